"""Reading and writing target files safely: inside the repo only, atomically, bytes kept."""

from __future__ import annotations

import errno
import fcntl
import os
import signal
import stat
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from codemods.core import errors
from codemods.core.source import NotRegularFile, read_regular, read_regular_status  # noqa: F401  (callers read through files too)


def resolved(path: Path, where: str = "") -> Path:
    """`path.resolve()`, refusing a symlink loop (exit 9, naming the path) where Python raises RuntimeError."""
    try:
        return path.resolve()
    except RuntimeError:
        pass
    except OSError as exc:
        if exc.errno != errno.ELOOP:
            raise
    raise errors.FileRefused(
        "is a symlink loop (or goes through one)",
        where=where or str(path),
        hint="point it at a real file or folder, or remove the symlink",
    )


def require_folder(path: Path) -> None:
    """Refuse a --repo that does not exist, is a file, or is a symlink loop."""
    resolved(path)
    if not path.exists():
        raise errors.UnknownProject("no tree at --repo: path does not exist", where=str(path), hint="check --repo")
    if not path.is_dir():
        raise errors.RepoState("is a file, not a folder", where=str(path), hint="point --repo at the project's folder")


def check_output(path: Path) -> None:
    """Refuse, before anything is applied, an output file (--patch) that cannot be written."""

    parent = path.parent if str(path.parent) else Path(".")
    problem = ""
    try:
        if not parent.is_dir():
            problem = f"its folder {parent} does not exist"
        elif path.is_dir():
            problem = "is a directory"
        elif path.exists() and not stat.S_ISREG(path.stat().st_mode):
            problem = "is not a regular file"
        elif not os.access(path if path.exists() else parent, os.W_OK):
            problem = "is not writable"
    except OSError as exc:
        problem = exc.strerror or str(exc)
    if problem:
        raise errors.FileRefused(problem, where=str(path), hint="give --patch a writable file path; nothing was applied")


def inside(root: Path, rel: str) -> Path:
    """The real path of root/rel, refusing anything (a symlink included) that leads outside root."""
    base = resolved(root)
    path = resolved(root / rel, where=rel)
    if path != base and base not in path.parents:
        raise errors.FileRefused(
            f"resolves to {path}, outside the repository",
            where=rel,
            hint="codemod only reads and writes files inside --repo; replace the symlink with the file",
        )
    if any(part.lower() == ".git" for part in path.relative_to(base).parts):
        raise errors.FileRefused(
            f"resolves to {path}, inside git's own folder",
            where=rel,
            hint="codemod never reads or writes a repository's .git as a source file; replace the symlink with the file",
        )
    return path


def reader(root: Path):
    """A `read(rel) -> bytes` for planning that never follows a path out of root, nor reads a FIFO or device."""

    def read(rel: str) -> bytes:
        return read_regular(inside(root, rel))

    return read


def write_atomic(path: Path, data: bytes, *, durable: bool = True) -> None:
    """Write through a temp file in the same folder and os.replace, keeping the file mode.

    `durable=False` is for caches (thousands of small files a run, any of
    which may be lost): no fsync, and a missing folder is created.
    """
    mode = path.stat().st_mode & 0o7777 if path.exists() else 0o644
    if not durable:
        path.parent.mkdir(parents=True, exist_ok=True)
    _replace(path, data, mode, durable=durable)


HOLD_WAIT = 5.0  # seconds codemod waits for another process to close a target it writes, before it refuses
LATE_WAIT = 60.0  # seconds it waits for a process that opened a file while codemod replaced it to close it
_FULL = (errno.ENOSPC, errno.EDQUOT, errno.EFBIG)


@dataclass
class Rewrite:
    """What `rewrite` found and did."""

    found: bytes  # the file's bytes when codemod held it alone
    written: bytes | None  # what codemod put there; None when the transform declined (nothing written)
    late: bytes = b""  # bytes other processes wrote to the replaced file meanwhile, put back after `written`


