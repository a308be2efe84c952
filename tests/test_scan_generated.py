"""`scan` on generated trees: every guard line found, nothing else, against a line-based reference.

The trees mix guards (plain, `#elif`, `#ifdef`-style, continued over
lines with backslashes, with trailing comments) with look-alikes that are no
gate (in block comments, in strings, behind `//`, naming other macros), and
hold a .gitignore'd file, a binary file with a source suffix and files that
cannot be parsed. A second scan must come from the cache (counted, not
timed), and the JSON shape is pinned.
"""

from __future__ import annotations

import json
import os
import random
import re
import shutil
import time
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from codemods.core.arch import Arch
from codemods.audit.scan import scan
from codemods.render.scan_json import to_json
from conftest import git

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"

SM120 = Arch.parse("sm_120")
MACROS = ["__CUDA_ARCH__", "__CUDA_ARCH_SPECIFIC__", "__CUDA_ARCH_FAMILY_SPECIFIC__", "__CUDA_ARCH_FEAT_SM90_ALL"]
CONDITIONS = [
    "__CUDA_ARCH__ >= {v}",
    "defined(__CUDA_ARCH__) && (__CUDA_ARCH__ >= {v}) && (__CUDA_ARCH__ < 1200)",
    "__CUDA_ARCH__ == {v}",
    "defined(__CUDA_ARCH_FEAT_SM90_ALL) || defined(__CUDA_ARCH_SPECIFIC__)",
    "(__CUDA_ARCH_FAMILY_SPECIFIC__ >= 1000) && !defined(FOO)",
]
NOT_GATES = [
    "/* #if __CUDA_ARCH__ >= 900 is how it was */",
    "/*\n#if __CUDA_ARCH__ >= 800\n#endif\n*/",
    '  const char* s = "#if __CUDA_ARCH__ >= 900";',
    "// #if __CUDA_ARCH__ >= 900",
    "  int x = __CUDA_ARCH__;  // the arch, not a guard",
    "#define ARCH __CUDA_ARCH__",
    "#if FOO_ENABLED\n  foo();\n#endif",
    "#if __CUDA_ARCH_HAS_FEATURE__(SM90_ALL)\n  bar();\n#endif",
]


def guarded(rng: random.Random) -> str:
    """One #if group whose first line (and maybe an #elif) is a gate."""
    condition = rng.choice(CONDITIONS).format(v=rng.choice([800, 900, 1000, 1200]))
    style = rng.randrange(5)
    if style == 0:  # continued over several lines
        parts = condition.split(" && ")
        head = "#if " + " && \\\n    ".join(parts) if len(parts) > 1 else f"#if {condition} \\\n  && 1"
    elif style == 1:
        head = f"#if {condition}  // why: upstream PR"
    elif style == 2:
        head = f"#  if {condition} /* spaced */"
    elif style == 3:
        head = f"#ifdef {rng.choice(MACROS[:3])}"
    else:
        head = f"#if {condition}"
    body = "  work();"
    if rng.random() < 0.4:
        body += f"\n#elif {rng.choice(CONDITIONS).format(v=1000)}\n  other();"
    if rng.random() < 0.3:
        body += "\n#else\n  fallback();"
    return f"{head}\n{body}\n#endif"


def c_source(rng: random.Random) -> str:
    pieces = ["/* generated */", "#include <cuda.h>"]
    for _ in range(rng.randrange(1, 8)):
        pieces.append(guarded(rng) if rng.random() < 0.6 else rng.choice(NOT_GATES))
    return "\n".join(pieces) + "\n"


_DIRECTIVE = re.compile(r"^\s*#\s*(?:if|ifdef|ifndef|elif)\b")
_MACRO = re.compile(r"\b(?:__CUDA_ARCH__|__CUDA_ARCH_SPECIFIC__|__CUDA_ARCH_FAMILY_SPECIFIC__|__CUDA_ARCH_FEAT_SM\d+_ALL)\b")


def reference(text: str) -> list[int]:
    """Gate lines by a plain reading of the generated shapes: comments open and close at line starts or ends."""
    lines = text.split("\n")
    found, in_comment, i = [], False, 0
    while i < len(lines):
        line = lines[i]
        start = i
        while line.endswith("\\") and i + 1 < len(lines):
            i += 1
            line = line[:-1] + " " + lines[i]
        if in_comment:
            in_comment = "*/" not in line
        elif line.lstrip().startswith("/*") and "*/" not in line:
            in_comment = True
        else:
            code = re.sub(r"/\*.*?\*/|//.*", " ", line)
            if _DIRECTIVE.match(code) and _MACRO.search(code):
                found.append(start + 1)
        i += 1
    return found


