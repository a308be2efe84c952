"""Putting a repository back after a run stops, and switching revert's files, without losing another process's bytes.

Files first, git second. Each file is rewritten by codemod itself
(files.rewrite: no byte another process writes meanwhile is lost), never by
`git checkout`, which replaces files under a writer and converts line
endings. Only when every file holds its base bytes (plus any bytes another
process added) do HEAD, the index and the branch move back; a rollback that
could not finish says so and leaves the journal for the next command.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from codemods.core import errors
from codemods.apply import files
from codemods.apply.repo import Repo


@dataclass
class PutBack:
    """What a rollback did, checked: the files it put back, the bytes of others it kept, what it could not do."""

    kept: dict[str, int] = field(default_factory=dict)  # rel -> bytes another process added, kept after the base bytes
    left: dict[str, str] = field(default_factory=dict)  # rel -> why it still differs from its base
    git_failed: str = ""  # HEAD, index or branch could not be moved back

    @property
    def complete(self) -> bool:
        return not self.left and not self.git_failed

    def describe(self) -> str:
        """One sentence on the state the rollback left, for the error's hint."""
        if self.left:
            return "the rollback did not finish (" + "; ".join(f"{rel}: {why}" for rel, why in self.left.items()) + ")"
        if self.git_failed:
            return f"every file is back at its base bytes, yet git's HEAD and index could not be moved back ({self.git_failed})"
        if not self.kept:
            return "every file is back at its base, byte for byte"
        kept = ", ".join(f"{rel} (+{n} bytes)" for rel, n in self.kept.items())
        return f"every file is back at its base byte for byte, plus the bytes another process added, kept uncommitted: {kept}"


def undo(known: list[bytes], original: bytes):
    """The transform that takes codemod's bytes out of a file: one of `known` states, plus what others appended."""
    states = sorted(set(known), key=len, reverse=True)

    def transform(found: bytes) -> bytes | None:
        for state in states:
            if found.startswith(state):
                return original + found[len(state):]
        return None

    return transform


def put_back(repo: Repo, states: dict[str, list[bytes]], base: str, branch: str) -> PutBack:
    """Every file of `states` back at base (put_files_back), then HEAD on base and `branch` deleted, checked."""
    done = put_files_back(repo, states)
    if done.left:
        return done
    try:
        repo.return_to(base, list(states), branch)
    except errors.CodemodError as exc:
        done.git_failed = exc.message
        return done
    head_branch, head_sha = repo.head()
    if base not in (head_branch, head_sha) or repo.branch_exists(branch):
        done.git_failed = f"HEAD is on {head_branch or head_sha[:12]}, not {base}"
    return done


def put_files_back(repo: Repo, states: dict[str, list[bytes]]) -> PutBack:
    """Every file of `states` (rel -> [its base bytes, then each version codemod wrote]) back at its base bytes.

    Nothing is claimed that was not checked: a file that another process
    rewrote as a whole (not appended to) is left as it is and named.
    """
    done = PutBack()
    for rel, known in states.items():
        original = known[0]
        try:
            result = files.rewrite(files.inside(repo.root, rel), undo(known, original), in_place_when_full=True)
        except errors.CodemodError as exc:
            done.left[rel] = exc.message
            continue
        except OSError as exc:
            done.left[rel] = exc.strerror or str(exc)
            continue
        if result.written is None:
            done.left[rel] = "another process rewrote it while codemod worked; its bytes are left as they are"
        elif len(result.written) > len(original):
            done.kept[rel] = len(result.written) - len(original)
    return done


def switch_keeping_bytes(repo: Repo, target: str, rels: list[str]) -> None:
    """Check out `target` where HEAD's tree differs from it only in `rels`, writing those files with files.rewrite.

    Each file must hold what git checked out for HEAD (plus bytes another
    process appended, which are kept after target's bytes). Where that does
    not hold for every file (git's rendering differs from the bytes on disk),
    git checks out as usual.
    """
    changed = repo.changed_files("HEAD", target)
    pairs = {rel: (repo.work_tree_bytes("HEAD", rel), repo.work_tree_bytes(target, rel)) for rel in changed}
    plain = set(changed) <= set(rels) and all(a is not None and b is not None for a, b in pairs.values())
    if plain:
        for rel, (now, then) in pairs.items():
            path = files.inside(repo.root, rel)
            plain = plain and path.is_file() and path.read_bytes().startswith(now or b"")
    if not plain:
        repo.checkout(target)
        return
    done: list[str] = []
    for rel, (now, then) in pairs.items():
        assert now is not None and then is not None
        result = files.rewrite(files.inside(repo.root, rel), undo([now], then))
        if result.written is None:
            for back in done:
                files.rewrite(files.inside(repo.root, back), undo([pairs[back][1] or b""], pairs[back][0] or b""))
            raise errors.RevertRefused(
                f"{rel} changed while codemod was reverting (another process rewrote it); "
                "codemod put back the files it had switched and stopped, still on the codemod branch",
                where=str(repo.root),
                hint=f"{rel} keeps the bytes it has now (see `git diff`); when that program is done, commit or stash it, "
                "then run the revert again",
            )
        done.append(rel)
    repo.return_to(target, changed)
