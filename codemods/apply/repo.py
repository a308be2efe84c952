"""The only module that talks to git: branches, one commit per change, status, revert.

Applied recipes are recorded in the commits themselves, as trailers
(codemods.apply.trailers), so the state survives clones and needs no side
files. `work_tree_of` is the one rule for when a folder gets a ShadowRepo.
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import subprocess
from pathlib import Path
from typing import TYPE_CHECKING

from codemods.core import errors
from codemods.core.lazy import LazyModule
from codemods.apply import journal
from codemods.apply.trailers import (  # noqa: F401  (the names callers import from here)
    TRAILER_BASE, TRAILER_CHANGE, TRAILER_FORCED, TRAILER_RECIPE, Applied, CodemodCommit, trailers,
)

if TYPE_CHECKING:
    import git
else:
    git = LazyModule("git")  # GitPython: `codemod scan` lists files with git itself and never needs it

_FALLBACK_IDENTITY = ("codemod", "codemod@localhost")


def branch_name(recipe_id: str) -> str:
    return f"codemod/{recipe_id}"


def bad_branch_name(name: str) -> str | None:
    """Why `name` cannot be a branch, by git's own rules (`git check-ref-format`); None when it can."""
    if not name or name.startswith("-"):
        return "a branch name cannot be empty or start with '-'"
    if name.startswith("refs/"):
        return "give the branch's short name (codemod/x), not a full ref (refs/heads/...)"
    if name == "HEAD" or "\n" in name:
        return "not a usable branch name"
    try:
        git.Git().check_ref_format(f"refs/heads/{name}")
    except git.GitCommandError:
        return "git does not accept it as a branch name (see `git help check-ref-format`)"
    return None


# What git leaves in the git dir while an operation waits for the user, and how to get out of it.
_IN_PROGRESS = (
    ("MERGE_HEAD", "a merge", "git merge --continue", "git merge --abort"),
    ("CHERRY_PICK_HEAD", "a cherry-pick", "git cherry-pick --continue", "git cherry-pick --abort"),
    ("REVERT_HEAD", "a revert", "git revert --continue", "git revert --abort"),
    ("rebase-merge", "a rebase", "git rebase --continue", "git rebase --abort"),
    ("rebase-apply", "a rebase or `git am`", "git rebase --continue / git am --continue", "git rebase --abort / git am --abort"),
    ("BISECT_LOG", "a bisect", "git bisect reset", "git bisect reset"),
)
_GIT_LOCKS = ("index.lock", "HEAD.lock", "packed-refs.lock", "config.lock", "shallow.lock")


def _no_hooks_env() -> dict[str, str]:
    """Environment that turns off the user's hooks for codemod's own git commands (one rule for all of them)."""
    count = int(os.environ.get("GIT_CONFIG_COUNT", "0") or 0)
    return {
        "GIT_CONFIG_COUNT": str(count + 1),
        f"GIT_CONFIG_KEY_{count}": "core.hooksPath",
        f"GIT_CONFIG_VALUE_{count}": os.devnull,
    }


def _git_failure(action: str, exc: git.GitCommandError, where: Path) -> errors.CodemodError:
    stderr = (exc.stderr or "").strip().removeprefix("stderr:").strip().strip("'").strip()
    first = next((line.strip() for line in stderr.splitlines() if line.strip()), f"exit status {exc.status}")
    if "sign" in stderr.lower() or "gpg" in stderr.lower():
        hint = (
            "codemod signs its commits as your git config says (commit.gpgsign); make your key usable, "
            "or turn signing off for this repository (git config commit.gpgsign false), then run again"
        )
    else:
        hint = "nothing was left half-done; fix the cause git names, then run again"
    return errors.RepoState(f"git {action} failed: {first}", where=str(where), hint=hint)


def codemod_home() -> Path:
    return Path(os.environ.get("CODEMOD_HOME") or Path.home() / ".cache" / "codemod")


def work_tree_top(folder: Path) -> Path | None:
    """The top of the git work tree `folder` is in; None when git cannot tell (or is missing)."""
    try:
        proc = subprocess.run(
            ["git", "-C", str(folder), "rev-parse", "--show-toplevel"], capture_output=True, timeout=120
        )
    except (OSError, subprocess.SubprocessError):
        return None
    if proc.returncode != 0 or not proc.stdout.strip():
        return None
    return Path(os.fsdecode(proc.stdout.rstrip(b"\r\n"))).resolve()


