"""`codemod scan`: every arch gate in a tree, and the hazards of one arch.

`scan(root, arch)` walks the tree (skipping `.git`, `__pycache__`, binary
files and symlinks out of it) and parses the files that can hold a gate:
C/C++/CUDA files whose bytes name `__CUDA_ARCH` (cuda_guard, with the CUDA
grammar for .cu/.cuh), and Python files whose bytes hold
`supported_major_versions=[` or an `is_smNN... or` (python_arch_list,
python_arch_or). It reports for each gate what it admits and whether it
excludes `arch`. A cuda_guard gate that excludes `arch` also says whether
it is *widenable*: no token of an instruction `arch` lacks in the region
it guards (hazards.blockers_for). Files that cannot be decoded or parsed
are skipped with a reason.

In a FlashInfer tree (checkout, wheel or package layout) it also reads the
JIT specs under `flashinfer/jit` (jit_specs) and follows each spec's
sources through their `#include "..."`/`<...>` closure inside the tree
(the including file's folder for quoted includes, then the include root,
the csrc folder and the spec's extra include dirs), and reports:

- `empty-kernel`: the spec's gate lists majors (or flag targets) and
  admits `arch`, while a guard in its closure compiles a body of code out
  on `arch`'s JIT target (hazards.jit_target), keeps it on an *older*
  target the spec is built for, and leaves `arch` no other branch of the
  group with code: a guard written before `arch` existed (`< 1200`,
  `== 1000`). The kernel runs without that code and returns wrong results
  with no error. A guard that keeps code only for newer targets (`>= 1000`
  seen from sm_90) marks a feature `arch` lacks and is not reported; nor is
  a guard nested in one `arch` already skips. Specs without such a gate are
  built for whatever the user asks and are not judged: such a guard was
  there before any widening.
- `unsupported-instruction`: an arch-selected branch (`#if __CUDA_ARCH__ >=
  1000`, or the `#else` after one) that `arch`'s JIT target takes, around
  tokens of an instruction `arch` lacks (`tcgen05.alloc`), so the module
  does not build. No hazard when every spec whose closure holds the file
  is gated away from `arch`; `potential` when the file is in no spec's
  closure or only in specs without a gate, when the branch also depends
  on other macros, or when only CuTe/CUTLASS wrapper names are found
  (they may compile to a trap instead).

`check(result)` is True when any hazard is not potential. Files are
independent, so with `jobs > 1` they are parsed in a process pool.
"""

from __future__ import annotations

import os
import posixpath
import re
import time
import urllib.parse
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

from codemods import hazards, jit_specs
from codemods.arch import DEFAULT_ARCHS, Arch
from codemods.gates import Gate, SourceError, cuda_guard, python_arch_list, python_arch_or
from codemods.hazards import Structure

CUDA_SUFFIXES = (".cu", ".cuh", ".h", ".hpp", ".inl", ".cpp", ".cc", ".cxx")
PYTHON_SUFFIXES = (".py",)
SKIP_DIRS = frozenset({".git", "__pycache__"})
_BINARY_PROBE = 8192
# Cheap byte tests before a Python file is parsed: only what each kind's `find` could match.
_PYTHON_PREFILTERS = (
    (python_arch_list, re.compile(rb"supported_major_versions\s*=\s*[\[(]")),
    # a chain starts with a predicate (maybe called) and `or`: `is_sm100a_supported(device)\n or`
    (python_arch_or, re.compile(rb"is_sm\d{2,3}a?(?:_supported)?\b\s*(?:\((?:[^()]|\([^()]*\))*\))?\s*\)*\s*\bor\b")),
)
# Below this many files a process pool costs more than it saves.
_POOL_MINIMUM = 64

