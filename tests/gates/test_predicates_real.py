"""The predicate reader's two shortcuts give the meanings running everything gives: it runs only the definitions
that may depend on the GPU, and a definition once per class of capabilities it can tell apart (the values its runs
compared), not on all 150 of DOMAIN."""

from __future__ import annotations

import pytest

from codemods.gates.python.predicates import reading
from conftest import unpack_wheel

RELEASES = [("sglang", "0.5.8"), ("flashinfer-python", "0.6.3")]
# every release the corpus holds predicates of: the classes are checked on each definition they define
CORPUS = [
    ("flashinfer-python", "0.6.3"), ("flashinfer-python", "0.7.4"), ("sglang", "0.5.8"), ("sglang", "0.5.23"),
    ("vllm", "0.34.0"),
]  # fmt: skip


def _meanings(dist: str, version: str, classes: bool = True) -> dict:
    root = unpack_wheel(dist, version)
    files = [p for p in sorted(root.rglob("*.py")) if b"_sm" in p.read_bytes() or b"capabilit" in p.read_bytes()]
    assert len(files) > 50
    reading._read.cache_clear()  # read() keeps the last files' meanings: each pass must run the reader
    first = {p: reading.read(p.read_bytes(), p.name, classes=classes) for p in files}
    # the project's meanings, as scan hands them to every file: far more definitions then may use the GPU
    known = {name: meaning for meanings in first.values() for name, meaning in meanings.items()}
    reading._read.cache_clear()
    second = {p: reading.read(p.read_bytes(), p.name, known, classes=classes) for p in files}
    return {"alone": first, "with known": second}


@pytest.mark.real
@pytest.mark.parametrize("dist, version", RELEASES)
def test_skipping_gpu_free_definitions_changes_no_meaning(dist, version, monkeypatch):
    fast = _meanings(dist, version)
    monkeypatch.setattr(reading._Reader, "_may_depend_on_the_gpu", lambda self: {*self.functions, *self.values})
    assert _meanings(dist, version) == fast
    assert sum(len(m) for m in fast["with known"].values()) >= 10, "the files define predicates the reader reads"


@pytest.mark.real
@pytest.mark.parametrize("dist, version", CORPUS)
def test_running_once_per_class_gives_what_every_capability_gives(dist, version):
    by_class = _meanings(dist, version)
    every = _meanings(dist, version, classes=False)
    for reading_pass in ("alone", "with known"):
        for path, meanings in every[reading_pass].items():
            assert by_class[reading_pass][path] == meanings, (reading_pass, path)
    found = [m for meanings in every["with known"].values() for m in meanings.values()]
    assert sum(m.known for m in found) >= 10, "the files define predicates the reader reads"