def old(path: Path, seconds: int = 60) -> None:
    """Date a file back, so the cache index trusts its stat (a file changed just now might change again unseen)."""
    stamp = time.time() - seconds
    os.utime(path, (stamp, stamp))


def make_tree(root: Path, seed: int, files: int = 40) -> dict[str, list[int]]:
    rng = random.Random(seed)
    expected: dict[str, list[int]] = {}
    for n in range(files):
        suffix = rng.choice([".cu", ".cuh", ".h", ".hpp", ".cpp", ""])
        rel = f"pkg{n % 4}/sub{n % 3}/file{n}{suffix}"
        text = c_source(rng)
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
        if reference(text):
            expected[rel] = reference(text)
    return expected


def per_file(result) -> dict[str, list[int]]:
    out: dict[str, list[int]] = {}
    for gate in result.gates:
        if gate["kind"] == "cuda_guard":
            out.setdefault(gate["file"], []).append(gate["line"])
    return out


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_every_guard_line_and_nothing_else(tmp_path, seed):
    root = tmp_path / "tree"
    expected = make_tree(root, seed)
    result = scan(root, SM120, jobs=1)
    assert per_file(result) == expected
    assert result.skipped == []


def test_the_reference_sees_continuations_and_comments():
    text = "/* x */\n#if defined(__CUDA_ARCH__) && \\\n    __CUDA_ARCH__ >= 900\n#endif\n/*\n#if __CUDA_ARCH__\n*/\n"
    assert reference(text) == [2]


def test_a_process_pool_finds_the_same(tmp_path):
    root = tmp_path / "tree"
    make_tree(root, 7, files=150)
    serial, pooled = scan(root, SM120, jobs=1), scan(root, SM120, jobs=2)
    assert pooled.stats["jobs"] == 2
    assert to_json(serial) == to_json(pooled)


def special_tree(root: Path) -> None:
    guard = "#if __CUDA_ARCH__ >= 900\n  fast();\n#endif\n"
    files = {
        "kept.cu": guard,
        "ignored/build.cu": guard,
        "blob.cuh": guard.encode() + b"\0\x01\x02\n",
        "latin1.cuh": b"#if __CUDA_ARCH__ >= 900 // caf\xe9\n#endif\n",
        "unbalanced.h": "#if __CUDA_ARCH__ >= 900\n#if FOO\n#endif\n",
        "broken.py": "flags(supported_major_versions=[9, 10]\n",
        "nv/target": "#  if defined(__CUDA_ARCH__) && (__CUDA_ARCH__ >= 800)\n#  endif\n",
        "notes.txt": guard,
    }
    for rel, text in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(text if isinstance(text, bytes) else text.encode())
    (root / ".gitignore").write_text("ignored/\n")


def test_gitignore_binary_and_unparsable_files(tmp_path):
    root = tmp_path / "repo"
    special_tree(root)
    git(root, "init", "-q", "-b", "main")
    result = scan(root, SM120, jobs=1)
    assert sorted(per_file(result)) == ["kept.cu", "nv/target"]
    assert {s["file"]: s["reason"].split(":")[0].split(" (")[0] for s in result.skipped} == {
        "broken.py": "not valid Python",
        "latin1.cuh": "not UTF-8",
        "unbalanced.h": "unbalanced preprocessor conditionals",
    }
    assert result.stats["binary"] == 1
    everything = scan(root, SM120, jobs=1, include_all=True)
    assert sorted(per_file(everything)) == ["blob.cuh", "ignored/build.cu", "kept.cu", "nv/target"]


def test_outside_git_the_walk_ignores_no_file(tmp_path):
    root = tmp_path / "plain"
    special_tree(root)
    result = scan(root, SM120, jobs=1)
    assert sorted(per_file(result)) == ["ignored/build.cu", "kept.cu", "nv/target"]


def test_a_submodule_and_a_nested_repository_are_scanned(tmp_path):
    guard = "#if __CUDA_ARCH__ >= 900\n#endif\n"
    outer = tmp_path / "outer"
    (outer / "3rdparty" / "cutlass" / "include").mkdir(parents=True)
    (outer / "3rdparty" / "cutlass" / "include" / "arch.h").write_text(guard)
    git(outer / "3rdparty" / "cutlass", "init", "-q")
    (outer / "main.cu").write_text(guard)
    git(outer, "init", "-q")
    assert sorted(per_file(scan(outer, SM120, jobs=1))) == ["3rdparty/cutlass/include/arch.h", "main.cu"]


