"""The scan cache: per-file results by content, a per-tree index of file stamps, and a snapshot of each tree's last result.

Three layers, each checked before the next (and a fourth beside them: the
project's predicate meanings, by the bytes of the files they were read from): a tree whose every file is
unchanged since the last scan with the same settings is answered whole from
its snapshot; an unchanged file (same size, mtime and inode, not modified
close to the last scan) from the index; a changed file whose bytes were seen
before from the object store. Every key holds a hash of the whole package's
code, so any change to codemod is a new cache.
"""

from __future__ import annotations

import hashlib
import json
import os
import time
from collections.abc import Callable
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING

from codemods.apply import repo
from codemods.apply.files import write_atomic
from codemods.audit.incremental import Previous
from codemods.audit.listing import stamp_at, stamp_of, under
from codemods.audit.records import Context, FileScan, ScanResult
from codemods.core import targets
from codemods.core.arch import Arch
from codemods.core.lazy import LazyModule
from codemods.cpp.instructions import Hit
from codemods.cpp.structure import Branch, Structure
from codemods.gates.python.predicates.evaluation import Meaning

if TYPE_CHECKING:
    from codemods.jit import specs as jit_specs
else:  # imported on first use: a scan of C sources, or one answered from the cache, needs none of them
    jit_specs = LazyModule("codemods.jit.specs")


CACHE_VERSION = 2


def default_cache() -> Path:
    """`$CODEMOD_HOME/scan-cache` (default ~/.cache/codemod/scan-cache)."""
    return repo.codemod_home() / "scan-cache"


CACHE_LIMIT_MB = 512.0


def cache_limit() -> int:
    """The most bytes the scan cache may hold: `$CODEMOD_SCAN_CACHE_MB` (default 512)."""
    try:
        megabytes = float(os.environ.get("CODEMOD_SCAN_CACHE_MB", CACHE_LIMIT_MB))
    except ValueError:
        megabytes = CACHE_LIMIT_MB
    return max(0, int(megabytes * (1 << 20)))


def prune_cache(cache: Path, limit: int) -> int:
    """Delete what no scan reads any more, then the least recently written entries, until at most `limit` bytes.

    Runs after a scan that wrote entries. Anything of another cache version
    is deleted; if the rest holds more than `limit` bytes, the oldest go
    until 80% of it is left (a deleted entry is only parsed again). Returns
    the number of files deleted.
    """
    current = os.path.join(str(cache), f"v{CACHE_VERSION}") + os.sep
    kept: list[tuple[int, str, int]] = []  # (mtime, path, size)
    doomed: list[str] = []
    total = 0
    for folder, _, names in os.walk(cache):
        for name in names:
            path = os.path.join(folder, name)
            if not path.startswith(current):
                doomed.append(path)
                continue
            try:
                status = os.stat(path)
            except OSError:
                continue
            total += status.st_size
            kept.append((status.st_mtime_ns, path, status.st_size))
    if total > limit:
        goal = limit * 4 // 5
        for _, path, size in sorted(kept):
            if total <= goal:
                break
            doomed.append(path)
            total -= size
    deleted = 0
    for path in doomed:
        try:
            os.unlink(path)
            deleted += 1
        except OSError:
            pass
    return deleted


def objects_folder(cache: Path) -> str:
    """Where the per-file results of the cache at `cache` live (Context.cache)."""
    return str(Path(cache) / f"v{CACHE_VERSION}" / "objects")


@lru_cache(maxsize=1)
def code_fingerprint() -> str:
    """A hash of every module of the package and of the project files (the layouts a scan reads): any change to
    the code or that data is a new cache (no hand-kept list)."""
    package = Path(__file__).resolve().parents[1]
    digest = hashlib.sha256(str(CACHE_VERSION).encode())
    for path in sorted([*package.rglob("*.py"), *package.rglob("*.c")]):  # .c: the compiled lexer's source
        digest.update(path.relative_to(package).as_posix().encode() + b"\0" + path.read_bytes())
    for path in targets.project_files():
        digest.update(path.name.encode() + b"\0" + path.read_bytes())
    return digest.hexdigest()[:32]


