"""FlashInfer's JIT cache: find and remove the stale builds of the modules a recipe changed.

Layout (flashinfer/jit/env.py): `$FLASHINFER_WORKSPACE_BASE/.cache/flashinfer/
<version>/<archs>/cached_ops/<module>`, with `~` as the default base. Only
those module folders are ever removed, and only when they resolve inside the
cache root.
"""

from __future__ import annotations

import os
import re
import shutil
from pathlib import Path

from codemods.core import errors

_NAME = re.compile(r"^[A-Za-z0-9_.+-]+$")


def cache_root(environ: dict[str, str] | None = None) -> Path:
    env = os.environ if environ is None else environ
    base = env.get("FLASHINFER_WORKSPACE_BASE") or str(Path.home())
    return Path(base) / ".cache" / "flashinfer"


def stale_builds(modules: list[str], version: str, root: Path) -> list[Path]:
    """The build folders of `modules` for FlashInfer `version`, in every arch folder."""
    if not version or not _NAME.match(version) or version in (".", ".."):
        raise errors.FileRefused(
            f"cannot tell the installed FlashInfer version ({version or 'unknown'})",
            where="--clear-jit-cache",
            hint=f"remove the folders by hand under {root}/<version>/<archs>/cached_ops/",
        )
    found = []
    version_dir = root / version
    if not version_dir.is_dir():
        return []
    for arch_dir in sorted(version_dir.iterdir()):
        for module in modules:
            if not _NAME.match(module) or module in (".", ".."):
                continue
            build = arch_dir / "cached_ops" / module
            if build.is_dir() and not build.is_symlink() and _inside(build, root):
                found.append(build)
    return found


def clear(builds: list[Path], root: Path) -> list[Path]:
    """Remove the given build folders (each checked again to lie inside root)."""
    removed = []
    for build in builds:
        if build.is_symlink() or not _inside(build, root):
            raise errors.FileRefused("is outside FlashInfer's JIT cache; not removed", where=str(build))
        shutil.rmtree(build)
        removed.append(build)
    return removed


def _inside(path: Path, root: Path) -> bool:
    real_root = root.resolve()
    real = path.resolve()
    return real != real_root and real_root in real.parents


PROJECT = "flashinfer"  # the project whose JIT builds this cache holds


def affected(modules: list[str], target, remove: bool, dry_run: bool) -> dict | None:
    """The cached builds of `modules` for the target's FlashInfer version: stale, removed or (dry run) to remove.

    None when the target is not FlashInfer or no JIT module is affected.
    """
    if not modules or target.project.name != PROJECT:
        return None
    root = cache_root()
    version = target.version()
    builds = stale_builds(modules, version, root) if version else []
    removed = clear(builds, root) if remove and not dry_run else []
    return {
        "modules": modules, "root": str(root), "version": version or None,
        "stale": [str(b) for b in builds], "removed": [str(b) for b in removed],
        "would_remove": [str(b) for b in builds] if remove and dry_run else [],
    }
