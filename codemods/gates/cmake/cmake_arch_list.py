"""CMake arch lists: the archs a build compiles a set of kernels for, found by the variable they set.

vLLM picks the archs of each kernel family in its CMakeLists.txt, and
sgl-kernel and FlashInfer list `-gencode` flags the same way:

    cuda_archs_loose_intersection(SCALED_MM_ARCHS "10.0a;10.1a;12.0a" "${CUDA_ARCHS}")
    set(FP4_ARCHS "10.0a;12.0a")
    list(APPEND SGL_KERNEL_CUDA_FLAGS
      "-gencode=arch=compute_90a,code=sm_90a"
      "-gencode=arch=compute_100a,code=sm_100a")

A gate is the list one command gives: the second argument of
`cuda_archs_loose_intersection` (its first is the variable it sets), the
values of `set(VAR ...)` (up to `CACHE` or `PARENT_SCOPE`) and of
`list(APPEND|PREPEND VAR ...)`. The selector `variable` keeps the commands
that set that variable; without it (what `scan` lists) every
`cuda_archs_loose_intersection`, every `set`/`list` of a variable named
for archs (`..._ARCHS`, `..._ARCH_LIST`, `..._ARCHITECTURES`) whose values are all arch names, and every `set`/`list`
holding `-gencode` flags is a gate.

Entries are `;`-separated, in one argument or several: `10.0a`, `120`,
`sm_90a`, `compute_120f`, `9.0+PTX`, or a `-gencode=arch=compute_X,code=sm_X`
flag (a flags list admits what its `-gencode` flags name; its other flags
and variables are not read, and a `-gencode` flag of another shape,
`code=[sm_90a,compute_90a]`, makes it unknown). An entry admits its capability; an `f` entry
(a family target) also the later minors of its major, as nvcc builds
compute_120f code for sm_121 and compute_100f for sm_103, while an `a` entry
admits only its own (compute_120a cannot run on sm_121). In
`cuda_archs_loose_intersection`, as vLLM's cmake/utils.cmake computes it, a
plain entry (`8.0`) also admits the later minors of its major (8.6, 8.9),
and a `+PTX` entry every later arch; elsewhere (`set`, `list`) a plain
entry admits its capability only. A list that takes
values from a variable (`"${CUDA_ARCHS}"`, `"9.0a;${MORE}"`) admits what
it spells and unknown for the rest, and is never rewritten.

`widen` adds each missing capability beside the entry that sorts just
below it (else before the first), spelled as that neighbour is: its prefix,
dotted or not, its suffix, its quotes, its `-gencode` shape; a new entry
takes no `+PTX`. Inside one argument it is joined with `;`, as its own
argument with the whitespace before its neighbour. `"10.0a;10.1a;12.0a"`
gains sm_121 as `"10.0a;10.1a;12.0a;12.1a"`. Comments, the other arguments
and the order of the entries already there stay byte for byte.

The commands are read with tree-sitter-cmake (CMake's command-invocation
grammar: quoted, bracket and unquoted arguments, line and bracket comments);
a file it cannot parse is refused with the line, never half read.
"""

from __future__ import annotations

import posixpath
import re
from dataclasses import dataclass
from functools import lru_cache

from codemods.core.arch import DEFAULT_ARCHS, KNOWN_CODES, Arch, ArchSet
from codemods.gates import CannotWiden, Edit, Gate, SourceError, decode, line_of

KIND = "cmake_arch_list"
LOOSE = "cuda_archs_loose_intersection"

# One arch entry of a list: vLLM's `10.0a`, CMake's `120`, nvcc's `sm_90a`/`compute_120f`; `+PTX` is vLLM's.
_ARCH_RE = re.compile(
    r"(?P<prefix>(?:sm|compute)_)?(?P<number>(?P<major>\d{1,2})\.(?P<minor>\d)|(?P<code>\d{2,3}))(?P<suffix>[af]?)(?P<tail>\+PTX)?"
)
_GENCODE_RE = re.compile(r"-gencode[= ]arch=compute_(?P<code>\d{2,3})(?P<suffix>[af]?),code=(?:sm|compute)_(?P=code)(?P=suffix)")
_GENCODE_FLAGS = ("-gencode", "--generate-code")
_NUMBER_IN_GENCODE = re.compile(r"(?<=compute_)\d{2,3}|(?<=sm_)\d{2,3}")
# A variable named for archs: SCALED_MM_ARCHS, TORCH_CUDA_ARCH_LIST, CMAKE_CUDA_ARCHITECTURES, not CMAKE_ARCHIVE_...
_NAMES_ARCH = re.compile(r"(?:^|_)ARCH(?:S|ES|ITECTURES?)?(?:_|$)", re.IGNORECASE)
# A value taken whole from a variable: `${CUDA_ARCHS}`, `${${LANG}_ARCHS}`, `$ENV{ARCHS}`, `$CACHE{ARCHS}`.
_VARIABLE_RE = re.compile(r"\$(?:ENV|CACHE)?\{(?:[\w.+-]|\$\{[\w.+-]*\})*\}")
_SET_ENDS = ("CACHE", "PARENT_SCOPE")


