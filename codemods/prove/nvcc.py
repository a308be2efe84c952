"""Runs nvcc -E on both sides of every changed file, per arch, and turns the outputs into verdicts.

The base is an overlay folder (codemods.prove.overlay) that mirrors the
work tree with symlinks and holds only the base versions of the changed
files, so unchanged siblings and relative `#include "../x.h"` still resolve.
Base outputs are cached by the contents of the changed files, the arch, the
flags and the nvcc version; a cache entry also records the hashes of the
unchanged files it read and is not used when one of them changed. A missing
third-party header may get an empty stand-in (see `Preprocessor._may_stand_in`).
"""

from __future__ import annotations

import gzip
import hashlib
import json
import os
import posixpath
import re
import subprocess
import tempfile
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from codemods.core.arch import Arch
from codemods.prove.branches import FilePair
from codemods.prove.doubts import Doubts
from codemods.prove.outputs import ROOT_TOKEN, TEMP_TOKEN, Output, blocks, compact, normalise, relative
from codemods.prove.overlay import shadow_tree
from codemods.prove.results import TEXT_LINES, Region, Verdict

_CACHE_VERSION = 1
_TIMEOUT_SECONDS = 600
_ERROR_RE = re.compile(r"\berror\b|\bfatal\b", re.IGNORECASE)


def nvcc_version(nvcc: str) -> str | None:
    try:
        proc = subprocess.run([nvcc, "--version"], capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.SubprocessError):
        return None
    return proc.stdout.strip() if proc.returncode == 0 else None


def _first_error(stderr: str, returncode: int) -> str:
    lines = [line.strip() for line in stderr.splitlines() if line.strip()]
    found = [line for line in lines if _ERROR_RE.search(line)] or lines
    return " ".join(found[0].split())[:300] if found else f"nvcc exited with status {returncode}"


def _gencode(arch: Arch) -> str:
    return f"arch=compute_{arch.code}{arch.variant},code=sm_{arch.code}{arch.variant}"


_MISSING_RE = re.compile(
    r"^(?P<includer>[^\n]*?):\d+(?::\d+)?: fatal error: (?P<header>[^\n:]+): No such file or directory", re.M
)
_FILE_MARKER_RE = re.compile(r'^#(?:line)? \d+ "((?:[^"\\]|\\.)*)"', re.M)
_ENTER_MARKER_RE = re.compile(r'\n# 1 "((?:[^"\\]|\\.)*)" 1')  # gcc's marker for entering an included file
_MAX_STAND_INS = 200
_SAME_STAND_INS_ROUNDS = 4


class _Failed(Exception):
    """nvcc could not preprocess one side; the message is its first error line."""


