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

The steps live beside it: codemods.prove.module_flags (1), prove.compile
(2, 3, the cache), prove.build_results (the records and the rules above);
codemods.render.build_proof prints the report.
"""

from __future__ import annotations

import ast
import os
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from codemods.apply.repo import Repo
from codemods.core import errors
from codemods.core.arch import Arch
from codemods.jit import flags as jit_flags
from codemods.prove.headers import HeaderSource, needs_hint, submodules_holding, third_party_headers
from codemods.jit.machine import Machine
from codemods.prove.build_results import BuildReport, ModuleProof, SideBuild, judge, promised
from codemods.prove.compile import Builder, Task, cache_root, demangle, find_nvcc, find_tvm_ffi, nvcc_release
from codemods.prove.module_flags import Side, data_links, missing_include_dirs, module_flags


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
    includes: list[Path] | None = None,
) -> BuildReport:
    """Build the changed (or named) JIT modules of the FlashInfer tree at `path`, base and work tree, per arch."""
    from codemods.recipes import load as recipes
    from codemods.audit import jit_modules
    from codemods.prove import preprocess as verifier
    from codemods.prove.overlay import shadow_tree
    from codemods.core.arch import family
    from codemods.apply.shadow import ShadowRepo
    from codemods.apply.workspace import Workspace

    started = time.monotonic()
    path = Path(path)
    try:
        target = recipes.detect(path.resolve(), ["flashinfer"])
    except errors.UnknownProject:
        other = recipes.detect(path.resolve())  # not a known project either: its UnknownProject is the answer
        raise errors.NothingToProve(
            f"{other.project.title} has no CUDA kernels for verify --build to compile (it builds FlashInfer's JIT modules)",
            where=str(path),
            hint="`codemod verify` without --build checks this tree's changes; run verify --build on the FlashInfer tree",
        ) from None
    repo = Workspace(path).repo
    records = [r for r in repo.applied() if recipe_id in (None, r.recipe) and not r.reverted] if repo is not None else []
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
        assert repo is not None  # a base commit is only ever read from the repo
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
    machine = Machine(os.path.dirname(os.path.dirname(nvcc_path)), release, tvm_include, python_include)
    python_dir = target.layout.places.get("python", ".")

    with tempfile.TemporaryDirectory(prefix="codemod-build-base-") as temp:
        sides = {"work": _side("work", target.root, python_dir)}
        if base_sha is not None:
            assert repo is not None  # a base commit is only ever read from the repo
            overlay = Path(temp) / "base" / repo.root.name  # the package folder keeps its name (absolute imports)
            shadow_tree(repo.root, overlay, {rel: data for rel, data in changed.items() if data is not None})
            sides["base"] = _side("base", overlay / prefix if prefix else overlay, python_dir)
        proofs: list[ModuleProof] = []
        headers: HeaderSource | None = None  # resolved when a module's flags name a third-party folder the tree lacks
        tasks: list[Task] = []
        slots: list[tuple[SideBuild, int]] = []
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
                        if headers is None:
                            headers = _headers(path, repo, target, lacking, includes or [], python)
                        build = jit_flags.ModuleBuild(build.module, build.sources, _with_headers(build.flags, side.root, lacking, headers.folders))
                    gencode = ",".join(f.split("=", 1)[1] if "=" in f else f for f in build.gencode())
                    side_build = SideBuild(True, gencode=gencode)
                    proof.archs.setdefault(a.name, {})[side.name] = side_build
                    for source in build.sources:
                        rel = os.path.relpath(source, side.root)
                        slots.append((side_build, len(tasks)))
                        tasks.append(Task(spec.module, a, side.name, source, rel, build.flags))
            if base_sha is not None:
                assert repo is not None  # a base commit is only ever read from the repo
                for rel, base_data in changed.items():
                    if rel.startswith(prefix) and verifier.is_cuda_source(rel):
                        after = (repo.root / rel).read_bytes() if (repo.root / rel).is_file() else b""
                        proof.promised += [(rel[len(prefix):], line, op) for line, op in promised(base_data or b"", after, targets, universe)]
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
    report.headers = headers
    return report


def _headers(path: Path, repo: Repo | None, target, lacking: list[str], includes: list[Path], python: str | None) -> HeaderSource:
    """The real third-party headers for the folders the flags name and the tree lacks (codemods.prove.headers)."""
    missing = f"third-party headers missing: {', '.join(lacking)} (absent or empty); a build needs the real headers, no stand-ins"
    hint = needs_hint(target, submodules_holding(target.root, lacking), target.root, lacking)
    try:
        headers = third_party_headers(repo, target, "", includes, python=python, fetch=True)
    except errors.BuildNeeds as exc:  # the release's wheel could not be downloaded
        raise errors.BuildNeeds(f"{missing}, and {exc.message}", where=str(path), hint=hint) from None
    if not headers.folders:
        raise errors.BuildNeeds(missing, where=str(path), hint=hint)
    return headers


def _with_headers(flags: tuple[str, ...], root: Path, lacking: list[str], folders: list[str]) -> tuple[str, ...]:
    """The flags with the include folders the tree lacks replaced, where the first of them stood, by `folders`."""
    gone = {str(root / rel) for rel in lacking}
    out: list[str] = []
    placed, index = False, 0
    while index < len(flags):
        flag = flags[index]
        folder, width = None, 1
        if flag in ("-isystem", "-I") and index + 1 < len(flags):
            folder, width = flags[index + 1], 2
        elif flag.startswith("-I"):
            folder = flag[2:]
        if folder is not None and os.path.normpath(folder) in gone:
            if not placed:
                out += [part for f in folders for part in ("-isystem", f)]
                placed = True
        else:
            out += flags[index:index + width]
        index += width
    return tuple(out)


def _side(name: str, root: Path, python_dir: str) -> Side:
    package = (root / python_dir) if python_dir not in ("", ".") else root
    links: dict[str, str] = {}
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