def context_key(arch: Arch, universe: tuple[Arch, ...], layout: bool, hazards: bool, meanings: str = "") -> str:
    """`meanings`: a digest of what the project's predicates admit (records.Context.meanings)."""
    text = f"{code_fingerprint()}|{arch.name}|{','.join(a.name for a in universe)}|{int(layout)}|{int(hazards)}|{meanings}"
    return hashlib.sha256(text.encode()).hexdigest()[:32]


def _tree_file(root: Path, mode: str) -> str:
    """The file name of a tree's index and snapshot, for a mode and this version of the code."""
    return hashlib.sha256(f"{root.resolve()}|{mode}|{code_fingerprint()}".encode()).hexdigest()[:32] + ".json"


class Index:
    """Per tree: each file's stat and content hash from the last scan, so an unchanged file is not read.

    An entry is trusted only when size, mtime and inode match and the file
    was last modified well before the index was written (a file changed
    within the file system's timestamp granularity looks unchanged).
    """

    _RACY_NS = 2_000_000_000

    def __init__(self, path: Path, entries: dict[str, list], written_ns: int) -> None:
        self.path = path
        self.entries = entries
        self.written_ns = written_ns
        self.fresh: dict[str, list] = {}
        self.started_ns = time.time_ns()

    @classmethod
    def load(cls, cache: Path, root: Path, mode: str) -> Index:
        path = cache / f"v{CACHE_VERSION}" / "index" / _tree_file(root, mode)
        try:
            data = json.loads(path.read_bytes())
            if data.get("version") != CACHE_VERSION or not isinstance(data.get("files"), dict):
                raise ValueError("unknown index")
            return cls(path, data["files"], int(data["written_ns"]))
        except (OSError, ValueError, TypeError, KeyError):
            return cls(path, {}, 0)

    def lookup(self, rel: str, status: os.stat_result) -> list | None:
        """`[size, mtime, inode, content hash]` when the file is unchanged, else None.

        The hash is "" for a file with nothing to parse, "binary" for a binary
        """
        entry = self.entries.get(rel)
        if (
            not isinstance(entry, list)
            or len(entry) != 4
            or entry[:3] != stamp_of(status)
            or not self.settled(status.st_mtime_ns)
            or not isinstance(entry[3], str)
        ):
            return None
        self.fresh[rel] = entry
        return entry

    def settled(self, mtime_ns: int) -> bool:
        """Whether a file modified at `mtime_ns` was modified well before this index was written."""
        return mtime_ns < self.written_ns - self._RACY_NS

    def record(self, rel: str, stamp: list[int], digest: str | None) -> None:
        if digest is not None:
            self.fresh[rel] = [*stamp, digest]

    def save(self) -> None:
        if self.fresh == self.entries:
            return
        data = {"version": CACHE_VERSION, "written_ns": self.started_ns, "files": self.fresh}
        try:
            write_atomic(self.path, json.dumps(data, separators=(",", ":")).encode(), durable=False)
        except OSError:
            pass  # a cache that cannot be written only makes the next scan slower


def _object_path(context: Context, digest: str, in_jit: bool) -> Path:
    key = hashlib.sha256(f"{digest}|{context.key}|{int(in_jit)}".encode()).hexdigest()
    assert context.cache is not None  # callers check: no cache, no objects
    return Path(context.cache) / key[:2] / f"{key[2:40]}.json"


def load_object(context: Context, digest: str, rel: str) -> FileScan | None:
    """The cached result for these bytes, or None when it is missing or cannot be read."""
    if context.cache is None:
        return None
    in_jit = context.hazards and context.jit is not None and under(rel, context.jit)
    try:
        data = json.loads(_object_path(context, digest, in_jit).read_bytes())
        if data.get("v") != CACHE_VERSION:
            return None
        return _file_scan_from_data(rel, data)
    except (OSError, ValueError, TypeError, KeyError, IndexError, AttributeError):
        return None


def store_object(context: Context, digest: str, in_jit: bool, item: FileScan) -> None:
    if context.cache is None:
        return
    try:
        write_atomic(
            _object_path(context, digest, in_jit),
            json.dumps(_file_scan_to_data(item), separators=(",", ":")).encode(),
            durable=False,
        )
    except OSError:
        pass


