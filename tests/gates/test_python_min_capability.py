"""python_min_capability: the lowest capability a quantization method declares, lowered for the targets."""

from textwrap import dedent

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from codemods.core.arch import DEFAULT_ARCHS, Arch, parse_archs
from codemods.gates import CannotWiden, SourceError, apply_edits
from codemods.gates.python.python_min_capability import admits, find, widen

# SGLang's shape (compressed_tensors schemes, quantization configs): a classmethod returning major * 10 + minor.
SCHEME = dedent('''\
    class CompressedTensorsW8A8Int8(CompressedTensorsScheme):
        def __init__(self, strategy):
            self.strategy = strategy

        @classmethod
        def get_min_capability(cls) -> int:
            # lovelace and up
            return 89

        def create_weights(self, layer):
            return None


    class Fp8Scheme(CompressedTensorsScheme):
        @classmethod
        def get_min_capability(cls) -> int:
            if envs.ALLOW_OLDER.get():
                return 80
            return 89


    class FallbackConfig(QuantizationConfig):
        @classmethod
        def get_min_capability(cls) -> int:
            return Fp8Config.get_min_capability()
''')


def _rewrite(source: str, archs: str, **selector) -> str:
    data = source.encode()
    edits = []
    for gate in find(data, DEFAULT_ARCHS, **selector):
        edits += widen(data, gate, parse_archs(archs), DEFAULT_ARCHS)
    return apply_edits(data, edits).decode()


def test_find_reads_each_return_of_the_function():
    gates = find(SCHEME.encode())
    assert [(g.line, g.context, g.text, g.admits.names(), bool(g.detail.get("unknown"))) for g in gates] == [
        (8, "CompressedTensorsW8A8Int8", "89", ["sm_89", "sm_90", "sm_100", "sm_103", "sm_110", "sm_120", "sm_121"], False),
        (18, "Fp8Scheme", "80", ["sm_80", "sm_86", "sm_89", "sm_90", "sm_100", "sm_103", "sm_110", "sm_120", "sm_121"], False),
        (19, "Fp8Scheme", "89", ["sm_89", "sm_90", "sm_100", "sm_103", "sm_110", "sm_120", "sm_121"], False),
        (25, "FallbackConfig", "Fp8Config.get_min_capability()", [], True),
    ]
    assert find(b"def get_max_capability():\n    return 89\n") == []
    assert find(b"def f():\n    def get_min_capability():\n        return 89\n    return 70\n")[0].text == "89"


def test_widen_lowers_the_bound_for_a_family_as_sglang_0_5_7():
    # family: sm_80 with sm_86 (the default universe's 8.x below 8.9)
    after = _rewrite(SCHEME, "sm_80,sm_86", function="CompressedTensorsW8A8Int8")
    assert after == SCHEME.replace("        return 89\n\n    def create", "        return 80\n\n    def create", 1)
    assert _rewrite(after, "sm_80,sm_86", function="CompressedTensorsW8A8Int8") == after  # admitted: no edit


def test_no_op_when_admitted():
    assert _rewrite(SCHEME, "sm_90,sm_120", function="CompressedTensorsW8A8Int8") == SCHEME
    assert _rewrite(SCHEME, "sm_86", function="Fp8Scheme") == SCHEME.replace(
        "        return 89\n\n\nclass Fallback", "        return 86\n\n\nclass Fallback"
    )  # the `return 80` branch admits sm_86 already; the other return is lowered


@pytest.mark.parametrize(
    "archs, selector, reason",
    [
        ("sm_80", {"function": "CompressedTensorsW8A8Int8"}, r"line 8: lowering `return 89` to 80 would also admit sm_86"),
        ("sm_80", {"function": "FallbackConfig"}, r"line 25: `return Fp8Config.get_min_capability\(\)`: a computed minimum"),
    ],
)
def test_refusals_name_the_line_and_the_reason(archs, selector, reason):
    with pytest.raises(CannotWiden, match=reason):
        _rewrite(SCHEME, archs, **selector)


def test_admits_text():
    assert admits("80").names() == ["sm_80", "sm_86", "sm_89", "sm_90", "sm_100", "sm_103", "sm_110", "sm_120", "sm_121"]
    assert admits("0").names() == [a.name for a in DEFAULT_ARCHS]
    assert admits("x").unknown == frozenset(DEFAULT_ARCHS)


@settings(deadline=None, max_examples=60)
@given(
    bound=st.sampled_from([0, 60, 70, 75, 80, 86, 89, 90, 100, 103, 110, 120]),
    chosen=st.sets(st.sampled_from(DEFAULT_ARCHS), min_size=1, max_size=4),
)
def test_widening_admits_exactly_the_old_archs_and_the_targets(bound, chosen):
    source = f"class Q:\n    @classmethod\n    def get_min_capability(cls):\n        return {bound}\n"
    data = source.encode()
    [gate] = find(data)
    targets = tuple(sorted(chosen, key=lambda a: (a.major, a.minor)))
    try:
        edits = widen(data, gate, targets)
    except CannotWiden:
        # refused only when an arch between the lowest target and the bound is not asked for
        low = min(a.major * 10 + a.minor for a in targets)
        assert any(low <= a.major * 10 + a.minor < bound and a not in targets for a in DEFAULT_ARCHS)
        return
    [after] = find(apply_edits(data, edits))
    assert set(after.admits.admitted) == set(gate.admits.admitted) | set(targets)