# ---------------------------------------------------------------- the cache


def test_second_scan_comes_from_the_cache(tmp_path):
    root = tmp_path / "tree"
    make_tree(root, 11, files=30)
    special_tree(root)
    for path in root.rglob("*"):
        if path.is_file():
            old(path)
    cache = tmp_path / "cache"
    first = scan(root, SM120, jobs=1, cache=cache)
    assert first.stats["cache_hits"] == 0 and first.stats["analysed"] == first.stats["files"]
    second = scan(root, SM120, jobs=1, cache=cache)
    assert second.stats["cache_hits"] == second.stats["files"] and second.stats["analysed"] == 0
    assert to_json(second) == to_json(first) and second.skipped == first.skipped

    # touched but unchanged: read again, its result found by content hash
    (root / "kept.cu").touch()
    third = scan(root, SM120, jobs=1, cache=cache)
    assert (third.stats["analysed"], third.stats["reused"]) == (1, 1)
    assert to_json(third) == to_json(first)

    # changed: parsed again
    (root / "kept.cu").write_text("#if __CUDA_ARCH__ < 1200\n#endif\n#if __CUDA_ARCH__ >= 1000\n#endif\n")
    old(root / "kept.cu")
    fourth = scan(root, SM120, jobs=1, cache=cache)
    assert (fourth.stats["analysed"], fourth.stats["reused"]) == (1, 0)
    assert [g["line"] for g in fourth.gates if g["file"] == "kept.cu"] == [1, 3]


def test_corrupt_or_foreign_cache_entries_are_ignored(tmp_path):
    root = tmp_path / "tree"
    expected = make_tree(root, 5, files=20)
    for path in root.rglob("*"):
        old(path)
    cache = tmp_path / "cache"
    scan(root, SM120, jobs=1, cache=cache)
    objects = [p for p in cache.rglob("*.json") if "objects" in p.parts]
    assert objects
    for n, path in enumerate(objects):
        path.write_bytes(b"{not json" if n % 2 else b'{"v": 999}')
    [index] = [p for p in cache.rglob("*.json") if "index" in p.parts]
    index.write_bytes(b"\0garbage")
    [snapshot] = [p for p in cache.rglob("*.json") if "snapshot" in p.parts]
    snapshot.write_bytes(b'{"version": 1, "key": "x"}')
    again = scan(root, SM120, jobs=1, cache=cache)
    assert per_file(again) == expected
    assert again.stats["cache_hits"] == 0
    assert scan(root, SM120, jobs=1, cache=cache).stats["cache_hits"] == again.stats["files"]


def test_an_unchanged_tree_is_answered_whole_from_the_snapshot(tmp_path):
    root = tmp_path / "tree"
    make_tree(root, 7, files=25)
    shutil.copytree(EXAMPLES / "flashinfer", root / "fi")
    (root / "fi" / "flashinfer" / "jit" / "comm.py").write_text(
        (root / "fi" / "flashinfer" / "jit" / "comm.py").read_text().replace("[9, 10]", "[9, 10, 12]")
    )
    for path in root.rglob("*"):
        old(path)
    cache = tmp_path / "cache"
    first = scan(root / "fi", SM120, jobs=1, cache=cache)
    assert first.hazards and not first.stats["snapshot"]  # comm.py widened alone: empty-kernel hazards
    second = scan(root / "fi", SM120, jobs=1, cache=cache)
    assert second.stats["snapshot"] and second.stats["analysed"] == 0
    assert to_json(second) == to_json(first) and second.modules == first.modules

    # a file removed: every remaining file is unchanged, but the tree is not: no snapshot, no stale gate
    whole = scan(root, SM120, jobs=1, cache=cache)
    assert scan(root, SM120, jobs=1, cache=cache).stats["snapshot"]
    gone = sorted({g["file"] for g in whole.gates if g["file"].endswith(".cu")})[0]
    (root / gone).unlink()
    after = scan(root, SM120, jobs=1, cache=cache)
    assert not after.stats["snapshot"] and after.stats["analysed"] == 0
    assert gone not in {g["file"] for g in after.gates}
    assert to_json(after)["gates"] == [g for g in to_json(whole)["gates"] if g["file"] != gone]
    # another arch, or gates only: a different snapshot
    assert not scan(root, Arch.parse("sm_121"), jobs=1, cache=cache).stats["snapshot"]
    assert not scan(root, SM120, jobs=1, cache=cache, hazards=False).stats["snapshot"]


