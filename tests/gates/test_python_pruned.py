"""parse(source, keep): libcst reads only the statements a kind names, and answers as a whole-module parse does."""

from __future__ import annotations

from pathlib import Path
from textwrap import dedent

import libcst as cst
import pytest

from codemods.core.arch import DEFAULT_ARCHS, Arch
from codemods.gates import CannotWiden
from codemods.gates.python import python_arch_list
from codemods.gates.python import python_arch_or
from codemods.gates.python import python_arch_test
from codemods.gates.python.cst_source import PythonSource, mentioning

SERVER_ARGS = """\
    from sglang.srt.utils import (
        get_device,
        is_sm90_supported,
        is_sm100_supported,
    )

    LONG = [
        1,
        2,
    ]


    class ServerArgs:
        name: str = "x"

        def _handle_model_specific_adjustments(self):
            device = get_device()
            if device == "cuda":
                self.attention_backend = "fa3"
            if not self.enable_dp_attention and (is_sm90_supported() or is_sm100_supported()):
                self.enable_flashinfer_allreduce_fusion = True
                log("enabled")

        def other(self):
            return [x for x in range(3)]
    """


def _code(parsed: PythonSource, node: cst.CSTNode) -> bytes:
    start, end = parsed.span(node)
    return parsed.source[start:end]


def test_pruned_parse_hands_libcst_only_the_statements_that_name_a_predicate() -> None:
    data = dedent(SERVER_ARGS).encode()
    pruned = PythonSource(data, python_arch_or.MENTIONS)
    assert pruned.pruned is not None and len(pruned.pruned.source) < len(data) * 3 // 4
    assert b"LONG" not in pruned.pruned.source and b"def other" not in pruned.pruned.source
    # an `if` whose test names a predicate is kept whole: its body decides `assigns` and `calls`
    assert b'log("enabled")' in pruned.pruned.source
    assert b'self.attention_backend = "fa3"' not in pruned.pruned.source


def test_pruned_nodes_stand_where_the_whole_module_has_them() -> None:
    data = dedent(SERVER_ARGS).replace("\n", "\r\n").encode()
    data = b"\xef\xbb\xbf" + data  # a BOM and CRLF line endings: offsets are the file's own
    full, pruned = PythonSource(data), PythonSource(data, python_arch_or.MENTIONS)
    assert pruned.pruned is not None
    spans = {(type(node), full.span(node)): node for node in full.nodes(cst.CSTNode)}
    blanks = [line for line in pruned.nodes(cst.SimpleStatementLine) if cst.Module([line]).code.strip() == "0"]
    kept = [node for node in pruned.nodes(cst.CSTNode) if not any(a in blanks for a in (node, *pruned.ancestors(node)))]
    for node in kept:
        if isinstance(node, (cst.Module, cst.IndentedBlock, cst.SimpleStatementLine, cst.Expr)) or _code(pruned, node) == b"":
            continue  # blocks around a cut differ; whitespace nodes have empty spans
        twin = spans.get((type(node), pruned.span(node)))
        assert twin is not None, (type(node), _code(pruned, node))
        assert _code(pruned, node) == _code(full, twin)
        assert pruned.enclosing_function(node) == full.enclosing_function(twin)
        assert pruned.at_module_level(node) == full.at_module_level(twin)
    [gate] = python_arch_or.find(data, assigns="self.enable_flashinfer_allreduce_fusion")
    assert gate.text == "(is_sm90_supported() or is_sm100_supported())" and gate.line == 20
    assert gate.context == "_handle_model_specific_adjustments"


