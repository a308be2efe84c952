"""The predicate reader runs only the definitions that may depend on the GPU: the same meanings as running all."""

from __future__ import annotations

import pytest

from codemods.gates import _predicates
from conftest import unpack_wheel


@pytest.mark.real
@pytest.mark.parametrize("dist, version", [("sglang", "0.5.8"), ("flashinfer-python", "0.6.3")])
def test_skipping_gpu_free_definitions_changes_no_meaning(dist, version, monkeypatch):
    root = unpack_wheel(dist, version)
    files = [p for p in sorted(root.rglob("*.py")) if b"_sm" in p.read_bytes() or b"capabilit" in p.read_bytes()]
    assert len(files) > 50
    fast = {p: _predicates.read(p.read_bytes(), p.name) for p in files}
    monkeypatch.setattr(_predicates._Reader, "_may_depend_on_the_gpu", lambda self: {*self.functions, *self.values})
    every = {p: _predicates.read(p.read_bytes(), p.name) for p in files}
    assert fast == every
    assert sum(len(m) for m in fast.values()) >= 10, "the files define predicates the reader reads"