def test_another_arch_does_not_reuse_verdicts(tmp_path):
    root = tmp_path / "tree"
    (root).mkdir()
    (root / "k.cu").write_text("#if __CUDA_ARCH__ >= 900 && __CUDA_ARCH__ < 1200\n#endif\n")
    old(root / "k.cu")
    cache = tmp_path / "cache"
    assert scan(root, SM120, cache=cache).gates[0]["excludes_arch"] is True
    assert scan(root, Arch.parse("sm_90"), cache=cache).gates[0]["excludes_arch"] is False


# ---------------------------------------------------------------- Python: capability comparisons, CUDA in strings


def test_capability_comparisons(tmp_path):
    source = """\
import torch

def f():
    if torch.cuda.get_device_capability()[0] >= 9:
        pass
    if torch.cuda.get_device_capability() == (12, 0):
        pass
    major, minor = torch.cuda.get_device_capability()
    if major in (10, 11) and minor != 3:
        pass
    cap = torch.cuda.get_device_capability(device)
    ok = cap < (8, 0)

def g(major):
    return major >= 9  # another `major`: not the capability

x = torch.cuda.get_device_capability()
"""
    root = tmp_path / "py"
    root.mkdir()
    (root / "m.py").write_text(source)
    gates = [(g["line"], g["text"], g["admits"], g["excludes_arch"]) for g in scan(root, SM120).gates]
    assert gates == [
        (4, "torch.cuda.get_device_capability()[0] >= 9", ["sm_90", "sm_100", "sm_103", "sm_110", "sm_120", "sm_121"], False),
        (6, "torch.cuda.get_device_capability() == (12, 0)", ["sm_120"], False),
        # both comparisons of one test report what its body admits (issue 18 item 1: the path, not each truth set)
        (9, "major in (10, 11)", ["sm_100", "sm_110"], True),
        (9, "minor != 3", ["sm_100", "sm_110"], True),
        (12, "cap < (8, 0)", [], True),
    ]
    assert {g["kind"] for g in scan(root, SM120).gates} == {"python_capability"}


def test_cuda_guards_in_python_strings_but_not_in_comments(tmp_path):
    source = '''\
KERNEL = """
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ == 900
  wgmma();
#endif
"""
#if __CUDA_ARCH__ >= 900  (a comment in Python)
'''
    root = tmp_path / "py"
    root.mkdir()
    (root / "gen.py").write_text(source)
    [gate] = scan(root, SM120).gates
    assert (gate["kind"], gate["line"], gate["text"]) == (
        "cuda_guard",
        2,
        "defined(__CUDA_ARCH__) && __CUDA_ARCH__ == 900",
    )


# ---------------------------------------------------------------- the CLI: JSON shape, several repos


KEYS = {"file", "line", "kind", "text", "symbol", "admits", "unknown", "excludes_arch", "classification", "reason", "area"}


def test_json_shape_with_two_repos(cli, tmp_path):
    first, second = tmp_path / "a", tmp_path / "b"
    for root, body in ((first, "#if __CUDA_ARCH__ >= 900\n#endif\n"), (second, "#if __CUDA_ARCH__ < 1200\n x();\n#endif\n")):
        root.mkdir()
        (root / "k.cu").write_text(body)
    (second / "bad.cuh").write_bytes(b"#if __CUDA_ARCH__ // \xff\n#endif\n")
    result = cli("scan", "--repo", first, "--repo", second, "--format", "json")
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert list(data) == ["schema_version", "gates", "skipped", "hazards"]
    one, two = data["gates"]
    assert one == {
        "file": "k.cu", "line": 1, "kind": "cuda_guard", "text": "__CUDA_ARCH__ >= 900", "symbol": "",
        "admits": ["sm_90", "sm_100", "sm_103", "sm_110", "sm_120", "sm_121"], "unknown": [],
        "excludes_arch": False, "classification": "admits", "reason": "", "area": "library", "repo": str(first),
    }  # fmt: skip
    assert set(two) == KEYS | {"repo", "widenable", "blockers"} and two["repo"] == str(second)
    assert data["skipped"] == [{"file": "bad.cuh", "reason": "not UTF-8 (byte 21: b'\\xff')", "repo": str(second)}]
    single = json.loads(cli("scan", "--repo", first, "--format", "json").stdout)
    assert set(single["gates"][0]) == KEYS


