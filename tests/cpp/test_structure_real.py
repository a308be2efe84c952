"""The one #if structure and include reader on every C file of real FlashInfer 0.6.3 and SGLang 0.5.8 wheels.

data/real_structures.json holds, per folder, a digest of what each file's
structure (every branch with its bounds, condition, nesting, whether it holds
code, and the first place of each family token in it and at file level) and
includes were when two readers still existed and agreed on every file. The
digest keeps the test short; a change of behaviour shows as the folders whose
digest moved.
"""

from __future__ import annotations

import hashlib
import json
import posixpath
from collections import defaultdict
from pathlib import Path

import pytest

from codemods.audit import listing
from codemods.core.source import SourceError
from codemods.cpp.lexer import includes
from codemods.cpp.structure import Structure, file_structure

pytestmark = pytest.mark.real
EXPECTED = Path(__file__).parent / "data" / "real_structures.json"


def _firsts(hits) -> list[tuple]:
    first: dict[tuple, object] = {}
    for hit in sorted(hits, key=lambda h: h.line):
        first.setdefault((hit.family, hit.token, hit.wrapper), hit)
    return sorted((h.family, h.token, h.line, h.wrapper) for h in first.values())


def _digest(value) -> str:
    return hashlib.sha1(json.dumps(value, sort_keys=True).encode()).hexdigest()[:12]


def _fingerprint(shape: Structure, data: bytes) -> list:
    branches = [
        [
            b.chain, b.position, b.parent, b.line, b.directive, b.condition, b.start, b.body_start, b.body_end,
            b.own_code, list(b.children), _firsts(b.hits),
        ]
        for b in shape.branches
    ]  # fmt: skip
    return [len(shape.branches), _digest([*branches, _firsts(shape.top)]), _digest(includes(data))]


def test_structures_and_includes_of_real_releases(real_unpacked):
    groups: dict[str, list] = defaultdict(list)
    for project in ("flashinfer", "sglang"):
        root = real_unpacked[project]
        for path in sorted(root.rglob("*")):
            if not (path.is_file() and path.name.endswith(listing.C_SUFFIXES)):
                continue
            data = path.read_bytes()
            try:
                shape = file_structure(data)
            except SourceError:
                continue
            rel = f"{project}/{path.relative_to(root).as_posix()}"
            groups[posixpath.dirname(rel)].append((posixpath.basename(rel), _fingerprint(shape, data)))
    found = {
        folder: [len(items), sum(item[1][0] for item in items), hashlib.sha1(json.dumps(items).encode()).hexdigest()[:16]]
        for folder, items in sorted(groups.items())
    }
    expected = json.loads(EXPECTED.read_text())
    assert sum(count for _, count, _ in expected.values()) > 10_000  # branches: the wheels hold a lot of #if
    assert {k: v for k, v in found.items() if expected.get(k) != v} == {}
    assert found.keys() == expected.keys()
