"""`codemod verify --build`: compile the changed JIT modules to PTX and show which kernels have real bodies.

For each JIT module whose spec or sources changed since the base (or each
`--module`), on each target arch and each compared arch, on the base and on
the work tree:

1. the nvcc flags are those FlashInfer's own JIT would use (codemods.jit.flags
   evaluates its Python code); where the JIT refuses the arch (the module's
   gate excludes it) the module is "not built" there, as it would be on a GPU;
2. each source is preprocessed (`nvcc -E`), and compiled (`nvcc -ptx`) unless
   the cache under $CODEMOD_BUILD_CACHE (default $CODEMOD_HOME/build-cache)
   holds a compile of the same preprocessed text with the same flags;
3. the PTX is read (codemods.prove.ptx): per kernel its instruction count, whether
   the body is `ret;` alone, and the PDL instructions it holds.

It fails when a target arch builds a kernel empty that has a body on a
compared arch (FlashInfer PR #3903's silent failure), when a PDL instruction
a widened guard promises is missing on the target from a kernel that has it
on a compared arch, when a compared arch's PTX differs from the base's, or
when the work tree no longer builds the module for a compared arch the base
built it for, or does not build it for the target at all.
"""

from __future__ import annotations

import ast
import gzip
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

from codemods.core import errors
from codemods.jit import flags as jit_flags
from codemods.prove import ptx
from codemods.core.arch import Arch

_CACHE_VERSION = 1
_TIMEOUT_SECONDS = 3600
# source tokens a widened guard may hold -> the PTX instruction they compile to
PROMISES = {
    "cudaGridDependencySynchronize": "griddepcontrol.wait",
    "cudaTriggerProgrammaticLaunchCompletion": "griddepcontrol.launch_dependents",
    "griddepcontrol.wait": "griddepcontrol.wait",
    "griddepcontrol.launch_dependents": "griddepcontrol.launch_dependents",
}
WATCHED = tuple(dict.fromkeys(PROMISES.values()))
_SHOWN = 10  # failing kernels listed per line in text; JSON lists all
_ERROR_LINE_RE = re.compile(r"^(?P<file>[^\s(][^(:\n]*?)(?:\((?P<line>\d+)\)|:(?P<line2>\d+)(?::\d+)?):\s*(?:fatal )?error\b:?\s*(?P<msg>.*)$", re.M)
_MISSING_RE = re.compile(r"fatal error: (?P<header>[^\s:]+): No such file or directory")
_MARKER_RE = re.compile(r"^#(?:line)?[ \t]+\d+.*\n?", re.M)


# ------------------------------------------------------------------ results


@dataclass
class Kernel:
    source: str
    name: str
    instructions: int
    empty: bool
    opcodes: dict[str, int]
    digest: str


@dataclass
class SourceBuild:
    source: str  # tree-relative
    kernels: list[Kernel] = field(default_factory=list)
    digest: str = ""  # of the normalised PTX
    cached: bool = False
    key: str = ""


@dataclass
class SideBuild:
    """One module on one arch on one side: built (sources) or not built (FlashInfer's own reason)."""

    built: bool
    reason: str = ""
    gencode: str = ""
    sources: list[SourceBuild] = field(default_factory=list)

    def kernels(self) -> dict[tuple[str, str], Kernel]:
        return {(k.source, k.name): k for s in self.sources for k in s.kernels}


@dataclass
class ModuleProof:
    module: str
    spec: str  # file:function
    archs: dict[str, dict[str, SideBuild]] = field(default_factory=dict)  # arch -> side -> build
    failures: list[str] = field(default_factory=list)
    empty: dict[str, list[Kernel]] = field(default_factory=dict)  # target -> kernels empty there, with a body elsewhere
    missing: dict[str, list[tuple[Kernel, str]]] = field(default_factory=dict)  # target -> (kernel, opcode)
    promised: list[tuple[str, int, str]] = field(default_factory=list)  # (file, line, opcode) of widened guards
    differs: dict[str, list[str]] = field(default_factory=dict)  # compared arch -> differing kernels
    reference: dict[str, list[str]] = field(default_factory=dict)  # target -> the archs its kernels are compared with


@dataclass
class BuildReport:
    root: str
    base: str | None
    base_label: str
    targets: tuple[str, ...]
    compared: tuple[str, ...]
    modules: list[ModuleProof]
    compiled: int = 0
    cached: int = 0
    seconds: float = 0.0
    names: dict[str, str] = field(default_factory=dict)  # mangled -> demangled

    @property
    def ok(self) -> bool:
        return all(not m.failures for m in self.modules)


