"""Parts of a tree's assembly (audit.scan `_assemble`) read in a worker of the scan's pool while the scan's
process reads the rest (issue 35, decision 4: the cores there are).

The assembly runs in the scan's process once a tree's files are read; on
FlashInfer 0.7.4 it took 15 s of a 33 s scan while the pool's workers sat
idle. Two of its readings read nothing the others write, and write nothing
the others read before them:

- the keys each arch-keyed map's callers pass (audit.map_callers): it reads
  and changes only the python_arch_map records that exclude the arch, which
  the JIT passes skip (jit_classify.OWN_PATH; jit_hazards reads or-chains and
  capability tests); its changes are put into the records before the passes
  that read them (outside_the_package and after);
- the ways into the specs' functions (jit_users.ways_in), which
  jit_classify follows for a spec list that excludes the arch: a function of
  the records' files and lines only; read ahead for every spec it may ask
  about (jit_classify.ways_ahead), and what it asks for taken from there.

Each worker reads the tree as the assembly does (a `TreeFiles`, a `Trees`
whose words rg finds in the same files), and gives back, with its answer,
the paths it looked at and the words it searched for: the scan records them
as its own (audit.incremental patches the next scan only when none of them
changed). Without a pool (one process) the scan reads both itself, as before;
the result is the same bytes either way (tests/audit/test_parallel.py).
"""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import Executor, Future
from dataclasses import dataclass
from pathlib import Path

from codemods.audit import finder, jit_classify
from codemods.audit.jit_modules import Module, TreeFiles
from codemods.audit.jit_users import Trees, Way, ways_in
from codemods.audit.map_callers import asked_of, keys_callers_pass
from codemods.core.arch import Arch
from codemods.core.pytrees import ParsedFiles

# what a task gives back besides its answer: the paths it looked at, with their stamps, and the words it searched
# the Python files for
Looked = tuple[dict[str, list[int] | None], set[bytes]]


@dataclass(frozen=True)
class CallersTask:
    """The keys each arch-keyed map's callers pass: `records` are the tree's python_arch_map records that exclude
    the arch, as the files' readers made them; `searched` the Python files rg looks in for a word."""

    root: str
    records: list[dict]
    own: tuple[str, ...]
    searched: list[str]
    arch: Arch


@dataclass(frozen=True)
class WaysTask:
    """The ways into the specs' `functions` (to the first ungated one) over the Python files `own`, gates at
    `lines` (jit_classify.gate_lines)."""

    root: str
    functions: list[str]
    own: tuple[str, ...]
    searched: list[str]
    lines: dict[str, set[int]]


def callers_keys(task: CallersTask) -> tuple[list[dict], Looked]:
    """`keys_callers_pass` over the task's records (run in a worker): the records as it left them."""
    files, trees, words = _reader(task.root, task.searched)
    keys_callers_pass(task.records, trees, task.own, task.arch)
    return task.records, (files.touched, words)


def ways_ahead(task: WaysTask) -> tuple[dict[str, list[Way] | None], Looked]:
    """The ways into each of the task's functions (run in a worker), by function."""
    files, trees, words = _reader(task.root, task.searched)
    ways = {
        function: ways_in(files.read, task.own, task.lines, function, trees, until_ungated=True)
        for function in task.functions
    }
    return ways, (files.touched, words)


def _reader(root: str, searched: list[str]) -> tuple[TreeFiles, Trees, set[bytes]]:
    """The tree's files as the assembly reads them, and the words searched so far."""
    files = TreeFiles(Path(root))
    words: set[bytes] = set()
    return files, searched_trees(files.read, ParsedFiles(), root, searched, words), words


def searched_trees(
    read: Callable[[str], bytes], parsed: ParsedFiles, root: str | Path, files: list[str], words: set[bytes]
) -> Trees:
    """The assembly's `Trees`: rg finds which of `files` hold a word, and each word asked for is added to `words`
    (a file that comes to hold it may change what is read: audit.incremental)."""

    def holding(literal: bytes) -> set[str]:
        words.add(literal)
        return finder.holding(root, files, literal)

    def holding_each(literals: list[bytes]) -> dict[bytes, set[str]]:
        words.update(literals)
        return finder.holding_each(root, files, literals)

    return Trees(read, parsed, files, holding, holding_each)


def callers_started(
    pool: Executor | None, root: str, gates: list[dict], own: tuple[str, ...], searched: list[str], arch: Arch,
    tree: TreeFiles, words: set[bytes],
) -> Callable[[], None] | None:
    """`keys_callers_pass` started in a worker: the function that waits for it and puts what it read into the
    records, and what it looked at into `tree` and `words`; None without a pool, or when no record asks."""
    records = asked_of(gates)
    if pool is None or not records:
        return None
    future = pool.submit(callers_keys, CallersTask(root, records, own, searched, arch))

    def finish() -> None:
        made, looked = future.result()
        for record, read in zip(records, made):
            record.update(read)
        _record(looked, tree, words)

    return finish


def ways_started(
    pool: Executor | None, root: str, gates: list[dict], modules: list[Module], own: tuple[str, ...],
    searched: list[str], tree: TreeFiles, words: set[bytes],
) -> Ahead | None:
    """The ways into the functions jit_classify may follow, started in a worker; None without a pool, or when no
    spec asks."""
    functions = jit_classify.ways_ahead(gates, modules)
    if pool is None or not functions:
        return None
    task = WaysTask(root, functions, own, searched, jit_classify.gate_lines(gates))
    return Ahead(pool.submit(ways_ahead, task), tree, words)


class Ahead:
    """Ways read ahead in a worker: called, waits for them (recording what the worker looked at) and gives them."""

    def __init__(self, future: Future, tree: TreeFiles, words: set[bytes]) -> None:
        self._future, self._tree, self._words = future, tree, words
        self._ways: dict[str, list[Way] | None] | None = None

    def __call__(self) -> dict[str, list[Way] | None]:
        if self._ways is None:
            ways, looked = self._future.result()
            _record(looked, self._tree, self._words)
            self._ways = ways
        return self._ways

    def settle(self) -> None:
        """Done with it. Never asked for, its answer was not used, so what it looked at is not recorded: not started
        yet, it never will be; running, it is not waited for."""
        if self._ways is None:
            self._future.cancel()


def _record(looked: Looked, tree: TreeFiles, words: set[bytes]) -> None:
    """What a worker looked at, recorded as if the scan's process had."""
    touched, searched = looked
    for path, stamp in touched.items():
        tree.touched.setdefault(path, stamp)
    words.update(searched)