def test_text_summary_per_kind_and_no_progress_bar_off_a_terminal(cli, tmp_path):
    root = tmp_path / "t"
    expected = make_tree(root, 3, files=20)
    result = cli("scan", "--repo", root, "--gates-only")
    assert result.exit_code == 0, result.output
    total = sum(len(lines) for lines in expected.values())
    assert result.stdout.startswith(f"{total} gates in {len(expected)} files; ")
    assert re.search(rf"^  cuda_guard +{total} gates, +\d+ exclude sm_120  in {len(expected)} files; most in ", result.stdout, re.M)
    # issue 16: the statistics line only with --verbose
    assert "scanning" not in result.stderr and "scanned " not in result.stderr
    verbose = cli("scan", "--repo", root, "--gates-only", "--verbose")
    assert verbose.exit_code == 0 and "scanned " in verbose.stderr


def test_check_needs_the_hazards(cli, tmp_path):
    result = cli("scan", "--repo", tmp_path, "--check", "--gates-only")
    assert result.exit_code == 2


@pytest.mark.parametrize(
    "source",
    [
        pytest.param("def f():\n    if torch.cuda.get_device_capability()[0] >= 9:\n        pass\n", id="in-a-function"),
        pytest.param(
            "class A:\n    @staticmethod\n    def f(d):\n        major, _ = torch.cuda.get_device_capability(d)\n"
            "        return major == 10\n\n    def g(self):\n        return major > 1\n",
            id="bound-in-a-method",
        ),
        pytest.param(
            "@pytest.mark.skipif(\n    torch.cuda.get_device_capability() < (9, 0),\n    reason='x',\n)\ndef test():\n    pass\n",
            id="in-a-decorator",
        ),
        pytest.param('"""\nget_device_capability()[0] >= 9\n"""\nOK = get_device_capability() != (12, 0)\n', id="docstring-and-module-level"),
        pytest.param("cap = get_device_capability()\n\ndef f():\n    return cap[0] >= 9\n", id="bound-at-module-level"),
    ],
)
def test_capability_blocks_agree_with_a_whole_parse(source):
    import ast

    from codemods.gates.python import python_capability as reader  # scan's reader, moved there from scan.py

    data = source.encode()
    full = reader.gates(reader.PythonText(data), ast.parse(data).body, SM120_UNIVERSE)
    blocks = reader.blocks(data)
    assert full
    if blocks is not None:
        part = reader.gates(*blocks, SM120_UNIVERSE)
        assert [(g.line, g.text, g.admits) for g in part] == [(g.line, g.text, g.admits) for g in full]
    else:
        assert "cap = " in source  # only a name bound outside functions needs the whole file


SM120_UNIVERSE = tuple(Arch.parse(a) for a in ("sm_80", "sm_90", "sm_100", "sm_120"))


# ---------------------------------------------------------------- prefilters


_CAPABILITY_PIECES = [
    b"get_device_capability", b"get_compute_capability", b"(", b")", b"[0]", b"[1]", b" ", b"\n", b">=", b"<", b"=",
    b"!=", b" in ",
    b"in", b"not", b"x", b".", b"torch.cuda.", b"9", b"major", b",", b"(0)", b"#",
]  # fmt: skip


@pytest.mark.exhaustive
@settings(max_examples=3000, deadline=None)
@given(st.lists(st.sampled_from(_CAPABILITY_PIECES), max_size=14))
def test_capability_prefilter_never_misses_what_the_regex_finds(pieces):
    from codemods.gates.python import python_capability as scanner  # the prefilter moved to its gate kind

    data = b"".join(pieces)
    if scanner.CAPABILITY_RE.search(data):
        assert scanner.may_compare(data)


