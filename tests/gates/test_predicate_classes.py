"""Evaluator._on_every_cap: a definition runs once per class of capabilities it can tell apart, the classes cut by
the values its runs compared (recorded as the evaluator meets them, not read from the literals of the text), and
gives on every capability what running all 150 of DOMAIN gives. Shapes of FlashInfer's and SGLang's predicates."""

from __future__ import annotations

import ast
from textwrap import dedent

import pytest

from codemods.gates.python.predicates import reading
from codemods.gates.python.predicates.evaluation import _SM, DOMAIN, _const

HEAD = """\
import torch
from functools import lru_cache, partial
"""


def _read(source: str, name: str, classes: bool = True):
    """The meaning of `name` in `source` and how many runs on one capability reading it took."""
    reader = reading._Reader(ast.parse(HEAD + dedent(source)), "utils.py", {}, classes)
    runs = 0
    every_cap = reader._on_every_cap

    def counting(run):
        def counted(cap):
            nonlocal runs
            runs += 1
            return run(cap)

        return every_cap(counted)

    reader._on_every_cap = counting  # type: ignore[method-assign]
    return reader.meaning(name), runs


def _caps(condition) -> frozenset:
    return frozenset(cap for cap in DOMAIN if condition(*cap))


CASES = [
    pytest.param("""
        def is_sm120a_supported(device):
            major, minor = torch.cuda.get_device_capability(device)
            return major == 12 and minor == 0
        """, "is_sm120a_supported", _caps(lambda major, minor: (major, minor) == (12, 0)), 4,
        id="flashinfer-major-and-minor"),  # (major == 12, minor == 0): four classes
    pytest.param("""
        def is_sm100_up():
            return torch.cuda.get_device_capability() >= (10, 0)
        """, "is_sm100_up", _caps(lambda major, minor: major >= 10), 2, id="tuple-compare"),
    pytest.param("""
        def is_sm100_up():
            major, minor = torch.cuda.get_device_capability()
            return major * 10 + minor >= 100
        """, "is_sm100_up", _caps(lambda major, minor: major >= 10), 2, id="arithmetic-then-compare"),
    pytest.param("""
        def is_blackwell():
            return get_device_sm() in (100, 103)
        """, "is_blackwell", _caps(lambda major, minor: (major, minor) in ((10, 0), (10, 3))), 2, id="sm-in-tuple"),
    pytest.param("""
        def is_sm12x_supported():
            return get_device_sm() // 10 == 12
        """, "is_sm12x_supported", _caps(lambda major, minor: major == 12), 2, id="sm-floor-division"),
    pytest.param("""
        def _check_cuda_device_version(device_capability_majors, cuda_version):
            major, minor = torch.cuda.get_device_capability()
            if major not in device_capability_majors:
                return False
            return version_at_least(cuda_version)

        is_sm100_supported = lru_cache(maxsize=1)(
            partial(_check_cuda_device_version, device_capability_majors=[10], cuda_version=(12, 8))
        )
        """, "is_sm100_supported", _caps(lambda major, minor: major == 10), 2, id="sglang-partial"),
    pytest.param("""
        def is_sm12x_supported():
            major, minor = torch.cuda.get_device_capability()
            return major == 12

        def is_sm120_supported():
            major, minor = torch.cuda.get_device_capability()
            return is_sm12x_supported() and minor == 0
        """, "is_sm120_supported", _caps(lambda major, minor: (major, minor) == (12, 0)), 2 + 4,
        id="another-predicate-read-by-its-meaning"),  # is_sm12x_supported's two runs, then four
    pytest.param("""
        def is_sm12x_picked():
            major, minor = torch.cuda.get_device_capability()
            return major == 12 and (True, True, False)[minor % 3]
        """, "is_sm12x_picked", _caps(lambda major, minor: major == 12 and minor % 3 != 2), 4,
        id="lookup-by-the-gpus-value"),  # (major == 12) x the item found, True or False
    pytest.param("""
        def is_sm90_supported():
            major, minor = torch.cuda.get_device_capability()
            return major == 9 if minor == 0 else False
        """, "is_sm90_supported", _caps(lambda major, minor: (major, minor) == (9, 0)), 3, id="conditional-expression"),
    pytest.param("""
        def is_sm90_supported():
            if not is_cuda():
                return False
            return torch.cuda.get_device_capability()[0] == 9
        """, "is_sm90_supported", _caps(lambda major, minor: major == 9), 2, id="environment-then-gpu"),
]


