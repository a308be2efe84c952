"""The git layer's commands (with codemods.apply.git_safety, the only code that runs git): branches, one commit per change, status, revert.

Applied recipes are recorded in the commits themselves, as trailers
(codemods.apply.trailers), so the state survives clones and needs no side
files. Which repository holds a folder is codemods.apply.locate's; the
shadow repository of a folder outside git is codemods.apply.shadow's.
"""

from __future__ import annotations

import errno
import os
import signal
import subprocess
from pathlib import Path
from typing import TYPE_CHECKING

from codemods.core import errors
from codemods.core.commands import shell
from codemods.core.lazy import LazyModule
from codemods.apply.git_safety import (
    driver_overrides, git_overrides,
    run_git,
)
from codemods.apply.trailers import (  # noqa: F401  (the names callers import from here)
    TRAILER_BASE, TRAILER_CHANGE, TRAILER_FORCED, TRAILER_RECIPE, Applied, CodemodCommit, FileChange, read_branch, trailers,
    TRAILER_REVERTS,
)

if TYPE_CHECKING:
    import git
else:
    git = LazyModule("git")  # GitPython: `codemod scan` lists files with git itself and never needs it

FALLBACK_IDENTITY = ("codemod", "codemod@localhost")


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
        accepted = run_git(["check-ref-format", f"refs/heads/{name}"]).returncode == 0
    except (OSError, subprocess.SubprocessError):
        accepted = True  # no git: the run says so when it needs git
    return None if accepted else "git does not accept it as a branch name (see `git help check-ref-format`)"


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


def _git_failure(action: str, exc: git.GitCommandError, where: Path) -> errors.CodemodError:
    action = action.replace("_", "-")
    stderr = (exc.stderr or "").strip().removeprefix("stderr:").strip().strip("'").strip()
    first = next((line.strip() for line in stderr.splitlines() if line.strip()), f"exit status {exc.status}")
    full = _out_of_room(exc.status, stderr)
    if full:
        return errors.FileRefused(
            f"git {action} failed: {full} ({first})",
            where=str(where),
            hint="make room on that disk (or raise the limit), then run again",
        )
    hint = "fix the cause git names, then run again"
    return errors.RepoState(f"git {action} failed: {first}", where=str(where), hint=hint)


def _out_of_room(status, stderr: str) -> str:
    """Why git could not write, when it is the disk or a limit rather than git: the words for it, else ""."""
    if status in (-signal.SIGXFSZ, 128 + signal.SIGXFSZ) or "File too large" in stderr:
        return "a file grew past the file size limit (`ulimit -f`, SIGXFSZ)"
    if any(words in stderr for words in ("No space left on device", "Disk quota exceeded", "Out of diskspace")):
        return "the disk is full"
    return ""


def as_codemod_error(exc: BaseException, where: Path) -> errors.CodemodError | None:
    """The catalogued error for a failure of git or of the file system during a run; None for anything else.

    A full disk (ENOSPC, EDQUOT), a file size limit (EFBIG, SIGXFSZ) and a git
    command that failed are the user's to fix, not internal errors.
    """
    if isinstance(exc, git.GitCommandError):
        action = exc.command[1] if isinstance(exc.command, list) and len(exc.command) > 1 else "command"
        return _git_failure(str(action), exc, where)
    if isinstance(exc, OSError):
        full = {errno.ENOSPC: "the disk is full", errno.EDQUOT: "the disk quota is used up",
                errno.EFBIG: "a file grew past the file size limit (`ulimit -f`)"}.get(exc.errno or 0)
        return errors.FileRefused(
            f"cannot write {exc.filename or 'a file'}: {full or exc.strerror or exc}",
            where=str(where),
            hint="make room on that disk (or raise the limit), then run again" if full else "fix the cause named, then run again",
        )
    return None


def codemod_home() -> Path:
    return Path(os.environ.get("CODEMOD_HOME") or Path.home() / ".cache" / "codemod")


def _text(value: str | bytes) -> str:
    """A commit's message or summary: GitPython types it str or bytes."""
    return value if isinstance(value, str) else value.decode("utf-8", "replace")


class _Conflict(Exception):
    """Taking codemod's edit out of a file someone amended conflicts with their edit (the path)."""

    def __init__(self, path: str) -> None:
        super().__init__(path)
        self.path = path