def rewrite(path: Path, transform: Callable[[bytes], bytes | None], *, in_place_when_full: bool = False) -> Rewrite:
    """Replace path's bytes with transform(its bytes now), never losing a byte another process writes meanwhile.

    Why no byte can be lost (an editor or formatter opens the file, writes
    and closes it; one that keeps it open for writing is waited for):

    1. codemod opens the file and takes a read lease on it (fcntl
       F_SETLEASE). The kernel grants it only while no other process has the
       file open for writing; while codemod holds it, any other open() of the
       file for writing waits in the kernel. Readers are not held up.
    2. Holding it, codemod reads the bytes, asks `transform` for the new
       ones, writes them to a temp file (fsync) and renames it over the path.
    3. It releases the lease. A process whose open() waited meanwhile had
       already looked up the path, so it now opens the *old* file. codemod
       takes the lease on the old file again, which waits until every such
       process has closed it; the old file has no name any more, so nobody
       else can open it: its bytes are final. codemod reads them.
    4. Bytes beyond those it read in step 2 (`late`) are put into the new
       file right after what codemod wrote, by the same steps (repeated until
       no more bytes arrive on the way).

    Bytes written to the new file after the rename are in the file anyway.
    A process that keeps the file open for writing longer than HOLD_WAIT
    stops codemod (exit 5) before it writes. Where leases are not available
    (a network file system; a file of another user without CAP_LEASE) steps
    1 and 3 cannot wait, and the old file is read once right after the
    rename. With `in_place_when_full`, a disk too full for the temp file gets
    the bytes written over the old ones under a write lease (no other process
    has the file open at all); the rollback uses it, as it only shrinks files.
    """
    first: bytes | None = None
    late = b""
    with open(path, "rb") as handle:  # nothing to write: no need to wait for anyone
        glance = handle.read()
    if transform(glance) in (None, glance):
        return Rewrite(glance, transform(glance))
    while True:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
        try:
            if not stat.S_ISREG(os.fstat(fd).st_mode):
                raise errors.FileRefused("is not a regular file", where=str(path), hint="codemod only rewrites regular files")
            guarded = _hold(fd, path, fcntl.F_RDLCK)
            found = _read_all(fd)
            first = found if first is None else first
            wanted = transform(found)
            if wanted is None or wanted == found:
                return Rewrite(first, wanted, late)
            try:
                _replace(path, wanted, stat.S_IMODE(os.fstat(fd).st_mode))
            except OSError as exc:
                if not (in_place_when_full and exc.errno in _FULL):
                    raise
                os.close(fd)
                fd = -1
                return Rewrite(first, _rewrite_in_place(path, transform), late)
            if guarded:
                fcntl.fcntl(fd, fcntl.F_SETLEASE, fcntl.F_UNLCK)
                _hold(fd, path, fcntl.F_RDLCK, wait=LATE_WAIT)
            final = _read_all(fd)
        finally:
            if fd >= 0:
                os.close(fd)  # drops the lease
        if final == found:
            return Rewrite(first, wanted, late)
        extra = final[len(found):] if final.startswith(found) else final
        late += extra

        def transform(now: bytes, done: bytes = wanted, extra: bytes = extra) -> bytes:  # noqa: F811
            return done + extra + now[len(done):] if now.startswith(done) else now + extra


def _rewrite_in_place(path: Path, transform: Callable[[bytes], bytes | None]) -> bytes | None:
    """rewrite's way on a full disk: write over the bytes while no other process has the file open."""
    fd = os.open(path, os.O_RDWR | os.O_CLOEXEC)
    try:
        _hold(fd, path, fcntl.F_WRLCK)
        wanted = transform(_read_all(fd))
        if wanted is not None:
            view = memoryview(wanted)
            offset = 0
            while offset < len(wanted):
                offset += os.pwrite(fd, view[offset:], offset)
            os.ftruncate(fd, len(wanted))
            os.fsync(fd)
        return wanted
    finally:
        os.close(fd)