class Preprocessor:
    """Runs nvcc -E for every (changed file, arch, side) and turns the outputs into verdicts."""

    def __init__(self, root, sources, include_dirs, nvcc, version, flags, cache_dir, extra_includes=(), stand_ins=False) -> None:
        self.root = root
        self.sources = sources
        self.include_dirs = include_dirs
        self.nvcc = nvcc
        self.version = version
        self.flags = flags
        self.cache_dir = Path(cache_dir) if cache_dir is not None else None
        self.extra_includes = tuple(extra_includes)
        self.allow_stand_ins = stand_ins
        self.stand_ins: list[str] = []  # in the order they were made; only ever appended to
        self.read: set[str] = set()  # tokenized paths of the headers the preprocessor read (when stand-ins may be made)
        self.preprocessed = 0
        self.cached = 0
        self._hashes: dict[str, str | None] = {}
        self._lock = threading.Lock()
        self._base_key = hashlib.sha256(
            json.dumps(
                {
                    "version": _CACHE_VERSION,
                    "base": {path: hashlib.sha256(base).hexdigest() for path, (base, _) in sorted(sources.items())},
                    "flags": list(flags),
                    "include_dirs": include_dirs,
                    "extra_includes": list(self.extra_includes),
                    "nvcc": version,
                }
            ).encode()
        ).hexdigest()

    def run(self, archs, structures: dict[str, FilePair], jobs) -> dict[Arch, Verdict]:
        with tempfile.TemporaryDirectory(prefix="codemod-verify-") as temp_name:
            temp = Path(temp_name)
            self.overlay = temp / "base"
            shadow_tree(self.root, self.overlay, {path: base for path, (base, _) in self.sources.items()})
            pairs = {(str(self.overlay), ROOT_TOKEN), (str(self.root), ROOT_TOKEN), (str(temp), TEMP_TOKEN)}
            pairs |= {(str(Path(prefix).resolve()), token) for prefix, token in pairs}
            self.tokens = sorted(pairs, key=lambda pair: -len(pair[0]))
            self.units = {path: self._unit(temp, index, path) for index, path in enumerate(self.sources)}
            self.stand_in_dir = temp / "stand-ins"
            # One task per (file, arch) runs both sides, so only two outputs per worker are alive at once.
            tasks = [(path, arch) for arch in archs for path in self.sources]
            compared = []
            if self.allow_stand_ins and tasks:
                # The first task finds the missing headers alone, so the workers do not all find them at once.
                first_path, first_arch = tasks[0]
                compared.append(self._compare(first_path, first_arch, structures))
            with ThreadPoolExecutor(max_workers=jobs) as pool:
                compared += pool.map(lambda task: self._compare(task[0], task[1], structures), tasks[len(compared) :])
        verdicts = {arch: Verdict() for arch in archs}
        seen: dict[Arch, set[tuple]] = {arch: set() for arch in archs}
        for (_, arch), (gained, lost, errors) in zip(tasks, compared):
            verdict = verdicts[arch]
            verdict.errors += errors
            for regions, found in ((verdict.gained, gained), (verdict.lost, lost)):
                for region in found:
                    key = (region.file, region.line, region.guard or region.text, regions is verdict.gained)
                    if key not in seen[arch]:
                        seen[arch].add(key)
                        regions.append(region)
        if self.stand_ins:
            doubts = Doubts(self, structures)
            for arch, verdict in verdicts.items():
                verdict.doubts = [doubt for path in structures for doubt in doubts.of(path, arch)]
        return verdicts

    def _compare(self, path: str, arch: Arch, structures) -> tuple[list[Region], list[Region], list[str]]:
        texts: dict[str, str] = {}
        errors: dict[str, str] = {}
        made_with: dict[str, int] = {}
        sides = ["base", "work"]
        for _ in range(_SAME_STAND_INS_ROUNDS):
            for side in sides:
                try:
                    texts[side], made_with[side] = self._preprocess(path, arch, side)
                    errors.pop(side, None)
                except _Failed as exc:
                    errors[side] = str(exc)
            # Both sides must see the same stand-ins: redo the one made before the other's were added.
            if errors or made_with["base"] == made_with["work"]:
                break
            sides = [min(made_with, key=lambda side: made_with[side])]
        if len(set(errors.values())) == 1 and len(errors) == 2:
            return [], [], [f"{path}: {errors['base']}"]
        if errors:
            return [], [], [f"{path} ({side}): {error}" for side, error in errors.items()]
        if compact(texts["base"]) == compact(texts["work"]):
            return [], [], []
        before, after = normalise(texts.pop("base")), normalise(texts.pop("work"))
        gained, lost = blocks(before, after)
        regions = {
            side: [region for start, end in spans for region in self._regions(out, start, end, structures, arch, side)]
            for side, spans, out in (("work", gained, after), ("base", lost, before))
        }
        return regions["work"], regions["base"], []

    def _unit(self, temp: Path, index: int, path: str) -> dict[str, Path]:
        """The input nvcc preprocesses for `path`: a one-line TU including it, or the file itself."""
        under = [d for d in self.include_dirs if d == "" or path.startswith(d + "/")]
        if not under:
            return {"base": self.overlay / path, "work": self.root / path}
        include_dir = max(under, key=len)
        included = path[len(include_dir) + 1 :] if include_dir else path
        unit = temp / "units" / f"{index}.cu"
        unit.parent.mkdir(parents=True, exist_ok=True)
        unit.write_text(f'#include "{included}"\n')
        return {"base": unit, "work": unit}

    def _command(self, unit: Path, arch: Arch, side: str) -> list[str]:
        roots = [self.overlay, self.root] if side == "base" else [self.root]
        includes = [f"-I{(base / d) if d else base}" for base in roots for d in self.include_dirs]
        includes += [f"-I{folder}" for folder in self.extra_includes]
        if self.allow_stand_ins:
            includes.append(f"-I{self.stand_in_dir}")
        return [self.nvcc, "-E", "-x", "cu", *self.flags, "-gencode", _gencode(arch), *includes, str(unit)]

    def _preprocess(self, path: str, arch: Arch, side: str) -> tuple[str, int]:
        """nvcc's output for one side with absolute prefixes replaced, and how many stand-ins it was made with.

        A missing header that may be stood in gets its empty stand-in and the
        run is made again; raises _Failed on any other error.
        """
        while True:
            with self._lock:
                made_with = len(self.stand_ins)
                known = sorted(self.stand_ins)
            key = hashlib.sha256(f"{self._base_key}\0{path}\0{arch.name}\0{known}".encode()).hexdigest()
            if side == "base":
                text = self._load(key)
                if text is not None:
                    with self._lock:
                        self.cached += 1
                    self._note_read(text)
                    return text, made_with
            command = self._command(self.units[path][side], arch, side)
            with self._lock:
                self.preprocessed += 1
            try:
                proc = subprocess.run(command, capture_output=True, timeout=_TIMEOUT_SECONDS)
            except subprocess.TimeoutExpired:
                raise _Failed(f"nvcc -E took longer than {_TIMEOUT_SECONDS} s") from None
            except OSError as exc:
                raise _Failed(f"cannot run nvcc: {exc}") from None
            if proc.returncode == 0:
                break
            stderr = self._tokenize(proc.stderr.decode("utf-8", "replace"))
            if not self._stand_in(stderr):
                raise _Failed(_first_error(stderr, proc.returncode))
        text = self._tokenize(proc.stdout.decode("utf-8", "replace"))
        if side == "base":
            self._store(key, text)
        self._note_read(text)
        return text, made_with

    # ------------------------------------------------------------ stand-ins

    def _stand_in(self, stderr: str) -> bool:
        """Make the empty stand-in for the header nvcc could not find; False when it may not be stood in."""
        missing = _MISSING_RE.search(stderr)
        if not self.allow_stand_ins or missing is None:
            return False
        header, includer = missing.group("header"), missing.group("includer")
        if not self._may_stand_in(header, includer):
            return False
        with self._lock:
            if header not in self.stand_ins:
                if len(self.stand_ins) >= _MAX_STAND_INS:
                    return False
                stand_in = self.stand_in_dir / header
                stand_in.parent.mkdir(parents=True, exist_ok=True)
                stand_in.write_bytes(b"")
                self.stand_ins.append(header)
        return True  # made now, or by another run after this one started: run again

    def _may_stand_in(self, header: str, includer: str) -> bool:
        """Whether `header` may be a missing third-party header: `lib/x.h` where `lib` names nothing found.

        Nothing of the tree's include roots, of the folders given, or next to
        the including file: a header missing from those is a real failure.
        """
        parts = header.split("/")
        if len(parts) < 2 or header.startswith("/") or any(part in ("", ".", "..") for part in parts):
            return False
        folders = [self.root / d if d else self.root for d in self.include_dirs]
        folders += [Path(folder) for folder in self.extra_includes]
        if includer.startswith(ROOT_TOKEN + "/"):
            folders.append(self.root / posixpath.dirname(relative(includer)))
        return not any((folder / parts[0]).exists() for folder in folders)

    def _note_read(self, text: str) -> None:
        """Remember the headers an output was read from (for the macros they define)."""
        if not self.allow_stand_ins:
            return
        found = set(_ENTER_MARKER_RE.findall(text))
        with self._lock:
            self.read |= found

    def _tokenize(self, text: str) -> str:
        for prefix, token in self.tokens:
            text = text.replace(prefix, token)
        return text

    def _regions(self, out: Output, start: int, end: int, structures, arch: Arch, side: str) -> list[Region]:
        """The regions in one block of lines only one side has.

        A block is split where its lines start coming from another flipped
        guard of a changed file (adjacent guards make one block); a line from
        anywhere else belongs to the region before it.
        """
        groups: list[tuple[str, int | None, int, list[str]]] = []  # file, branch index, first line, lines
        for position in range(start, end):
            file, number = out.origins[position]
            path = relative(file)
            index = self._flipped_branch(structures, path, number, arch, side)
            if not groups or (index is not None and (path, index) != groups[-1][:2]):
                groups.append((path, index, number, []))
            groups[-1][3].append(out.lines[position].strip())
        regions = []
        for path, index, number, lines in groups:
            text, body = "\n".join(lines[:TEXT_LINES]), "\n".join(lines)
            if index is None:
                regions.append(Region(path, number, text, body=body))
                continue
            file_side = structures[path].work if side == "work" else structures[path].base
            branch = file_side.branches[index]
            gate = file_side.gate(branch)
            regions.append(Region(path, branch.line, text, gate.text if gate else "", body))
        return regions

    @staticmethod
    def _flipped_branch(structures, path: str, line: int, arch: Arch, side: str) -> int | None:
        """The innermost guard of `path` that flipped on `arch` and holds `line`, if any.

        When the evaluator cannot pair the two sides, any arch guard holding
        the line will do.
        """
        pair = structures.get(path)
        file_side = None if pair is None else pair.work if side == "work" else pair.base
        if file_side is None or file_side.branches is None:
            return None
        gained, lost, problem = pair.flips(arch)
        if problem:
            guarded = {i for i, branch in enumerate(file_side.branches) if file_side.gate(branch) is not None}
            return file_side.innermost(line, guarded)
        return file_side.innermost(line, gained if side == "work" else lost)

    # ------------------------------------------------------------ cache

    def _load(self, key: str) -> str | None:
        if self.cache_dir is None:
            return None
        entry = self.cache_dir / f"{key}.json"
        output = self.cache_dir / f"{key}.ii.gz"
        try:
            depends = json.loads(entry.read_text())
            if any(self._hash(rel) != digest for rel, digest in depends.items()):
                return None
            return gzip.decompress(output.read_bytes()).decode("utf-8")
        except (OSError, ValueError, EOFError):
            return None

    def _store(self, key: str, text: str) -> None:
        if self.cache_dir is None:
            return
        files: set[str] = set()
        for match in _FILE_MARKER_RE.finditer(text):
            if match.group(1).startswith(ROOT_TOKEN + "/"):
                files.add(relative(match.group(1)))
        depends = {rel: self._hash(rel) for rel in sorted(files - set(self.sources))}
        try:
            self.cache_dir.mkdir(parents=True, exist_ok=True)
            for name, data in ((f"{key}.ii.gz", gzip.compress(text.encode("utf-8"), 1)),
                               (f"{key}.json", json.dumps(depends).encode())):
                partial = self.cache_dir / f".{name}.{os.getpid()}.{id(data)}"
                partial.write_bytes(data)
                os.replace(partial, self.cache_dir / name)
        except OSError:
            pass  # a cache that cannot be written only costs time

    def _hash(self, rel: str) -> str | None:
        if rel not in self._hashes:
            try:
                self._hashes[rel] = hashlib.sha256((self.root / rel).read_bytes()).hexdigest()
            except OSError:
                self._hashes[rel] = None
        return self._hashes[rel]
