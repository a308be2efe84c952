"""Where `codemod verify` and `verify --build` find the third-party headers (CUTLASS, spdlog) a plain clone lacks.

A clone whose submodules are not initialised has empty `3rdparty/` folders.
The headers then come, first found wins, from:

1. `--include` folders;
2. an installed package of the same project and version in `--python` (or
   codemod's own Python): its wheel bundles them;
3. that release's wheel from PyPI, unpacked in codemod's cache
   (codemods.prove.header_wheels): taken from the cache when it is there,
   downloaded only for a build (`fetch`).

Else the preprocessor proof stands them in with empty files
(codemods.prove.preprocess); a build refuses, it needs the real headers.
Both proofs resolve them here, once.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from codemods.apply.repo import Repo
from codemods.core import errors
from codemods.prove import header_wheels
from codemods.recipes import load as recipes
from codemods.recipes.model import ProjectTree

# library -> (its version header, the macros of major, minor, patch)
_VERSION_HEADERS = {
    "CUTLASS": ("cutlass/version.h", ("CUTLASS_MAJOR", "CUTLASS_MINOR", "CUTLASS_PATCH")),
    "spdlog": ("spdlog/version.h", ("SPDLOG_VER_MAJOR", "SPDLOG_VER_MINOR", "SPDLOG_VER_PATCH")),
}


@dataclass
class HeaderSource:
    """Where verify finds the third-party headers (CUTLASS, spdlog) the layout's include roots should hold."""

    # "tree" (every root is there), "include" (--include), "installed" (an installed package's),
    # "downloaded" (the release's wheel from PyPI, in codemod's cache), "none"
    kind: str
    folders: list[str] = field(default_factory=list)  # absolute folders searched after the tree's own roots
    missing: list[str] = field(default_factory=list)  # repo-relative include roots that do not exist
    installed: str = ""  # "flashinfer-python 0.6.3 at /site-packages", for kind "installed"
    submodules: list[str] = field(default_factory=list)  # submodules not initialised that hold missing roots
    wheel: str = ""  # "flashinfer_python-0.6.3-py3-none-any.whl", for kind "downloaded"
    versions: str = ""  # "CUTLASS 4.2.1, spdlog 1.14.1", read from the folders' version headers

    def note(self) -> str:
        """One line saying where the headers came from (empty when the tree holds them or nothing does)."""
        versions = f" ({self.versions})" if self.versions else ""
        if self.kind == "include":
            return f"third-party headers from --include{versions}: {', '.join(self.folders)}"
        if self.kind == "installed":
            return f"third-party headers from the installed {self.installed}{versions}: {', '.join(self.folders)}"
        if self.kind == "downloaded":
            return f"third-party headers from {self.wheel}, downloaded from PyPI into codemod's cache{versions}: {', '.join(self.folders)}"
        return ""


def third_party_headers(
    repo: Repo | None, target: ProjectTree, prefix: str, includes: list[Path], *, python: str | None = None, fetch: bool = False,
) -> HeaderSource:
    """The layout's third-party include roots the tree lacks, and the folders that stand in for them.

    `repo`'s .gitmodules names the submodules holding them (`prefix`: the
    tree's folder in it); `fetch` downloads the release's wheel when no other
    source has them (a build: it refuses without the real headers). A
    package's bundled copy is not taken when the commit it was built from is
    in `repo` and pins those submodules at other commits than HEAD does.
    """
    root = repo.root if repo is not None else None
    missing = [d for d in third_party_dirs(target) if not (target.root / d).is_dir()]
    for folder in includes:
        if not folder.is_dir():
            raise errors.RepoState("is not a folder", where=f"--include {folder}", hint="pass the folder that holds the headers, e.g. .../cutlass/include")
    source = HeaderSource("tree", missing=[prefix + d for d in missing])
    if missing and root is not None:
        source.submodules = submodules_holding(root, source.missing)
    if includes:
        source.kind, source.folders = "include", [str(folder.resolve()) for folder in includes]
    elif missing:
        source.kind = "none"
        pins = _Pins(repo, source.submodules)
        installed = installed_headers(target, python, pins)
        if installed is not None:
            source.kind, (source.installed, source.folders) = "installed", installed
        else:
            released = released_headers(target, fetch, needs_hint(target, source.submodules, root, source.missing), pins)
            if released is not None:
                source.kind, (source.wheel, source.folders) = "downloaded", released
    source.versions = versions(source.folders)
    return source


def needs_hint(target: ProjectTree, submodules: list[str], root: Path | None, missing: Sequence[str] = ()) -> str:
    """What to do when a build finds no real third-party headers (`missing`: roots, when .gitmodules names none)."""
    version = target.version()
    submodules = submodules or sorted({"/".join(d.split("/")[:2]) for d in missing if d.startswith("3rdparty/")})
    ways = [f"git -C {root} submodule update --init {' '.join(submodules)}"] if submodules and root is not None else []
    ways += ["pass --include DIR for each missing include folder"]
    if version:
        ways += [f"pass --python of an environment with {_distribution(target)} {version} installed"]
    return "; or ".join(ways)