def is_cmake(rel: str) -> bool:
    """Whether a file is CMake: `CMakeLists.txt` or `*.cmake`."""
    name = posixpath.basename(rel)
    return name == "CMakeLists.txt" or name.endswith(".cmake")


def may_hold(data: bytes) -> bool:
    """The byte prefilter: whether a CMake file may hold a list `find` reports (an `arch` word, a -gencode flag)."""
    return b"arch" in data.lower()


@dataclass(frozen=True)
class _Argument:
    start: int  # the argument as written, quotes included
    end: int
    inner: int  # where its content starts (past an opening quote)
    text: str  # its content
    kind: str  # "quoted_argument", "unquoted_argument" or "bracket_argument"


@dataclass(frozen=True)
class _Entry:
    """One arch of a list: where it is written, its capability and how it is spelled."""

    start: int  # the element, or its whole argument when the argument holds only it
    end: int
    written: str  # source[start:end]
    at: int  # where the element itself starts inside `written`
    element: str
    value: tuple[int, int]
    suffix: str
    tail: str  # "+PTX"
    gencode: bool
    alone: bool  # the only element of its argument: a new entry is a new argument


@dataclass(frozen=True)
class _List:
    variable: str
    command: str
    start: int
    end: int
    loose: bool
    gencode: bool
    entries: tuple[_Entry, ...]
    unread: tuple[str, ...]  # elements taken from variables (or, in a loose intersection, not arch names)
    arguments: tuple[_Argument, ...]


@lru_cache(maxsize=1)
def _parser():
    import tree_sitter
    import tree_sitter_cmake

    return tree_sitter.Parser(tree_sitter.Language(tree_sitter_cmake.language()))


def _commands(source: bytes):
    """(name, arguments) of every command invocation, in source order."""
    decode(source)
    tree = _parser().parse(source)
    if tree.root_node.has_error:
        raise SourceError(f"not valid CMake: line {_first_error(tree.root_node)}")
    stack = [tree.root_node]
    found = []
    while stack:
        node = stack.pop()
        if node.type == "normal_command":
            name = node.child(0)
            listed = next((c for c in node.children if c.type == "argument_list"), None)
            arguments = [] if listed is None else [_argument(source, c) for c in listed.children if c.type == "argument"]
            found.append((node.start_byte, source[name.start_byte : name.end_byte].decode("utf-8").lower(), arguments))
        stack.extend(reversed(node.children))
    return [(name, arguments) for _, name, arguments in sorted(found, key=lambda item: item[0])]


def _first_error(node) -> int:
    stack = [node]
    while stack:
        current = stack.pop(0)
        if current.type == "ERROR" or current.is_missing:
            return current.start_point[0] + 1
        stack = list(current.children) + stack
    return node.start_point[0] + 1


def _argument(source: bytes, node) -> _Argument:
    inner = node.child(0) if node.child_count else node
    start, end = node.start_byte, node.end_byte
    if inner.type == "quoted_argument":
        return _Argument(start, end, start + 1, source[start + 1 : end - 1].decode("utf-8"), inner.type)
    return _Argument(start, end, start, source[start:end].decode("utf-8"), inner.type)


def _lists(source: bytes, variable: str | None) -> list[_List]:
    found = []
    for name, arguments in _commands(source):
        picked = _picked(name, arguments)
        if picked is None:
            continue
        target, values = picked
        if variable is not None and target != variable:
            continue
        listed = _read(source, name, target, values)
        if listed is None or (variable is None and not (listed.loose or listed.gencode or _NAMES_ARCH.search(target))):
            continue
        found.append(listed)
    return found


def _picked(name: str, arguments: list[_Argument]) -> tuple[str, list[_Argument]] | None:
    """The variable a command sets and the arguments that are its list, for the commands that make arch lists."""
    plain = [a.text if a.kind == "unquoted_argument" else None for a in arguments]
    if name == LOOSE and len(arguments) >= 2 and plain[0]:
        return plain[0], arguments[1:2]
    if name == "set" and len(arguments) >= 2 and plain[0]:
        ends = [i for i, word in enumerate(plain) if i > 0 and word in _SET_ENDS]
        return plain[0], arguments[1 : ends[0] if ends else None]
    if name == "list" and len(arguments) >= 3 and plain[0] in ("APPEND", "PREPEND") and plain[1]:
        return plain[1], arguments[2:]
    return None


