"""The scanner's fast paths agree with the gate kinds they stand in for, on real FlashInfer and SGLang wheels.

`scan` finds guard lines with byte searches instead of tree-sitter, looks
for instruction tokens only where an arch decides, and hands libcst a Python
file with the statements that cannot hold a gate cut out. Here every file of
the releases goes through both ways.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from codemods.cpp.instructions import Hit, lacking
from codemods.cpp.structure import Structure, build_structure, structure
from codemods.jit import specs as jit_specs
from codemods.jit.spec_cst import LibcstIndex
from codemods.audit import listing, prefilter, python_files, records
from codemods.audit import scan as scanner
from codemods.cpp import lexer, syntax
from codemods.cpp.evaluate import conditionals, read_guard
from codemods.core.arch import DEFAULT_ARCHS, Arch, ArchSet
from codemods.gates import SourceError
from codemods.gates.python import cst_source
from codemods.gates.cpp import cuda_guard
from codemods.gates.python import python_arch_list
from codemods.gates.python import python_arch_or
from codemods.gates.python import python_capability

pytestmark = pytest.mark.real
SM120 = Arch.parse("sm_120")
UNIVERSE = tuple(dict.fromkeys((*DEFAULT_ARCHS, SM120)))


def sources(root: Path, suffixes: tuple[str, ...], token: bytes) -> list[tuple[str, bytes]]:
    found = []
    for path in sorted(root.rglob("*")):
        if path.is_file() and path.name.endswith(suffixes):
            data = path.read_bytes()
            if token in data:
                found.append((path.relative_to(root).as_posix(), data))
    return found


def _tree_sitter_guards(data: bytes, language: str) -> list[tuple[int, str, ArchSet]]:
    """(line, condition, admits) of every arch guard tree-sitter's tree of the whole file finds: the reference the
    lexer's guard finder (cuda_guard.find, the one scan and run share) is checked against."""
    tree = syntax.parser(language).parse(data)
    keywords, directives = conditionals(tree, language)
    found = []
    for keyword in keywords:
        guard = read_guard(data, tree, keyword, arch_macros_only=True, directive=directives.get(keyword.start_byte))
        if guard is not None:
            found.append((keyword.start_point.row + 1, data[guard.start : guard.end].decode(), guard.admits(UNIVERSE)))
    return found


@pytest.mark.parametrize("project", ["flashinfer", "sglang"])
def test_the_guard_finder_is_a_superset_of_tree_sitters_directives(real_unpacked, project):
    files = sources(real_unpacked[project], listing.C_SUFFIXES, b"__CUDA_ARCH")
    assert files
    extra = decided = 0
    for rel, data in files:
        language = "cuda" if rel.endswith((".cu", ".cuh")) else "cpp"
        try:
            mine = {(g.line, g.text): g.admits for g in cuda_guard.find(data, UNIVERSE, language=language)}
        except SourceError as exc:
            assert "unbalanced" in str(exc) or "UTF-8" in str(exc), f"{rel}: {exc}"
            continue
        reference = _tree_sitter_guards(data, language)
        for line, text, admits in reference:
            assert (line, text) in mine, f"{rel}:{line} {text}"
            # tree-sitter calls a condition unknown when it cannot parse the code around it
            if not admits.unknown:
                assert mine[(line, text)] == admits, f"{rel}:{line}"
                decided += 1
        extra += len(mine) - len(reference)
    assert decided > 0
    assert extra < len(files)  # the directives tree-sitter misreads (inside broken code) are few


def _normalised(shape: Structure, families) -> list[tuple]:
    names = {family.name for family in families}
    out = []
    for branch in shape.branches:
        first: dict[tuple, Hit] = {}
        # scan looks for tokens only where an arch decides (hazards and blockers look nowhere else)
        hits = branch.hits if shape.selecting(branch) is not None else []
        for hit in sorted(hits, key=lambda h: h.line):
            if hit.family in names:
                first.setdefault((hit.family, hit.token, hit.wrapper), hit)
        out.append(
            (
                branch.chain, branch.position, branch.parent, branch.line, branch.directive, branch.condition,
                branch.start, branch.body_start, branch.body_end, branch.own_code, branch.children,
                sorted((h.family, h.token, h.line, h.wrapper) for h in first.values()),
            )
        )  # fmt: skip
    return out


@pytest.mark.parametrize("arch", ["sm_120", "sm_100a"])
def test_tokens_where_an_arch_decides_are_those_of_the_whole_structure(real_unpacked, arch):
    """scan looks for the tokens an arch lacks only where an arch decides (build_structure): it finds there what
    the structure with every token everywhere holds."""
    target = Arch.parse(arch)
    families = lacking(target)
    files = sources(real_unpacked["flashinfer"], listing.C_SUFFIXES, b"__CUDA_ARCH")
    for rel, data in files:
        comments = lexer.Comments(data)
        mine = build_structure(data, comments, lexer.find_directives(data, comments), families)
        assert _normalised(mine, families) == _normalised(structure(data), families), rel


