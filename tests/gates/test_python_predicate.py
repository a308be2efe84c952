"""python_predicate: an arch predicate's definition is a gate, admitting what its definition says (scan only)."""

import pytest

from codemods.core.arch import DEFAULT_ARCHS, Arch
from codemods.gates import CannotWiden
from codemods.gates.python.python_predicate import covers, find, widen
from fixtures.predicates import SM12X, SM120F_RETURN, SM120F_RETURN_FIXED, UTILS as PREDICATES_UTILS

UTILS = (PREDICATES_UTILS + SM12X).encode()


def _found(source: bytes) -> dict[str, tuple[int, list[str]]]:
    return {g.context: (g.line, g.admits.names()) for g in find(source, DEFAULT_ARCHS)}


def test_the_deciding_return_admits_what_the_definition_says():
    assert _found(UTILS) == {
        "is_sm90a_supported": (16, ["sm_90"]),
        "is_sm120a_supported": (21, ["sm_120"]),
        "is_sm120f_supported": (26, ["sm_120"]),  # `minor == 0`: not sm_121, whatever the name says
        "is_sm121a_supported": (31, ["sm_121"]),
        "is_sm12x_supported": (39, ["sm_120", "sm_121"]),  # the early `return False` read as well
    }


def test_after_the_upstream_fix_the_family_predicate_admits_sm121():
    fixed = UTILS.replace(SM120F_RETURN.encode(), SM120F_RETURN_FIXED.encode())
    assert fixed != UTILS
    assert _found(fixed)["is_sm120f_supported"] == (26, ["sm_120", "sm_121"])  # ec0178acd


@pytest.mark.parametrize(
    "source",
    [
        pytest.param("def is_sm100_supported(device):\n    return query_driver(device)\n", id="unreadable-definition"),
        pytest.param("def get_sm_count(device):\n    major, _ = get_compute_capability(device)\n    return major == 9\n",
                     id="not-a-predicate-name"),
        pytest.param("class P:\n    def is_sm90_supported(self):\n        return get_compute_capability(0)[0] == 9\n",
                     id="a-method-is-read-through-its-callers"),
        pytest.param("def is_sm90_supported(:\n", id="does-not-parse"),
    ],
)
def test_noop(source):
    assert find(source.encode(), DEFAULT_ARCHS) == []


@pytest.mark.parametrize(
    "target, arch, expected",
    [
        ("sm_120f", "sm_121", True),  # compute_120f -> sm_121 is accepted (ARCH_FACTS)
        ("sm_120a", "sm_121", False),  # compute_120a -> sm_121a: "cannot be compiled to future architecture"
        ("sm_100f", "sm_103", True),
        ("sm_100f", "sm_121", False),
        ("sm_120", "sm_121", None),  # a plain number says no more than the arch
    ],
)
def test_covers(target, arch, expected):
    assert covers(target, Arch.parse(arch)) is expected


def test_never_widened():
    gate = next(g for g in find(UTILS, DEFAULT_ARCHS) if g.context == "is_sm120f_supported")
    with pytest.raises(CannotWiden, match="line 26: `is_sm120f_supported` is a predicate every caller uses"):
        widen(UTILS, gate, (Arch.parse("sm_121"),))
    assert widen(UTILS, gate, (Arch.parse("sm_120"),)) == []