RULES = {
    "gate-excludes-arch": (
        "note",
        "An arch gate excludes the scanned arch",
        "A gate (a CUDA #if guard, a JIT arch list or an arch predicate chain) does not admit the scanned "
        "arch, so the code it guards does not run there. Widenable tells whether the guarded region holds "
        "instructions the arch lacks.",
    ),
    "empty-kernel": (
        "error",
        "A JIT module is built for the arch but a guard compiles its code out",
        "The module's JIT gate admits the arch, while a guard in a source it compiles excludes the arch and "
        "keeps the code for the module's other targets. The kernel runs without that code and returns wrong "
        "results with no error. Widen the guard together with the JIT gate (FlashInfer PR #3903).",
    ),
    "unsupported-instruction": (
        "error",
        "A guard admits the arch around instructions it lacks",
        "A guard the arch's compile target takes holds instructions or wrapper names ptxas rejects on that "
        "arch (wgmma, tcgen05/TMEM, 2-SM TMA, block-scaled mma.sync). Narrow the guard, or keep the module's "
        "JIT gate from building it for this arch.",
    ),
}


@dataclass(frozen=True)
class Layout:
    """Where a FlashInfer tree keeps its JIT specs and the sources they compile."""

    name: str
    jit: str
    csrc: str
    include: str


# The layouts of targets/projects/flashinfer.toml: git checkout, installed wheel, the package folder.
LAYOUTS = (
    Layout("checkout", "flashinfer/jit", "csrc", "include"),
    Layout("wheel", "flashinfer/jit", "flashinfer/data/csrc", "flashinfer/data/include"),
    Layout("package", "jit", "data/csrc", "data/include"),
)
# FlashInfer up to 0.6.x builds every major >= 9 as an `a` target (compilation_context.py).
_ALL_SPECIFIC_RE = re.compile(rb"""str\(minor\)\s*\+\s*["']a["']""")


@dataclass
class ScanResult:
    root: Path
    arch: Arch
    universe: tuple[Arch, ...]
    gates: list[dict] = field(default_factory=list)
    skipped: list[dict] = field(default_factory=list)
    hazards: list[dict] = field(default_factory=list)
    modules: list[dict] = field(default_factory=list)  # the JIT specs found, for the text report
    layout: str = ""
    stats: dict = field(default_factory=dict)


@dataclass
class _FileScan:
    file: str
    gates: list[dict] = field(default_factory=list)
    skipped: str = ""
    structure: Structure | None = None
    specs: list[jit_specs.JitSpec] = field(default_factory=list)


