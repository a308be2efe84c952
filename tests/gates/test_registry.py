"""The registry declares every gate kind, and each declaration matches its module's functions."""

from __future__ import annotations

import importlib
import inspect
import pkgutil

import pytest

from codemods import gates
from codemods.core.arch import DEFAULT_ARCHS, parse_archs
from codemods.gates.base import GateKind, Where
from codemods.gates.registry import KINDS, modules


def _kind_modules() -> dict[str, object]:
    found = {}
    for info in pkgutil.walk_packages(gates.__path__, "codemods.gates."):
        module = importlib.import_module(info.name)
        if hasattr(module, "KIND") and (hasattr(module, "find") or hasattr(module, "rewrite")):
            found[module.KIND] = module
    return found


def test_every_kind_module_is_registered_once():
    assert modules() == _kind_modules()
    assert all(kind.name == name for name, kind in KINDS.items())


@pytest.mark.parametrize("name", sorted(KINDS))
def test_declared_selectors_are_the_functions_keyword_parameters(name):
    """The declaration is the contract; this checks it against the module (the planner never looks)."""
    kind, module = KINDS[name], modules()[name]
    entry = module.rewrite if kind.edit_kind else module.find
    params = [p for p in inspect.signature(entry).parameters.values() if p.kind is p.KEYWORD_ONLY]
    assert set(kind.selector_names) == {p.name for p in params}
    assert set(kind.required_selectors) == {p.name for p in params if p.default is p.empty}
    assert kind.edit_kind == bool(getattr(module, "EDIT_KIND", False))


def test_a_kind_is_either_an_edit_or_a_gate():
    with pytest.raises(TypeError, match="either rewrite, or find, admits and widen"):
        GateKind("half", find=lambda *a: [])
    with pytest.raises(TypeError):
        GateKind("both", find=lambda *a: [], admits=lambda *a: None, widen=lambda *a: [], rewrite=lambda *a: [])


def test_where_gives_the_language_by_file_name():
    assert [Where(f).language for f in ("a.cu", "a.cuh", "a.h", "a.cpp", "")] == ["cuda", "cuda", "cpp", "cpp", "cpp"]


def test_cuda_guard_blockers_hook_and_widen_through_the_record():
    kind = KINDS["cuda_guard"]
    source = b"#if __CUDA_ARCH__ >= 900 && __CUDA_ARCH__ < 1000\n  asm(\"wgmma.fence.sync.aligned;\");\n#endif\n"
    [gate] = kind.find(source, DEFAULT_ARCHS, Where("k.cuh"), {})
    targets = parse_archs("sm_120")
    assert kind.blockers(source, gate, targets)  # wgmma is SM90a-only: widening to SM120 breaks the build
    assert kind.widen(source, gate, targets, DEFAULT_ARCHS, Where("k.cuh"))
    assert KINDS["python_arch_list"].blockers(b"", gate, targets) == []  # the default hook