def test_scan_lists_the_minimum_capability(tmp_path):
    from codemods.audit.scan import scan

    (tmp_path / "w8a8.py").write_text(SCHEME)
    gates = scan(tmp_path, Arch.parse("sm_80")).gates
    assert [(g["kind"], g["line"], g["symbol"], g["text"], g["excludes_arch"]) for g in gates] == [
        ("python_min_capability", 8, "CompressedTensorsW8A8Int8", "89", True),
        ("python_min_capability", 18, "Fp8Scheme", "80", False),
        ("python_min_capability", 19, "Fp8Scheme", "89", True),
        ("python_min_capability", 25, "FallbackConfig", "Fp8Config.get_min_capability()", False),  # unknown
    ]


def test_recipe_test_runs_the_kind(tmp_path, cli):
    recipe = tmp_path / "w8a8.toml"
    recipe.write_text(dedent('''\
        id = "w8a8-int8-sm80"
        summary = "W8A8 INT8 on Ampere"
        arch = "sm_80"
        admit = "family"

        [[change]]
        id = "sglang.w8a8-int8-min-capability"
        project = "sglang"
        file = "{python}/srt/layers/quantization/w8a8.py"
        kind = "python_min_capability"
        function = "CompressedTensorsW8A8Int8"
        title = "Admit SM80 in the W8A8 INT8 scheme"

        [[test]]
        change = "sglang.w8a8-int8-min-capability"
        before = \'\'\'
        class CompressedTensorsW8A8Int8:
            @classmethod
            def get_min_capability(cls) -> int:
                return 89
        \'\'\'
        after = \'\'\'
        class CompressedTensorsW8A8Int8:
            @classmethod
            def get_min_capability(cls) -> int:
                return 80
        \'\'\'
    '''))
    result = cli("recipe", "test", recipe)
    assert result.exit_code == 0, result.output
    assert "1 passed, 0 failed" in result.output


@pytest.mark.real
def test_sglang_refuses_a_gpu_below_the_minimum_it_reads(real_unpacked):
    """What the kind assumes, checked against the release: SGLang compares the capability, as major * 10 +
    minor, against get_min_capability() as a lower bound (model_loader/loader.py refuses below it), and the
    functions it finds in the release return int literals in that scale."""
    import ast

    from codemods.gates.python.python_min_capability import FUNCTIONS

    root = real_unpacked["sglang"] / "sglang"
    loader = (root / "srt/model_loader/loader.py").read_text()
    tree = ast.parse(loader)
    bounds = [
        node for node in ast.walk(tree)
        if isinstance(node, ast.Compare) and len(node.ops) == 1 and isinstance(node.ops[0], ast.Lt)
        and isinstance(node.comparators[0], ast.Call) and ast.unparse(node.comparators[0].func).endswith("." + FUNCTIONS[0])
    ]  # fmt: skip
    assert [ast.unparse(node.left) for node in bounds] == ["capability"]
    assert "capability = major * 10 + minor" in loader
    found = [g for path in sorted((root / "srt/layers/quantization").rglob("*.py")) for g in find(path.read_bytes())]
    known = [int(g.text) for g in found if not g.detail.get("unknown")]
    assert len(known) >= 20 and set(known) <= {0, 60, 70, 75, 80, 89, 90, 100, 103, 110, 120}, sorted(set(known))


def test_a_number_written_otherwise_is_read_and_rewritten_in_decimal():
    source = "class Q:\n    def get_min_capability(self):\n        return 0x59\n"
    [gate] = find(source.encode())
    assert gate.admits.names()[0] == "sm_89"
    assert _rewrite(source, "sm_80,sm_86") == source.replace("0x59", "80")


@pytest.mark.parametrize(
    "source",
    [
        pytest.param(
            "# -*- coding: latin-1 -*-\nclass Q:\n    @classmethod\n    def get_min_capability(cls) -> int:\n"
            "        s = 'é'; return 89\n",
            id="latin-1-coding-line-read-as-utf-8-like-every-other-reader",
        ),
    ],
)
def test_a_coding_line_does_not_decide_how_the_file_is_read(source: str) -> None:
    """A `# coding: latin-1` line made Python's parser, given the bytes, read the file as Latin-1 while every span
    is UTF-8: the gate came out a byte off (`9\\n`). Refused, as any file that is not UTF-8 is."""
    with pytest.raises(SourceError, match="^not UTF-8"):
        find(source.encode("latin-1"), DEFAULT_ARCHS)