def scan(root: Path, arch: Arch, universe: tuple[Arch, ...] = DEFAULT_ARCHS, jobs: int = 0) -> ScanResult:
    """Gates and hazards for `arch` in the tree at `root`.

    `jobs` > 1 parses files in that many processes; 1 parses in this
    process; 0 picks the CPU count, or this process for small trees.
    """
    started = time.perf_counter()
    root = Path(root)
    universe = tuple(dict.fromkeys((*universe, arch)))
    layout = _detect(root)
    tasks = [(str(root), rel, arch, universe, layout is not None and _under(rel, layout.jit)) for rel in _walk(root)]
    workers = jobs if jobs > 0 else ((os.cpu_count() or 1) if len(tasks) >= _POOL_MINIMUM else 1)
    if workers > 1 and len(tasks) > 1:
        with ProcessPoolExecutor(max_workers=workers) as pool:
            scans = list(pool.map(_scan_file, tasks, chunksize=max(1, len(tasks) // (workers * 8))))
    else:
        workers = 1
        scans = [_scan_file(task) for task in tasks]
    parsed_at = time.perf_counter()
    result = ScanResult(root, arch, universe, layout=layout.name if layout else "")
    structures: dict[str, Structure] = {}
    specs: list[tuple[str, jit_specs.JitSpec]] = []
    for item in scans:
        result.gates += item.gates
        if item.skipped:
            result.skipped.append({"file": item.file, "reason": item.skipped})
        if item.structure is not None:
            structures[item.file] = item.structure
        specs += [(item.file, spec) for spec in item.specs]
    modules: list[_Module] = []
    all_specific = False
    if layout is not None:
        all_specific = _all_specific(root, layout)
        modules = _modules(specs, _Closures(root, layout), arch)
        result.modules = [module.record for module in modules]
        result.hazards = _empty_kernels(modules, structures, arch, universe, all_specific)
    result.hazards += _unsupported(modules, structures, arch, all_specific)
    result.gates.sort(key=lambda g: (g["file"], g["line"]))
    result.skipped.sort(key=lambda s: s["file"])
    result.hazards.sort(key=lambda h: (h["file"], h["line"], h["kind"]))
    result.stats = {
        "files": len(tasks),
        "parsed": sum(1 for s in scans if s.gates or s.structure is not None or s.specs),
        "jobs": workers,
        "parse_seconds": round(parsed_at - started, 3),
        "seconds": round(time.perf_counter() - started, 3),
    }
    return result


def check(result: ScanResult) -> bool:
    """True when the scan found a hazard that is not merely potential (`scan --check` fails then)."""
    return any(not hazard["potential"] for hazard in result.hazards)


# ---------------------------------------------------------------- walking and parsing


def _walk(root: Path) -> list[str]:
    """Relative POSIX paths of the files that may hold a gate, in a stable order."""
    found = []
    base = root.resolve()
    for folder, dirs, files in os.walk(root):
        dirs[:] = sorted(d for d in dirs if d not in SKIP_DIRS)
        for name in sorted(files):
            if not name.endswith(CUDA_SUFFIXES + PYTHON_SUFFIXES):
                continue
            path = Path(folder, name)
            if path.is_symlink():
                target = path.resolve()
                if base not in target.parents or not target.is_file():
                    continue
            found.append(path.relative_to(root).as_posix())
    return found


def _under(rel: str, folder: str) -> bool:
    return rel.startswith(folder.rstrip("/") + "/")


def _language(rel: str) -> str:
    return "cuda" if rel.endswith((".cu", ".cuh")) else "cpp"


def _scan_file(task: tuple[str, str, Arch, tuple[Arch, ...], bool]) -> _FileScan:
    """Parse one file; never raises (a file that cannot be read or parsed comes back skipped)."""
    root, rel, arch, universe, in_jit = task
    out = _FileScan(rel)
    try:
        data = Path(root, rel).read_bytes()
    except OSError as exc:
        out.skipped = f"cannot read: {exc.strerror or exc}"
        return out
    if b"\0" in data[:_BINARY_PROBE]:
        return out
    try:
        if rel.endswith(PYTHON_SUFFIXES):
            found: list[Gate] = []
            for kind, prefilter in _PYTHON_PREFILTERS:
                if prefilter.search(data):
                    found += kind.find(data, universe)
            out.gates = [_record(rel, gate, arch) for gate in found]
            if in_jit:
                out.specs = jit_specs.find(data, universe)
        elif b"__CUDA_ARCH" in data:
            found = cuda_guard.find(data, universe, language=_language(rel))
            out.structure = hazards.structure(data)
            out.gates = [_record(rel, gate, arch, data) for gate in found]
    except SourceError as exc:
        out = _FileScan(rel, skipped=str(exc))
    except RecursionError:
        out = _FileScan(rel, skipped="cannot parse: nested too deeply")
    except Exception as exc:  # one file never stops the scan; the reason says what to report
        out = _FileScan(rel, skipped=f"cannot parse ({type(exc).__name__}: {exc}); please report this file")
    return out


def _record(rel: str, gate: Gate, arch: Arch, source: bytes | None = None) -> dict:
    record = {
        "file": rel,
        "line": gate.line,
        "kind": gate.kind,
        "text": gate.text,
        "admits": gate.admits.names(),
        "unknown": gate.admits.unknown_names(),
        "excludes_arch": gate.admits.admits(arch) is False,
    }
    if record["excludes_arch"] and gate.kind == cuda_guard.KIND and source is not None:
        blockers = hazards.blockers_for(source, gate, arch)
        record["widenable"] = not blockers
        record["blockers"] = blockers
    return record


# ---------------------------------------------------------------- JIT modules and their closures


def _detect(root: Path) -> Layout | None:
    for layout in LAYOUTS:
        if (root / layout.jit).is_dir() and (root / layout.csrc).is_dir():
            return layout
    return None


def _all_specific(root: Path, layout: Layout) -> bool:
    context = root / posixpath.dirname(layout.jit) / "compilation_context.py"
    try:
        return bool(_ALL_SPECIFIC_RE.search(context.read_bytes()))
    except OSError:
        return False


class _Closures:
    """Resolve JIT sources and follow their includes inside the tree, caching per file."""

    def __init__(self, root: Path, layout: Layout) -> None:
        self.root = root
        self.layout = layout
        self._base = root.resolve()
        self._includes: dict[str, list[tuple[str, bool]]] = {}
        self._exists: dict[str, bool] = {}

    def exists(self, rel: str) -> bool:
        """Whether `rel` is a file inside the tree (an absolute path, `..` or a symlink out of it is not)."""
        if rel not in self._exists:
            inside = not posixpath.isabs(rel) and rel != ".." and not rel.startswith("../")
            path = self.root / rel
            if inside and path.is_symlink():
                inside = self._base in path.resolve().parents
            self._exists[rel] = inside and path.is_file()
        return self._exists[rel]

    def place(self, root_name: str, path: str) -> str:
        base = self.layout.csrc if root_name == "csrc" else self.layout.include
        return posixpath.normpath(posixpath.join(base, path))

    def closure(self, spec: jit_specs.JitSpec) -> tuple[list[str], list[str]]:
        """The files the spec compiles and includes, and the named sources that do not exist."""
        dirs = [self.layout.include, self.layout.csrc] + [self.place(*d) for d in spec.include_dirs]
        queue, missing = [], []
        for source in spec.sources:
            rel = self.place(*source)
            (queue if self.exists(rel) else missing).append(rel)
        seen = dict.fromkeys(queue)
        while queue:
            current = queue.pop()
            for path, quoted in self._read_includes(current):
                here = [posixpath.dirname(current)] if quoted else []
                for folder in here + dirs:
                    rel = posixpath.normpath(posixpath.join(folder, path))
                    if self.exists(rel):
                        if rel not in seen:
                            seen[rel] = None
                            queue.append(rel)
                        break
        return list(seen), missing

    def _read_includes(self, rel: str) -> list[tuple[str, bool]]:
        if rel not in self._includes:
            try:
                self._includes[rel] = hazards.includes((self.root / rel).read_bytes())
            except OSError:
                self._includes[rel] = []
        return self._includes[rel]


@dataclass
class _Module:
    """One JIT spec variant, the files it compiles, and its record for the report."""

    spec: jit_specs.JitSpec
    file: str
    files: frozenset[str]
    record: dict

    @property
    def name(self) -> str:
        return self.spec.module

    def admits(self, arch: Arch) -> bool | None:
        """Whether the gate admits `arch`; None for a spec without a gate."""
        return None if self.spec.gate is None else self.spec.gate.admits(arch)

    def target(self, arch: Arch, all_specific: bool) -> Arch:
        """The nvcc target the module is compiled for on a GPU of `arch`."""
        gate = self.spec.gate
        if gate is not None and arch.major not in gate.majors:
            for target in gate.targets:
                if target.plain == arch.plain:
                    return target
        return hazards.jit_target(arch, all_specific=all_specific)


def _modules(specs: list[tuple[str, jit_specs.JitSpec]], closures: _Closures, arch: Arch) -> list[_Module]:
    modules = []
    for file, spec in specs:
        files, missing = closures.closure(spec)
        gate = spec.gate
        record = {
            "module": spec.module,
            "file": file,
            "line": spec.line,
            "function": spec.function,
            "gate": None if gate is None else {"function": gate.function, "line": gate.line, "text": gate.text},
            "admits_arch": None if gate is None else gate.admits(arch),
            "sources": len(spec.sources) - len(missing),
            "closure": len(files),
        }
        modules.append(_Module(spec, file, frozenset(files), record))
    return modules


def _empty_kernels(
    modules: list[_Module],
    structures: dict[str, Structure],
    arch: Arch,
    universe: tuple[Arch, ...],
    all_specific: bool,
) -> list[dict]:
    found: dict[tuple[str, int], dict] = {}
    details: dict[tuple[str, int], tuple] = {}
    for module in modules:
        gate = module.spec.gate
        if gate is None or not gate.admits(arch):
            continue
        target = module.target(arch, all_specific)
        # Only older targets count: a guard that keeps code from `arch` but gives it to a newer
        # target (`>= 1000` seen from sm_90) marks a feature `arch` lacks, not a guard left narrow.
        older = [a for a in universe if (a.major, a.minor) < (arch.major, arch.minor) and gate.admits(a)]
        siblings = {module.target(a, all_specific) for a in older}
        for rel in sorted(module.files & structures.keys()):
            shape = structures[rel]
            for branch in shape.branches:
                if branch.directive == "#else" or not branch.names_arch:
                    continue
                if shape.own(branch, target) is not False or not shape.has_code(branch):
                    continue
                if branch.parent is not None and not shape.reachable(shape.branches[branch.parent], target):
                    continue
                if shape.gives_code(branch, target):
                    continue
                kept = sorted(
                    (s for s in siblings if shape.own(branch, s) is True and shape.taken(branch, s) is not False),
                    key=lambda a: (a.major, a.minor, a.variant),
                )
                if not kept:
                    continue
                key = (rel, branch.line)
                if key in found:
                    found[key]["_modules"].append(module.name)
                    continue
                found[key] = {
                    "kind": "empty-kernel",
                    "file": rel,
                    "line": branch.line,
                    "module": module.name,
                    "potential": False,
                    "_modules": [module.name],
                }
                details[key] = (branch, target, kept, module)
    out = []
    for key, record in found.items():
        branch, target, kept, module = details[key]
        names = list(dict.fromkeys(record.pop("_modules")))
        gate = module.spec.gate
        record["message"] = (
            f"{' and '.join(names)} {'is' if len(names) == 1 else 'are'} built for {arch.name} "
            f"({module.file}:{gate.line} admits it; compiled as {target.name}), but "
            f"`{branch.directive} {branch.condition}` compiles this code out there while "
            f"{', '.join(a.name for a in kept)} keep{'s' if len(kept) == 1 else ''} it: the kernel runs without it "
            "and returns garbage without an error; widen this guard together with the JIT gate"
        )
        out.append(record)
    return out


def _unsupported(
    modules: list[_Module], structures: dict[str, Structure], arch: Arch, all_specific: bool
) -> list[dict]:
    names = {family.name for family in hazards.lacking(arch)}
    holding: dict[str, list[_Module]] = {}
    for module in modules:
        for rel in module.files:
            holding.setdefault(rel, []).append(module)
    out = []
    for rel, shape in structures.items():
        holders = holding.get(rel, [])
        admitting = [m for m in holders if m.admits(arch) is True]
        ungated = [m for m in holders if m.admits(arch) is None]
        # (target, module name, whether only potential, where the file is built)
        if admitting:
            contexts = [
                (m.target(arch, all_specific), m.name, False, f"{m.name} is built for {arch.name}") for m in admitting
            ]
        elif ungated:
            contexts = [
                (
                    m.target(arch, all_specific),
                    m.name,
                    True,
                    f"{m.name} has no arch list, so it is built for {arch.name} when asked",
                )
                for m in ungated
            ]
        elif not holders:
            contexts = [(arch, None, True, "no JIT spec compiles this file, so whether anything builds it is unknown")]
        else:
            continue  # every module that compiles this file is gated away from arch
        merged: dict[int, dict] = {}
        for target, module_name, potential, where in contexts:
            for branch in shape.branches:
                own_hits = [hit for hit in branch.hits if hit.family in names]
                if not own_hits or not shape.reachable(branch, target):
                    continue
                selecting = shape.selecting(branch)
                if selecting is None:
                    continue
                entry = merged.setdefault(
                    selecting.index,
                    {"branch": selecting, "hits": {}, "modules": {}, "decided": False, "target": target},
                )
                entry["hits"].update(dict.fromkeys(own_hits))
                entry["modules"].setdefault(module_name, where)
                entry["decided"] |= not potential and shape.taken(selecting, target) is True
        for entry in merged.values():
            out.append(_unsupported_record(rel, shape, entry, arch))
    return out


def _unsupported_record(rel: str, shape: Structure, entry: dict, arch: Arch) -> dict:
    branch, hits = entry["branch"], sorted(entry["hits"], key=lambda h: h.line)
    found_tokens = hazards.tokens(hits)
    wheres = list(entry["modules"].values())
    instructions = [hit for hit in hits if not hit.wrapper]
    condition = "#else" if branch.directive == "#else" else f"{branch.directive} {branch.condition}"
    verb = "admits" if shape.taken(branch, entry["target"]) is True else "may admit"
    if instructions:
        what = f"{', '.join(found_tokens)}, which ptxas rejects there"
    else:
        what = (
            f"{', '.join(found_tokens)}: CuTe/CUTLASS names for instructions {arch.name} lacks, which "
            "fail to build or trap at run time (CUTE_INVALID_CONTROL_PATH) when called"
        )
    more = f" (and {len(wheres) - 1} more modules)" if len(wheres) > 1 else ""
    return {
        "kind": "unsupported-instruction",
        "file": rel,
        "line": branch.line,
        "module": next(iter(entry["modules"])),
        # Wrapper names alone may compile to a trap instead of failing: never more than potential.
        "potential": not (entry["decided"] and instructions),
        "tokens": found_tokens,
        "message": (
            f"`{condition}` {verb} {arch.name} (compiled as {entry['target'].name}) around {what}; "
            f"{wheres[0]}{more}. {hazards.describe((instructions or hits)[:1], arch)[0]}"
        ),
    }


def _one_line(text: str) -> str:
    return " ".join(text.split())


# ---------------------------------------------------------------- output


def to_json(result: ScanResult) -> dict:
    """`{"gates", "skipped", "hazards"}`; gates that exclude the arch carry `widenable` and `blockers` (cuda_guard)."""
    return {
        "gates": [dict(gate) for gate in result.gates],
        "skipped": [dict(item) for item in result.skipped],
        "hazards": [dict(hazard) for hazard in result.hazards],
    }


def _tool_version() -> str | None:
    try:
        from importlib.metadata import version

        return version("codemod")
    except Exception:  # not installed: a source checkout on sys.path
        return None


def to_sarif(result: ScanResult) -> dict:
    """The scan as a SARIF 2.1.0 log: one run, rules gate-excludes-arch, empty-kernel, unsupported-instruction."""
    rule_ids = list(RULES)
    driver: dict = {
        "name": "codemod",
        "rules": [
            {
                "id": rule,
                "shortDescription": {"text": short},
                "fullDescription": {"text": full},
                "defaultConfiguration": {"level": level},
            }
            for rule, (level, short, full) in RULES.items()
        ],
    }
    version = _tool_version()
    if version:
        driver["version"] = version
    results = []
    for gate in result.gates:
        if not gate["excludes_arch"]:
            continue
        admitted = ", ".join(gate["admits"]) or "none"
        text = f"{gate['kind']} `{_one_line(gate['text'])}` excludes {result.arch.name} (admits {admitted})"
        properties = {"kind": gate["kind"]}
        if "widenable" in gate:
            properties["widenable"] = gate["widenable"]
            properties["blockers"] = gate["blockers"]
            text += "; widenable" if gate["widenable"] else f"; not widenable: {'; '.join(gate['blockers'])}"
        results.append(_sarif_result("gate-excludes-arch", rule_ids, "note", text, gate, properties))
    for hazard in result.hazards:
        level = "warning" if hazard["potential"] else "error"
        properties = {"potential": hazard["potential"], "module": hazard.get("module")}
        if "tokens" in hazard:
            properties["tokens"] = hazard["tokens"]
        results.append(_sarif_result(hazard["kind"], rule_ids, level, hazard["message"], hazard, properties))
    return {
        "$schema": "https://docs.oasis-open.org/sarif/sarif/v2.1.0/errata01/os/schemas/sarif-schema-2.1.0.json",
        "version": "2.1.0",
        "runs": [
            {
                "tool": {"driver": driver},
                "originalUriBaseIds": {"SRCROOT": {"uri": Path(result.root).resolve().as_uri() + "/"}},
                "results": results,
                "properties": {"arch": result.arch.name},
            }
        ],
    }


def _sarif_result(rule: str, rule_ids: list[str], level: str, text: str, where: dict, properties: dict) -> dict:
    return {
        "ruleId": rule,
        "ruleIndex": rule_ids.index(rule),
        "level": level,
        "message": {"text": text},
        "locations": [
            {
                "physicalLocation": {
                    "artifactLocation": {"uri": urllib.parse.quote(where["file"]), "uriBaseId": "SRCROOT"},
                    "region": {"startLine": where["line"]},
                }
            }
        ],
        "properties": properties,
    }


def to_text(result: ScanResult) -> str:
    """A human summary: counts, then every hazard, then every gate that excludes the arch."""
    arch = result.arch.name
    excluding = [g for g in result.gates if g["excludes_arch"]]
    guarded = [g for g in excluding if "widenable" in g]
    blocked = [g for g in guarded if not g["widenable"]]
    files = len({g["file"] for g in result.gates})
    definite = [h for h in result.hazards if not h["potential"]]
    lines = [
        f"{len(result.gates)} gates in {files} files; {len(excluding)} exclude {arch}"
        + (f" ({len(guarded) - len(blocked)} cuda guards widenable, {len(blocked)} blocked)" if guarded else ""),
        f"{len(result.hazards)} hazards for {arch}: {len(definite)} definite, "
        f"{len(result.hazards) - len(definite)} potential"
        + (f"; {len(result.modules)} JIT specs read ({result.layout} layout)" if result.layout else ""),
    ]
    if result.skipped:
        lines.append(f"{len(result.skipped)} files skipped")
    if result.hazards:
        lines += ["", "hazards:"]
        for hazard in result.hazards:
            tag = "potential " if hazard["potential"] else ""
            lines.append(f"  {hazard['file']}:{hazard['line']}: {tag}{hazard['kind']}: {hazard['message']}")
    if excluding:
        lines += ["", f"gates that exclude {arch}:"]
        for gate in excluding:
            state = ""
            if "widenable" in gate:
                state = (
                    "  [widenable]"
                    if gate["widenable"]
                    else f"  [blocked: {', '.join(b.split(' (')[0] for b in gate['blockers'])}]"
                )
            lines.append(f"  {gate['file']}:{gate['line']}: {gate['kind']} {_one_line(gate['text'])}{state}")
    if result.skipped:
        lines += ["", "skipped:"]
        lines += [f"  {item['file']}: {item['reason']}" for item in result.skipped]
    return "\n".join(lines) + "\n"
