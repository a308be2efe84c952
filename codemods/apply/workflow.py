"""The run/revert transaction's public names in one place (codemods.apply.run, .revert, .recovery), and verify's checks.

run and revert live in their own modules; this one keeps the names callers
import from it, and verify's repository-side checks until they move to prove/.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field, replace
from pathlib import Path

from codemods.core import errors
from codemods.recipes import load as recipes
from codemods.core.arch import DEFAULT_ARCHS, Arch
from codemods.gates import SourceError
from codemods.apply.commit_message import commit_message, describe_half_patch
from codemods.apply.recovery import recover_interrupted
from codemods.apply.repo import Repo, open_repo
from codemods.apply.revert import RevertResult, Status, revert, revert_many, status, status_many
from codemods.apply.run import RunResult, check_names, failed_error, prepare, run, run_many
from codemods.apply.workspace import Workspace
from codemods.plan.rewrites import intended_rewrites
from codemods.recipes.model import ProjectTree

__all__ = [
    "RevertResult", "RunResult", "Status", "Workspace", "check_names", "commit_message", "describe_half_patch",
    "failed_error", "prepare", "recover_interrupted", "revert", "revert_many", "run", "run_many", "status",
    "status_many", "verify_repo",
]


@dataclass
class HeaderSource:
    """Where verify finds the third-party headers (CUTLASS, spdlog) the layout's include roots should hold."""

    kind: str  # "tree" (every root is there), "include" (--include), "installed" (an installed package's), "none"
    folders: list[str] = field(default_factory=list)  # absolute folders searched after the tree's own roots
    missing: list[str] = field(default_factory=list)  # repo-relative include roots that do not exist
    installed: str = ""  # "flashinfer-python 0.6.3 at /site-packages", for kind "installed"
    submodules: list[str] = field(default_factory=list)  # submodules not initialised that hold missing roots


@dataclass
class VerifyContext:
    repo: Repo
    recipe: str
    base_sha: str
    targets: tuple[Arch, ...]
    expected: dict[str, int]
    headers: HeaderSource = field(default_factory=lambda: HeaderSource("tree"))
    intended: list[tuple[str, str, list[int]]] = field(default_factory=list)  # (change id, file, base lines) compared as made


def verify_repo(
    repo_path: Path,
    *,
    recipe_id: str | None = None,
    base: str | None = None,
    arch: Arch | None = None,
    universe: tuple[Arch, ...] = DEFAULT_ARCHS,
    jobs: int = 0,
    nvcc: str | None = "nvcc",
    recipes_dirs: list[Path] | None = None,
    includes: list[Path] | None = None,
):
    """Preprocess every CUDA file changed since the base, per arch, before and after (codemods.prove.preprocess).

    Third-party headers missing from the tree come from `includes`, else
    from an installed package of the same project and version, else are
    stood in by empty files (the same on both sides). A JIT module the
    change touches (or the recipe names) that is built for a target while a
    guard of its sources drops code there fails its target (half-patched).
    """
    from codemods.prove import preprocess as verifier
    from codemods.core.arch import family
    from codemods.gates import cuda_guard
    from codemods.apply.repo import codemod_home

    repo = open_repo(repo_path)
    records = [r for r in repo.applied() if recipe_id in (None, r.recipe)]
    if base:
        base_sha = repo.resolve_rev(base)
        recipe_name = recipe_id or (records[0].recipe if len(records) == 1 else "")
    elif records:
        record = next((r for r in records if r.current), records[0])
        base_sha, recipe_name = record.base_sha, record.recipe
    else:
        raise errors.RepoState(
            f"no applied recipe{' ' + recipe_id if recipe_id else ''} to verify",
            where=str(repo.root),
            hint="apply one with `codemod run`, or pass --base REV to compare the work tree with any revision",
        )
    recipe = None
    if recipe_name:
        try:
            recipe = recipes.find_recipe(recipe_name, recipes_dirs)
        except errors.CodemodError:
            if arch is None:
                raise errors.UnknownRecipe(f"recipe {recipe_name} is not known here", hint="pass --arch sm_120 to name the target") from None
    if arch is not None:
        targets = tuple(dict.fromkeys(family(arch, tuple(universe) + (arch,))))
    elif recipe is not None:
        targets = recipe.targets(universe)
    else:
        raise errors.RepoState("cannot tell the target arch", where=str(repo.root), hint="pass --arch sm_120")
    target = recipes.detect(repo_path.resolve())
    prefix = repo.rel(target.root)
    prefix = "" if prefix == "." else prefix + "/"
    include_dirs = [f"{prefix}{d}" for d in target.layout.include_dirs if (target.root / d).is_dir()]
    headers = _third_party_headers(repo, target, prefix, includes or [])
    changed: dict[str, tuple[bytes, bytes]] = {}
    expected: dict[str, int] = {a.name: 0 for a in targets}
    uncounted: set[str] = set()  # targets whose gained regions cannot be counted from the guards
    intended: list[tuple[str, str, list[int]]] = []
    touched = repo.changed_since(base_sha)
    for rel in touched:
        if not verifier.is_cuda_source(rel):
            continue
        path = repo.root / rel
        before = repo.show(base_sha, rel) or b""
        after = path.read_bytes() if path.is_file() else b""
        if before and after and rel.startswith(prefix):
            before, made = _intended(recipe_name, recipes_dirs, target, rel[len(prefix):], before, after)
            intended += [(change_id, rel, lines) for change_id, lines in made]
            if made and before == after:
                continue  # nothing but the intended change: the same bytes preprocess the same on every arch
        changed[rel] = (before, after)
        try:
            gates_before = cuda_guard.find(before, tuple(universe) + targets) if before else []
            gates_after = cuda_guard.find(after, tuple(universe) + targets) if after else []
        except SourceError:
            uncounted.update(expected)
            continue
        if len(gates_before) != len(gates_after):
            uncounted.update(expected)
            continue
        for old, new in zip(gates_before, gates_after):
            for a in targets:
                was, now = old.admits.admits(a), new.admits.admits(a)
                if old.text != new.text and (was is None or now is None):
                    uncounted.add(a.name)
                elif was is False and now:
                    expected[a.name] += 1
    for name in uncounted:
        expected.pop(name, None)
    modules = tuple(
        m for c in (recipe.changes if recipe is not None else ()) if c.project == target.project.name for m in c.jit_modules
    )
    kernels = verifier.empty_kernels(
        target.root, targets, tuple(universe), modules, tuple(rel[len(prefix):] for rel in touched if rel.startswith(prefix))
    )
    archs = tuple(dict.fromkeys(tuple(universe) + targets))
    report = verifier.verify(
        repo.root, changed, archs, targets, include_dirs, expected=expected, jobs=jobs,
        cache_dir=codemod_home() / "verify-cache", nvcc=nvcc,
        extra_includes=tuple(headers.folders), stand_ins=bool(headers.missing),
        half_patched=tuple(replace(k, file=prefix + k.file, spec=prefix + k.spec) for k in kernels),
    )
    return report, VerifyContext(repo, recipe_name, base_sha, targets, expected, headers, intended)


