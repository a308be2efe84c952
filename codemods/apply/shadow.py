"""The shadow repository: codemod's own git record of a folder that is in no git work tree (site-packages)."""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
from pathlib import Path
from typing import TYPE_CHECKING

from codemods.core import errors
from codemods.core.commands import shell
from codemods.core.lazy import LazyModule
from codemods.apply.git_safety import drop_inherited_git_variables, SHADOW_CONFIG, SHADOW_ENVIRONMENT, checked, run_git, shadow_attributes
from codemods.apply import journal
from codemods.apply.repo import FALLBACK_IDENTITY, Repo, codemod_home

if TYPE_CHECKING:
    import git
else:
    git = LazyModule("git")


class ShadowRepo(Repo):
    """A git repository under $CODEMOD_HOME whose work tree is a folder that has none (site-packages).

    It tracks only the files recipes touch: the first run commits them as the
    pristine base, and the usual branch/commit/revert workflow runs on top.
    """

    ready_step = "shadow-ready"

    def __init__(self, git_repo: git.Repo, root: Path, home: Path):
        super().__init__(git_repo, root, GIT_DIR=str(git_repo.git_dir), GIT_WORK_TREE=str(root), **SHADOW_ENVIRONMENT)
        self.home = home

    def checked_out_elsewhere(self) -> dict[str, Path]:
        """A shadow repository has one work tree, the folder."""
        return {}

    def _identity_env(self) -> dict[str, str]:
        """Always explicit: the shadow's git reads none of the user's config, where user.name would be."""
        reader = self.git_repo.config_reader()
        name = os.environ.get("GIT_AUTHOR_NAME") or str(reader.get_value("user", "name", default="")) or FALLBACK_IDENTITY[0]
        email = os.environ.get("GIT_AUTHOR_EMAIL") or str(reader.get_value("user", "email", default="")) or FALLBACK_IDENTITY[1]
        return {"GIT_AUTHOR_NAME": name, "GIT_AUTHOR_EMAIL": email, "GIT_COMMITTER_NAME": name, "GIT_COMMITTER_EMAIL": email}

    @classmethod
    def recorded(cls, path: Path) -> bool:
        """codemod has a shadow repository for this folder (keyed by its real path)."""
        try:
            return cls.location(path).joinpath("git").is_dir()
        except (OSError, RuntimeError):
            return False

    def forget(self, dry_run: bool = False) -> None:
        """Drop codemod's record of this folder; the folder itself is not touched."""
        if not dry_run:
            shutil.rmtree(self.home)

    def drift(self) -> list[str]:
        """The recorded files that differ from the record: the package was reinstalled or upgraded."""
        return self.dirty(self.tracked_files())

    def refuse_changed(self, dirty: list[str], head_branch: str | None) -> None:
        if dirty:
            recipe = next((a.recipe for a in self.applied() if a.branch == head_branch), "RECIPE")
            raise errors.DirtyTree(
                f"changed since codemod recorded them on {head_branch}: " + ", ".join(dirty),
                where=str(self.root),
                hint=f"the package was probably reinstalled or upgraded; `{shell('codemod', 'status', '--repo', str(self.root))}` "
                f"shows the record, `{shell('codemod', 'revert', recipe, '--forget', '--repo', str(self.root))}` drops it "
                "without touching the files",
            )

    def refuse_changed_for_revert(self, dirty: list[str], recipe_id: str) -> None:
        if dirty:
            raise errors.RevertRefused(
                "changed since codemod applied the recipe: " + ", ".join(dirty),
                where=str(self.root),
                hint="the package was probably reinstalled or upgraded, so there is nothing of codemod's to take out; "
                f"`{shell('codemod', 'revert', recipe_id, '--forget', '--repo', str(self.root))}` drops codemod's record "
                "without touching the files",
            )

    @classmethod
    def location(cls, path: Path) -> Path:
        real = str(path.resolve())
        return codemod_home() / "shadow" / hashlib.sha256(real.encode()).hexdigest()[:16]

    @classmethod
    def open(cls, path: Path, *, create: bool) -> ShadowRepo:
        root = path.resolve()
        home = cls.location(root)
        gitdir = home / "git"
        if not gitdir.is_dir():
            if not create:
                raise errors.RepoState(
                    "not inside a git work tree, and codemod has no record of it",
                    where=str(path),
                    hint="nothing is applied here; `codemod run RECIPE --repo PATH` records the pristine files first",
                )
            if "\n" in str(root) or "\r" in str(root):  # root.txt and git's config hold it on one line
                raise errors.FileRefused(
                    "the path has a line break, which codemod cannot record",
                    where=repr(str(path)),
                    hint="rename the folder, or reach it through a symlink whose path has no line break",
                )
            try:
                home.mkdir(parents=True, exist_ok=True)
                tmp = home / f"git.tmp.{os.getpid()}"
                checked(run_git(["init", "-q", "--template=", "-b", "main", "--bare", str(tmp)], extra=SHADOW_ENVIRONMENT))
                for key, value in (("core.bare", "false"), ("core.worktree", str(root)), *SHADOW_CONFIG):
                    checked(run_git(["config", "--file", str(tmp / "config"), key, value], extra=SHADOW_ENVIRONMENT))
                shadow_attributes(tmp)
                (home / "root.txt").write_text(str(root) + "\n", encoding="utf-8")
                os.replace(tmp, gitdir)
            except (OSError, subprocess.SubprocessError) as exc:
                raise errors.FileRefused(
                    f"cannot keep codemod's record of this folder under $CODEMOD_HOME: {(getattr(exc, 'strerror', None) or str(exc)).strip().splitlines()[0]}",
                    where=str(codemod_home()),
                    hint="set CODEMOD_HOME to a writable folder (default ~/.cache/codemod), then run again",
                ) from None
        try:
            shadow_attributes(gitdir)  # a record made by an older codemod gets them too
        except OSError:
            pass  # a read-only record: `status` still reads it; a run then fails on its own write
        drop_inherited_git_variables()
        return cls(git.Repo(gitdir), root, home)

    @property
    def state_dir(self) -> Path:
        return self.home / "state"

    def ensure_base(self, rels: list[str], label: str) -> None:
        """Record the pristine bytes of rels on main before anything is patched.

        Only while no codemod branch is checked out: then any difference between
        the files and main is an install or upgrade of the package, and becomes
        the new base.
        """
        self._record_base(rels, label)
        journal.checkpoint("base-recorded")

    def _record_base(self, rels: list[str], label: str) -> None:
        branch, _ = (None, "") if not self.has_commits() else self.head()
        if self.has_commits() and branch != "main":
            return
        for rel in rels:
            nested = next((p for p in (self.root / rel).parents if p != self.root and self.root in p.parents and (p / ".git").exists()), None)
            if nested is not None:
                raise errors.RepoState(
                    f"{nested / '.git'}: the installed files hold a git repository of their own (a wheel or archive shipped it); "
                    "codemod records installed packages in its own repository and will not use or record through that one",
                    where=str(self.root / rel),
                    hint=f"remove it (rm -rf '{nested / '.git'}'); it is no part of the package's code; then run again",
                )
        self.g.add("-f", "--", *rels)  # -f: the folder's own .gitignore says nothing about codemod's record
        if self.has_commits() and not self.g.diff("--no-ext-diff", "--no-textconv", "--cached", "--name-only", "--", *rels).strip():
            return
        env = self._identity_env()
        self._git("commit", "--no-verify", "-q", "--allow-empty", "-m", f"codemod base: {label}", "--", *rels, env=env or None)

    def tracked_files(self) -> list[str]:
        return [p for p in self.g.ls_files("-z").split("\0") if p]
