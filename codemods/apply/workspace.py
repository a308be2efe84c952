"""A tree a command works on (--repo PATH or --package NAME), resolved once and passed down.

The folder, the project expected there, the repository that records
codemod's work on it (the work tree's own, or a ShadowRepo under
$CODEMOD_HOME) and the state dir of its lock and journal are each found once,
on first use, and shared by every step of the command: one `run` opens its
repository once.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING

from codemods.core import errors
from codemods.core.lazy import LazyModule
from codemods.apply.files import require_folder, resolved

if TYPE_CHECKING:
    from codemods.apply.repo import Repo

# imported on first use: `codemod scan` resolves --package too, and needs neither GitPython nor libcst
git_repos = LazyModule("codemods.apply.repo")
locate = LazyModule("codemods.apply.locate")
shadow = LazyModule("codemods.apply.shadow")
packages = LazyModule("codemods.apply.packages")
recipes = LazyModule("codemods.recipes.load")


class Workspace:
    """One --repo or --package: the folder as the user named it, the project expected there, and its repository."""

    def __init__(self, path: Path, project: str | None = None, package: str | None = None, python: str | None = None):
        self.path = path
        self.project = project  # the project --package names; None for --repo (any the recipe knows)
        self.package = package
        self.python = python  # --python as given, for --package (printed commands carry it)
        self._repo: Repo | None = None
        self._repo_found = False
        self._targets: dict[tuple[str, ...], object] = {}

    @classmethod
    def of(cls, spot: Workspace | Path) -> Workspace:
        return spot if isinstance(spot, Workspace) else cls(Path(spot))

    @property
    def root(self) -> Path:
        return resolved(self.path)

    @property
    def repo(self) -> Repo | None:
        """The Repo or ShadowRepo recording this folder; None when it is outside git and has no record yet.

        Refuses (and is asked again next time) a missing folder, a bare
        repository or a repository with no commits.
        """
        if not self._repo_found:
            require_folder(self.path)
            found = locate.work_tree_of(self.path)
            if found is not None:
                self._repo = git_repos.Repo.of_work_tree(found, self.path)
            elif shadow.ShadowRepo.recorded(self.path):
                self._repo = shadow.ShadowRepo.open(self.path, create=False)
            self._repo_found = True
        return self._repo

    def open(self, *, create: bool = False) -> Repo:
        """The repository; without one, a new ShadowRepo when `create`, else the precise refusal."""
        repo = self.repo
        if repo is None:
            repo = self._repo = shadow.ShadowRepo.open(self.path, create=create)
        return repo

    @property
    def state_dir(self) -> Path | None:
        """Where the lock and journal live (None: not a tree codemod can use; the command then says why)."""
        try:
            return self.require_state_dir()
        except errors.CodemodError:
            return None

    def require_state_dir(self) -> Path:
        """Where the lock and journal live; refuses a tree codemod cannot use, saying why."""
        repo = self.repo
        return repo.state_dir if repo is not None else shadow.ShadowRepo.location(self.path) / "state"

    def detect(self, projects: Iterable[str]):
        """The recognised project and layout here: the --package's project, else the first of `projects` that matches."""
        names = tuple([self.project] if self.project else sorted(set(projects)))
        if names not in self._targets:
            self._targets[names] = recipes.detect(self.root, list(names))
        return self._targets[names]


def resolve(repos: list[Path], package_names: list[str], python: str | None) -> list[Workspace]:
    """The trees of --repo PATH and --package NAME (found in --python's site-packages), in that order."""
    found = [Workspace(path) for path in repos]
    found += [Workspace(packages.folder(name, python), packages.project_of(name), name, python) for name in package_names]
    return found


def open_repo(path: Path, *, create_shadow: bool = False) -> Repo:
    """The git repository that records codemod's work for the tree at path.

    A folder inside a git work tree uses that repository, unless the folder is
    ignored there (a venv inside a project). Any other folder (site-packages)
    gets a shadow repository under $CODEMOD_HOME, whose work tree is the folder
    itself: nothing is written into the folder but the patched files.
    A command resolves its trees once with a Workspace; this is the same
    lookup for a caller that has only a path.
    """
    return Workspace(path).open(create=create_shadow)
