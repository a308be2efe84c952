"""The finder of a scan: ripgrep says which listed files could hold a gate, and which hold a runtime check.

`find(root, rels)` runs `rg` (from the `ripgrep` wheel this package depends
on) over the files a scan would read, two searches side by side:

- the literal tokens every gate kind's prefilter needs (prefilter.FINDER_TOKENS),
  in every file: a file with none of them is never read, since nothing in it
  could be a gate;
- the capability comparison cpp_runtime_check reads (prefilter.runtime_check_pattern),
  in C files: only those are handed to its parser.

`holding(root, rels, literal)` runs one more: which files hold a word, for
the JIT readers (jit_users.Trees), instead of keeping every Python file's
bytes in memory to look in.

All search the bytes as they are: `--text` (a NUL byte stops nothing; the
workers decide what is binary), `--encoding none` (no BOM sniffing),
`--no-unicode` (`\\b`, `\\w`, `\\s`, `\\d` are ASCII, as in Python's bytes
regexes) and, for the regex, `--multiline`, so `\\s*` spans newlines as `re`
does. A file rg could not read is handed to the workers, which say why.
Multi-threaded and with a literal-optimised regex engine, this is some 40x
faster than Python's `re` over a release's 650 MB of CUDA headers
(bench/scan_results.md).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import sysconfig
from dataclasses import dataclass, field
from pathlib import Path

from codemods.audit.prefilter import FINDER_TOKENS, is_c_file, runtime_check_pattern
from codemods.gates.cmake import cmake_arch_list
from codemods.core import distribution
from codemods.core.errors import InstallBroken

# Paths per rg command: well under the kernel's limit on a command line (ARG_MAX, often 2 MiB with the environment).
_ARGUMENT_BYTES = 256 << 10
_COMMON = ["--no-config", "--files-with-matches", "--null", "--text", "--encoding", "none", "--no-unicode", "--no-messages"]


@dataclass
class Found:
    """The files rg found: `candidates` may hold a gate; `runtime` (C files) hold a capability comparison."""

    candidates: set[str] = field(default_factory=set)
    runtime: set[str] = field(default_factory=set)


def rg_path() -> str:
    """The `rg` of the `ripgrep` wheel installed beside this package (its interpreter's scripts), else on PATH."""
    scripts = sysconfig.get_path("scripts")
    for candidate in (os.path.join(scripts, "rg") if scripts else None, shutil.which("rg")):
        if candidate and os.access(candidate, os.X_OK):
            return candidate
    raise InstallBroken(
        "ripgrep (`rg`), which codemod scan finds files with, is not installed",
        hint=f"install codemod's pinned ripgrep beside it: `{distribution.pip_install('ripgrep', sys.executable)}`",
    )


def find(root: Path | str, rels: list[str]) -> Found:
    """Which of `rels` (paths relative to `root`, regular files) may hold a gate, and which C files a runtime check."""
    found = Found()
    if not rels:
        return found
    rg = rg_path()
    tokens = [arg for token in FINDER_TOKENS for arg in ("-e", token.decode("latin-1"))]
    c_rels = [rel for rel in rels if is_c_file(rel)]
    for batch in _batches(rels):
        literal = _start(rg, root, [*_COMMON, "--fixed-strings", *tokens], batch)
        c_batch = [rel for rel in batch if is_c_file(rel)] if c_rels else []
        regex = _start(rg, root, [*_COMMON, "--multiline", "-e", runtime_check_pattern().decode("latin-1")], c_batch) if c_batch else None
        printed, failed = _finish(literal)
        # A file rg could not read is read by a worker, which reports why (rg's exit 2 does not say which).
        found.candidates |= set(batch) if failed else printed
        if regex is not None:
            found.runtime |= _finish(regex)[0]
    found.candidates |= found.runtime
    # CMake files are few and name their lists by variable, not by a token: each is read (prefilter.may_hold_gates)
    found.candidates |= {rel for rel in rels if cmake_arch_list.is_cmake(rel)}
    return found


def holding(root: Path | str, rels: list[str], literal: bytes) -> set[str]:
    """Which of `rels` hold the ASCII bytes `literal`, as the bytes are (jit_users.Trees' words), plus any file rg
    could not read (the caller reads it and looks again)."""
    return holding_each(root, rels, [literal])[literal]


def holding_each(root: Path | str, rels: list[str], literals: list[bytes]) -> dict[bytes, set[str]]:
    """`holding` for several ASCII literals in one rg search: the files holding any of them, each then read once
    and looked in for each literal (a batch in which rg could not read a file counts whole for every literal,
    the empty literal is in every file)."""
    literals = list(dict.fromkeys(literals))
    if any(not literal.isascii() for literal in literals):
        raise ValueError("rg matches an ASCII literal byte for byte only")
    found: dict[bytes, set[str]] = {literal: set() if literal else set(rels) for literal in literals}
    searched = [literal for literal in literals if literal]
    if not rels or not searched:
        return found
    rg = rg_path()
    options = [*_COMMON, "--fixed-strings", *(part for literal in searched for part in ("-e", literal.decode("ascii")))]
    for batch in _batches(rels):
        printed, failed = _finish(_start(rg, root, options, batch))
        if failed or len(searched) == 1:  # rg's answer is the answer
            for literal in searched:
                found[literal] |= set(batch) if failed else printed
            continue
        for rel in sorted(printed):
            try:
                data = (Path(root) / rel).read_bytes()
            except OSError:
                data = None
            for literal in searched:
                if data is None or literal in data:
                    found[literal].add(rel)
    return found


def _batches(rels: list[str]):
    batch: list[str] = []
    size = 0
    for rel in rels:
        length = len(os.fsencode(rel)) + 1
        if batch and size + length > _ARGUMENT_BYTES:
            yield batch
            batch, size = [], 0
        batch.append(rel)
        size += length
    if batch:
        yield batch


def _start(rg: str, root: Path | str, options: list[str], rels: list[str]) -> subprocess.Popen:
    return subprocess.Popen(
        [rg, *options, "--", *rels], cwd=root, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL
    )


def _finish(proc: subprocess.Popen) -> tuple[set[str], bool]:
    """The paths rg printed, and whether it met an error (exit 2: a file it could not read)."""
    out, _ = proc.communicate()
    if proc.returncode not in (0, 1, 2):
        raise InstallBroken(f"ripgrep failed with exit status {proc.returncode}")
    return {os.fsdecode(name) for name in out.split(b"\0") if name}, proc.returncode == 2
