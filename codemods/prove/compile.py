"""Preprocesses and compiles the build proof's sources with nvcc, in parallel, with a PTX cache.

Each source is preprocessed (`nvcc -E`), and compiled (`nvcc -ptx`) unless
the cache under $CODEMOD_BUILD_CACHE (default $CODEMOD_HOME/build-cache)
holds a compile of the same preprocessed text with the same flags. The PTX
is read (codemods.prove.ptx): per kernel its instruction count, whether the
body is `ret;` alone, and the PDL instructions it holds. Also finds the
machine's nvcc, its CUDA release and TVM-FFI's headers.
"""

from __future__ import annotations

import gzip
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from codemods.apply import packages
from codemods.apply.files import write_atomic
from codemods.core import distribution, errors
from codemods.core.arch import Arch
from codemods.prove import ptx
from codemods.prove.build_results import WATCHED, Kernel, SourceBuild

_CACHE_VERSION = 1
_TIMEOUT_SECONDS = 3600
_ERROR_LINE_RE = re.compile(r"^(?P<file>[^\s(][^(:\n]*?)(?:\((?P<line>\d+)\)|:(?P<line2>\d+)(?::\d+)?):\s*(?:fatal )?error\b:?\s*(?P<msg>.*)$", re.M)
_MISSING_RE = re.compile(r"fatal error: (?P<header>[^\s:]+): No such file or directory")
_MARKER_RE = re.compile(r"^#(?:line)?[ \t]+\d+.*\n?", re.M)


def find_nvcc(nvcc: str) -> str:
    found = shutil.which(nvcc)
    if not found:
        raise errors.BuildNeeds(
            f"{nvcc} not found", where="verify --build",
            hint="install the CUDA toolkit (12.8 or later for sm_120) and put its bin/ on PATH; no GPU is needed",
        )
    return found


def nvcc_release(nvcc: str) -> str:
    try:
        out = subprocess.run([nvcc, "--version"], capture_output=True, text=True, timeout=60).stdout
    except (OSError, subprocess.SubprocessError):
        out = ""
    match = re.search(r"release (\d+\.\d+)", out)
    if not match:
        raise errors.BuildNeeds(f"cannot read the CUDA release from `{nvcc} --version`", where="verify --build", hint="check the CUDA installation")
    return match.group(1)


_TVM_PROBE = """
import importlib.util, json, sysconfig
spec = importlib.util.find_spec("tvm_ffi")
folder = list(spec.submodule_search_locations or []) if spec else []
print(json.dumps({"tvm_ffi": folder[0] if folder else None, "include": sysconfig.get_path("include")}))
"""


def find_tvm_ffi(python: str | None) -> tuple[str, str]:
    """(TVM-FFI's include folder, the Python include folder) of this interpreter or of `python`, without importing tvm_ffi."""
    try:
        proc = packages.probe(python or sys.executable, _TVM_PROBE)
        found = json.loads(proc.stdout.strip().splitlines()[-1])
    except (OSError, subprocess.SubprocessError, ValueError, IndexError):
        raise errors.RepoState(f"cannot run {python}", where="--python", hint="pass the python of the environment that runs your server") from None
    include = os.path.join(found["tvm_ffi"], "include") if found.get("tvm_ffi") else None
    if include is None or not os.path.isdir(os.path.join(include, "tvm", "ffi")):
        where = python or sys.executable
        raise errors.BuildNeeds(
            f"TVM-FFI's headers (tvm/ffi/*.h, dlpack/dlpack.h) are missing: no apache-tvm-ffi package in {where}",
            where="verify --build",
            hint=f"install it into that Python: `{distribution.pip_install('apache-tvm-ffi', where)}` (the range FlashInfer 0.6.x requires; "
            f"codemod's `build` extra), or pass --python of the environment that has it",
        )
    return include, found.get("include") or ""


@dataclass
class Task:
    """One source of one module to build on one arch and side, and its cache key (or nvcc's error)."""

    module: str
    arch: Arch
    side: str
    source: str  # absolute
    rel: str
    flags: tuple[str, ...]
    key: str = ""
    error: str = ""


