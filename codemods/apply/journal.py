"""The lock and the journal that make run and revert recoverable after a crash.

Both live in the repository's git dir (`.git/codemod/`, or the shadow repo),
never in the work tree.

- The lock is an flock on `.git/codemod/lock`: the kernel drops it when its
  process dies, even on SIGKILL, so a crash can never leave a user stuck. The
  file keeps the holder's pid and command, to name it in "busy" messages and
  to say that a dead holder's lock was taken over.
- The journal (`journal.json`, replaced atomically) is written before the
  first change to the repo and removed after the last. While it exists, the
  operation it names was interrupted, and `status` says at which step;
  `run` and `revert` first put the repo back to the recorded base.

`checkpoint(step)` marks a step boundary. It does nothing unless a hook is
installed; only the tests' fault runner (tests/fault_runner.py) installs one,
to kill or pause the process exactly at a boundary.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import shutil
import socket
import time
from collections.abc import Callable
from contextlib import contextmanager
from pathlib import Path

from codemods.core import errors

_hook: Callable[[str], None] | None = None  # set only by the tests' fault runner


def checkpoint(step: str) -> None:
    """A step boundary: where a test may kill or pause this process."""
    if _hook is not None:
        _hook(step)


@contextmanager
def locked(state_dir: Path, command: str):
    """Hold the repository's codemod lock for the duration; refuse if another live codemod holds it."""
    path = state_dir / "lock"
    try:
        state_dir.mkdir(parents=True, exist_ok=True)
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    except OSError as exc:
        raise unwritable(state_dir, exc) from None
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = _read_holder(fd)
            raise errors.Busy(
                f"another codemod is working on this repository (pid {holder.get('pid', '?')}: {holder.get('command', '?')}, "
                f"since {holder.get('started', '?')})",
                where=str(state_dir.parent.parent if state_dir.parent.name == ".git" else state_dir.parent),
            ) from None
        previous = _read_holder(fd)
        stale = previous.get("pid") if previous and previous.get("pid") != os.getpid() else None
        os.ftruncate(fd, 0)
        os.pwrite(fd, json.dumps({
            "pid": os.getpid(), "host": socket.gethostname(), "command": command,
            "started": time.strftime("%Y-%m-%d %H:%M:%S"),
        }).encode(), 0)
        yield stale
    finally:
        try:
            os.ftruncate(fd, 0)
        finally:
            os.close(fd)  # closing drops the flock


def _read_holder(fd: int) -> dict:
    try:
        data = os.pread(fd, 4096, 0)
        return json.loads(data) if data.strip() else {}
    except (OSError, ValueError):
        return {}


def read(state_dir: Path) -> dict | None:
    """The journal of an interrupted operation, None when there is none.

    One codemod cannot read (not JSON, not an object, or missing what run and
    revert write first) comes back as `{"op": "unknown", "corrupt": True, "raw": ...}`.
    """
    path = state_dir / "journal.json"
    try:
        text = path.read_text(encoding="utf-8")
        entry = json.loads(text)
    except FileNotFoundError:
        return None
    except (OSError, ValueError):
        return {"op": "unknown", "corrupt": True, "raw": ""}
    if not _well_formed(entry):
        return {"op": "unknown", "corrupt": True, "raw": text[:200]}
    return entry


def _well_formed(entry) -> bool:
    if not isinstance(entry, dict) or entry.get("op") not in ("run", "revert"):
        return False
    if not all(isinstance(entry.get(key), str) for key in ("branch", "base_sha", "step")):
        return False
    files = entry.get("files")
    return entry["op"] == "revert" or (isinstance(files, dict) and all(isinstance(v, str) for v in files.values()))


def write(state_dir: Path, entry: dict) -> None:
    tmp = state_dir / f"journal.json.{os.getpid()}.tmp"
    try:
        state_dir.mkdir(parents=True, exist_ok=True)
        tmp.write_text(json.dumps(entry, indent=1), encoding="utf-8")
        with open(tmp, "rb") as handle:
            os.fsync(handle.fileno())
        os.replace(tmp, state_dir / "journal.json")
    except OSError as exc:
        raise unwritable(state_dir, exc) from None


def step(state_dir: Path, entry: dict, name: str) -> None:
    """Record that the operation of `entry` reached step `name` (journal, then the step boundary)."""
    entry["step"] = name
    write(state_dir, entry)
    checkpoint(name.split(":")[0])


def unwritable(state_dir: Path, exc: OSError) -> errors.CodemodError:
    """The refusal (exit 9) when codemod cannot keep its lock and journal in `state_dir`."""
    return errors.FileRefused(
        f"codemod cannot keep its lock and journal here: {exc.strerror or exc}",
        where=str(state_dir),
        hint="it must be a writable folder (a file of that name, a read-only or immutable folder is refused); "
        "fix that (or set CODEMOD_HOME for installed packages), then run again",
    )


def keep_original(state_dir: Path, data: bytes) -> str:
    """Keep a target's bytes from before the run (durably) until the journal is cleared; returns their sha256.

    The rollback and recovery put these exact bytes back: git's copy of a file
    can differ from the bytes on disk (core.autocrlf, filters).
    """
    digest = hashlib.sha256(data).hexdigest()
    folder = state_dir / "originals"
    tmp = folder / f"{digest}.{os.getpid()}.tmp"
    try:
        folder.mkdir(parents=True, exist_ok=True)
        with open(tmp, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, folder / digest)
    except OSError as exc:
        tmp.unlink(missing_ok=True)
        raise unwritable(state_dir, exc) from None
    return digest


def original(state_dir: Path, digest: str) -> bytes | None:
    """The bytes keep_original kept under `digest`, when they are there and intact."""
    try:
        data = (state_dir / "originals" / digest).read_bytes()
    except OSError:
        return None
    return data if hashlib.sha256(data).hexdigest() == digest else None


def clear(state_dir: Path) -> None:
    try:
        (state_dir / "journal.json").unlink()
    except FileNotFoundError:
        pass
    shutil.rmtree(state_dir / "originals", ignore_errors=True)
