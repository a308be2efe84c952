"""Recipes are data: validation errors name the file, the line and the fix; embedded cases run."""

from __future__ import annotations

import shutil
import textwrap

import pytest

from codemods.core.arch import Arch
from conftest import EXAMPLES, git

SM110 = EXAMPLES / "recipes" / "sm110-enable.toml"

GOOD = """\
id = "my-recipe"
summary = "test recipe"
arch = "sm_120"

[[change]]
id = "flashinfer.jit"
project = "flashinfer"
file = "{python}/jit/comm.py"
kind = "python_arch_list"
function = "gen_trtllm_comm_module"
"""


@pytest.mark.parametrize(
    "edit, line, message",
    [
        pytest.param(("summary = ", "colour = 1\nsummary = "), 2, "unknown key 'colour'", id="unknown-top-level-key"),
        pytest.param(('kind = "python_arch_list"', 'kind = "python_arch_set"'), 9, "unknown gate kind 'python_arch_set'", id="unknown-gate-kind"),
        pytest.param(('project = "flashinfer"', 'project = "flashinfr"'), 7,
                     "unknown project 'flashinfr'", id="unknown-project-at-load"),
        pytest.param(('arch = "sm_120"', 'arch = "ampere"'), 3, "'ampere' is not an arch name", id="bad-arch"),
        pytest.param(('function = "gen', 'functon = "gen'), 10, "unknown key 'functon'", id="unknown-selector"),
        pytest.param(('file = "{python}', 'file = "../../etc/{python}'), 8, "leaves the repository", id="path-traversal"),
        pytest.param(('file = "{python}/jit/comm.py"', 'file = "/etc/passwd"'), 8, "leaves the repository", id="absolute-path"),
        pytest.param(('file = "{python}/jit/comm.py"', 'file = ".git/info/x.py"'), 8, "goes through .git", id="path-into-dot-git"),
        pytest.param(('file = "{python}/jit/comm.py"', 'file = "{python}/.GIT/hooks/x.py"'), 8, "goes through .git", id="path-into-dot-git-any-case"),
        pytest.param(('function = "gen_trtllm_comm_module"', "function = 3"), 10, "'function' must be a string", id="wrong-type"),
        pytest.param(('file = "{python}/jit/comm.py"', 'file = "{include}/flashinfer/comm.cuh"'), 8,
                     "python_arch_list reads Python source, and '{include}/flashinfer/comm.cuh' is not a .py file",
                     id="python-kind-on-a-header"),
    ],
)
def test_invalid_recipe_is_rejected_with_line(cli, tmp_path, edit, line, message):
    path = tmp_path / "my-recipe.toml"
    path.write_text(GOOD.replace(*edit))
    result = cli("list", "--recipes", tmp_path)
    assert result.exit_code == 8, result.output
    assert f"{path}:{line}: " in result.stderr and message in result.stderr
    assert "hint:" in result.stderr and "Traceback" not in result.output


def test_list_includes_user_recipes_from_flag_and_env(cli, tmp_path, monkeypatch):
    (tmp_path / "a").mkdir()
    (tmp_path / "a" / "my-recipe.toml").write_text(GOOD)
    assert "my-recipe" in cli("list", "--recipes", tmp_path / "a").stdout
    shutil.copy(SM110, tmp_path / "sm110-enable.toml")
    monkeypatch.setenv("CODEMOD_RECIPES", str(tmp_path))
    listed = cli("list").stdout
    assert "sm110-enable" in listed and "sm120-enable" in listed


def test_recipe_test_runs_embedded_cases(cli):
    result = cli("recipe", "test", SM110)
    assert result.exit_code == 0, result.output
    assert result.stdout.endswith("4 passed, 0 failed\n")


def test_recipe_test_fails_on_wrong_after(cli, tmp_path):
    broken = tmp_path / "sm110-enable.toml"
    broken.write_text(SM110.read_text().replace("supported_major_versions=[9, 10, 11])", "supported_major_versions=[9, 10, 12])"))
    result = cli("recipe", "test", broken)
    assert result.exit_code == 1
    assert "FAIL JIT list gains major 11: output differs from 'after'" in result.stdout
    assert "+    nvcc_flags = ctx.get_nvcc_flags_list(supported_major_versions=[9, 10, 11])" in result.stdout


