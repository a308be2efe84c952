"""Which part of a tree a scanned file belongs to (library, tests, benchmarks), and which files a scan leaves out.

A maintainer acts on the library first: `scan` prints its groups library
first, then benchmarks, then tests, and every record says its `area`. The
patterns are data: a project file's `[scan]` table (targets/projects/) gives
`tests`, `benchmarks` and `exclude` globs; a tree of no known project gets
the defaults below. `--exclude GLOB` adds to the project's `exclude`.

A glob is matched with fnmatch against the path relative to the tree (`*`
also crosses `/`), and against each of the folders above the file, so
`tests` or `*/benchmarks` leaves out everything under such a folder.
Excluded files are analysed as usual (a JIT module's sources or a caller
in a test still count for the library's gates) and only left out of the
report. No I/O besides reading the project files (core.targets).
"""

from __future__ import annotations

import posixpath
import re
from collections.abc import Iterable
from dataclasses import dataclass
from fnmatch import translate
from functools import lru_cache
from pathlib import Path

from codemods.core.targets import project_tables

LIBRARY, BENCHMARKS, TESTS = "library", "benchmarks", "tests"
# In the order a maintainer reads them (and the text and SARIF rank them).
AREAS = (LIBRARY, BENCHMARKS, TESTS)

_DEFAULT_TESTS = ("test", "tests", "*/test", "*/tests", "test_*.py", "*/test_*.py", "*_test.py", "conftest.py",
                  "*/conftest.py")
_DEFAULT_BENCHMARKS = ("bench", "benchmark", "benchmarks", "*/bench", "*/benchmark", "*/benchmarks", "bench_*.py",
                       "*/bench_*.py", "benchmark_*.py", "*/benchmark_*.py")


@dataclass(frozen=True)
class Areas:
    """The globs that place a file in tests or benchmarks, and those whose files the report leaves out."""

    tests: tuple[str, ...] = _DEFAULT_TESTS
    benchmarks: tuple[str, ...] = _DEFAULT_BENCHMARKS
    exclude: tuple[str, ...] = ()

    def area(self, rel: str) -> str:
        """`tests`, `benchmarks` or `library` for the path `rel` (tests first: a test of a benchmark is a test)."""
        if matches(rel, self.tests):
            return TESTS
        if matches(rel, self.benchmarks):
            return BENCHMARKS
        return LIBRARY

    def excluded(self, rel: str) -> bool:
        return matches(rel, self.exclude)

    def adding(self, exclude: Iterable[str]) -> Areas:
        return Areas(self.tests, self.benchmarks, (*self.exclude, *exclude))


def matches(rel: str, globs: Iterable[str]) -> bool:
    """Whether `rel` or a folder above it matches one of `globs` (a trailing `/` on a glob is ignored)."""
    pattern = _one_pattern(tuple(globs))
    if pattern is None:
        return False
    path = rel.replace("\\", "/").removeprefix("./")
    while path:
        if pattern.match(path):
            return True
        path = posixpath.dirname(path)
    return False


@lru_cache(maxsize=64)
def _one_pattern(globs: tuple[str, ...]) -> re.Pattern[str] | None:
    """The globs as one regular expression, each as fnmatch reads it (`fnmatchcase(name, glob)` is
    `re.match(fnmatch.translate(glob), name)`): a warm scan places 3,700 files and their folders (0.35 s of
    fnmatchcase calls for the corpus, one per glob and folder)."""
    patterns = [glob.rstrip("/") for glob in globs if glob.strip("/")]
    if not patterns:
        return None
    return re.compile("|".join(f"(?:{translate(pattern)})" for pattern in patterns))


def for_tree(root: Path) -> Areas:
    """The areas of the project whose layout matches the tree at `root` (its `[scan]` table), else the defaults."""
    for table in project_tables():
        for layout in table.get("layout", ()):
            if all((root / marker).exists() for marker in layout.get("markers", ())):
                return from_table(table.get("scan", {}))
    return Areas()


def from_table(scan: dict) -> Areas:
    """A project file's `[scan]` table: each key a list of globs; a missing key keeps the default."""
    return Areas(
        tuple(scan.get("tests", _DEFAULT_TESTS)),
        tuple(scan.get("benchmarks", _DEFAULT_BENCHMARKS)),
        tuple(scan.get("exclude", ())),
    )


def rank(area: str) -> int:
    """The area's place in AREAS (an unknown one last): library 0, benchmarks 1, tests 2."""
    return AREAS.index(area) if area in AREAS else len(AREAS)


def place(gates: list[dict], hazards: list[dict], skipped: list[dict], areas: Areas) -> int:
    """Give every gate and hazard its `area`, and drop in place the records of excluded files (skipped ones too);
    the number of records dropped."""
    dropped = 0
    excluded: dict[str, bool] = {}  # by file: a file's many records share one answer (20,000 gates, 3,000 files)
    area: dict[str, str] = {}
    for records in (gates, hazards, skipped):
        kept = []
        for record in records:
            rel = str(record.get("file", ""))
            if rel not in excluded:
                excluded[rel] = areas.excluded(rel)
            if not excluded[rel]:
                kept.append(record)
        dropped += len(records) - len(kept)
        if records is not skipped:  # a skipped file or folder says only why
            for record in kept:
                rel = str(record.get("file", ""))
                if rel not in area:
                    area[rel] = areas.area(rel)
                record["area"] = area[rel]
        records[:] = kept
    return dropped
