"""python_arch_call on vLLM's platform predicates (`current_platform.is_device_capability_family(100)`), whose meaning
is read from the Platform class (examples/vllm's interface.py, in vLLM's shape), never from the names."""

from pathlib import Path
from textwrap import dedent

import pytest

from codemods.core.arch import DEFAULT_ARCHS, parse_archs
from codemods.gates import CannotWiden, apply_edits
from codemods.gates.python.predicates import reading
from codemods.gates.python.python_arch_call import admits, find, widen

INTERFACE = Path(__file__).resolve().parents[2] / "examples" / "vllm" / "vllm" / "platforms" / "interface.py"
MEANINGS = reading.read(INTERFACE.read_bytes(), "vllm/platforms/interface.py")
SM12X = parse_archs("sm_120,sm_121")


def _widen(source: str, targets=SM12X, **selector) -> str:
    data = source.encode()
    [gate] = find(data, DEFAULT_ARCHS, meanings=MEANINGS, **selector)
    out = apply_edits(data, widen(data, gate, targets, DEFAULT_ARCHS, MEANINGS))
    [again] = find(out, DEFAULT_ARCHS, meanings=MEANINGS, **selector)
    assert widen(out, again, targets, DEFAULT_ARCHS, MEANINGS) == []  # a second pass changes nothing
    return out.decode()


@pytest.mark.parametrize(
    "text, admitted",
    [
        pytest.param("current_platform.has_device_capability(100)", ["sm_100", "sm_103", "sm_110", "sm_120", "sm_121"], id="has-is-at-least"),
        pytest.param("current_platform.is_device_capability(100)", ["sm_100"], id="is-is-exactly"),
        pytest.param("current_platform.is_device_capability_family(120)", ["sm_120", "sm_121"], id="family-is-the-major"),
        pytest.param("current_platform.is_device_capability_family(100) or current_platform.is_device_capability(90)",
                     ["sm_90", "sm_100", "sm_103"], id="a-mixed-or"),
    ],
)
def test_what_each_platform_predicate_admits_comes_from_its_definition(text, admitted):
    assert admits(text, DEFAULT_ARCHS, MEANINGS).names() == admitted


def test_without_the_definitions_a_mixed_or_is_unknown():
    gate = "current_platform.is_device_capability_family(100) or current_platform.is_device_capability(90)"
    assert admits(gate, DEFAULT_ARCHS).unknown  # no meanings: nothing is guessed from the names


@pytest.mark.parametrize(
    "before, after",
    [
        pytest.param(
            dedent('''\
                def enable_allreduce_rms_fusion(tp):
                    return (
                        tp > 1
                        and (
                            current_platform.is_device_capability_family(100)
                            or current_platform.is_device_capability(90)
                        )
                    )
                '''),
            dedent('''\
                def enable_allreduce_rms_fusion(tp):
                    return (
                        tp > 1
                        and (
                            current_platform.is_device_capability_family(100)
                            or current_platform.is_device_capability(90)
                            or current_platform.is_device_capability_family(120)
                        )
                    )
                '''),
            id="one-operand-a-line-gains-a-line-inside-the-parentheses-written",
        ),
        pytest.param(
            "use = tp > 1 and current_platform.is_device_capability(100)\n",
            "use = tp > 1 and (current_platform.is_device_capability(100) or current_platform.is_device_capability(120))\n",
            id="an-and-operand-gains-parentheses-and-an-exact-call-for-an-exact-target",
        ),
        pytest.param(
            dedent('''\
                @pytest.mark.skipif(
                    not current_platform.is_device_capability(100),
                    reason="Only test on SM100",
                )
                def test_fusion():
                    pass
                '''),
            dedent('''\
                @pytest.mark.skipif(
                    not (current_platform.is_device_capability(100) or current_platform.is_device_capability(120)),
                    reason="Only test on SM100",
                )
                def test_fusion():
                    pass
                '''),
            id="a-skipif-under-not",
        ),
    ],
)
def test_widen(before, after):
    targets = SM12X if "family" in before else parse_archs("sm_120")
    assert _widen(before, targets) == after


@pytest.mark.parametrize(
    "source",
    [
        pytest.param("if current_platform.has_device_capability(90):\n    pass\n", id="at-least-90-admits-sm120"),
        pytest.param("if current_platform.is_device_capability_family(120):\n    pass\n", id="already-the-family"),
        pytest.param("x = current_platform.get_device_capability()\n", id="no-number"),
        pytest.param("if other.is_device_capability(n):\n    pass\n", id="a-computed-number"),
    ],
)
def test_noop(source):
    for gate in find(source.encode(), DEFAULT_ARCHS, meanings=MEANINGS):
        assert widen(source.encode(), gate, SM12X, DEFAULT_ARCHS, MEANINGS) == []


def test_no_single_call_of_the_gates_functions_admits_the_targets_alone():
    source = b"if current_platform.is_device_capability(90):\n    pass\n"
    [gate] = find(source, DEFAULT_ARCHS, meanings=MEANINGS)
    with pytest.raises(CannotWiden, match="no call of is_device_capability with one number admits sm_120, sm_121"):
        widen(source, gate, SM12X, DEFAULT_ARCHS, MEANINGS)