def test_sm110_recipe_from_file(cli, example_repo):
    fi = example_repo("flashinfer")
    result = cli("run", SM110, "--repo", fi)
    assert result.exit_code == 0, result.output
    assert git(fi, "branch", "--show-current").strip() == "codemod/sm110-enable"
    assert "supported_major_versions=[9, 10, 11]" in (fi / "flashinfer/jit/comm.py").read_text()
    assert git(fi, "diff", "--name-only", "main", "HEAD").split() == ["flashinfer/jit/comm.py"]


def test_sm110_recipe_refuses_sglang_without_predicate(cli, example_repo):
    sg = example_repo("sglang")
    before = git(sg, "for-each-ref")
    result = cli("run", SM110, "--repo", sg)
    assert result.exit_code == 3
    assert "is_sm110_supported is not defined in this SGLang" in result.stderr
    assert git(sg, "for-each-ref") == before and git(sg, "status", "--porcelain") == ""


def test_builtin_recipe_cases(cli):
    from codemods.recipes.load import data_root

    result = cli("recipe", "test", data_root() / "recipes" / "sm120-enable.toml")
    assert result.exit_code == 0, result.output


def test_recipe_test_takes_a_recipe_id(cli, tmp_path, monkeypatch):
    """A pip user has no .toml path: the id `codemod list` shows is enough, the built-in or one of --recipes."""
    from codemods.recipes.load import data_root

    monkeypatch.chdir(tmp_path)  # no file named like the id here
    by_id = cli("recipe", "test", "sm120-enable")
    assert by_id.exit_code == 0, by_id.output
    assert by_id.stdout.endswith(" passed, 0 failed\n") and by_id.stdout == cli("recipe", "test", data_root() / "recipes" / "sm120-enable.toml").stdout
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "sm110-enable.toml").write_bytes(SM110.read_bytes())
    assert cli("recipe", "test", "sm110-enable", "--recipes", mine).stdout.endswith("4 passed, 0 failed\n")
    unknown = cli("recipe", "test", "sm999-enable")
    assert unknown.exit_code == 8 and "no recipe named 'sm999-enable'" in unknown.stderr and "sm120-enable" in unknown.stderr


MULTI = """\
id = "cublaslt-sm80-up"
summary = "several archs at once"
arch = ["sm_80", "sm_90", "sm_110", "sm_120"]
admit = "family"

[[change]]
id = "flashinfer.cublaslt-jit"
project = "flashinfer"
file = "{python}/jit/gemm/core.py"
kind = "python_arch_list"
function = "gen_mm_bf16_cublaslt_module"

[[test]]
change = "flashinfer.cublaslt-jit"
before = '''
def gen_mm_bf16_cublaslt_module():
    return ctx.get_nvcc_flags_list(supported_major_versions=[10])
'''
after = '''
def gen_mm_bf16_cublaslt_module():
    return ctx.get_nvcc_flags_list(supported_major_versions=[8, 9, 10, 11, 12])
'''
"""


def test_several_archs_widen_each_gate_once(cli, tmp_path):
    from codemods.core.arch import DEFAULT_ARCHS
    from codemods.recipes.load import load_recipe

    path = tmp_path / "cublaslt-sm80-up.toml"
    path.write_text(MULTI)
    recipe = load_recipe(path)
    assert [a.name for a in recipe.archs] == ["sm_80", "sm_90", "sm_110", "sm_120"]
    assert [a.name for a in recipe.targets(DEFAULT_ARCHS)] == ["sm_80", "sm_86", "sm_89", "sm_90", "sm_110", "sm_120", "sm_121"]
    path.write_text(MULTI.replace('admit = "family"', 'admit = "exact"'))
    assert [a.name for a in load_recipe(path).targets(DEFAULT_ARCHS)] == ["sm_80", "sm_90", "sm_110", "sm_120"]
    path.write_text(MULTI)
    result = cli("recipe", "test", path)
    assert result.exit_code == 0, result.output
    assert result.stdout.endswith("1 passed, 0 failed\n")


@pytest.mark.parametrize(
    "arch, message",
    [
        pytest.param("[]", "must be an arch name or a non-empty list", id="empty-list"),
        pytest.param('["sm_90", "volta"]', "'volta' is not an arch name", id="bad-member"),
        pytest.param('["sm_90", "sm_90"]', "sm_90 is named twice", id="duplicate"),
        pytest.param("[90]", "must be an arch name or a non-empty list", id="not-strings"),
        # a typo must not name another arch (round 11 bug 9a: `sm_12` was read as 1.2, `[9, 10]` became `[1, 9, 10]`)
        pytest.param('"sm_12"', "'sm_12' is not an arch nvcc knows", id="major-alone-is-no-arch"),
        pytest.param('"1.2"', "'1.2' is not an arch nvcc knows", id="capability-nvcc-lacks"),
        pytest.param('"sm_99"', "'sm_99' is not an arch nvcc knows", id="no-such-gpu"),
        pytest.param('"sm_1200"', "spells __CUDA_ARCH__'s number; the target is sm_120", id="cuda-arch-number-after-sm"),
    ],
)
def test_arch_list_validation(cli, tmp_path, arch, message):
    path = tmp_path / "my-recipe.toml"
    path.write_text(GOOD.replace('arch = "sm_120"', f"arch = {arch}"))
    result = cli("list", "--recipes", tmp_path)
    assert result.exit_code == 8, result.output
    assert f"{path}:3: " in result.stderr and message in result.stderr