def _file_scan_to_data(item: FileScan) -> dict:
    gates = [{k: v for k, v in gate.items() if k != "file"} for gate in item.gates]
    shape = item.structure
    return {
        "v": CACHE_VERSION,
        "gates": gates,
        "skipped": item.skipped,
        "parsed": item.parsed,
        "structure": None
        if shape is None
        else [
            [
                b.chain, b.position, b.parent, b.line, b.directive, b.condition, b.start, b.body_start,
                b.body_end, b.own_code, [[h.family, h.token, h.line, h.wrapper] for h in b.hits], b.children,
            ]
            for b in shape.branches
        ],
        "chains": None if shape is None else shape.chains,
        "specs": [_spec_to_data(spec) for spec in item.specs],
    }  # fmt: skip


def _file_scan_from_data(rel: str, data: dict) -> FileScan:
    structure = None
    if data["structure"] is not None:
        branches = [
            Branch(
                index=i, chain=b[0], position=b[1], parent=b[2], line=b[3], directive=b[4], condition=b[5],
                start=b[6], body_start=b[7], body_end=b[8], own_code=b[9],
                hits=tuple(Hit(h[0], h[1], h[2], h[3]) for h in b[10]), children=b[11],
            )
            for i, b in enumerate(data["structure"])
        ]  # fmt: skip
        structure = Structure(branches, data["chains"])
    return FileScan(
        file=rel,
        gates=[{"file": rel, **gate} for gate in data["gates"]],
        skipped=data["skipped"],
        structure=structure,
        specs=[_spec_from_data(spec) for spec in data["specs"]],
        parsed=bool(data["parsed"]),
    )


def _spec_to_data(spec: jit_specs.JitSpec) -> dict:
    gate = spec.gate
    return {
        "module": spec.module,
        "function": spec.function,
        "line": spec.line,
        "sources": [list(s) for s in spec.sources],
        "include_dirs": [list(d) for d in spec.include_dirs],
        "gate": None
        if gate is None
        else [gate.function, gate.line, gate.text, list(gate.majors), [t.name for t in gate.targets]],
    }


def _spec_from_data(data: dict) -> jit_specs.JitSpec:
    gate = data["gate"]
    return jit_specs.JitSpec(
        module=data["module"],
        function=data["function"],
        line=data["line"],
        sources=tuple(tuple(s) for s in data["sources"]),
        include_dirs=tuple(tuple(d) for d in data["include_dirs"]),
        gate=None
        if gate is None
        else jit_specs.JitGate(gate[0], gate[1], gate[2], tuple(gate[3]), tuple(Arch.parse(t) for t in gate[4])),
    )