def _hold(fd: int, path: Path, kind: int, wait: float = HOLD_WAIT) -> bool:
    """Take a lease of `kind` on fd's file; False where the system offers none. Refuses after `wait` seconds.

    The lease-break signal goes to SIGURG, which is ignored by default: an
    open() that waits on codemod never kills it.
    """
    try:
        fcntl.fcntl(fd, fcntl.F_SETSIG, signal.SIGURG)
    except OSError:
        return False
    deadline = time.monotonic() + wait
    pause = 0.0001
    while True:
        try:
            fcntl.fcntl(fd, fcntl.F_SETLEASE, kind)
            return True
        except OSError as exc:
            if exc.errno not in (errno.EAGAIN, errno.EBUSY):
                return False  # EINVAL (file system), EACCES (not the owner), ENOLCK: no leases here
        if time.monotonic() > deadline:
            writers = kind == fcntl.F_RDLCK
            holders = ", ".join(holders_of(fd, writers)) or "another process"
            if wait == LATE_WAIT:
                raise errors.RepoState(
                    f"{holders} opened it for writing while codemod replaced it and still holds it after {wait:.0f} s; "
                    "what it writes now goes to the file codemod replaced, which has no name any more",
                    where=str(path),
                    hint="close that program, then look at the file (`git diff`) and run again",
                )
            raise errors.RepoState(
                f"is open{' for writing' if writers else ''} in {holders}; "
                "codemod does not replace a file another process may be writing",
                where=str(path),
                hint="close it there (or wait until that program is done), then run again",
            )
        time.sleep(pause)
        pause = min(pause * 2, 0.005)


def holders_of(fd: int, writers: bool = False) -> list[str]:
    """The other processes that have fd's file open (for writing), as `pid N (name)`, as far as /proc shows them."""
    info = os.fstat(fd)
    proc = Path("/proc")
    found = []
    for entry in proc.iterdir() if proc.is_dir() else []:
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            for link in (entry / "fd").iterdir():
                target = os.stat(link)
                if (target.st_dev, target.st_ino) != (info.st_dev, info.st_ino):
                    continue
                flags = (entry / "fdinfo" / link.name).read_text().split("flags:")[1].split()[0]
                if writers and not int(flags, 8) & (os.O_WRONLY | os.O_RDWR):
                    continue
                found.append(f"pid {entry.name} ({(entry / 'comm').read_text().strip()})")
                break
        except (OSError, IndexError, ValueError):
            continue
    return found


def _read_all(fd: int) -> bytes:
    chunks: list[bytes] = []
    offset = 0
    while True:
        chunk = os.pread(fd, 1 << 20, offset)
        if not chunk:
            return b"".join(chunks)
        chunks.append(chunk)
        offset += len(chunk)


def _replace(path: Path, data: bytes, mode: int, *, durable: bool = True) -> None:
    """Write data to a temp file beside path (fsync'd when durable), give it mode, and os.replace path with it."""
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".codemod-tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            if durable:
                handle.flush()
                os.fsync(handle.fileno())
        os.chmod(tmp, mode)
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
        raise


def check_writable(root: Path, rels: list[str]) -> None:
    """Refuse before anything is written when a target or its folder is read-only."""
    for rel in rels:
        path = inside(root, rel)
        read_only = not path.stat().st_mode & 0o222 or not path.parent.stat().st_mode & 0o222
        if read_only or not os.access(path, os.W_OK) or not os.access(path.parent, os.W_OK):
            # Mode bits count even for root: a read-only file says "do not edit me".
            raise errors.FileRefused(
                "is read-only (or its folder is)",
                where=rel,
                hint="fix the permissions (or run as the owner of the files), then run again",
            )


def remove_leftovers(path: Path) -> None:
    """Delete temp files an interrupted write_atomic left beside path."""
    for leftover in path.parent.glob(f".{path.name}.*.codemod-tmp"):
        leftover.unlink()


def write_patch(path: Path, diff: str, applied: bool) -> None:
    """Write run's diff to --patch; a failure says whether the recipe itself was applied all the same."""
    try:
        path.write_text(diff, encoding="utf-8", errors="surrogateescape")
    except OSError as exc:
        raise errors.FileRefused(
            f"cannot write the patch: {exc.strerror or exc}" + ("; the recipe itself was applied" if applied else ""),
            where=str(path),
            hint="the diff is on the codemod branch too: `git diff BASE codemod/RECIPE`" if applied else "nothing was written",
        ) from None