def test_admits_names_a_known_arch(cli, tmp_path):
    path = tmp_path / "my-recipe.toml"
    path.write_text(GOOD.replace('function = "gen_trtllm_comm_module"', 'function = "gen_trtllm_comm_module"\nadmits = ["sm_1000"]'))
    result = cli("list", "--recipes", tmp_path)
    assert result.exit_code == 8, result.output
    assert "'sm_1000' spells __CUDA_ARCH__'s number; the target is sm_100" in result.stderr and "Traceback" not in result.output


def test_known_arch_spellings_still_parse():
    assert [Arch.parse_target(t).name for t in ("sm_120", "sm120", "120", "12.0", "1200", "compute_120f", "sm_107a", "sm_70")] == [
        "sm_120", "sm_120", "sm_120", "sm_120", "sm_120", "sm_120f", "sm_107a", "sm_70"
    ]


def test_several_archs_plan_json_and_matrix(cli, example_repo, tmp_path):
    import json

    fi = example_repo("flashinfer")
    path = tmp_path / "trtllm-many.toml"
    path.write_text(GOOD.replace('arch = "sm_120"', 'arch = ["sm_110", "sm_120"]').replace("my-recipe", "trtllm-many"))
    result = cli("run", path, "--repo", fi, "--dry-run", "--format", "json")
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)["results"][0]
    assert data["archs"] == ["sm_110", "sm_120"]
    assert data["targets"] == ["sm_110", "sm_120", "sm_121"]
    [gate] = data["changes"][0]["gates"]
    assert gate["after"] == "[9, 10, 11, 12]"
    text = cli("run", path, "--repo", fi, "--dry-run")
    assert "sm_110" in text.stderr.split("arch matrix")[1].splitlines()[1]


CALL_RECIPE = """\
id = "nvfp4-attention-sm121"
summary = "capability lists by call and position"
arch = "sm_121"
admit = "exact"

[[change]]
id = "flashinfer.nvfp4-attention-requirement"
project = "flashinfer"
file = "{python}/nvfp4_attention_sm120.py"
kind = "python_arch_list"
call = "supported_compute_capability"
position = 0
function = "_nvfp4_attention_requirement"

[[test]]
change = "flashinfer.nvfp4-attention-requirement"
before = '''
@supported_compute_capability([120])
def _nvfp4_attention_requirement(q):
    return True
'''
after = '''
@supported_compute_capability([120, 121])
def _nvfp4_attention_requirement(q):
    return True
'''

[[test]]
change = "flashinfer.nvfp4-attention-requirement"
before = '''
@supported_compute_capability(SM12X_CCS)
def _nvfp4_attention_requirement(q):
    return True
'''
outcome = "failed"
"""


def test_call_position_selectors_in_a_recipe(cli, tmp_path):
    path = tmp_path / "nvfp4-attention-sm121.toml"
    path.write_text(CALL_RECIPE)
    result = cli("recipe", "test", path)
    assert result.exit_code == 0, result.output
    assert result.stdout.endswith("2 passed, 0 failed\n")
    path.write_text(CALL_RECIPE.replace("position = 0", 'position = "first"'))
    result = cli("list", "--recipes", tmp_path)
    assert result.exit_code == 8
    assert f"{path}:12: " in result.stderr and "'position' must be a non-negative integer" in result.stderr
    assert "hint: position = 1" in result.stderr


