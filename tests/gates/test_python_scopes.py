"""PythonSource.bound / importers (Python's symbol tables) answer as libcst's scope analysis does."""

from textwrap import dedent

import libcst as cst
import pytest
from libcst.metadata import Assignment

from codemods.gates.python.cst_source import PythonSource

SOURCES = [
    pytest.param(
        """\
        from sglang.srt.utils import is_sm90_supported, is_sm100_supported as sm100
        import torch.cuda
        _is_cuda = torch.cuda.is_available()
        _is_sm90_supported = _is_cuda and is_sm90_supported()

        def apply(x, is_sm120_supported=None):
            from other import is_sm110_supported
            if _is_sm90_supported or sm100() or is_sm110_supported():
                return len(x)
            return is_sm120_supported
        """,
        id="module-function-parameter-local-import",
    ),
    pytest.param(
        """\
        class Runner:
            from sglang.srt.utils import is_sm100_supported
            flag = is_sm100_supported()

            def method(self):
                return is_sm100_supported() or flag

            class Inner:
                value = flag
        """,
        id="class-scope-not-seen-from-methods",
    ),
    pytest.param(
        """\
        def outer():
            is_sm90_supported = lambda: True
            def inner():
                global is_sm100_supported
                nonlocal_free = is_sm90_supported()
                return nonlocal_free or is_sm100_supported()
            return inner

        def later():
            global is_sm100_supported
            is_sm100_supported = print
        """,
        id="closure-global-declared-elsewhere",
    ),
    pytest.param(
        """\
        @decorator(is_sm90_supported)
        def f(a=is_sm100_supported, *args, **kwargs) -> bool:
            for is_sm100_supported in args:
                pass
            with open(a) as is_sm90_supported:
                pass
            try:
                pass
            except Exception as err:
                print(err, kwargs)
            if (n := len(args)):
                return n
        from m import is_sm90_supported
        """,
        id="decorators-defaults-loops-with-except-walrus",
    ),
    pytest.param(
        """\
        def g():
            values = [is_sm90_supported for is_sm90_supported in range(3)]
            return (lambda is_sm100_supported: is_sm100_supported or values)(1)
        from x import is_sm100_supported
        """,
        id="comprehension-and-lambda-fall-back-to-libcst",
    ),
]
NAMES = ["is_sm90_supported", "is_sm100_supported", "sm100", "is_sm110_supported", "is_sm120_supported",
         "_is_sm90_supported", "flag", "len", "print", "torch", "nonlocal_free", "x", "undefined_name"]  # fmt: skip


@pytest.mark.parametrize("source", SOURCES)
def test_bound_and_importers_agree_with_libcst_scopes(source: str) -> None:
    parsed = PythonSource(dedent(source).encode())
    checked = answered = 0
    # names in expressions of statement bodies: where a gate's chain is (a def's name, its parameters and
    # decorators, and import aliases are scoped differently by libcst, and no chain is there)
    header = (cst.Param, cst.Decorator, cst.Import, cst.ImportFrom)
    names = [
        node
        for node in parsed.nodes(cst.Name)
        if not isinstance(parsed.parent(node), (cst.FunctionDef, cst.ClassDef))
        and not any(
            isinstance(ancestor, header) or (isinstance(ancestor, cst.Arg) and isinstance(parsed.parent(ancestor), cst.ClassDef))
            for ancestor in parsed.ancestors(node)
        )
    ]
    for node in [parsed.module, *names]:
        try:
            scope = parsed.scope(node)
        except KeyError:
            continue  # libcst gives no scope to some names (an import's dotted parts)
        for name in NAMES:
            assert parsed.bound(node, name) == (name in scope), (node, name)
            expected = [
                a.node for a in scope[name] if isinstance(a, Assignment) and isinstance(a.node, cst.ImportFrom)
            ]
            assert parsed.importers(node, name) == expected, (node, name)
            checked += 1
            answered += parsed._binding_table(node, name) is not None  # not libcst's answer passed through
    assert checked > 50 and answered > 0


def test_parse_hands_out_a_read_only_source() -> None:
    """parse's cache shares one PythonSource between callers: nobody can change it for the others."""
    import pytest

    from codemods.gates.python.cst_source import parse

    source = b"import os\n\ndef f():\n    global g\n    g = 1\n    return os\n"
    parsed = parse(source)
    assert parse(source) is parsed
    with pytest.raises(AttributeError, match="read-only"):
        parsed.source = b"x = 1\n"
    with pytest.raises(AttributeError, match="read-only"):
        del parsed.module
    with pytest.raises(TypeError):
        parsed._parents[parsed.module] = parsed.module  # type: ignore[index]
    with pytest.raises(AttributeError):
        parsed._order.append(parsed.module)  # type: ignore[attr-defined]
    assert parsed.bound(parsed.module, "g") and parsed.bound(parsed.module, "os")  # the lazy tables still fill
    with pytest.raises(AttributeError):
        parsed._globals.add("h")  # type: ignore[attr-defined]
    assert parse(source).source == source


def test_defines_reads_the_module_symbol_table() -> None:
    from codemods.gates.python.ast_text import defines

    source = b"from m import (\n    a,\n    b as c,\n)\nif x:\n    d = 1\ndef e(): pass\nfrom n import *\n"
    assert [name for name in "abcdef" if defines(source, name)] == ["a", "c", "d", "e"]
    assert not defines(b"def (:\n", "a") and not defines(b"\xff", "a")