def _read(source: bytes, command: str, variable: str, arguments: list[_Argument]) -> _List | None:
    """The list a command gives, or None when it is no arch list (no values, a word that is no arch)."""
    if not arguments:
        return None
    loose = command == LOOSE
    entries: list[_Entry] = []
    unread: list[str] = []
    flags: list[str] = []  # -gencode flags not read (`code=[sm_90a,compute_90a]`, another arch per code)
    others = False
    for argument in arguments:
        if argument.kind == "bracket_argument" or "\\" in argument.text:
            unread.append(argument.text)
            continue
        pieces = _pieces(argument)
        # a new entry is a new argument only where the list is written one argument per entry
        alone = len(pieces) == 1 and len(arguments) > 1 and not loose
        for at, piece in pieces:
            entry = _entry(source, argument, at, piece, alone)
            if entry is not None:
                entries.append(entry)
            elif _VARIABLE_RE.fullmatch(piece):
                unread.append(piece)
            elif piece.startswith(_GENCODE_FLAGS):
                flags.append(piece)
            else:
                others = True
                if loose:
                    unread.append(piece)
    gencode = bool(flags) or any(entry.gencode for entry in entries)
    if gencode:
        entries = [entry for entry in entries if entry.gencode]
        unread = flags  # a flags list: its other flags and variables are not arch entries
    elif others and not loose:
        return None
    elif not entries and not unread:
        return None
    start, end = arguments[0].start, arguments[-1].end
    return _List(variable, command, start, end, loose, gencode, tuple(entries), tuple(unread), tuple(arguments))


def _pieces(argument: _Argument) -> list[tuple[int, str]]:
    """The `;`-separated elements of an argument with their offsets (CMake splits unquoted and quoted alike when
    the value is used as a list); `${...}` stays one element."""
    pieces, at, depth, begin = [], 0, 0, 0
    text = argument.text
    while at <= len(text):
        char = text[at] if at < len(text) else ";"
        if text.startswith("${", at):
            depth += 1
        elif char == "}" and depth:
            depth -= 1
        elif char == ";" and not depth:
            piece = text[begin:at]
            stripped = piece.strip()
            if stripped:
                pieces.append((begin + len(piece) - len(piece.lstrip()), stripped))
            begin = at + 1
        at += 1
    return pieces


def _entry(source: bytes, argument: _Argument, at: int, piece: str, alone: bool) -> _Entry | None:
    gencode = _GENCODE_RE.fullmatch(piece)
    if gencode is not None:
        value = divmod(int(gencode.group("code")), 10)
        suffix, tail = gencode.group("suffix"), ""
    else:
        match = _ARCH_RE.fullmatch(piece)
        if match is None:
            return None
        if match.group("major") is not None:
            value = (int(match.group("major")), int(match.group("minor")))
        else:
            value = divmod(int(match.group("code")), 10)
        suffix, tail = match.group("suffix"), match.group("tail") or ""
    if value[0] * 10 + value[1] not in KNOWN_CODES:
        return None
    start = argument.inner + len(argument.text[:at].encode("utf-8"))
    end = start + len(piece.encode("utf-8"))
    if alone:
        start, end, at = argument.start, argument.end, start - argument.start
    else:
        at = 0
    written = source[start:end].decode("utf-8")
    return _Entry(start, end, written, at, piece, value, suffix, tail, gencode is not None, alone)


def _admitted(listed: _List, arch: Arch) -> bool:
    mine = (arch.major, arch.minor)
    for entry in listed.entries:
        if entry.value == mine:
            return True
        if listed.loose and entry.tail and entry.value < mine:
            return True  # +PTX: the PTX runs on every later arch
        later = entry.value[0] == arch.major and entry.value[1] < arch.minor
        if later and entry.suffix == "f":
            return True  # a family target: compute_120f code runs on sm_121, compute_100f on sm_103 (ARCH_FACTS)
        if later and listed.loose and not entry.suffix:
            return True  # the loose intersection builds 8.0 for an 8.6 target
    return False


def _admits(listed: _List, universe: tuple[Arch, ...]) -> ArchSet:
    admitted = frozenset(a for a in universe if _admitted(listed, a))
    unknown = frozenset(universe) - admitted if listed.unread else frozenset()
    return ArchSet(universe, admitted, unknown)