class Builder:
    """Preprocesses and compiles tasks in parallel, with the PTX cache."""

    def __init__(self, nvcc: str, version: str, cache: Path, jobs: int, progress: Callable[[str, int, int], None] | None):
        self.nvcc = nvcc
        self.version = version
        self.cache = cache
        self.jobs = jobs or os.cpu_count() or 1
        self.progress = progress or (lambda label, done, total: None)
        self.compiled = 0
        self.cached = 0

    def run(self, tasks: list[Task], roots: dict[str, Path]) -> dict[int, SourceBuild]:
        labels: dict[str, list[int]] = {}
        for i, task in enumerate(tasks):
            labels.setdefault(f"{task.arch.name} {task.rel}", []).append(i)
        steps = {label: 2 * len(ids) for label, ids in labels.items()}
        done = {label: 0 for label in labels}

        def step(task: Task) -> None:
            label = f"{task.arch.name} {task.rel}"
            done[label] += 1
            self.progress(label, done[label], steps[label])

        for label in labels:
            self.progress(label, 0, steps[label])
        with ThreadPoolExecutor(max_workers=self.jobs) as pool:
            # a base overlay links to the work tree's folders: either root may show up in either side's text
            prefixes = sorted({p for root in roots.values() for p in (str(root), str(root.resolve()))}, key=len, reverse=True)

            def key_and_step(task: Task) -> None:
                self._key(task, prefixes)
                step(task)

            list(pool.map(key_and_step, tasks))
            for task in tasks:
                if task.error:
                    raise self._failure(task, roots)
            unique: dict[str, Task] = {}
            for task in tasks:
                unique.setdefault(task.key, task)
            results = dict(zip(unique, pool.map(lambda t: self._build(t, roots), unique.values())))
        out = {}
        for i, task in enumerate(tasks):
            summary, cached = results[task.key]
            if isinstance(summary, str):
                task.error = summary
                raise self._failure(task, roots)
            kernels = [Kernel(task.rel, k["name"], k["instructions"], k["empty"], k["opcodes"], k["digest"]) for k in summary["kernels"]]
            out[i] = SourceBuild(task.rel, kernels, summary["digest"], cached, task.key)
            step(task)
        return out

    def _key(self, task: Task, prefixes: list[str]) -> None:
        command = [self.nvcc, "-E", *task.flags, task.source]
        try:
            proc = subprocess.run(command, capture_output=True, timeout=_TIMEOUT_SECONDS)
        except (OSError, subprocess.SubprocessError) as exc:
            task.error = f"cannot run nvcc: {exc}"
            return
        if proc.returncode != 0:
            task.error = proc.stderr.decode("utf-8", "replace")
            return
        text = proc.stdout.decode("utf-8", "replace")
        if not any(f in ("-G", "-lineinfo", "-g") for f in task.flags):
            text = _MARKER_RE.sub("", text)  # debug info off: positions do not reach the PTX
            text = "\n".join(line for line in text.splitlines() if line.strip())
        for prefix in prefixes:
            text = text.replace(prefix + "/", "<root>/")  # __FILE__: the same code on the base and the work tree
        code_flags = _code_flags(task.flags)
        digest = hashlib.sha256()
        digest.update(json.dumps([_CACHE_VERSION, self.version, code_flags]).encode())
        digest.update(text.encode())
        task.key = digest.hexdigest()

    def _build(self, task: Task, roots) -> tuple[dict | str, bool]:
        folder = self.cache / task.key[:2]
        summary_file = folder / f"{task.key}.json"
        try:
            return json.loads(summary_file.read_text()), True
        except (OSError, ValueError):
            pass
        with tempfile.TemporaryDirectory(prefix="codemod-build-") as temp:
            out = Path(temp) / "out.ptx"
            command = [self.nvcc, "-ptx", *task.flags, task.source, "-o", str(out)]
            try:
                proc = subprocess.run(command, capture_output=True, timeout=_TIMEOUT_SECONDS)
            except (OSError, subprocess.SubprocessError) as exc:
                return f"cannot run nvcc: {exc}", False
            if proc.returncode != 0:
                return proc.stderr.decode("utf-8", "replace") or f"nvcc exited with status {proc.returncode}", False
            text = out.read_text(errors="replace")
        self.compiled += 1
        summary = summarise(text)
        folder.mkdir(parents=True, exist_ok=True)
        write_atomic(folder / f"{task.key}.ptx.gz", gzip.compress(ptx.normalised(text).encode(), 6))
        write_atomic(summary_file, json.dumps(summary).encode())
        return summary, False

    def ptx_text(self, key: str) -> str:
        try:
            return gzip.decompress((self.cache / key[:2] / f"{key}.ptx.gz").read_bytes()).decode()
        except OSError:
            return ""

    def _failure(self, task: Task, roots: dict[str, Path]) -> errors.CodemodError:
        root = roots[task.side]
        text = task.error.replace(str(root) + "/", "").replace(str(root.resolve()) + "/", "")
        missing = sorted(set(_MISSING_RE.findall(text)))
        where = f"{task.rel} ({task.side}, {task.arch.name})"
        if missing:
            return errors.BuildNeeds(
                f"missing header(s): {', '.join(missing)}; a build needs the real headers (no stand-ins)",
                where=where,
                hint="initialise the submodules (git submodule update --init 3rdparty/cutlass 3rdparty/spdlog), "
                "pass --include DIR of the folder that holds them, or --python of an environment with the same "
                "FlashInfer version installed (its wheel bundles them)",
            )
        match = _ERROR_LINE_RE.search(text)
        if match:
            line = match.group("line") or match.group("line2")
            first = f"{match.group('file')}:{line}: error: {match.group('msg').strip()}"
        else:
            lines = [l.strip() for l in text.splitlines() if l.strip()]
            first = lines[0] if lines else "nvcc failed"
        return errors.CompileFailed(first[:400], where=where)


