"""`codemod verify` on a repository: the base, the changed CUDA files, the headers, then the preprocessor proof.

It finds the base (the applied recipe's, or `--base`), the target archs, the
changed files and how many regions each target must gain, the third-party
headers (codemods.prove.headers) and the JIT modules left half-patched
(codemods.audit.empty_kernels), and hands them to codemods.prove.preprocess.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from pathlib import Path

from codemods.apply.repo import Repo, codemod_home
from codemods.apply.workspace import open_repo
from codemods.audit import empty_kernels
from codemods.core import errors
from codemods.core.arch import DEFAULT_ARCHS, Arch, family
from codemods.gates import SourceError
from codemods.gates.cpp import cuda_guard
from codemods.prove import preprocess as verifier
from codemods.prove.headers import HeaderSource, third_party_headers
from codemods.recipes import load as recipes
from codemods.plan import rewrites


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
    python: str | None = None,
):
    """Preprocess every CUDA file changed since the base, per arch, before and after (codemods.prove.preprocess).

    Third-party headers missing from the tree come from `includes`, else
    from an installed package of the same project and version (in `python`),
    else from that release's wheel already in codemod's cache, else are
    stood in by empty files (the same on both sides): codemods.prove.headers. A JIT module the
    change touches (or the recipe names) that is built for a target while a
    guard of its sources drops code there fails its target (half-patched).
    """
    repo = open_repo(repo_path)
    records = [r for r in repo.applied() if recipe_id in (None, r.recipe) and not r.reverted]
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
    headers = third_party_headers(repo, target, prefix, includes or [], python=python)
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
    kernels = empty_kernels.find(
        target.root, targets, tuple(universe), modules, tuple(rel[len(prefix):] for rel in touched if rel.startswith(prefix))
    )
    archs = tuple(dict.fromkeys(tuple(universe) + targets))
    report = verifier.verify(
        repo.root, changed, archs, targets, include_dirs, expected=expected, jobs=jobs,
        cache_dir=codemod_home() / "verify-cache", nvcc=nvcc,
        extra_includes=tuple(headers.folders), stand_ins=bool(headers.missing),
        half_patched=tuple(replace(k, file=prefix + k.file, spec=prefix + k.spec) for k in kernels),
    )
    report.nothing_to_prove = not changed and not intended
    return report, VerifyContext(repo, recipe_name, base_sha, targets, expected, headers, intended)


def _intended(recipe_name: str, recipes_dirs, target, file: str, base: bytes, work: bytes):
    """The base with the recipe's host-side (edit-kind) changes that the work tree has, and which they are."""
    try:
        recipe = recipes.find_recipe(recipe_name, recipes_dirs) if recipe_name else None
    except errors.CodemodError:
        recipe = None
    return rewrites.intended_rewrites(recipe, target, file, base, work) if recipe is not None else (base, [])