def _third_party_headers(repo: Repo, target: ProjectTree, prefix: str, includes: list[Path]) -> HeaderSource:
    """The layout's third-party include roots the tree lacks, and the folders that stand in for them."""
    missing = [d for d in _third_party_dirs(target) if not (target.root / d).is_dir()]
    for folder in includes:
        if not folder.is_dir():
            raise errors.RepoState("is not a folder", where=f"--include {folder}", hint="pass the folder that holds the headers, e.g. .../cutlass/include")
    source = HeaderSource("tree", missing=[prefix + d for d in missing])
    if includes:
        source.kind, source.folders = "include", [str(folder.resolve()) for folder in includes]
    elif missing:
        source.kind = "none"
        installed = _installed_headers(target)
        if installed is not None:
            source.kind, (source.installed, source.folders) = "installed", installed
    if missing:
        source.submodules = _submodules_holding(repo, source.missing)
    return source


def _third_party_dirs(target: ProjectTree) -> list[str]:
    """The layout's include roots other than the project's own include and csrc folders."""
    own = {target.layout.places.get("include"), target.layout.places.get("csrc")}
    return [d for d in target.layout.include_dirs if d not in own]


def _installed_headers(target: ProjectTree) -> tuple[str, list[str]] | None:
    """The third-party include folders of this interpreter's installed package of the same project and version."""
    from codemods.apply import packages

    version = target.version()
    if not version:
        return None
    try:
        site, dist, installed_version = packages.locate(target.project.name)
        installed = recipes.detect(site, [target.project.name])
    except errors.CodemodError:
        return None
    if installed_version != version or installed.root.resolve() == target.root.resolve():
        return None
    folders = [str((installed.root / d).resolve()) for d in _third_party_dirs(installed) if (installed.root / d).is_dir()]
    return (f"{dist} {installed_version} at {installed.root}", folders) if folders else None


def _submodules_holding(repo: Repo, roots: list[str]) -> list[str]:
    """The submodule paths of .gitmodules under which the (repo-relative) roots lie."""
    try:
        text = (repo.root / ".gitmodules").read_text(errors="replace")
    except OSError:
        return []
    paths = [match.strip() for match in re.findall(r"^\s*path\s*=\s*(.+)$", text, re.M)]
    return [p for p in paths if any(root == p or root.startswith(p.rstrip("/") + "/") for root in roots)]


def _intended(recipe_name: str, recipes_dirs, target, file: str, base: bytes, work: bytes):
    """The base with the recipe's host-side (edit-kind) changes that the work tree has, and which they are."""
    try:
        recipe = recipes.find_recipe(recipe_name, recipes_dirs) if recipe_name else None
    except errors.CodemodError:
        recipe = None
    return intended_rewrites(recipe, target, file, base, work) if recipe is not None else (base, [])