def listed_files(folder: Path) -> list[str] | None:
    """`git ls-files -co --exclude-standard` in `folder`; None when it is no git work tree (or git is missing).

    Run as a plain git process, not through GitPython: a scan lists every
    submodule and nested repository this way and needs nothing else of git.
    """
    try:
        proc = subprocess.run(
            ["git", "-C", str(folder), "ls-files", "-co", "--exclude-standard", "-z"],
            capture_output=True,
            timeout=120,
        )
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
    try:
        return git.Repo(path, search_parent_directories=True)
    except (git.InvalidGitRepositoryError, git.NoSuchPathError):
        return None
    except git.GitError as exc:
        raise errors.RepoState(f"git cannot read this repository: {exc}", where=str(path)) from None


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


def _text(value: str | bytes) -> str:
    """A commit's message or summary: GitPython types it str or bytes."""
    return value if isinstance(value, str) else value.decode("utf-8", "replace")


class Repo:
    """A git work tree that holds --repo."""

    ready_step = "repo-ready"  # the journal checkpoint once the repository is open for a run

    def __init__(self, git_repo: git.Repo, root: Path, **environment: str):
        self.git_repo = git_repo
        self.root = root
        self.g = git_repo.git
        self.g.update_environment(**environment, **_no_hooks_env())

    @classmethod
    def of_work_tree(cls, git_repo: git.Repo, path: Path) -> Repo:
        """The work tree's repository; refused when it has no commits (there is no base to return to)."""
        work = git_repo.working_tree_dir
        if work is None:
            raise errors.RepoState("a bare repository has no work tree to change", where=str(path))
        repo = cls(git_repo, Path(work).resolve())
        if not repo.has_commits():
            raise errors.RepoState(
                "the repository has no commits yet",
                where=str(path),
                hint="commit the current tree first (git add -A && git commit -m base), so there is a base to return to",
            )
        return repo

    def has_commits(self) -> bool:
        try:
            self.git_repo.head.commit
            return True
        except ValueError:
            return False

    @property
    def key(self) -> str:
        """Identity of the repository: two targets with the same key share branches."""
        return str(Path(self.git_repo.git_dir).resolve())

    @property
    def state_dir(self) -> Path:
        """Where codemod keeps its lock and journal: inside the git dir, never in the work tree."""
        return Path(self.git_repo.git_dir) / "codemod"

    # ------------------------------------------------------------ reading

    def git_locks(self) -> list[Path]:
        """git's own lock files present now (a running git, or one that died holding them)."""
        dirs = dict.fromkeys([Path(self.git_repo.git_dir), Path(self.git_repo.common_dir)])
        found = [d / name for d in dirs for name in _GIT_LOCKS if (d / name).exists()]
        heads = Path(self.git_repo.common_dir) / "refs" / "heads"
        if heads.is_dir():
            found += sorted(heads.rglob("*.lock"))
        return found

    def refuse_busy(self) -> None:
        """Refuse (exit 5) while git itself is mid-operation: a merge, rebase, cherry-pick, revert or bisect, or a lock."""
        git_dir = Path(self.git_repo.git_dir)
        for name, what, finish, abort in _IN_PROGRESS:
            if (git_dir / name).exists():
                raise errors.RepoState(
                    f"{what} is in progress ({name} exists); codemod will not touch the repository in the middle of it",
                    where=str(self.root),
                    hint=f"finish it ({finish}) or abort it ({abort}), then run again",
                )
        locks = self.git_locks()
        if locks:
            raise errors.RepoState(
                f"{locks[0]} exists: another git process seems to be running in this repository",
                where=str(self.root),
                hint="wait for it to finish; if no git process is running (one crashed earlier), "
                f"remove the file (rm '{locks[0]}'), then run again",
            )

    def rel(self, path: Path) -> str:
        return Path(os.path.relpath(path.resolve(), self.root)).as_posix()

    def head(self) -> tuple[str | None, str]:
        """(branch name or None when detached, commit sha)."""
        sha = self.git_repo.head.commit.hexsha
        if self.git_repo.head.is_detached:
            return None, sha
        return self.git_repo.active_branch.name, sha

    def dirty(self, rels: list[str]) -> list[str]:
        """Which of rels have staged, unstaged or untracked changes."""
        if not rels:
            return []
        out = self.g.status("--porcelain=v1", "-z", "--untracked-files=all", "--", *rels)
        found = []
        for entry in out.split("\0"):
            if len(entry) > 3:
                found.append(entry[3:])
        return found

    def tracked(self, rel: str) -> bool:
        return bool(self.g.ls_files("--", rel).strip())

    def branch_exists(self, name: str) -> bool:
        return name in [h.name for h in self.git_repo.heads]

    def applied(self) -> list[Applied]:
        """Every codemod branch in the repo, read from its trailers."""
        found = []
        current = None if self.git_repo.head.is_detached else self.git_repo.active_branch.name
        for head in self.git_repo.heads:
            record = self._read_branch(head.name)
            if record:
                record.current = head.name == current
                found.append(record)
        return found

    def _read_branch(self, name: str) -> Applied | None:
        commits: list[CodemodCommit] = []
        foreign: list[tuple[str, str]] = []
        record: Applied | None = None
        for commit in self.git_repo.iter_commits(name, max_count=200, first_parent=True):
            t = trailers(_text(commit.message))
            if TRAILER_RECIPE in t:
                base = t.get(TRAILER_BASE, "")
                ref, _, sha = base.rpartition("@") if "@" in base else ("", "", base)
                commits.append(CodemodCommit(commit.hexsha, _text(commit.summary), t.get(TRAILER_CHANGE, ""), t[TRAILER_RECIPE], base))
                if record is None:
                    record = Applied(t[TRAILER_RECIPE], name, ref, sha)
                if commit.parents and commit.parents[0].hexsha == sha:
                    break
            elif record is None:
                foreign.append((commit.hexsha, _text(commit.summary)))
            else:
                break
        if record is None:
            return None
        record.commits = list(reversed(commits))
        record.foreign = foreign
        return record

    def changed_files(self, base: str, tip: str) -> list[str]:
        out = self.g.diff("--name-only", "-z", base, tip)
        return [p for p in out.split("\0") if p]

    def changed_since(self, base: str) -> list[str]:
        """Files whose work-tree content differs from `base` (committed or not)."""
        out = self.g.diff("--name-only", "-z", base, "--")
        return [p for p in out.split("\0") if p]

    def show(self, rev: str, rel: str) -> bytes | None:
        """The bytes of rel at rev, or None when it did not exist there."""
        try:
            blob = self.git_repo.commit(rev).tree / rel
        except KeyError:
            return None
        return blob.data_stream.read()

    def resolve_rev(self, rev: str) -> str:
        try:
            return self.git_repo.commit(rev).hexsha
        except (git.BadName, ValueError):
            raise errors.RepoState(f"unknown revision {rev!r}", where=str(self.root), hint="pass a branch, tag or commit sha to --base") from None

    def drift(self) -> list[str]:
        """Files changed behind codemod's back; in a git work tree that is the user's own work, so none."""
        return []

    def refuse_changed(self, dirty: list[str], head_branch: str | None) -> None:
        """Refuse a run over uncommitted changes in the files it would edit."""
        if dirty:
            raise errors.DirtyTree("uncommitted changes in files this recipe edits: " + ", ".join(dirty), where=str(self.root))

    def refuse_changed_for_revert(self, dirty: list[str], recipe_id: str) -> None:
        """Refuse a revert over uncommitted changes in the files the recipe changed."""
        if dirty:
            raise errors.DirtyTree(
                "uncommitted changes in files the recipe changed: " + ", ".join(dirty),
                where=str(self.root),
                hint="commit or stash them first; revert never discards your edits",
            )

    # ------------------------------------------------------------ writing

    def ensure_base(self, rels: list[str], label: str) -> None:
        """A git work tree's base is its own history: nothing to record."""

    def forget(self, dry_run: bool = False) -> None:
        """Only a folder outside git has a record of codemod's to forget."""
        raise errors.RevertRefused("--forget only applies to folders outside git (installed packages)", where=str(self.root))

    def _identity_env(self) -> dict[str, str]:
        env: dict[str, str] = {}
        reader = self.git_repo.config_reader()
        name = str(reader.get_value("user", "name", default="")) or os.environ.get("GIT_AUTHOR_NAME", "")
        email = str(reader.get_value("user", "email", default="")) or os.environ.get("GIT_AUTHOR_EMAIL", "")
        if not name or not email:
            env = {
                "GIT_AUTHOR_NAME": name or _FALLBACK_IDENTITY[0],
                "GIT_AUTHOR_EMAIL": email or _FALLBACK_IDENTITY[1],
                "GIT_COMMITTER_NAME": name or _FALLBACK_IDENTITY[0],
                "GIT_COMMITTER_EMAIL": email or _FALLBACK_IDENTITY[1],
            }
        return env

    def _git(self, action: str, *args, **kwargs) -> str:
        """Run one git command of codemod's own; a failure is a RepoState error quoting git, not a traceback."""
        try:
            return getattr(self.g, action)(*args, **kwargs)
        except git.GitCommandError as exc:
            raise _git_failure(action, exc, self.root) from None

    def create_branch(self, name: str) -> None:
        """Branch from HEAD and check it out; uncommitted changes elsewhere come along untouched."""
        self._git("checkout", "-q", "-b", name, "--")

    def commit(self, rels: list[str], message: str) -> str:
        """Commit exactly rels (nothing else the user staged) and return the new sha."""
        self._git("add", "--", *rels)
        env = self._identity_env()
        self.state_dir.mkdir(parents=True, exist_ok=True)
        message_file = self.state_dir / "COMMIT_MSG"
        message_file.write_text(message, encoding="utf-8")
        self._git("commit", "--no-verify", "-q", "-F", str(message_file), "--only", "--", *rels, env=env or None)
        message_file.unlink()
        return self.git_repo.head.commit.hexsha

    def checkout(self, ref: str) -> None:
        self._git("checkout", "-q", ref, "--")

    def restore(self, rels: list[str]) -> None:
        """Put rels back to HEAD (used to roll back a failed run)."""
        if rels:
            self._git("checkout", "-q", "HEAD", "--", *rels)

    def delete_branch(self, name: str) -> None:
        self._git("branch", "-D", name)

    def revert_commits(self, shas: list[str]) -> None:
        """git revert each sha, newest first, with the default messages; all or none.

        When a revert conflicts with a later commit, git's revert is aborted and
        HEAD goes back to where it was (`reset --keep` keeps unrelated edits),
        then the conflict is refused naming the commit and the files.
        """
        env = self._identity_env()
        start = self.git_repo.head.commit.hexsha
        for sha in reversed(shas):
            try:
                self.g.revert("--no-edit", sha, env=env or None)
            except git.GitCommandError as exc:
                conflicted = [p for p in self.g.diff("--name-only", "--diff-filter=U").splitlines() if p]
                for undo in (("revert", "--abort"), ("reset", "-q", "--keep", start)):
                    try:
                        getattr(self.g, undo[0])(*undo[1:])
                    except git.GitCommandError:
                        pass
                if not conflicted:
                    raise _git_failure("revert", exc, self.root) from None
                raise errors.RevertRefused(
                    f"undoing codemod's commit {sha[:10]} conflicts with a later commit in {', '.join(conflicted)}; "
                    "nothing was reverted",
                    where=str(self.root),
                    hint=f"revert it by hand (git revert {sha[:10]}) and resolve the conflict, "
                    "or move your commits off the codemod branch and revert without --keep-commits",
                ) from None