class Snapshot:
    """The whole result of a tree's last scan, valid while its index says no file changed since."""

    def __init__(self, cache: Path, root: Path, mode: str, key: str, unlisted: list[dict]) -> None:
        self.path = cache / f"v{CACHE_VERSION}" / "snapshot" / _tree_file(root, mode)
        self.context_key = key
        self.unlisted = json.dumps(unlisted, sort_keys=True, separators=(",", ":"))

    def _key(self, entries: dict[str, list]) -> str:
        """The settings, every file's stamp, and what the listing left out (a submodule initialised since)."""
        files = json.dumps(sorted(entries.items()), separators=(",", ":"))
        return hashlib.sha256(f"{self.context_key}|{files}|{self.unlisted}".encode()).hexdigest()

    def load(self, root: Path, arch: Arch, universe: tuple[Arch, ...], index: Index) -> ScanResult | None:
        try:
            data = json.loads(self.path.read_bytes())
            if data.get("version") != CACHE_VERSION or data.get("key") != self._key(index.fresh):
                return None
            # files the JIT closures looked at may lie outside the listing (a header .gitignore hides)
            for rel, stamp in data["touched"].items():
                now = stamp_at(root / rel)
                if now != stamp or (now is not None and not index.settled(now[1])):
                    return None
            return self._result(data, root, arch, universe)
        except (OSError, ValueError, TypeError, KeyError, AttributeError):
            return None

    @staticmethod
    def _result(data: dict, root: Path, arch: Arch, universe: tuple[Arch, ...]) -> ScanResult | None:
        result = ScanResult(root, arch, universe, layout=data["layout"])
        for name in ("gates", "skipped", "hazards", "modules"):
            value = data[name]
            if not isinstance(value, list) or not all(isinstance(item, dict) for item in value):
                return None
            setattr(result, name, value)
        result.stats = {"parsed": int(data["parsed"])}
        return result

    def previous(self, root: Path, arch: Arch, universe: tuple[Arch, ...], index: Index, layout: str) -> Previous | None:
        """The last scan's result and what it read (audit.incremental), when it was made with these settings over
        the files the index recorded then (whatever changed since); else None."""
        try:
            data = json.loads(self.path.read_bytes())
            if (
                data.get("version") != CACHE_VERSION
                or data.get("key") != self._key(index.entries)
                or data.get("layout") != layout
                or not isinstance(data.get("words"), list)
                or not isinstance(data.get("parsed_files"), list)
            ):
                return None
            result = self._result(data, root, arch, universe)
            if result is None:
                return None
            words = [str(word).encode("ascii") for word in data["words"]]
            touched = {str(rel): stamp for rel, stamp in data["touched"].items()}
            return Previous(result, index.entries, touched, words, {str(rel) for rel in data["parsed_files"]})
        except (OSError, ValueError, TypeError, KeyError, AttributeError, UnicodeError):
            return None

    def save(
        self, index: Index, result: ScanResult, parsed: set[str], touched: dict[str, list[int] | None],
        words: set[bytes] | list[bytes],
    ) -> None:
        """`parsed`: the files parsed; `touched` and `words`: what the assembly read (audit.incremental)."""
        data = {
            "version": CACHE_VERSION,
            "key": self._key(index.fresh),
            "touched": touched,
            "words": sorted(word.decode("ascii") for word in words),
            "parsed_files": sorted(parsed),
            "layout": result.layout,
            "parsed": len(parsed),
            "gates": result.gates,
            "skipped": result.skipped,
            "hazards": result.hazards,
            "modules": result.modules,
        }
        try:
            write_atomic(self.path, json.dumps(data, separators=(",", ":")).encode(), durable=False)
        except (OSError, TypeError, ValueError):
            pass  # a cache that cannot be written only makes the next scan slower


class MeaningsMemo:
    """What a tree's project predicates admit (scan.project_meanings), kept with the digest of every file read to
    work it out: a scan whose files all hold the same bytes (an absent one still absent) takes the meanings from
    here instead of parsing the predicate files again. Pure data in JSON, under the code's fingerprint."""

    def __init__(self, cache: Path, root: Path, project: str) -> None:
        key = hashlib.sha256(f"{root.resolve()}|{project}|{code_fingerprint()}".encode()).hexdigest()[:32]
        self.path = Path(cache) / f"v{CACHE_VERSION}" / "meanings" / f"{key}.json"

    @staticmethod
    def digest(data: bytes | None) -> str | None:
        return None if data is None else hashlib.sha256(data).hexdigest()

    def load(self, read: Callable[[str], bytes | None]) -> dict[str, Meaning] | None:
        """The kept meanings when every file they were read from still reads the same through `read` (None: absent)."""
        try:
            data = json.loads(self.path.read_bytes())
            files, kept = data["files"], data["meanings"]
            if any(self.digest(read(rel)) != digest for rel, digest in files):
                return None
            return {
                name: Meaning(frozenset(map(tuple, caps)) if caps is not None else None, where, reason)  # type: ignore[arg-type]
                for name, (caps, where, reason) in kept.items()
            }
        except (OSError, ValueError, KeyError, TypeError):
            return None

    def save(self, files: dict[str, str | None], meanings: dict[str, Meaning]) -> None:
        data = {
            "files": sorted(files.items()),
            "meanings": {
                name: [sorted(m.caps) if m.caps is not None else None, m.where, m.reason] for name, m in meanings.items()
            },
        }
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            write_atomic(self.path, json.dumps(data, separators=(",", ":")).encode(), durable=False)
        except OSError:
            pass  # a cache that cannot be written is a slower next scan, not an error