def _gates(gates) -> list[tuple]:
    return [(g.kind, g.line, g.start, g.end, g.text, g.admits, g.context) for g in gates]


@pytest.mark.parametrize("project", ["flashinfer", "sglang"])
def test_pruned_python_gives_the_same_gates(real_unpacked, project):
    checked = 0
    for rel, data in sources(real_unpacked[project], (".py",), b""):
        kinds = prefilter.python_kinds(data)
        if not kinds:
            continue
        text = python_capability.PythonText(data)
        patterns = [prefilter for kind, prefilter in prefilter.PYTHON_PREFILTERS if kind in kinds]
        patterns.append(prefilter.named_or_re())
        pruned = cst_source.Pruned(text, ast.parse(data), lambda piece, stmt, inside: any(p.search(piece) for p in patterns))
        for kind in kinds:
            full = kind.find(data, UNIVERSE)
            assert _gates(pruned.gate(g) for g in kind.find(pruned.source, UNIVERSE)) == _gates(full), rel
            checked += len(full)
    assert checked > 0


def test_pruned_jit_files_give_the_same_specs(real_unpacked):
    root = real_unpacked["flashinfer"]
    context = records.Context(str(root), SM120, UNIVERSE, "flashinfer/jit", True, False, True, None, "")
    checked = 0
    for rel, data in sources(root / "flashinfer" / "jit", (".py",), b"gen_jit_spec"):
        result = python_files.analyse_python(f"flashinfer/jit/{rel}", data, context, True)
        assert result.specs == jit_specs.find(data, UNIVERSE), rel
        checked += len(result.specs)
    assert checked > 50


def test_python_kinds_of_the_scan_match_a_full_find(real_unpacked):
    root = real_unpacked["sglang"]
    result = scanner.scan(root, SM120, jobs=1)
    found = {(g["file"], g["line"], g["text"]) for g in result.gates if g["kind"] in (python_arch_or.KIND, python_arch_list.KIND)}
    expected = set()
    for rel, data in sources(root, (".py",), b"is_"):
        for kind in (python_arch_or, python_arch_list):
            try:
                expected |= {(rel, g.line, g.text) for g in kind.find(data, UNIVERSE)}
            except SourceError:
                pass
    assert found == expected and found


@pytest.mark.parametrize("project", ["flashinfer", "sglang"])
def test_capability_blocks_give_what_a_whole_module_parse_gives(real_unpacked, project):
    checked = 0
    for rel, data in sources(real_unpacked[project], (".py",), b"_capability"):  # torch's call and FlashInfer's helper
        if not python_capability.CAPABILITY_RE.search(data):
            continue
        full = python_capability.gates(python_capability.PythonText(data), ast.parse(data).body, UNIVERSE)
        blocks = python_capability.blocks(data)
        if blocks is not None:
            assert _gates(python_capability.gates(*blocks, UNIVERSE)) == _gates(full), rel
            checked += 1
    assert checked > 0


@pytest.mark.parametrize("project", ["flashinfer", "sglang"])
def test_fast_python_readers_agree_with_libcst(real_unpacked, project):
    """jit_specs' ast reader gives what the libcst reader gives, and python_arch_list (which reads the stdlib ast)
    gives spans that are libcst's (widen edits through libcst), file by file."""
    import libcst as cst

    from codemods.gates.python.cst_source import parse

    specs = lists = 0
    for rel, data in sources(real_unpacked[project], (".py",), b""):
        if b"gen_jit_spec" in data:
            fast = jit_specs._specs(jit_specs._AstIndex(data))
            assert fast == jit_specs._specs(LibcstIndex(parse(data), data, UNIVERSE)), rel
            specs += len(fast)
        if b"supported_major_versions" in data or b"supported_compute_capability" in data:
            listed, known = python_arch_list.find(data, UNIVERSE), python_arch_list.find_known(data, UNIVERSE)
            assert _gates(python_arch_list.find_known(data, UNIVERSE, ast.parse(data))) == _gates(known), rel
            parsed = parse(data)
            spans = {parsed.outer_span(node) for node in parsed.nodes((cst.List, cst.Tuple))}
            spans |= {parsed.outer_span(arg.value) for arg in parsed.nodes(cst.Arg)}
            assert {(g.start, g.end) for g in listed + known} <= spans, rel
            lists += len(listed)
    assert (specs > 50 and lists > 10) if project == "flashinfer" else True
