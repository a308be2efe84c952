"""audit.areas.matches: the globs read as one expression give what fnmatch gives glob by glob, folder by folder."""

from __future__ import annotations

import posixpath
from fnmatch import fnmatchcase

from hypothesis import given, settings, strategies as st

from codemods.audit.areas import _DEFAULT_BENCHMARKS, _DEFAULT_TESTS, matches


def reference(rel: str, globs) -> bool:
    """fnmatch on the path and on each folder above it, glob by glob (what `matches` answers)."""
    patterns = [glob.rstrip("/") for glob in globs if glob.strip("/")]
    path = rel.replace("\\", "/").removeprefix("./")
    candidates = [path]
    while (path := posixpath.dirname(path)):
        candidates.append(path)
    return any(fnmatchcase(candidate, pattern) for pattern in patterns for candidate in candidates)


PIECES = st.sampled_from(["a", "b", "test", "tests", "bench", "x.py", "test_x.py", "conftest.py", ".", "_", "-"])
PATHS = st.lists(st.lists(PIECES, min_size=1, max_size=3).map("".join), min_size=1, max_size=5).map("/".join)
GLOB_PIECES = st.sampled_from(["*", "?", "a", "b", "test", "s", "[ab]", "[!a]", "/", ".py", "**", "x", "_"])
GLOBS = st.lists(st.lists(GLOB_PIECES, min_size=1, max_size=5).map("".join), max_size=4)


@settings(max_examples=400, deadline=None)
@given(PATHS, GLOBS)
def test_matches_is_fnmatch_of_the_path_and_its_folders(rel, globs):
    assert matches(rel, globs) == reference(rel, globs)


def test_the_default_areas_place_paths_as_fnmatch_does():
    paths = ["flashinfer/tests/test_a.py", "tests/x.cu", "pkg/benchmarks/run.py", "bench_gemm.py", "a/conftest.py",
             "src/testing/util.py", "include/flashinfer/attention.cuh", "./tests/y.py", "a\\tests\\z.py", ""]
    for globs in (_DEFAULT_TESTS, _DEFAULT_BENCHMARKS, ("tests/",), ("/",), ()):
        for rel in paths:
            assert matches(rel, globs) == reference(rel, globs), (rel, globs)