# ------------------------------------------------------------------ the machine


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
import importlib.util, json, sys, sysconfig
spec = importlib.util.find_spec("tvm_ffi")
folder = list(spec.submodule_search_locations or []) if spec else []
print(json.dumps({"tvm_ffi": folder[0] if folder else None, "include": sysconfig.get_path("include")}))
"""


def find_tvm_ffi(python: str | None) -> tuple[str, str]:
    """(TVM-FFI's include folder, the Python include folder) of this interpreter or of `python`, without importing tvm_ffi."""
    try:
        proc = subprocess.run([python or sys.executable, "-c", _TVM_PROBE], capture_output=True, text=True, timeout=60)
        found = json.loads(proc.stdout.strip().splitlines()[-1])
    except (OSError, subprocess.SubprocessError, ValueError, IndexError):
        raise errors.RepoState(f"cannot run {python}", where="--python", hint="pass the python of the environment that runs your server") from None
    include = os.path.join(found["tvm_ffi"], "include") if found.get("tvm_ffi") else None
    if include is None or not os.path.isdir(os.path.join(include, "tvm", "ffi")):
        where = python or sys.executable
        raise errors.BuildNeeds(
            f"TVM-FFI's headers (tvm/ffi/*.h, dlpack/dlpack.h) are missing: no apache-tvm-ffi package in {where}",
            where="verify --build",
            hint="pip install 'codemod[build]' (or apache-tvm-ffi, the version FlashInfer requires) into that Python, or pass --python of the environment that has it",
        )
    return include, found.get("include") or ""


# ------------------------------------------------------------------ reading the tree


def data_links(build_backend: str) -> dict[str, str]:
    """FlashInfer's `flashinfer/data/<name>` -> checkout folder links, from build_backend.py's `ln(source, name)` calls."""
    links = {}
    try:
        tree = ast.parse(build_backend)
    except SyntaxError:
        return links
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "ln" and len(node.args) == 2:
            source, name = node.args
            if isinstance(source, ast.Constant) and isinstance(name, ast.Constant) and isinstance(source.value, str):
                links[str(name.value)] = source.value
    return links


def promised(base: bytes, work: bytes, targets: tuple[Arch, ...], universe: tuple[Arch, ...]) -> list[tuple[int, str]]:
    """(line, PTX opcode) of each promise token in the body of a guard the change widened to a target."""
    from codemods.cpp.lexer import mask_comments
    from codemods.cpp.structure import structure
    from codemods.gates import SourceError, cuda_guard

    archs = tuple(dict.fromkeys((*universe, *targets)))
    try:
        before, after = cuda_guard.find(base, archs), cuda_guard.find(work, archs)
    except SourceError:
        return []
    lines = _line_map(base.splitlines(), work.splitlines())
    by_line = {gate.line: gate for gate in before}
    shape = structure(work)
    found = []
    for new in after:
        old = by_line.get(lines.get(new.line, -1))
        if old is None or not any(old.admits.admits(a) is False and new.admits.admits(a) for a in targets):
            continue
        branch = shape.at(new.start)
        if branch is None:
            continue
        end = branch.body_end if branch.body_end >= 0 else len(work)
        body = mask_comments(work[branch.body_start:end]).decode("utf-8", "replace")
        for token, opcode in PROMISES.items():
            if token in body:
                found.append((new.line, opcode))
    return sorted(set(found))


def _line_map(before: list[bytes], after: list[bytes]) -> dict[int, int]:
    """1-based line of `after` -> the line of `before` it is (kept, or rewritten in place)."""
    import difflib

    out = {}
    for tag, a0, a1, b0, b1 in difflib.SequenceMatcher(None, before, after, autojunk=False).get_opcodes():
        if tag == "equal" or (tag == "replace" and a1 - a0 == b1 - b0):
            out.update({b0 + i + 1: a0 + i + 1 for i in range(b1 - b0)})
    return out


# ------------------------------------------------------------------ the proof


@dataclass
class Side:
    name: str  # "base" or "work"
    root: Path  # the project folder of this side on disk
    package: Path  # its flashinfer package folder
    links: dict[str, str]  # data/<name> -> checkout folder, when the package has no data folder


@dataclass
class _Task:
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

    def run(self, tasks: list[_Task], roots: dict[str, Path]) -> dict[int, SourceBuild]:
        labels: dict[str, list[int]] = {}
        for i, task in enumerate(tasks):
            labels.setdefault(f"{task.arch.name} {task.rel}", []).append(i)
        steps = {label: 2 * len(ids) for label, ids in labels.items()}
        done = {label: 0 for label in labels}

        def step(task: _Task) -> None:
            label = f"{task.arch.name} {task.rel}"
            done[label] += 1
            self.progress(label, done[label], steps[label])

        for label in labels:
            self.progress(label, 0, steps[label])
        with ThreadPoolExecutor(max_workers=self.jobs) as pool:
            # a base overlay links to the work tree's folders: either root may show up in either side's text
            prefixes = sorted({p for root in roots.values() for p in (str(root), str(root.resolve()))}, key=len, reverse=True)
            list(pool.map(lambda t: (self._key(t, prefixes), step(t)), tasks))
            for task in tasks:
                if task.error:
                    raise self._failure(task, roots)
            unique = {}
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

    def _key(self, task: _Task, prefixes: list[str]) -> None:
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
        text = text.encode()
        code_flags = _code_flags(task.flags)
        digest = hashlib.sha256()
        digest.update(json.dumps([_CACHE_VERSION, self.version, code_flags]).encode())
        digest.update(text)
        task.key = digest.hexdigest()

    def _build(self, task: _Task, roots) -> tuple[dict | str, bool]:
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
        _atomic_write(folder / f"{task.key}.ptx.gz", gzip.compress(ptx.normalised(text).encode(), 6))
        _atomic_write(summary_file, json.dumps(summary).encode())
        return summary, False

    def ptx_text(self, key: str) -> str:
        try:
            return gzip.decompress((self.cache / key[:2] / f"{key}.ptx.gz").read_bytes()).decode()
        except OSError:
            return ""

    def _failure(self, task: _Task, roots: dict[str, Path]) -> errors.CodemodError:
        root = roots[task.side]
        text = task.error.replace(str(root) + "/", "").replace(str(root.resolve()) + "/", "")
        missing = sorted(set(_MISSING_RE.findall(text)))
        where = f"{task.rel} ({task.side}, {task.arch.name})"
        if missing:
            return errors.BuildNeeds(
                f"missing header(s): {', '.join(missing)}; a build needs the real headers (no stand-ins)",
                where=where,
                hint="initialise the submodules (git submodule update --init 3rdparty/cutlass 3rdparty/spdlog), "
                "or install the same FlashInfer version, whose wheel bundles them",
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


def _atomic_write(path: Path, data: bytes) -> None:
    tmp = path.with_name(f"{path.name}.{os.getpid()}.tmp")
    tmp.write_bytes(data)
    os.replace(tmp, path)


def cache_root() -> Path:
    from codemods.apply.repo import codemod_home

    return Path(os.environ.get("CODEMOD_BUILD_CACHE") or codemod_home() / "build-cache")


def module_flags(side: Side, spec_file: str, function: str, arch: Arch, machine: jit_flags.Machine) -> jit_flags.ModuleBuild | str:
    """FlashInfer's flags for the module on this side, or the JIT's reason for not building it."""

    def read(path: str) -> str | None:
        try:
            return Path(path).read_text(encoding="utf-8", errors="replace")
        except OSError:
            return None

    try:
        build = jit_flags.module_build(read, str(side.package), str(side.package / spec_file), function, (arch.major, arch.minor), machine)
    except jit_flags.NotBuilt as exc:
        return str(exc)
    except jit_flags.Unreadable as exc:
        raise errors.JitUnreadable(f"cannot read the nvcc flags of {function}: {exc}", where=f"{side.name} tree") from None
    if side.links and not (side.package / "data").is_dir():
        data = str(side.package / "data") + "/"

        def place(text: str) -> str:
            for name, source in side.links.items():
                if text.startswith(data + name):
                    return str(side.root / source) + text[len(data + name):]
            return text

        build = jit_flags.ModuleBuild(build.module, tuple(place(s) for s in build.sources), tuple(place(f) for f in build.flags))
    return build


def missing_include_dirs(flags: tuple[str, ...], root: Path) -> list[str]:
    """Include folders of the flags that lie in the tree and are absent or empty (uninitialised submodules)."""
    found, take = [], False
    for flag in flags:
        folder = None
        if take:
            folder, take = flag, False
        elif flag in ("-isystem", "-I"):
            take = True
        elif flag.startswith("-I"):
            folder = flag[2:]
        if folder and folder.startswith(str(root) + "/"):
            path = Path(folder)
            if not path.is_dir() or not any(path.iterdir()):
                found.append(os.path.relpath(folder, root))
    return found


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


def judge(proof: ModuleProof, targets: tuple[Arch, ...], compared: tuple[Arch, ...], base: bool, read_ptx: Callable[[str], str]) -> None:
    """Fill the proof's failures from its builds (the rules in the module docstring)."""
    reference = [a for a in compared if proof.archs.get(a.name, {}).get("work", SideBuild(False)).built]
    for arch in compared:
        sides = proof.archs.get(arch.name, {})
        work, before = sides.get("work"), sides.get("base")
        if before is None or work is None:
            continue
        if before.built and not work.built:
            proof.failures.append(f"{arch.name}: the work tree no longer builds {proof.module} ({work.reason})")
        elif before.built and work.built:
            differing = []
            for a, b in zip(before.sources, work.sources):
                if a.digest != b.digest:
                    names, rest = ptx.differing(read_ptx(a.key), read_ptx(b.key))
                    differing += [f"{b.source}: {n}" for n in names] + ([f"{b.source}: module-level declarations"] if rest else [])
            if differing:
                proof.differs[arch.name] = differing
                proof.failures.append(f"{arch.name}: PTX differs from the base in {len(differing)} kernel(s); a non-target arch must stay untouched")
    for arch in targets:
        work = proof.archs.get(arch.name, {}).get("work")
        if work is None:
            continue
        if not work.built:
            proof.failures.append(f"{arch.name}: FlashInfer's JIT does not build {proof.module} for {arch.name} ({work.reason})")
            continue
        proof.reference[arch.name] = [a.name for a in reference]
        refs = [proof.archs[a.name]["work"].kernels() for a in reference]
        empty, missing = [], []
        for key, kernel in work.kernels().items():
            others = [r[key] for r in refs if key in r]
            if kernel.empty and (any(not o.empty for o in others) or not refs):
                empty.append(kernel)
                continue
            if base:
                for opcode in sorted({op for _, _, op in proof.promised}):
                    if any(o.opcodes.get(opcode) for o in others) and not kernel.opcodes.get(opcode):
                        missing.append((kernel, opcode))
        if empty:
            proof.empty[arch.name] = empty
            against = (
                f" but have a body on {', '.join(a.name for a in reference)}" if reference
                else "; no compared arch builds the module to compare with"
            )
            proof.failures.append(f"{arch.name}: {len(empty)} kernel(s) compile empty (`ret;` only){against}")
        if missing:
            proof.missing[arch.name] = missing
            proof.failures.append(f"{arch.name}: {len(missing)} kernel(s) lack an instruction the widened guards promise")


# ------------------------------------------------------------------ the command


def prove(
    path: Path,
    *,
    arch: Arch | None,
    universe: tuple[Arch, ...],
    modules: tuple[str, ...] = (),
    base: str | None = None,
    recipe_id: str | None = None,
    python: str | None = None,
    jobs: int = 0,
    nvcc: str = "nvcc",
    progress: Callable[[str, int, int], None] | None = None,
    recipes_dirs: list[Path] | None = None,
) -> BuildReport:
    """Build the changed (or named) JIT modules of the FlashInfer tree at `path`, base and work tree, per arch."""
    from codemods.recipes import load as recipes
    from codemods.audit import jit_modules
    from codemods.prove import preprocess as verifier
    from codemods.core.arch import family
    from codemods.apply.repo import ShadowRepo
    from codemods.apply.workspace import Workspace

    started = time.monotonic()
    path = Path(path)
    target = recipes.detect(path.resolve(), ["flashinfer"])
    repo = Workspace(path).repo
    records = [r for r in repo.applied() if recipe_id in (None, r.recipe)] if repo is not None else []
    base_sha, label, recipe_name = None, "none (no codemod record: the work tree alone)", recipe_id or ""
    if base:
        if repo is None:
            raise errors.RepoState("--base needs a git work tree or a codemod record", where=str(path), hint="drop --base to build the work tree alone")
        base_sha, label = repo.resolve_rev(base), base
    elif records:
        record = next((r for r in records if r.current), records[0])
        base_sha, recipe_name = record.base_sha, record.recipe
        label = f"recipe {record.recipe}"
    elif repo is not None and not isinstance(repo, ShadowRepo):
        base_sha, label = repo.resolve_rev("HEAD"), "HEAD"
    recipe = None
    if recipe_name:
        try:
            recipe = recipes.find_recipe(recipe_name, recipes_dirs)
        except errors.CodemodError:
            recipe = None
    if arch is not None:
        targets = tuple(a for a in dict.fromkeys(family(arch, tuple(universe) + (arch,))) if a in universe or a == arch)
    elif recipe is not None:
        targets = recipe.targets(universe)
    else:
        raise errors.RepoState("cannot tell the target arch", where=str(path), hint="pass --arch sm_120")
    compared = tuple(a for a in universe if a not in targets)

    prefix = ""
    changed: dict[str, bytes | None] = {}
    if base_sha is not None:
        rel_root = repo.rel(target.root)
        prefix = "" if rel_root == "." else rel_root + "/"
        for rel in repo.changed_since(base_sha):
            changed[rel] = repo.show(base_sha, rel)
    tree_changed = {rel[len(prefix):] for rel in changed if rel.startswith(prefix)}

    specs = _specs(target.root)
    wanted = list(modules)
    if not wanted:
        layout = jit_modules.detect(target.root)
        closures = jit_modules.tree_closures(target.root, layout) if layout is not None else None
        for rel, spec in specs:
            files = closures.closure(spec).files if closures is not None else set()
            if set(files) & tree_changed:
                wanted.append(spec.module)
            elif rel in tree_changed:
                functions = {spec.function} | ({spec.gate.function} if spec.gate is not None else set())
                before = changed.get(prefix + rel) or b""
                after = (target.root / rel).read_bytes() if (target.root / rel).is_file() else b""
                if any(_function_text(before, f) != _function_text(after, f) for f in functions):
                    wanted.append(spec.module)
        wanted += [m for c in (recipe.changes if recipe else ()) if c.project == "flashinfer" for m in c.jit_modules]
        wanted = list(dict.fromkeys(wanted))
    if not wanted:
        why = "nothing changed since the base" if base_sha else "there is no base to find changed modules from"
        raise errors.BadUsage(f"no JIT module to build: {why}", where=str(path), hint="name one with --module, e.g. --module trtllm_comm")
    chosen = []
    for name in wanted:
        found = [(rel, spec) for rel, spec in specs if spec.module == name]
        if not found:
            known = ", ".join(sorted({s.module for _, s in specs})[:12])
            raise errors.BadUsage(f"no JIT module {name} in {target.root}", where="--module", hint=f"known modules include: {known}")
        chosen.append(found[0])

    nvcc_path = find_nvcc(nvcc)
    release = nvcc_release(nvcc_path)
    tvm_include, python_include = find_tvm_ffi(python)
    machine = jit_flags.Machine(os.path.dirname(os.path.dirname(nvcc_path)), release, tvm_include, python_include)
    python_dir = target.layout.places.get("python", ".")

    with tempfile.TemporaryDirectory(prefix="codemod-build-base-") as temp:
        sides = {"work": _side("work", target.root, python_dir)}
        if base_sha is not None:
            overlay = Path(temp) / "base" / repo.root.name  # the package folder keeps its name (absolute imports)
            verifier.shadow_tree(repo.root, overlay, {rel: data for rel, data in changed.items() if data is not None})
            sides["base"] = _side("base", overlay / prefix if prefix else overlay, python_dir)
        proofs, tasks, slots = [], [], []
        for spec_rel, spec in chosen:
            proof = ModuleProof(spec.module, f"{spec_rel}:{spec.function}")
            spec_in_package = os.path.relpath(target.root / spec_rel, target.root / python_dir)
            for a in (*targets, *compared):
                for side in sides.values():
                    build = module_flags(side, spec_in_package, spec.function, a, machine)
                    if isinstance(build, str):
                        proof.archs.setdefault(a.name, {})[side.name] = SideBuild(False, build)
                        continue
                    lacking = missing_include_dirs(build.flags, side.root)
                    if lacking:
                        raise errors.BuildNeeds(
                            f"third-party headers missing: {', '.join(lacking)} (absent or empty); a build needs the real headers, no stand-ins",
                            where=str(path),
                            hint=f"git -C {path} submodule update --init {' '.join(sorted({'/'.join(d.split('/')[:2]) for d in lacking}))}, "
                            "or build from an installed wheel of the same version (it bundles them)",
                        )
                    gencode = ",".join(f.split("=", 1)[1] if "=" in f else f for f in build.gencode())
                    side_build = SideBuild(True, gencode=gencode)
                    proof.archs.setdefault(a.name, {})[side.name] = side_build
                    for source in build.sources:
                        rel = os.path.relpath(source, side.root)
                        slots.append((side_build, len(tasks)))
                        tasks.append(_Task(spec.module, a, side.name, source, rel, build.flags))
            if base_sha is not None:
                for rel, before in changed.items():
                    if rel.startswith(prefix) and verifier.is_cuda_source(rel):
                        after = (repo.root / rel).read_bytes() if (repo.root / rel).is_file() else b""
                        proof.promised += [(rel[len(prefix):], line, op) for line, op in promised(before or b"", after, targets, universe)]
            proofs.append(proof)
        builder = Builder(nvcc_path, release, cache_root(), jobs, progress)
        built = builder.run(tasks, {name: side.root for name, side in sides.items()})
        for side_build, index in slots:
            side_build.sources.append(built[index])
        for proof in proofs:
            judge(proof, targets, compared, base_sha is not None, builder.ptx_text)
    report = BuildReport(
        str(path), base_sha, label, tuple(a.name for a in targets), tuple(a.name for a in compared), proofs,
        builder.compiled, sum(b.cached for b in built.values()), time.monotonic() - started,
    )
    shown = {k.name for p in proofs for ks in p.empty.values() for k in ks} | {k.name for p in proofs for ks in p.missing.values() for k, _ in ks}
    report.names = demangle(sorted(shown))
    return report


def _side(name: str, root: Path, python_dir: str) -> Side:
    package = (root / python_dir) if python_dir not in ("", ".") else root
    links = {}
    backend = root / "build_backend.py"
    if not (package / "data").is_dir() and backend.is_file():
        links = data_links(backend.read_text(errors="replace"))
    return Side(name, root, package, links)


def _function_text(source: bytes, name: str) -> str | None:
    """The code of the top-level function `name` (as ast dumps it: comments and layout do not count)."""
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError):
        return None
    for node in tree.body:
        if isinstance(node, ast.FunctionDef) and node.name == name:
            return ast.dump(node)
    return None


def _specs(root: Path) -> list:
    """(file, jit_specs.JitSpec) of every spec in the tree's JIT folder."""
    from codemods.jit import specs as jit_specs
    from codemods.audit import jit_modules
    from codemods.gates import SourceError

    layout = jit_modules.detect(root)
    if layout is None:
        raise errors.UnknownProject("no FlashInfer JIT folder here", where=str(root))
    found = []
    for file in sorted((root / layout.jit).rglob("*.py")):
        try:
            specs = jit_specs.find(file.read_bytes())
        except (OSError, SourceError):
            continue
        rel = file.relative_to(root).as_posix()
        found += [(rel, spec) for spec in specs]
    return found


# ------------------------------------------------------------------ rendering


def _totals(build: SideBuild) -> str:
    if not build.built:
        return f"not built (FlashInfer's JIT: {build.reason})"
    kernels = [k for s in build.sources for k in s.kernels]
    counts = {op: sum(k.opcodes.get(op, 0) for k in kernels) for op in WATCHED}
    pdl = ", ".join(f"{op} {n}" for op, n in counts.items())
    cached = sum(s.cached for s in build.sources)
    note = f", {cached}/{len(build.sources)} from cache" if cached else ""
    return (
        f"{len(build.sources)} source(s), {len(kernels)} kernels, {sum(k.empty for k in kernels)} empty, "
        f"{sum(k.instructions for k in kernels)} instructions, {pdl} [{build.gencode}{note}]"
    )


def to_text(report: BuildReport) -> list[str]:
    lines = [f"build proof of {report.root}: base {report.base_label}" + (f" @ {report.base[:12]}" if report.base else "")]
    for proof in report.modules:
        lines.append(f"module {proof.module} ({proof.spec})")
        for arch in (*report.targets, *report.compared):
            sides = proof.archs.get(arch, {})
            role = "target" if arch in report.targets else "compared"
            for side in ("base", "work"):
                build = sides.get(side)
                if build is None:
                    continue
                text = _totals(build)
                if side == "work" and arch in report.compared and "base" in sides and build.built and sides["base"].built:
                    same = all(a.digest == b.digest for a, b in zip(sides["base"].sources, build.sources))
                    text = "same PTX as the base" if same else text + "; PTX differs from the base"
                lines.append(f"  {arch:<7} {role:<8} {side:<4}  {text}")
        for arch, kernels in proof.empty.items():
            lines.append(f"  empty on {arch} ({len(kernels)}):")
            lines += [f"    {report.names.get(k.name, k.name)}  [{k.source}]" for k in kernels[:_SHOWN]]
            if len(kernels) > _SHOWN:
                lines.append(f"    ... and {len(kernels) - _SHOWN} more (--format json lists them all)")
        for arch, missing in proof.missing.items():
            lines.append(f"  missing on {arch} ({len(missing)}):")
            lines += [f"    {report.names.get(k.name, k.name)}: no {op}  [{k.source}]" for k, op in missing[:_SHOWN]]
        for arch, names in proof.differs.items():
            lines.append(f"  differs from the base on {arch} ({len(names)}):")
            lines += [f"    {n}" for n in names[:_SHOWN]]
        if proof.promised:
            ops = sorted({op for _, _, op in proof.promised})
            lines.append(f"  the widened guards promise {', '.join(ops)} ({len(proof.promised)} guard(s))")
        for failure in proof.failures:
            lines.append(f"FAIL {proof.module}: {failure}")
    timing = f"{report.compiled} compiled, {report.cached} from cache, {report.seconds:.1f} s"
    if report.ok:
        lines.append(
            f"passed: no kernel compiles empty on {', '.join(report.targets)} that has a body elsewhere, the promised "
            f"instructions are there, and every compared arch builds the base's PTX ({timing})"
        )
    else:
        lines.append(f"failed ({timing})")
    return lines


def to_json(report: BuildReport) -> dict:
    modules = []
    for proof in report.modules:
        archs = []
        for arch, sides in proof.archs.items():
            entry = {"arch": arch, "target": arch in report.targets}
            for side, build in sides.items():
                entry[side] = {
                    "built": build.built, "reason": build.reason or None, "gencode": build.gencode or None,
                    "sources": [
                        {
                            "source": s.source, "cached": s.cached, "kernels": len(s.kernels),
                            "empty": sum(k.empty for k in s.kernels), "instructions": sum(k.instructions for k in s.kernels),
                            **{op: sum(k.opcodes.get(op, 0) for k in s.kernels) for op in WATCHED},
                        }
                        for s in build.sources
                    ],
                }
            if "base" in sides and "work" in sides and sides["base"].built and sides["work"].built:
                entry["same_as_base"] = all(a.digest == b.digest for a, b in zip(sides["base"].sources, sides["work"].sources))
            archs.append(entry)
        kernels = []
        for arch in report.targets:
            work = proof.archs.get(arch, {}).get("work")
            if work is None or not work.built:
                continue
            refs = {r: proof.archs[r]["work"].kernels() for r in proof.reference.get(arch, [])}
            for k in (k for s in work.sources for k in s.kernels):
                kernels.append({
                    "arch": arch, "source": k.source, "kernel": k.name, "instructions": k.instructions, "empty": k.empty,
                    "opcodes": k.opcodes,
                    "reference": {r: {"instructions": ks[(k.source, k.name)].instructions, "opcodes": ks[(k.source, k.name)].opcodes}
                                  for r, ks in refs.items() if (k.source, k.name) in ks},
                })
        modules.append({
            "module": proof.module, "spec": proof.spec, "ok": not proof.failures, "failures": proof.failures,
            "archs": archs,
            "empty": {a: [{"kernel": k.name, "name": report.names.get(k.name), "source": k.source} for k in ks] for a, ks in proof.empty.items()},
            "missing": {a: [{"kernel": k.name, "name": report.names.get(k.name), "source": k.source, "instruction": op} for k, op in ks]
                        for a, ks in proof.missing.items()},
            "differs": proof.differs,
            "promised": [{"file": f, "line": line, "instruction": op} for f, line, op in proof.promised],
            "kernels": kernels,
        })
    return {
        "ok": report.ok, "status": "passed" if report.ok else "failed", "root": report.root, "base": report.base,
        "base_label": report.base_label, "targets": list(report.targets), "compared": list(report.compared),
        "compiled": report.compiled, "cached": report.cached, "seconds": round(report.seconds, 2), "modules": modules,
    }
