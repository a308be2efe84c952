"""The predicate reader's two shortcuts give the meanings running everything gives: it runs only the definitions
that may depend on the GPU, and a run that read no capability only once."""

from __future__ import annotations

import pytest

from codemods.gates.python.predicates import reading
from codemods.gates.python.predicates.evaluation import DOMAIN
from conftest import unpack_wheel

RELEASES = [("sglang", "0.5.8"), ("flashinfer-python", "0.6.3")]


def _meanings(dist: str, version: str) -> dict:
    root = unpack_wheel(dist, version)
    files = [p for p in sorted(root.rglob("*.py")) if b"_sm" in p.read_bytes() or b"capabilit" in p.read_bytes()]
    assert len(files) > 50
    reading._read.cache_clear()  # read() keeps the last files' meanings: each pass must run the reader
    first = {p: reading.read(p.read_bytes(), p.name) for p in files}
    # the project's meanings, as scan hands them to every file: far more definitions then may use the GPU
    known = {name: meaning for meanings in first.values() for name, meaning in meanings.items()}
    reading._read.cache_clear()
    return {p: reading.read(p.read_bytes(), p.name, known) for p in files}


@pytest.mark.real
@pytest.mark.parametrize("dist, version", RELEASES)
def test_skipping_gpu_free_definitions_changes_no_meaning(dist, version, monkeypatch):
    fast = _meanings(dist, version)
    monkeypatch.setattr(reading._Reader, "_may_depend_on_the_gpu", lambda self: {*self.functions, *self.values})
    assert _meanings(dist, version) == fast
    assert sum(len(m) for m in fast.values()) >= 10, "the files define predicates the reader reads"


@pytest.mark.real
@pytest.mark.parametrize("dist, version", RELEASES)
def test_running_once_what_reads_no_capability_changes_no_meaning(dist, version, monkeypatch):
    fast = _meanings(dist, version)
    monkeypatch.setattr(
        reading._Reader, "_on_every_cap", lambda self, run: {cap: run(cap) for cap in DOMAIN}
    )
    assert _meanings(dist, version) == fast
    assert sum(len(m) for m in fast.values()) >= 10, "the files define predicates the reader reads"