def third_party_dirs(target: ProjectTree) -> list[str]:
    """The layout's include roots other than the project's own include and csrc folders."""
    own = {target.layout.places.get("include"), target.layout.places.get("csrc")}
    return [d for d in target.layout.include_dirs if d not in own]


def installed_headers(target: ProjectTree, python: str | None = None, pins: _Pins | None = None) -> tuple[str, list[str]] | None:
    """The third-party include folders of the installed package of the same project and version (in `python`)."""
    from codemods.apply import packages

    version = target.version()
    if not version:
        return None
    try:
        site, dist, installed_version = packages.locate(target.project.name, python)
    except errors.CodemodError:
        return None
    if installed_version != version:
        return None
    package, folders = bundled(site, target)
    if package is None or not folders or (pins is not None and pins.differ(package)):
        return None
    return f"{dist} {installed_version} at {site}", folders


def released_headers(target: ProjectTree, fetch: bool, hint: str, pins: _Pins | None = None) -> tuple[str, list[str]] | None:
    """The third-party include folders of the tree's release wheel from PyPI: cached, or downloaded with `fetch`."""
    version = target.version()
    if not version:
        return None
    dist = _distribution(target)
    found = header_wheels.fetch(dist, version, hint) if fetch else header_wheels.unpacked(dist, version)
    if found is None:
        return None
    site, wheel = found
    package, folders = bundled(site, target)
    differ = pins.differ(package) if pins is not None and package is not None else ""
    if fetch and (not folders or differ):
        why = f"pins {differ}" if differ else "holds none of them"
        raise errors.BuildNeeds(f"{wheel}, downloaded from PyPI, {why}", where=str(site), hint=hint)
    return (wheel, folders) if folders and not differ else None


def bundled(site: Path, target: ProjectTree) -> tuple[ProjectTree | None, list[str]]:
    """The installed (or unpacked) package of the tree's project under `site`, and the third-party include folders it holds."""
    try:
        package = recipes.detect(site, [target.project.name])
    except errors.CodemodError:
        return None, []
    if package.root.resolve() == target.root.resolve():
        return None, []
    return package, [str((package.root / d).resolve()) for d in third_party_dirs(package) if (package.root / d).is_dir()]


class _Pins:
    """The submodule commits HEAD pins, against those of the commit a package was built from."""

    def __init__(self, repo: Repo | None, submodules: list[str]):
        self.repo, self.submodules = repo, submodules

    def differ(self, package: ProjectTree) -> str:
        """'3rdparty/cutlass at <HEAD's> (the package's commit <sha>: <its>)' for each submodule pinned otherwise; ''
        when they agree or cannot be compared (no build commit recorded, or that commit is not in the repository)."""
        commit = _build_commit(package)
        if self.repo is None or not self.submodules or not commit:
            return ""
        built = self.repo.gitlinks(commit, self.submodules)
        if built is None:
            return ""
        ours = self.repo.gitlinks("HEAD", self.submodules) or {}
        return ", ".join(
            f"{path} at {sha[:12]}, this tree at {ours.get(path, 'none')[:12]} (its build commit {commit[:12]})"
            for path, sha in built.items() if ours.get(path) != sha
        )


def _build_commit(package: ProjectTree) -> str:
    """The commit a package was built from, as its version file records it (FlashInfer's `__git_version__`)."""
    for rel in package.layout.version_files:
        try:
            text = (package.root / rel).read_text(errors="replace")
        except OSError:
            continue
        match = re.search(r"""^__git_version__\s*=\s*["']([0-9a-f]{40})["']""", text, re.M)
        if match:
            return match.group(1)
    return ""


def versions(folders: list[str]) -> str:
    """"CUTLASS 4.2.1, spdlog 1.14.1": the releases the folders' version headers name."""
    found = []
    for library, (header, macros) in _VERSION_HEADERS.items():
        for folder in folders:
            try:
                text = (Path(folder) / header).read_text(errors="replace")
            except OSError:
                continue
            numbers = [re.search(rf"^\s*#\s*define\s+{m}\s+(\d+)", text, re.M) for m in macros]
            if all(numbers):
                found.append(f"{library} {'.'.join(n.group(1) for n in numbers if n)}")
                break
    return ", ".join(found)


def submodules_holding(root: Path, roots: list[str]) -> list[str]:
    """The submodule paths of .gitmodules under which the (repo-relative) roots lie."""
    try:
        text = (root / ".gitmodules").read_text(errors="replace")
    except OSError:
        return []
    paths = [match.strip() for match in re.findall(r"^\s*path\s*=\s*(.+)$", text, re.M)]
    return [p for p in paths if any(r == p or r.startswith(p.rstrip("/") + "/") for r in roots)]


def _distribution(target: ProjectTree) -> str:
    from codemods.apply import packages

    return packages.distributions_for(target.project.name)[0]