def test_the_cache_is_pruned_to_its_limit_oldest_first(tmp_path, monkeypatch):
    cache = tmp_path / "cache"
    stale = cache / "v0" / "objects" / "ab" / "old.json"  # an older cache version: goes first
    stale.parent.mkdir(parents=True)
    stale.write_bytes(b"x" * 50_000)
    trees = []
    for n in range(3):
        root = tmp_path / f"tree{n}"
        make_tree(root, 20 + n, files=30)
        for path in root.rglob("*"):
            old(path)
        trees.append(root)
    monkeypatch.setenv("CODEMOD_SCAN_CACHE_MB", "10")
    for root in trees:
        scan(root, SM120, jobs=1, cache=cache)
    assert not stale.exists()
    size = sum(p.stat().st_size for p in cache.rglob("*") if p.is_file())
    # a limit below one tree's entries: pruned to 80% of it, the newest entries kept
    limit = size // 2
    monkeypatch.setenv("CODEMOD_SCAN_CACHE_MB", str(limit / (1 << 20)))
    (trees[0] / "new.cu").write_text("#if __CUDA_ARCH__ >= 1000\n#endif\n")
    old(trees[0] / "new.cu")
    again = scan(trees[0], SM120, jobs=1, cache=cache)
    assert sum(p.stat().st_size for p in cache.rglob("*") if p.is_file()) <= limit * 4 // 5
    # whatever was pruned is parsed again: the results never change
    for root in trees:
        assert to_json(scan(root, SM120, jobs=1, cache=cache)) == to_json(scan(root, SM120, jobs=1))
    assert [g["line"] for g in again.gates if g["file"] == "new.cu"] == [1]


def test_a_header_outside_the_listing_that_a_jit_source_includes_voids_the_snapshot(tmp_path):
    root = tmp_path / "fi"
    shutil.copytree(EXAMPLES / "flashinfer", root)
    comm = root / "flashinfer" / "jit" / "comm.py"
    comm.write_text(comm.read_text().replace("[9, 10]", "[9, 10, 12]"))
    folder = root / "include" / "flashinfer" / "comm"
    header = folder / "trtllm_allreduce.cuh"
    (root / ".gitignore").write_text("generated_launch.cuh\n")  # written at build time, say
    generated = folder / "generated_launch.cuh"
    generated.write_text("#pragma once\n")
    guarded = folder / "launch_guarded.cuh"  # listed, but no JIT source includes it yet
    guarded.write_text(
        "#pragma once\n__global__ void launch() {\n#if (defined(__CUDA_ARCH__) && (__CUDA_ARCH__ < 1200))\n"
        '  asm volatile("griddepcontrol.wait;" ::: "memory");\n#endif\n}\n'
    )
    header.write_text('#include "generated_launch.cuh"\n' + header.read_text())
    git(root, "init", "-q")
    for path in root.rglob("*"):
        if ".git" not in path.parts:
            old(path)
    cache = tmp_path / "cache"
    first = scan(root, SM120, jobs=1, cache=cache)
    assert "include/flashinfer/comm/generated_launch.cuh" not in {g["file"] for g in first.gates}
    assert scan(root, SM120, jobs=1, cache=cache).stats["snapshot"]
    # the ignored header (never listed) now includes the guarded one: the JIT closure grew
    generated.write_text('#pragma once\n#include "launch_guarded.cuh"\n')
    old(generated)
    after = scan(root, SM120, jobs=1, cache=cache)
    assert not after.stats["snapshot"]
    assert after.hazards == scan(root, SM120, jobs=1).hazards
    files = lambda result: {h["file"] for h in result.hazards if h["kind"] == "empty-kernel"}  # noqa: E731
    assert "include/flashinfer/comm/launch_guarded.cuh" not in files(first)
    assert "include/flashinfer/comm/launch_guarded.cuh" in files(after)


def test_several_trees_share_one_pool_and_each_gets_its_own_result(tmp_path):
    from codemods.audit.scan import scan_many

    roots = []
    for n, files in enumerate((120, 3, 90)):
        root = tmp_path / f"tree{n}"
        make_tree(root, 40 + n, files=files)
        for path in root.rglob("*"):
            old(path)
        roots.append(root)
    shutil.copytree(EXAMPLES / "flashinfer", tmp_path / "fi")
    roots.append(tmp_path / "fi")
    cache = tmp_path / "cache"
    scan(roots[2], SM120, jobs=1, cache=cache)  # answered from its snapshot below
    serial = [scan(root, SM120, jobs=1) for root in roots]
    pooled = scan_many(roots, SM120, jobs=2, cache=cache)
    assert [to_json(result) for result in pooled] == [to_json(result) for result in serial]
    assert [result.root for result in pooled] == roots
    assert [result.stats["snapshot"] for result in pooled] == [False, False, True, False]
    assert pooled[0].stats["jobs"] == 2 and pooled[0].stats["analysed"] == pooled[0].stats["files"]