class Repo:
    """A git work tree that holds --repo."""

    ready_step = "repo-ready"  # the journal checkpoint once the repository is open for a run

    def __init__(self, git_repo: git.Repo, root: Path, **environment: str):
        self.git_repo = git_repo
        self.root = root
        self.g = git_repo.git
        drivers = driver_overrides(root, environment)
        self.g.update_environment(**environment, **git_overrides(drivers))

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
                f"remove the file ({shell('rm', str(locks[0]))}), then run again",
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
        out = self.g.status("--porcelain=v1", "-z", "--untracked-files=all", "--ignore-submodules=dirty", "--", *rels)
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
        elsewhere = self.checked_out_elsewhere()
        for head in self.git_repo.heads:
            record = self._read_branch(head.name)
            if record:
                record.current = head.name == current
                record.worktree = str(elsewhere.get(head.name, ""))
                found.append(record)
        return found

    def checked_out_elsewhere(self) -> dict[str, Path]:
        """Branch -> the other worktree of this repository that has it checked out (git will not check it out or delete it here)."""
        try:
            out = self.g.worktree("list", "--porcelain")
        except git.GitCommandError:
            return {}
        found: dict[str, Path] = {}
        for block in out.split("\n\n"):
            fields = dict(line.partition(" ")[::2] for line in block.splitlines())
            path, ref = fields.get("worktree"), fields.get("branch", "")
            if path and ref.startswith("refs/heads/") and Path(path).resolve() != self.root.resolve():
                found[ref.removeprefix("refs/heads/")] = Path(path)
        return found

    def _read_branch(self, name: str) -> Applied | None:
        log = ((c.hexsha, _text(c.summary), _text(c.message)) for c in self.git_repo.iter_commits(name, max_count=200, first_parent=True))
        return read_branch(name, log)

    def commit_files(self, sha: str) -> tuple[int, frozenset[FileChange]]:
        """How many parents commit `sha` has, and the files it changes against its first parent (blobs, no renames)."""
        parents = self.git_repo.commit(sha).parents
        if not parents:
            return 0, frozenset()
        out = self._git("diff_tree", "-r", "-z", "--no-renames", "--no-commit-id", parents[0].hexsha, sha)
        fields = out.split("\0")
        found = set()
        for head, path in zip(fields[0::2], fields[1::2]):
            old_mode, new_mode, before, after, _ = head.lstrip(":").split(" ")
            found.add(FileChange(path, before, after if old_mode in (new_mode, "000000") else f"{after}:{new_mode}"))
        return len(parents), frozenset(found)

    def file_change(self, rel: str) -> FileChange:
        """What committing rel as it is on disk records against HEAD: stages it (as commit does) and names both blobs.

        The blob is the one `git add` stores, not a hash of the bytes: git's
        conversions (autocrlf, which keeps CRLF a file already has in the index) decide it.
        """
        try:
            before = self.g.rev_parse(f"HEAD:{rel}")
        except git.GitCommandError:
            before = ""
        self._git("add", "-f", "--", rel)  # -f as in commit: (shadow) the folder's .gitignore is not codemod's
        after = self._git("rev_parse", f":{rel}")
        return FileChange(rel, before or "0" * len(after), after)

    def branch_created_at(self, name: str) -> str | None:
        """The commit branch `name` was created at, from its reflog; None when the reflog no longer says."""
        try:
            out = self.g.reflog("show", "--format=%H%x09%gs", f"refs/heads/{name}", "--")
        except git.GitCommandError:
            return None
        oldest = out.strip().splitlines()[-1:] if out.strip() else []
        for line in oldest:
            sha, _, subject = line.partition("\t")
            if subject.startswith("branch: Created from"):
                return sha
        return None

    def changed_files(self, base: str, tip: str) -> list[str]:
        out = self.g.diff("--no-ext-diff", "--no-textconv", "--name-only", "-z", base, tip)
        return [p for p in out.split("\0") if p]

    def changed_since(self, base: str) -> list[str]:
        """Files whose work-tree content differs from `base` (committed or not)."""
        out = self.g.diff("--no-ext-diff", "--no-textconv", "--ignore-submodules=dirty", "--name-only", "-z", base, "--")
        return [p for p in out.split("\0") if p]

    def show(self, rev: str, rel: str) -> bytes | None:
        """The bytes of rel at rev, or None when it did not exist there or is no file (a folder, a submodule)."""
        try:
            blob = self.git_repo.commit(rev).tree / rel
        except KeyError:
            return None
        return blob.data_stream.read() if blob.type == "blob" else None

    def gitlinks(self, rev: str, paths: list[str]) -> dict[str, str] | None:
        """The commit each submodule path pins at `rev` (paths that are no submodule there left out); None when
        `rev` is not in this repository."""
        try:
            tree = self.git_repo.commit(rev).tree
        except (git.BadName, ValueError):
            return None
        pinned = {}
        for path in paths:
            try:
                entry = tree / path
            except KeyError:
                continue
            if entry.type == "submodule":
                pinned[path] = entry.hexsha
        return pinned

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
                "GIT_AUTHOR_NAME": name or FALLBACK_IDENTITY[0],
                "GIT_AUTHOR_EMAIL": email or FALLBACK_IDENTITY[1],
                "GIT_COMMITTER_NAME": name or FALLBACK_IDENTITY[0],
                "GIT_COMMITTER_EMAIL": email or FALLBACK_IDENTITY[1],
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
        self._git("add", "-f", "--", *rels)  # -f: a file codemod edits is tracked, or (shadow) the folder's .gitignore is not codemod's
        env = self._identity_env()
        self.state_dir.mkdir(parents=True, exist_ok=True)
        message_file = self.state_dir / "COMMIT_MSG"
        message_file.write_text(message, encoding="utf-8")
        self._git("commit", "--no-verify", "-q", "-F", str(message_file), "--only", "--", *rels, env=env or None)
        message_file.unlink()
        return self.git_repo.head.commit.hexsha

    def checkout(self, ref: str) -> None:
        self._git("checkout", "-q", ref, "--")

    def return_to(self, base: str, rels: list[str], branch: str | None = None) -> None:
        """HEAD back on base (a branch or a commit) and the index of rels as base has them; the work tree is not touched.

        The rollback and revert write the files' bytes themselves (files.rewrite),
        so that no byte another process writes meanwhile is lost, as it would be
        when git replaced them; then this moves git's pointers. `branch` is deleted.
        """
        if self.branch_exists(base):
            self._git("symbolic_ref", "HEAD", f"refs/heads/{base}")
        else:
            self._git("update_ref", "--no-deref", "HEAD", self.resolve_rev(base))
        for rel in rels:  # the index entry set from base's tree: git reads no file, so runs no filter
            listed = self._git("ls_tree", "-z", "HEAD", "--", rel).rstrip("\0")
            if listed:
                mode, _, rest = listed.partition(" ")
                sha = rest.partition(" ")[2].partition("\t")[0]
                self._git("update_index", "--cacheinfo", f"{mode},{sha},{rel}")
            else:
                self._git("update_index", "--force-remove", "--", rel)
        if branch and self.branch_exists(branch):
            self._git("branch", "-D", branch)

    def work_tree_bytes(self, rev: str, rel: str) -> bytes | None:
        """The bytes git would check out for rel at rev (line-ending conversion applied); None when rel is not there."""
        try:
            return self.g.cat_file("--filters", f"{rev}:{rel}", stdout_as_string=False, strip_newline_in_stdout=False)
        except git.GitCommandError:
            return None

    def stores_as_committed(self, sha: str, rel: str, data: bytes) -> bool:
        """Whether commit sha holds for rel what git add makes of `data` at that path (converted or, as git keeps CRLF it holds, as is)."""
        self.state_dir.mkdir(parents=True, exist_ok=True)
        probe = self.state_dir / "hash-probe"
        probe.write_bytes(data)
        try:
            # git add converts line endings (autocrlf) unless the index already holds the file with CRLF, then stores
            # the bytes as they are: either blob is what codemod wrote; a foreign write makes neither
            wanted = {self._git("hash_object", f"--path={rel}", "--", str(probe)).strip(),
                      self._git("hash_object", "--no-filters", "--", str(probe)).strip()}
        finally:
            probe.unlink(missing_ok=True)
        try:
            return (self.git_repo.commit(sha).tree / rel).hexsha in wanted
        except KeyError:
            return False

    def refuse_hidden(self, rels: list[str]) -> None:
        """Refuse (exit 4) targets that git's index bits keep out of `git status` (assume-unchanged, skip-worktree).

        git neither shows edits to them nor commits them as codemod needs: a
        hidden local edit would be swept into codemod's commit, and `git add`
        refuses a skip-worktree path half-way through a run.
        """
        hidden = self.hidden_by_index(rels)
        if not hidden:
            return
        sparse = "skip-worktree" in hidden.values() and self._sparse()
        listed = ", ".join(
            f"{rel} ({bit}{', outside the sparse checkout' if sparse and bit == 'skip-worktree' else ''})" for rel, bit in hidden.items()
        )
        undo = "; ".join(f"git update-index --no-{bit} {rel}" for rel, bit in hidden.items())
        raise errors.DirtyTree(
            f"git's index hides these files from `git status`, so their local edits cannot be checked: {listed}",
            where=str(self.root),
            hint=(f"add their folders to the sparse checkout (git sparse-checkout add DIR) or run `{undo}`" if sparse else f"run `{undo}`")
            + ", look at `git diff` for edits they hid, commit or stash them, then run again",
        )

    def _sparse(self) -> bool:
        try:
            return self.g.config("--bool", "core.sparseCheckout").strip() == "true"
        except git.GitCommandError:
            return False

    def hidden_by_index(self, rels: list[str]) -> dict[str, str]:
        """Which of rels git's index bits keep out of `git status` (rel -> the bit), read from `git ls-files -v -t`."""
        if not rels:
            return {}
        out = self._git("ls_files", "-v", "-z", "--", *rels)
        found = {}
        for entry in out.split("\0"):
            if len(entry) > 2 and entry[1] == " ":
                tag, rel = entry[0], entry[2:]
                if tag == "S":
                    found[rel] = "skip-worktree"
                elif tag.islower():
                    found[rel] = "assume-unchanged"
        return found

    def delete_branch(self, name: str) -> None:
        self._git("branch", "-D", name)

    def revert_commits(self, commits: list[CodemodCommit]) -> list[str]:
        """Undo each codemod commit, newest first, with one revert commit each; all or none. Returns the new shas.

        Each revert undoes only what codemod recorded: a file that someone
        else's amend added to a codemod commit keeps its bytes. The revert
        commits carry `Codemod-Reverts: <sha>`, so status knows them as codemod's.
        When a revert conflicts with a later commit, HEAD goes back to where it
        was (`reset --keep` keeps unrelated edits) and the conflict is refused
        naming the commit and the files.
        """
        env = self._identity_env()
        start = self.git_repo.head.commit.hexsha
        made = []
        for commit in reversed(commits):
            try:
                self.g.revert("--no-commit", commit.sha, env=env or None)
                _, actual = self.commit_files(commit.sha)
                recorded = commit.files if commit.files is not None else actual
                for path in sorted({f.path for f in actual} - {f.path for f in recorded}):
                    if self.show("HEAD", path) is None:
                        self.g.rm("-q", "-f", "--", path)
                    else:
                        self.g.checkout("HEAD", "--", path)
                for change in recorded - actual:  # a codemod file someone amended: take out only codemod's edit
                    self._unapply(change)
                message_file = self.state_dir / "COMMIT_MSG"
                message_file.parent.mkdir(parents=True, exist_ok=True)
                message_file.write_text(
                    f'Revert "{commit.subject}"\n\nThis reverts commit {commit.sha}.\n\n{TRAILER_REVERTS}: {commit.sha}\n',
                    encoding="utf-8",
                )
                self.g.commit("--no-verify", "-q", "--allow-empty", "-F", str(message_file), env=env or None)
                message_file.unlink()
                made.append(self.git_repo.head.commit.hexsha)
            except (git.GitCommandError, _Conflict) as exc:
                conflicted = [p for p in self.g.diff("--no-ext-diff", "--no-textconv", "--name-only", "--diff-filter=U").splitlines() if p]
                conflicted += [exc.path] if isinstance(exc, _Conflict) else []
                for undo in (("revert", "--abort"), ("reset", "-q", "--merge", start), ("reset", "-q", "--keep", start)):
                    try:
                        getattr(self.g, undo[0])(*undo[1:])
                    except git.GitCommandError:
                        pass
                if not conflicted and isinstance(exc, git.GitCommandError):
                    raise _git_failure("revert", exc, self.root) from None
                raise errors.RevertRefused(
                    f"undoing codemod's commit {commit.sha[:10]} conflicts with a later commit in {', '.join(conflicted)}; "
                    "nothing was reverted",
                    where=str(self.root),
                    hint=f"revert it by hand ({shell('git', 'revert', commit.sha[:10])}) and resolve the conflict, "
                    "or move your commits off the codemod branch and revert without --keep-commits",
                ) from None
        return made

    def _unapply(self, change: FileChange) -> None:
        """Stage HEAD's change.path with codemod's recorded edit (after -> before) merged out of it (a conflict raises)."""
        sides = [self.state_dir / f"unapply.{name}" for name in ("current", "after", "before")]
        try:
            try:
                blobs = [self.g.cat_file("blob", b, stdout_as_string=False) for b in (change.after, change.before)]
            except git.GitCommandError:
                return  # codemod's recorded blob is gone (pruned): the file's whole committed diff stays reverted
            for side, data in zip(sides, [self.show("HEAD", change.path) or b"", *blobs]):
                side.write_bytes(data)
            try:
                self.g.merge_file("-q", *map(str, sides))  # into sides[0]; exit status = conflicts
            except git.GitCommandError:
                raise _Conflict(change.path) from None
            blob = self.g.hash_object("-w", "--no-filters", "--", str(sides[0]))
            mode = self.g.ls_files("-s", "--", change.path).split(" ")[0] or "100644"
            self.g.update_index("--cacheinfo", f"{mode},{blob},{change.path}")
            self.g.checkout("--", change.path)
        finally:
            for side in sides:
                side.unlink(missing_ok=True)