@pytest.mark.parametrize("source, name, caps, runs", CASES)
def test_once_per_class_gives_what_every_capability_gives(source, name, caps, runs):
    by_class, taken = _read(source, name)
    every, all_runs = _read(source, name, classes=False)
    assert by_class == every and by_class is not None and by_class.caps == caps
    assert taken == runs and all_runs >= len(DOMAIN) and all_runs % len(DOMAIN) == 0


@pytest.mark.parametrize("source, name, line", [
    pytest.param("""
        def is_sm12x_supported():
            major, minor = torch.cuda.get_device_capability()
            return major == 12 and (True, False)[minor]
        """, "is_sm12x_supported", 6, id="an-index-out-of-range-past-minor-1"),
    pytest.param("""
        def is_sm12x_supported():
            major, minor = torch.cuda.get_device_capability()
            return major == 12 and 10 // (minor - 5) > 0
        """, "is_sm12x_supported", 6, id="a-division-by-zero-at-minor-5"),
])  # fmt: skip
def test_a_capability_that_cannot_be_evaluated_makes_it_unknown_as_every_capability_does(source, name, line):
    # only some capabilities raise, none of them the first: the first class's run takes no exception
    by_class, taken = _read(source, name)
    every, _ = _read(source, name, classes=False)
    assert by_class == every and not by_class.known and by_class.reason.startswith(f"line {line}: cannot")
    assert taken < len(DOMAIN)


def test_a_function_that_reads_no_gpu_runs_once():
    meaning, runs = _read("""
        def is_sm90_supported():
            return version_at_least("12.3")
        """, "is_sm90_supported")
    assert runs == 1 and meaning is None  # the environment's condition: no arch in it
    always, runs = _read("def is_sm90_supported():\n    return True\n", "is_sm90_supported")
    assert runs == 1 and always is not None and always.caps == frozenset(DOMAIN)


def test_a_numbered_method_runs_once_per_class_for_each_number():
    source = """
        class CudaPlatform:
            def has_device_capability(self, capability):
                current = self.get_device_capability()
                return current.to_int() >= capability
        """
    tree = ast.parse(HEAD + dedent(source))
    by_class = reading.read_tree(tree, "platform.py")
    every = reading.read_tree(tree, "platform.py", classes=False)
    assert by_class == every
    assert by_class[".has_device_capability(100)"].caps == _caps(lambda major, minor: major >= 10)
    assert by_class[".has_device_capability(121)"].caps == _caps(lambda major, minor: major * 10 + minor >= 121)


COMPUTED = """
    def is_sm120_up():
        return get_device_sm() >= 12 * 10
    """


def test_the_classes_are_cut_by_the_values_compared_not_the_literals_of_the_text():
    reader = reading._Reader(ast.parse(HEAD + dedent(COMPUTED)), "utils.py", {})
    reader.observed = {}
    reader._run(reader.functions["is_sm120_up"], (9, 0), {})
    compared = [o for o in reader.observed if o[0] == "compare"]
    assert compared == [("compare", ast.GtE, _SM, _const(120))]  # the threshold the evaluator met: 12 * 10
    meaning, runs = _read(COMPUTED, "is_sm120_up")
    assert meaning.caps == _caps(lambda major, minor: major >= 12) and runs == 2
    # classes cut at the literals of the text (10 and 12, on the number the comparison reads) put sm_119 and
    # sm_120 in one class, where the definition tells them apart
    literals = {n.value for n in ast.walk(ast.parse(dedent(COMPUTED))) if isinstance(n, ast.Constant)}
    assert literals == {10, 12}

    def cut(cap):
        return tuple(cap[0] * 10 + cap[1] >= literal for literal in sorted(literals))

    assert cut((11, 9)) == cut((12, 0)) and ((11, 9) in meaning.caps) != ((12, 0) in meaning.caps)


def test_a_threshold_bound_by_a_partial_is_the_one_compared():
    # the function's text has no number at all: the majors come from the partial's keyword
    source = """
        def _check(majors):
            major, minor = torch.cuda.get_device_capability()
            return major in majors

        is_sm10x_or_12x = partial(_check, majors=[10, 12])
        """
    meaning, runs = _read(source, "is_sm10x_or_12x")
    assert meaning.caps == _caps(lambda major, minor: major in (10, 12)) and runs == 2