def summarise(text: str) -> dict:
    """What the proof keeps of one PTX text: per kernel, and a digest of the whole."""
    kernels = []
    for entry in ptx.entries(text):
        kernels.append({
            "name": entry.name, "instructions": entry.instructions, "empty": entry.empty,
            "opcodes": {op: entry.count(op) for op in WATCHED if entry.count(op)},
            "digest": hashlib.sha256(entry.body.encode()).hexdigest()[:16],
        })
    return {"kernels": kernels, "digest": hashlib.sha256(ptx.normalised(text).encode()).hexdigest()}


def _code_flags(flags: tuple[str, ...]) -> list[str]:
    """The flags that shape the code (include folders do not once the text is preprocessed)."""
    out, skip = [], False
    for flag in flags:
        if skip:
            skip = False
            continue
        if flag in ("-isystem", "-I", "-include"):
            skip = True
            continue
        if flag.startswith(("-I", "-isystem")):
            continue
        out.append(flag)
    return out


def cache_root() -> Path:
    from codemods.apply.repo import codemod_home

    return Path(os.environ.get("CODEMOD_BUILD_CACHE") or codemod_home() / "build-cache")


def demangle(names: list[str]) -> dict[str, str]:
    tool = shutil.which("cu++filt") or shutil.which("c++filt")
    if not tool or not names:
        return {}
    try:
        proc = subprocess.run([tool], input="\n".join(names) + "\n", capture_output=True, text=True, timeout=120)
    except (OSError, subprocess.SubprocessError):
        return {}
    out = proc.stdout.splitlines()
    if len(out) != len(names):
        return {}
    # the kernel and its template arguments, without `void` and the parameter list
    return {n: _short(d) for n, d in zip(names, out)}


def _short(demangled: str) -> str:
    text = demangled[5:] if demangled.startswith("void ") else demangled
    depth = 0
    for i, c in enumerate(text):
        if c in "<(":
            if c == "(" and depth == 0:
                text = text[:i]
                break
            depth += 1
        elif c in ">)":
            depth -= 1
    head, sep, rest = text.partition("<")
    return head.rsplit("::", 1)[-1] + sep + rest