def test_call_argument_that_is_no_list_is_refused_naming_file_and_line(cli, example_repo, tmp_path):
    fi = example_repo("flashinfer")
    target = fi / "flashinfer" / "nvfp4_attention_sm120.py"
    target.write_text(
        "SM12X_CCS = [120]\nif _has_sm121():\n    SM12X_CCS = [120, 121]\n\n\n"
        "@supported_compute_capability(SM12X_CCS)\ndef _nvfp4_attention_requirement(q):\n    return True\n"
    )
    git(fi, "add", "-A")
    git(fi, "commit", "-qm", "nvfp4")
    path = tmp_path / "nvfp4-attention-sm121.toml"
    path.write_text(CALL_RECIPE)
    result = cli("run", path, "--repo", fi)
    assert result.exit_code == 3, result.output
    assert "flashinfer/nvfp4_attention_sm120.py:6: cannot widen `SM12X_CCS`" in result.stderr
    assert "is not a list literal, and it is bound more than once in this file (lines 1, 3)" in result.stderr
    assert git(fi, "status", "--porcelain") == ""


def test_a_named_module_level_list_is_widened_where_it_is_assigned(cli, example_repo, tmp_path):
    fi = example_repo("flashinfer")
    target = fi / "flashinfer" / "nvfp4_attention_sm120.py"
    before = "SM12X_CCS = [120]\n\n\n@supported_compute_capability(SM12X_CCS)\ndef _nvfp4_attention_requirement(q):\n    return True\n"
    target.write_text(before)
    git(fi, "add", "-A")
    git(fi, "commit", "-qm", "nvfp4")
    path = tmp_path / "nvfp4-attention-sm121.toml"
    path.write_text(CALL_RECIPE)
    result = cli("run", path, "--repo", fi)
    assert result.exit_code == 0, result.output
    assert target.read_text() == before.replace("SM12X_CCS = [120]", "SM12X_CCS = [120, 121]")
    assert git(fi, "diff", "--name-only", "main", "HEAD").split() == ["flashinfer/nvfp4_attention_sm120.py"]


ASSIGNS_RECIPE = """\
id = "bmm-fp8-heuristic-sm107"
summary = "one call among several, by the name its result is assigned to"
arch = "sm_107"
admit = "exact"

[[change]]
id = "flashinfer.bmm-fp8-heuristic"
project = "flashinfer"
file = "{python}/gemm/gemm_base.py"
kind = "python_arch_list"
call = "_match_sm_version"
position = 1
assigns = "sm_ok"

[[test]]
change = "flashinfer.bmm-fp8-heuristic"
before = '''
def _pick_backend(a):
    sm_ok = _match_sm_version(a.device, ["100", "103"])
    sm12x_ok = _match_sm_version(a.device, ["120", "121"])
'''
after = '''
def _pick_backend(a):
    sm_ok = _match_sm_version(a.device, ["100", "103", "107"])
    sm12x_ok = _match_sm_version(a.device, ["120", "121"])
'''

[[test]]
change = "flashinfer.bmm-fp8-heuristic"
before = '''
def _pick_backend(a):
    sm12x_ok = _match_sm_version(a.device, ["120", "121"])
'''
outcome = "failed"
"""


def test_assigns_selector_in_recipe_test(cli, tmp_path):
    path = tmp_path / "bmm-fp8-heuristic-sm107.toml"
    path.write_text(ASSIGNS_RECIPE)
    result = cli("recipe", "test", path)
    assert result.exit_code == 0, result.output
    assert result.stdout.endswith("2 passed, 0 failed\n")
    path.write_text(ASSIGNS_RECIPE.replace('assigns = "sm_ok"', "assigns = 3"))
    result = cli("list", "--recipes", tmp_path)
    assert result.exit_code == 8
    assert f"{path}:13: " in result.stderr and "'assigns' must be a string" in result.stderr


def test_a_change_admits_an_arch_no_default_universe_holds(tmp_path, cli):
    """`admits = ["sm_107"]` picks the gates admitting sm_107: the arch is read like the targets, not dropped
    because the default universe lacks it (which once left every gate unpicked: "not found")."""
    recipe = tmp_path / "frost.toml"
    recipe.write_text(textwrap.dedent('''\
        id = "frost-sm120"
        summary = "Frost on SM120"
        arch = "sm_120"
        admit = "exact"

        [[change]]
        id = "flashinfer.frost-supported"
        project = "flashinfer"
        file = "{python}/fused_moe/api.py"
        kind = "python_capability"
        admits = ["sm_107"]
        names = { arch = "sm" }
        title = "Frost admits 120"

        [[test]]
        change = "flashinfer.frost-supported"
        before = """
        def routed(arch):
            return arch in (100, 103)


        def frost(arch):
            return arch == 107
        """
        after = """
        def routed(arch):
            return arch in (100, 103)


        def frost(arch):
            return arch in (107, 120)
        """
    '''))
    result = cli("recipe", "test", recipe)
    assert result.exit_code == 0, result.output
