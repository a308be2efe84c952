"""Where `codemod verify` finds the third-party headers (CUTLASS, spdlog) a plain clone lacks.

A clone whose submodules are not initialised has empty `3rdparty/` folders.
The headers then come from `--include` folders, else from an installed
package of the same project and version (its wheel bundles them), else the
preprocessor proof stands them in with empty files (codemods.prove.preprocess).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

from codemods.apply.repo import Repo
from codemods.core import errors
from codemods.recipes import load as recipes
from codemods.recipes.model import ProjectTree


@dataclass
class HeaderSource:
    """Where verify finds the third-party headers (CUTLASS, spdlog) the layout's include roots should hold."""

    kind: str  # "tree" (every root is there), "include" (--include), "installed" (an installed package's), "none"
    folders: list[str] = field(default_factory=list)  # absolute folders searched after the tree's own roots
    missing: list[str] = field(default_factory=list)  # repo-relative include roots that do not exist
    installed: str = ""  # "flashinfer-python 0.6.3 at /site-packages", for kind "installed"
    submodules: list[str] = field(default_factory=list)  # submodules not initialised that hold missing roots


def third_party_headers(repo: Repo, target: ProjectTree, prefix: str, includes: list[Path]) -> HeaderSource:
    """The layout's third-party include roots the tree lacks, and the folders that stand in for them."""
    missing = [d for d in third_party_dirs(target) if not (target.root / d).is_dir()]
    for folder in includes:
        if not folder.is_dir():
            raise errors.RepoState("is not a folder", where=f"--include {folder}", hint="pass the folder that holds the headers, e.g. .../cutlass/include")
    source = HeaderSource("tree", missing=[prefix + d for d in missing])
    if includes:
        source.kind, source.folders = "include", [str(folder.resolve()) for folder in includes]
    elif missing:
        source.kind = "none"
        installed = installed_headers(target)
        if installed is not None:
            source.kind, (source.installed, source.folders) = "installed", installed
    if missing:
        source.submodules = submodules_holding(repo, source.missing)
    return source


def third_party_dirs(target: ProjectTree) -> list[str]:
    """The layout's include roots other than the project's own include and csrc folders."""
    own = {target.layout.places.get("include"), target.layout.places.get("csrc")}
    return [d for d in target.layout.include_dirs if d not in own]


def installed_headers(target: ProjectTree) -> tuple[str, list[str]] | None:
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
    folders = [str((installed.root / d).resolve()) for d in third_party_dirs(installed) if (installed.root / d).is_dir()]
    return (f"{dist} {installed_version} at {installed.root}", folders) if folders else None


def submodules_holding(repo: Repo, roots: list[str]) -> list[str]:
    """The submodule paths of .gitmodules under which the (repo-relative) roots lie."""
    try:
        text = (repo.root / ".gitmodules").read_text(errors="replace")
    except OSError:
        return []
    paths = [match.strip() for match in re.findall(r"^\s*path\s*=\s*(.+)$", text, re.M)]
    return [p for p in paths if any(root == p or root.startswith(p.rstrip("/") + "/") for root in roots)]