def find(source: bytes, universe: tuple[Arch, ...] = DEFAULT_ARCHS, *, variable: str | None = None) -> list[Gate]:
    """Every arch list in the source (with `variable`, only those setting it), in source order."""
    gates = []
    for listed in _lists(source, variable):
        detail: dict = {"variable": listed.variable, "command": listed.command, "loose": listed.loose}
        if listed.gencode:
            detail["gencode"] = True
        if listed.unread:
            detail["unread"] = list(listed.unread)
        gates.append(
            Gate(
                kind=KIND,
                start=listed.start,
                end=listed.end,
                line=line_of(source, listed.start),
                text=source[listed.start : listed.end].decode("utf-8"),
                admits=_admits(listed, universe),
                context=listed.variable,
                detail=detail,
            )
        )
    return gates


def admits(text: str, universe: tuple[Arch, ...] = DEFAULT_ARCHS, detail: dict | None = None) -> ArchSet:
    """What a list's text (`"10.0a;12.0a"`, the gencode flags) admits, read as `find` reads the command in `detail`."""
    # the values alone, as `set` gives them: `list(APPEND VAR ...)` reads its values alike
    loose = (detail or {}).get("command") == LOOSE
    wrapped = f"{LOOSE}(_ {text} _)".encode() if loose else f"set(_ {text})".encode()
    try:
        lists = _lists(wrapped, "_")
    except SourceError:
        lists = []
    if not lists:
        return ArchSet(universe, frozenset(), frozenset(universe))
    return _admits(lists[0], universe)


def widen(
    source: bytes, gate: Gate, targets: tuple[Arch, ...], universe: tuple[Arch, ...] = DEFAULT_ARCHS
) -> list[Edit]:
    """Edits that add the targets' capabilities the list lacks, each spelled as its neighbour; `[]` if it has them."""
    where = f"line {gate.line}: {gate.detail.get('variable', '')}"
    listed = next((found for found in _lists(source, gate.detail.get("variable")) if found.start == gate.start), None)
    if listed is None:
        raise CannotWiden(f"{where}: the list is no longer at this place; find the gates again")
    missing = sorted({(a.major, a.minor) for a in targets if not _admitted(listed, a)})
    if not missing:
        return []
    if listed.unread:
        raise CannotWiden(f"{where} holds {', '.join(listed.unread)}, which codemod cannot read; widen it by hand")
    if not listed.entries:
        raise CannotWiden(f"{where} lists no arch to spell a new one like; widen it by hand")
    inserts: dict[tuple[int, bool], list[tuple[str, str]]] = {}
    for value in missing:
        below = [e for e in listed.entries if e.value < value]
        neighbour = max(below, key=lambda e: e.value) if below else listed.entries[0]
        after = bool(below)
        inserts.setdefault((neighbour.end if after else neighbour.start, after), []).append(
            (_separator(source, listed, neighbour), _spell(neighbour, value))
        )
    edits = []
    for (offset, after), added in inserts.items():
        if after:
            text = "".join(separator + spelled for separator, spelled in added)
        else:
            text = "".join(spelled + separator for separator, spelled in added)
        edits.append(Edit(offset, offset, text.encode("utf-8")))
    return sorted(edits)


def _spell(neighbour: _Entry, value: tuple[int, int]) -> str:
    """`value` written as `neighbour` is: `12.0a` -> `12.1a`, `"-gencode=arch=compute_120a,code=sm_120a"` -> 121."""
    major, minor = value
    element = neighbour.element
    if neighbour.gencode:
        spelled = _NUMBER_IN_GENCODE.sub(str(major * 10 + minor), element)
    else:
        match = _ARCH_RE.fullmatch(element)
        assert match is not None  # _entry read it
        number = f"{major}.{minor}" if match.group("major") is not None else str(major * 10 + minor)
        spelled = f"{match.group('prefix') or ''}{number}{match.group('suffix')}"
    written = neighbour.written
    return written[: neighbour.at] + spelled + written[neighbour.at + len(element) :]


def _separator(source: bytes, listed: _List, neighbour: _Entry) -> str:
    """What stands between two entries: `;` inside one argument; else the whitespace written before the neighbour
    (or after it, when it is the first argument), past any comment."""
    if not neighbour.alone:
        return ";"
    index = next(i for i, a in enumerate(listed.arguments) if a.start == neighbour.start)
    if index > 0:
        between = source[listed.arguments[index - 1].end : neighbour.start]
    elif len(listed.arguments) > 1:
        between = source[neighbour.end : listed.arguments[1].start]
    else:
        between = b" "
    text = between.decode("utf-8")
    if "#" in text:  # a comment between them stays where it is
        text = text[text.rfind("\n") :] if "\n" in text else " "
    return text or " "
