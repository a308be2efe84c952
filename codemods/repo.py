"""The only module that talks to git: branches, one commit per change, status, revert.

Applied recipes are recorded in the commits themselves, as trailers:
`Codemod-Recipe: <id>`, `Codemod-Change: <change id>` and
`Codemod-Base: <branch>@<sha>` (or `<sha>` when HEAD was detached), so the
state survives clones and needs no side files.
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
from dataclasses import dataclass, field
from pathlib import Path

import git

from codemods import errors
from codemods.files import require_folder

TRAILER_RECIPE = "Codemod-Recipe"
TRAILER_CHANGE = "Codemod-Change"
TRAILER_BASE = "Codemod-Base"
TRAILER_FORCED = "Codemod-Forced"
_FALLBACK_IDENTITY = ("codemod", "codemod@localhost")


def branch_name(recipe_id: str) -> str:
    return f"codemod/{recipe_id}"


def trailers(message: str) -> dict[str, str]:
    found = {}
    for line in message.splitlines():
        m = re.match(r"^(Codemod-[A-Za-z]+):\s*(.+?)\s*$", line)
        if m:
            found[m.group(1)] = m.group(2)
    return found


@dataclass
class CodemodCommit:
    sha: str
    subject: str
    change: str
    recipe: str
    base: str


@dataclass
class Applied:
    """A recipe applied on a branch: its base and its commits (oldest first)."""

    recipe: str
    branch: str
    base_ref: str  # branch name, or "" when the base was a detached HEAD
    base_sha: str
    commits: list[CodemodCommit] = field(default_factory=list)
    foreign: list[tuple[str, str]] = field(default_factory=list)  # (sha, subject) of user commits on top
    current: bool = False


def codemod_home() -> Path:
    return Path(os.environ.get("CODEMOD_HOME") or Path.home() / ".cache" / "codemod")


def open_repo(path: Path, *, create_shadow: bool = False) -> "Repo":
    """The git repository that records codemod's work for the tree at path.

    A folder inside a git work tree uses that repository, unless the folder is
    ignored there (a venv inside a project). Any other folder (site-packages)
    gets a shadow repository under $CODEMOD_HOME, whose work tree is the folder
    itself: nothing is written into the folder but the patched files.
    """
    require_folder(path)
    found = _enclosing(path)
    if found is not None and found.bare:
        raise errors.RepoState("is a bare repository; there is no work tree to patch", where=str(path), hint="clone it and point --repo at the clone")
    if found is not None and not _ignored(found, path):
        return Repo(found, path)
    return ShadowRepo.open(path, create=create_shadow)


def refuse_unusable(path: Path) -> None:
    """Refuse early what no recipe can use: a bare repository, or a repository with no commits."""
    found = _enclosing(path)
    if found is None or _ignored_safe(found, path):
        return
    if found.bare:
        raise errors.RepoState("is a bare repository; there is no work tree to patch", where=str(path), hint="clone it and point --repo at the clone")
    try:
        found.head.commit
    except ValueError:
        raise errors.RepoState(
            "the repository has no commits yet",
            where=str(path),
            hint="commit the current tree first (git add -A && git commit -m base), so there is a base to return to",
        ) from None


def _ignored_safe(found: git.Repo, path: Path) -> bool:
    return not found.bare and _ignored(found, path)


def _enclosing(path: Path) -> git.Repo | None:
    try:
        return git.Repo(path, search_parent_directories=True)
    except (git.InvalidGitRepositoryError, git.NoSuchPathError):
        return None
    except git.GitError as exc:
        raise errors.RepoState(f"git cannot read this repository: {exc}", where=str(path)) from None


def _ignored(found: git.Repo, path: Path) -> bool:
    rel = os.path.relpath(path.resolve(), Path(found.working_tree_dir).resolve())
    if rel == ".":
        return False
    try:
        found.git.check_ignore("-q", "--", rel)
        return True
    except git.GitCommandError:
        return False


class Repo:
    """A git work tree that holds --repo."""

    shadow = False

    def __init__(self, git_repo: git.Repo, path: Path):
        self.git_repo = git_repo
        self.root = Path(git_repo.working_tree_dir).resolve()
        self.g = git_repo.git
        if not self.has_commits():
            raise errors.RepoState(
                "the repository has no commits yet",
                where=str(path),
                hint="commit the current tree first (git add -A && git commit -m base), so there is a base to return to",
            )

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
            t = trailers(commit.message)
            if TRAILER_RECIPE in t:
                base = t.get(TRAILER_BASE, "")
                ref, _, sha = base.rpartition("@") if "@" in base else ("", "", base)
                commits.append(CodemodCommit(commit.hexsha, commit.summary, t.get(TRAILER_CHANGE, ""), t[TRAILER_RECIPE], base))
                if record is None:
                    record = Applied(t[TRAILER_RECIPE], name, ref, sha)
                if commit.parents and commit.parents[0].hexsha == sha:
                    break
            elif record is None:
                foreign.append((commit.hexsha, commit.summary))
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

    # ------------------------------------------------------------ writing

    def _identity_env(self) -> dict[str, str]:
        env = {}
        reader = self.git_repo.config_reader()
        name = reader.get_value("user", "name", default="") or os.environ.get("GIT_AUTHOR_NAME", "")
        email = reader.get_value("user", "email", default="") or os.environ.get("GIT_AUTHOR_EMAIL", "")
        if not name or not email:
            env = {
                "GIT_AUTHOR_NAME": name or _FALLBACK_IDENTITY[0],
                "GIT_AUTHOR_EMAIL": email or _FALLBACK_IDENTITY[1],
                "GIT_COMMITTER_NAME": name or _FALLBACK_IDENTITY[0],
                "GIT_COMMITTER_EMAIL": email or _FALLBACK_IDENTITY[1],
            }
        return env

    def create_branch(self, name: str) -> None:
        """Branch from HEAD and check it out; uncommitted changes elsewhere come along untouched."""
        self.g.checkout("-b", name)

    def commit(self, rels: list[str], message: str) -> str:
        """Commit exactly rels (nothing else the user staged) and return the new sha."""
        self.g.add("--", *rels)
        env = self._identity_env()
        self.state_dir.mkdir(parents=True, exist_ok=True)
        message_file = self.state_dir / "COMMIT_MSG"
        message_file.write_text(message, encoding="utf-8")
        self.g.commit("--no-verify", "-q", "-F", str(message_file), "--only", "--", *rels, env=env or None)
        message_file.unlink()
        return self.git_repo.head.commit.hexsha

    def checkout(self, ref: str) -> None:
        self.g.checkout("-q", ref)

    def restore(self, rels: list[str]) -> None:
        """Put rels back to HEAD (used to roll back a failed run)."""
        if rels:
            self.g.checkout("-q", "HEAD", "--", *rels)

    def delete_branch(self, name: str) -> None:
        self.g.branch("-D", name)

    def revert_commits(self, shas: list[str]) -> None:
        """git revert each sha, newest first, with the default messages."""
        env = self._identity_env()
        for sha in reversed(shas):
            self.g.revert("--no-edit", sha, env=env or None)


class ShadowRepo(Repo):
    """A git repository under $CODEMOD_HOME whose work tree is a folder that has none (site-packages).

    It tracks only the files recipes touch: the first run commits them as the
    pristine base, and the usual branch/commit/revert workflow runs on top.
    """

    shadow = True

    def __init__(self, git_repo: git.Repo, path: Path, home: Path):
        self.home = home
        git_repo.git.update_environment(GIT_DIR=git_repo.git_dir, GIT_WORK_TREE=str(path))
        self.git_repo = git_repo
        self.root = path
        self.g = git_repo.git

    @classmethod
    def wanted(cls, path: Path) -> bool:
        """True when path is not in a git work tree, or is ignored by the one around it."""
        found = _enclosing(path)
        return found is None or (not found.bare and _ignored(found, path))

    def forget(self) -> None:
        """Drop codemod's record of this folder; the folder itself is not touched."""
        shutil.rmtree(self.home)

    @classmethod
    def location(cls, path: Path) -> Path:
        real = str(path.resolve())
        return codemod_home() / "shadow" / hashlib.sha256(real.encode()).hexdigest()[:16]

    @classmethod
    def open(cls, path: Path, *, create: bool) -> "ShadowRepo":
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
            home.mkdir(parents=True, exist_ok=True)
            tmp = home / f"git.tmp.{os.getpid()}"
            git.Git().init("-q", "-b", "main", "--bare", str(tmp))
            probe = git.Repo(tmp)
            with probe.config_writer() as cw:
                cw.set_value("core", "bare", "false")
                cw.set_value("core", "worktree", str(root))
                cw.set_value("status", "showUntrackedFiles", "no")
                cw.set_value("gc", "auto", "0")
            (home / "root.txt").write_text(str(root) + "\n", encoding="utf-8")
            os.replace(tmp, gitdir)
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
        branch, _ = (None, "") if not self.has_commits() else self.head()
        if self.has_commits() and branch != "main":
            return
        self.g.add("--", *rels)
        if self.has_commits() and not self.g.diff("--cached", "--name-only", "--", *rels).strip():
            return
        env = self._identity_env()
        self.g.commit("--no-verify", "-q", "--allow-empty", "-m", f"codemod base: {label}", "--", *rels, env=env or None)

    def tracked_files(self) -> list[str]:
        return [p for p in self.g.ls_files("-z").split("\0") if p]
