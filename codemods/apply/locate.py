"""Which git repository holds a folder: the one rule for when a folder gets a ShadowRepo, its listing, its provenance."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path
from typing import TYPE_CHECKING

from codemods.core import errors, remote_url
from codemods.core.lazy import LazyModule
from codemods.apply.git_safety import drop_inherited_git_variables, git_overrides, is_git_dir, own_dot_git, run_git, work_tree_top
from codemods.apply.shadow import ShadowRepo

if TYPE_CHECKING:
    import git
else:
    git = LazyModule("git")


def listed_files(folder: Path) -> list[str] | None:
    """`git ls-files -co --exclude-standard` in `folder`; None when it is no git work tree (or git is missing).

    Run as a plain git process, not through GitPython: a scan lists every
    submodule and nested repository this way and needs nothing else of git.
    """
    if work_tree_top(folder) is None:
        return None
    try:
        proc = run_git(["-C", str(folder), "ls-files", "-co", "--exclude-standard", "-z"])
    except (OSError, subprocess.SubprocessError):
        return None
    if proc.returncode != 0:
        return None
    return [os.fsdecode(name) for name in proc.stdout.split(b"\0") if name]


def work_tree_of(path: Path) -> git.Repo | None:
    """The git repository whose work tree holds path; None when codemod keeps a shadow repository for it instead.

    The one rule for "use a shadow repository": codemod has one for path
    already (patched outside git; a repository made around it later changes
    nothing), or path is in no git work tree, or it is ignored there. A bare
    repository is refused: it has no work tree to patch.
    """
    if ShadowRepo.recorded(path):
        return None
    found = _enclosing(path)
    if found is None:
        return None
    if found.bare:
        raise errors.RepoState("is a bare repository; there is no work tree to patch", where=str(path), hint="clone it and point --repo at the clone")
    return None if _ignored(found, path) else found


def _enclosing(path: Path) -> git.Repo | None:
    """The repository of the work tree holding path (own_dot_git's rules), its git commands in git_overrides()."""
    dot_git = own_dot_git(path)
    here = path.resolve()
    place = dot_git.parent if dot_git is not None else next((p for p in (here, *here.parents) if is_git_dir(p)), None)
    if place is None:
        return None
    if dot_git is not None:
        work_tree_top(path)  # git's own answer (GitPython ignores core.worktree beside a .git): refuses another folder
    drop_inherited_git_variables()
    try:
        found = git.Repo(place)
    except (git.InvalidGitRepositoryError, git.NoSuchPathError):
        return None
    except git.GitError as exc:
        raise errors.RepoState(f"git cannot read this repository: {exc}", where=str(path)) from None
    found.git.update_environment(**git_overrides())
    return found


def _ignored(found: git.Repo, path: Path) -> bool:
    work = found.working_tree_dir
    if work is None:  # a bare repository ignores nothing: it has no work tree
        return False
    rel = os.path.relpath(str(path.resolve()), str(Path(work).resolve()))
    if rel == ".":
        return False
    try:
        found.git.check_ignore("-q", "--", rel)
        return True
    except git.GitCommandError:
        return False


def provenance(path: Path) -> dict | None:
    """Where path sits in git, for reports: the work tree's top folder, and its remote, commit and branch.

    None outside git. Reads only; never fails a command (an unreadable repository gives None).
    """
    try:
        found = _enclosing(path)
        if found is None or found.bare or found.working_tree_dir is None:
            return None
        info: dict = {"root": str(Path(found.working_tree_dir).resolve())}
        try:
            info["revision"] = found.head.commit.hexsha
        except ValueError:
            return info
        info["branch"] = None if found.head.is_detached else found.active_branch.name
        remote = next(iter(found.remotes), None)
        if remote is not None:
            url = next(iter(remote.urls), "")
            info["remote"] = remote_url.public(url)  # never print credentials
        return info
    except (errors.CodemodError, git.GitError, OSError, ValueError):
        return None
