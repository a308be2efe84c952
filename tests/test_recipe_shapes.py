"""The named shapes of issue 34 and 38, each a recipe whose [[test]] case is upstream's before and after, run as
`codemod recipe test` runs it."""

from __future__ import annotations

import textwrap

# FlashInfer ec0178acd's shape: a family predicate over the major alone, its `minor` then bound to `_` as the
# file binds it elsewhere.
FAMILY_DROP = '''\
id = "sm120f-family"
summary = "is_sm120f_supported for the whole SM12x family"
arch = "sm_121"

[[change]]
id = "flashinfer.sm120f-supported"
project = "flashinfer"
file = "{python}/utils.py"
kind = "python_capability"
function = "is_sm120f_supported"

[[test]]
change = "flashinfer.sm120f-supported"
before = """
def is_sm100a_supported(device: torch.device) -> bool:
    major, _ = get_compute_capability(device)
    return major == 10 and version_at_least(torch.version.cuda, "12.8")


def is_sm120f_supported(device: torch.device) -> bool:
    major, minor = get_compute_capability(device)
    return major == 12 and minor == 0 and version_at_least(torch.version.cuda, "12.9")
"""
after = """
def is_sm100a_supported(device: torch.device) -> bool:
    major, _ = get_compute_capability(device)
    return major == 10 and version_at_least(torch.version.cuda, "12.8")


def is_sm120f_supported(device: torch.device) -> bool:
    major, _ = get_compute_capability(device)
    return major == 12 and version_at_least(torch.version.cuda, "12.9")
"""
'''

# FlashInfer's test shape for issue 38 item 4: a skip unless one (major, minor).
NEGATED_CONJUNCTION = '''\
id = "mm-fp4-sm103"
summary = "mm_fp4 tests on SM103"
arch = "sm_103"

[[change]]
id = "flashinfer.mm-fp4-test"
project = "flashinfer"
file = "tests/gemm/test_mm_fp4.py"
kind = "python_capability"
function = "test_mm_fp4"

[[test]]
change = "flashinfer.mm-fp4-test"
before = """
def test_mm_fp4(m, n, k):
    major, minor = torch.cuda.get_device_capability()
    if not (major == 10 and minor == 0):
        pytest.skip("mm_fp4 is only supported on SM100")
"""
after = """
def test_mm_fp4(m, n, k):
    major, minor = torch.cuda.get_device_capability()
    if not (major == 10 and minor in [0, 3]):
        pytest.skip("mm_fp4 is only supported on SM100")
"""
'''


def _recipe_test(cli, tmp_path, text: str):
    path = tmp_path / "recipe.toml"
    path.write_text(textwrap.dedent(text))
    return cli("recipe", "test", path)


def test_dropping_minor_for_a_family_binds_the_unused_minor_to_underscore(cli, tmp_path):
    result = _recipe_test(cli, tmp_path, FAMILY_DROP)
    assert result.exit_code == 0, result.output
    assert result.stdout.endswith("1 passed, 0 failed\n")


def test_in_a_file_that_never_binds_underscore_the_minor_is_kept(cli, tmp_path):
    """SGLang 0.5.21's vision.py kept `major, minor =` when it dropped `and minor != 3`: the file's own style."""
    text = FAMILY_DROP.replace("    major, _ = get_compute_capability(device)\n", "    major, minor = get_compute_capability(device)\n")
    text = text.replace('after = """', 'after = """', 1)
    head, after = text.split('after = """')
    after = after.replace("major, _ =", "major, minor =")
    result = _recipe_test(cli, tmp_path, head + 'after = """' + after)
    assert result.exit_code == 0, result.output


def test_a_negated_conjunction_widens_through_the_minor_membership(cli, tmp_path):
    result = _recipe_test(cli, tmp_path, NEGATED_CONJUNCTION)
    assert result.exit_code == 0, result.output
    assert result.stdout.endswith("1 passed, 0 failed\n")


# FlashInfer 8f4e806e2's shape (issue 34's third named shape): the MoE dispatch's check that a config's major is the
# device's, `sm_version / 10 == sm_ / 10`, gains an `||` clause admitting SM100 configs on an SM110 device. The
# config is named as the fixed arch it was built for.
CONFIG_PAIR = '''\
id = "moe-sm100-configs-on-sm110"
summary = "Run SM100 MoE configs on SM110 devices"
arch = "sm_110"
admit = "exact"

[[change]]
id = "flashinfer.moe-dispatch-config-major"
project = "flashinfer"
file = "{csrc}/moe_gemm/moe_gemm_dispatch.h"
kind = "cpp_runtime_check"
function = "dispatchToArch"
macro = "TLLM_CHECK_WITH_INFO"
names = { "sm_" = "sm", "inputs.gemm_config.sm_version" = "sm_100" }

[[test]]
change = "flashinfer.moe-dispatch-config-major"
before = """
template <typename T>
void GemmRunner<T>::dispatchToArch(GroupedInput<T> inputs) {
  if (inputs.gemm_config.sm_version >= 90) {
    TLLM_CHECK_WITH_INFO(inputs.gemm_config.sm_version / 10 == sm_ / 10,
                         "Using SM %d configuration for SM %d device",
                         inputs.gemm_config.sm_version, sm_);
    runGrouped(inputs);
  }
}
"""
after = """
template <typename T>
void GemmRunner<T>::dispatchToArch(GroupedInput<T> inputs) {
  if (inputs.gemm_config.sm_version >= 90) {
    TLLM_CHECK_WITH_INFO((inputs.gemm_config.sm_version / 10 == sm_ / 10) ||
                             (inputs.gemm_config.sm_version / 10 == 10 && sm_ / 10 == 11),
                         "Using SM %d configuration for SM %d device",
                         inputs.gemm_config.sm_version, sm_);
    runGrouped(inputs);
  }
}
"""
'''


def test_a_config_arch_check_gains_the_new_pair_as_an_or_clause(cli, tmp_path):
    result = _recipe_test(cli, tmp_path, CONFIG_PAIR)
    assert result.exit_code == 0, result.output
    assert result.stdout.endswith("1 passed, 0 failed\n")


def test_the_same_check_with_both_sides_named_sm_is_refused_with_the_fixed_arch_hint(cli, tmp_path):
    """Both sides named `sm` (the blind recipe of 8f4e806e2): the check compares the device with itself, so it
    admits every arch, and the recipe's case cannot come out; the refusal must not be a silent pass."""
    text = CONFIG_PAIR.replace('"inputs.gemm_config.sm_version" = "sm_100"', '"inputs.gemm_config.sm_version" = "sm"')
    result = _recipe_test(cli, tmp_path, text)
    assert result.exit_code != 0
    assert "0 passed, 1 failed" in result.stdout