def test_compound_statements_of_every_shape_are_cut_and_kept() -> None:
    """match, try, with, while and for: a header naming a predicate keeps the statement whole, a body only itself."""
    source = dedent(
        """\
        match mode:
            case "a" if is_sm90_supported():
                x = 1
            case _:
                y = is_sm100_supported() or is_sm90_supported()
        match is_sm90_supported():
            case True:
                z = 1
        try:
            w = 1
        except ValueError:
            w = is_sm90_supported() or is_sm100_supported()
        finally:
            v = 2
        with open(f) as handle:
            u = 3
        while is_sm90_supported() or is_sm100_supported():
            break
        for i in range(3):
            pass
        """
    ).encode()
    pruned = PythonSource(source, python_arch_or.MENTIONS)
    assert pruned.pruned is not None
    kept = pruned.pruned.source
    assert b"z = 1" in kept and b"break" in kept  # the headers name a predicate (a case guard is no header)
    assert b"w = 1" not in kept and b"v = 2" not in kept and b"u = 3" not in kept and b"range" not in kept
    full = PythonSource(source)
    chains = [n for n in full.nodes(cst.BooleanOperation) if python_arch_or.is_or(n)]
    assert python_arch_or.find(source) and [g.start for g in python_arch_or.find(source)] == [
        full.outer_span(n)[0] for n in chains
    ]


def test_scopes_come_from_the_whole_module() -> None:
    """A lambda's scope is libcst's; the statements left out of the parse still bind names."""
    source = dedent(
        """\
        from m import is_sm90_supported, is_sm100_supported
        helper = 1
        f = lambda: helper and (is_sm90_supported() or is_sm100_supported())
        """
    ).encode()
    full, pruned = PythonSource(source), PythonSource(source, python_arch_or.MENTIONS)
    [chain] = [n for n in pruned.nodes(cst.BooleanOperation) if python_arch_or.is_or(n)]
    [twin] = [n for n in full.nodes(cst.BooleanOperation) if python_arch_or.is_or(n)]
    for name in ("helper", "is_sm90_supported", "is_sm120_supported", "len"):
        assert pruned.bound(chain, name) == full.bound(twin, name), name
    assert [pruned.span(n) for n in pruned.importers(chain, "is_sm90_supported")] == [
        full.span(n) for n in full.importers(twin, "is_sm90_supported")
    ]


@pytest.mark.parametrize(
    "source",
    [
        pytest.param(b"x = is_sm90_supported() or is_sm100_supported()\ry = 1\n", id="lone-cr-line-ending"),
        pytest.param(b"x = (is_sm90_supported() or\n", id="not-python"),
    ],
)
def test_source_ast_cannot_place_is_parsed_whole(source: bytes) -> None:
    try:
        parsed = PythonSource(source, python_arch_or.MENTIONS)
    except Exception:  # the whole-module parse's own error, as without `keep`
        with pytest.raises(Exception):
            PythonSource(source)
        return
    assert parsed.pruned is None


def _every_gate(kind, data: bytes) -> list[tuple]:
    found = kind.find_known(data, UNIVERSE) if kind is python_arch_list else kind.find(data, UNIVERSE)
    out = []
    for gate in found:
        try:
            edits = kind.widen(data, gate, (SM120,), UNIVERSE)
        except CannotWiden as exc:
            edits = str(exc)
        out.append((gate.kind, gate.start, gate.end, gate.line, gate.text, gate.admits, gate.context, gate.detail, edits))
    return out


SM120 = Arch.parse("sm_120")
UNIVERSE = tuple(dict.fromkeys((*DEFAULT_ARCHS, SM120)))


@pytest.mark.real
@pytest.mark.parametrize("project", ["flashinfer", "sglang"])
def test_pruned_parse_finds_and_widens_as_the_whole_module_parse(real_unpacked, project, monkeypatch) -> None:
    """The agreement test of the one fast path: every Python gate of a release, found and widened both ways."""
    files = []
    root: Path = real_unpacked[project]
    for path in sorted(root.rglob("*.py")):
        data = path.read_bytes()
        if python_arch_or.MENTIONS.search(data) or b"supported_major_versions" in data or b"supported_compute_capability" in data:
            files.append((path.relative_to(root).as_posix(), data))
    kinds = (python_arch_or, python_arch_test)  # python_arch_list finds with the stdlib ast alone
    fast = {rel: [_every_gate(kind, data) for kind in kinds] for rel, data in files}
    monkeypatch.setattr(python_arch_or, "MENTIONS", None)  # python_arch_test reads it from there too
    checked = 0
    for rel, data in files:
        whole = [_every_gate(kind, data) for kind in kinds]
        assert fast[rel] == whole, rel
        checked += sum(len(found) for found in whole)
    assert checked > 20
    assert mentioning(("a", "b")) is mentioning(("a", "b"))  # find and widen share one cached parse