class ShadowRepo(Repo):
    """A git repository under $CODEMOD_HOME whose work tree is a folder that has none (site-packages).

    It tracks only the files recipes touch: the first run commits them as the
    pristine base, and the usual branch/commit/revert workflow runs on top.
    """

    ready_step = "shadow-ready"

    def __init__(self, git_repo: git.Repo, root: Path, home: Path):
        super().__init__(git_repo, root, GIT_DIR=str(git_repo.git_dir), GIT_WORK_TREE=str(root))
        self.home = home

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
            raise errors.DirtyTree(
                f"changed since codemod recorded them on {head_branch}: " + ", ".join(dirty),
                where=str(self.root),
                hint="the package was probably reinstalled or upgraded; `codemod status` shows the record, "
                "`codemod revert RECIPE --repo PATH --forget` drops it without touching the files",
            )

    def refuse_changed_for_revert(self, dirty: list[str], recipe_id: str) -> None:
        if dirty:
            raise errors.RevertRefused(
                "changed since codemod applied the recipe: " + ", ".join(dirty),
                where=str(self.root),
                hint="the package was probably reinstalled or upgraded, so there is nothing of codemod's to take out; "
                f"`codemod revert {recipe_id} --repo PATH --forget` drops codemod's record without touching the files",
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
                git.Git().init("-q", "-b", "main", "--bare", str(tmp))
                config = git.Git()
                for key, value in (("core.bare", "false"), ("core.worktree", str(root)),
                                   ("status.showUntrackedFiles", "no"), ("gc.auto", "0")):
                    config.config("--file", str(tmp / "config"), key, value)
                (home / "root.txt").write_text(str(root) + "\n", encoding="utf-8")
                os.replace(tmp, gitdir)
            except (OSError, git.GitCommandError) as exc:
                raise errors.FileRefused(
                    f"cannot keep codemod's record of this folder under $CODEMOD_HOME: {(getattr(exc, 'strerror', None) or str(exc)).strip().splitlines()[0]}",
                    where=str(codemod_home()),
                    hint="set CODEMOD_HOME to a writable folder (default ~/.cache/codemod), then run again",
                ) from None
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
        self.g.add("--", *rels)
        if self.has_commits() and not self.g.diff("--cached", "--name-only", "--", *rels).strip():
            return
        env = self._identity_env()
        self._git("commit", "--no-verify", "-q", "--allow-empty", "-m", f"codemod base: {label}", "--", *rels, env=env or None)

    def tracked_files(self) -> list[str]:
        return [p for p in self.g.ls_files("-z").split("\0") if p]


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
            info["remote"] = re.sub(r"//[^/@]+@", "//", url)  # never print credentials
        return info
    except (errors.CodemodError, git.GitError, OSError, ValueError):
        return None
