"""Dicts keyed by arch strings whose lookup fails for a missing arch: a gate admitting the keys (read by `scan`).

    _TMEM_MAX_ALLOC_COLUMNS_MAP = {"sm_100": 512, "sm_103": 512, "sm_120": 512}

    def get_max_tmem_alloc_cols(compute_capability: str) -> int:
        if compute_capability not in _TMEM_MAX_ALLOC_COLUMNS_MAP:
            raise ValueError(f"Unsupported compute capability: {compute_capability}")
        return _TMEM_MAX_ALLOC_COLUMNS_MAP[compute_capability]

A dict literal bound to a name, every key an arch string (`"sm_100"`,
`"sm_120a"`, `"sm100"`, or, for an arch in KNOWN_CODES, `"12.0"`, `"100a"`,
`"100"`), is a gate when the file looks it up so that an arch
it lacks gets an error: a membership test guarding a path that runs only
for its keys (`if cc not in MAP: raise`, `assert cc in MAP`; `polarity`
reads which way the test goes) or an index with a computed key (`MAP[cc]`,
a KeyError). It admits the archs its keys name: a plain or `a` key its own
arch, a family key (`"sm_120f"`) every later minor of its major. A map read
with `.get(key, default)` or only iterated is no gate. A dict bound to no
name and indexed where it is written (`{"90a": True, "100a": False}[arch]`)
is a gate named for the function it is in (a recipe's `function`).

`widen` adds a key for each target the map lacks (a recipe selects the map
with `assigns = "NAME"`, or with `key = "mm_fp4"` the dict under that key of
a named dict, which needs no failing lookup), spelled like the keys already there (`"sm_121"`,
`"sm_121a"`, `'sm121'`) and placed in arch order, after the greatest key
below it. Its value is copied from the nearest key below it of the same
major (`"sm_120": 512` gives `"sm_121": 512`, as upstream 5a767523c did by
hand), or, when it is a call of names (`functools.partial(f, major_a=major_a)`,
on as many lines as written), as written; with no such key, or any other
value, widen refuses: codemod never invents a value. A one-line dict that grows
past the file's line length is split black's way, one entry a line with a
trailing comma; a dict already split one entry a line gains a line.

A capability table (vLLM's `FI_ALLREDUCE_FUSION_MAX_SIZE_MB = {90: {...}, 100: {...}}`, integer keys, numbers for
values) admits the archs its keys name; its rows are tuning data, copied only from the row `value_from` names
(`maps.tables`).

`keyed_by` says which parameter of a module-level function every failing
lookup of a map uses as its key (`compute_capability` above): scan reads the
keys its callers pass (audit.map_callers).
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass, replace

from codemods.core.arch import DEFAULT_ARCHS, KNOWN_CODES, Arch, ArchSet
from codemods.gates import CannotWiden, Edit, Gate, SourceError
from codemods.gates.python import polarity, tree_index
from codemods.gates.python.capability.values import spell
from codemods.gates.python.ast_text import PythonText, ast_of, dotted
from codemods.gates.python.layout.text import line_length
from codemods.gates.python.maps.tables import TABLE_PREFILTER, check_selector, notes  # noqa: F401 (this kind's hooks)
from codemods.gates.python.maps.tables import capability_lookups as _capability_lookups, code_key as _code_key, is_table as _table

KIND = "python_arch_map"

# The archs a key without `sm` may name (`"12.0"`, `"100a"`, `"90"`) are core.arch's KNOWN_CODES: a bare number or an
# "M.N" string is an arch only when it is one of these, so a version string (`"12.8"`, `"2.1"`) or a count (`"64"`) is
# no key. 107: FlashInfer 0.6.16's deep_gemm.py keys `"107a"` beside `"100a"` and `"103a"` (290c09186).
# A file that may hold an arch-keyed dict: nothing else is worth parsing for this kind.
PREFILTER = re.compile(
    rb"[\"']sm_?\d{2,3}[af]?[\"']\s*:|[\"'](?:%s|%s)[af]?[\"']:"
    % (b"|".join(str(c).encode() for c in KNOWN_CODES), b"|".join(f"{c // 10}\\.{c % 10}".encode() for c in KNOWN_CODES))
)
# One of these literals is in every file PREFILTER passes (audit.prefilter.FINDER_TOKENS, for the finder's rg).
TOKENS = (b'"sm', b"'sm", *(
    f"{quote}{number}{variant}{quote}:".encode()
    for code in KNOWN_CODES for number in (str(code), f"{code // 10}.{code % 10}")
    for variant in ("", "a", "f") for quote in "\"'"
))  # fmt: skip
_KEY_RE = re.compile(r"^(?:sm_?(?P<sm>\d{2,3})|(?P<major>\d{1,2})\.(?P<minor>\d)|(?P<bare>\d{2,3}))(?P<suffix>[af]?)$")


def _key(key: str) -> tuple[int, str] | None:
    """(the arch number, its suffix) a key names: 120 for `"sm_120"`, `"sm120"`, `"12.0"`, `"120"`; `"100a"` is
    (100, "a"); None for a string that names no arch."""
    match = _KEY_RE.match(key)
    if match is None:
        return None
    if match["sm"]:
        return int(match["sm"]), match["suffix"]
    code = int(match["bare"]) if match["bare"] else int(match["major"]) * 10 + int(match["minor"])
    return (code, match["suffix"]) if code in KNOWN_CODES else None


def _arch_keys(literal: ast.Dict) -> list[str] | None:
    """The keys of a dict literal whose every key is a string naming an arch, or a tuple of one length with such
    a string at one place (`("103a", torch.int)`: FlashInfer's deep_gemm.py `get_default_recipe`), the arch
    strings; None for any other dict."""
    position = _arch_position(literal)
    elements = [_arch_element(k, position) for k in literal.keys]
    if not elements or any(e is None for e in elements):
        return None
    if any(_code_key(k) for k in literal.keys) and not _table(literal):
        return None  # integer keys: a capability table of numbers, or no arch map
    return [e[1] for e in elements if e is not None]


def _arch_position(literal: ast.Dict) -> int | None:
    """For tuple keys, the one place where every key holds an arch string; None for string keys (or no such place)."""
    keys = literal.keys
    if not keys or not all(isinstance(k, ast.Tuple) and k.elts for k in keys):
        return None
    lengths = {len(k.elts) for k in keys if isinstance(k, ast.Tuple)}
    if len(lengths) != 1:
        return None
    for position in range(lengths.pop()):
        if all(_arch_element(k.elts[position], None) for k in keys if isinstance(k, ast.Tuple)):
            return position
    return None


def _arch_element(key: ast.expr | None, position: int | None) -> tuple[ast.expr, str] | None:
    """The arch string a key is (`position` None) or holds at `position` of its tuple: its node and its value."""
    if position is not None:
        key = key.elts[position] if isinstance(key, ast.Tuple) and position < len(key.elts) else None
    if isinstance(key, ast.Constant) and isinstance(key.value, str) and _key(key.value):
        return key, key.value
    if position is None and isinstance(key, ast.Constant) and _code_key(key):
        return key, str(key.value)
    return None


def find(
    source: bytes, universe: tuple[Arch, ...] = DEFAULT_ARCHS, tree: ast.Module | None = None, *,
    assigns: str | None = None, key: str | None = None, function: str | None = None, value_from: int | None = None,
) -> list[Gate]:
    """Every arch-keyed dict the file looks up so that a missing key fails, in source order: bound to a name, or
    looked up where it is written (`{"90a": True, "100a": False}[arch]`). `assigns` keeps the one bound to that
    name, `function` those written in that function; `key` selects instead the dict that is the value of that key
    in a dict bound to a name (`routine_cc_to_supported_backends["mm_fp4"]`), however it is looked up."""
    if tree is None:
        try:
            tree = ast_of(source)
        except (SyntaxError, ValueError, RecursionError, MemoryError):
            return []
    maps: dict[str, tuple[ast.Assign, ast.Dict, list[str]]] = {}
    nested: list[tuple[str, ast.Assign, ast.expr, ast.Dict, list[str]]] = []  # (outer name, its assignment, key, map)
    unbound: list[tuple[ast.Subscript, ast.Dict, list[str]]] = []  # `{...}[arch]`
    uses: list[tuple[str, ast.AST]] = []  # what may look a map up (`MAP[cc]`, `cc in MAP`), in walk order
    tables: set[str] = set()  # capability tables that are module-level constants
    for node in tree_index.index(tree).of_type(ast.AnnAssign, ast.Assign, ast.Subscript, ast.Compare):  # all it reads
        if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name) and isinstance(node.value, ast.Dict):
            node = ast.Assign(targets=[node.target], value=node.value, lineno=node.lineno, col_offset=node.col_offset)  # `NAME: T = {`
        if (
            isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name)
            and isinstance(node.value, ast.Dict) and node.value.keys
        ):
            keys = _arch_keys(node.value)
            if keys is not None:
                maps[node.targets[0].id] = (node, node.value, keys)
                bound = node.targets[0].id
                if _table(node.value) and (assigns == bound or (assigns is None and bound.isupper() and node.col_offset == 0)):
                    tables.add(bound)
            elif key is not None:
                for outer_key, value in zip(node.value.keys, node.value.values):
                    if isinstance(outer_key, ast.Constant) and outer_key.value == key and isinstance(value, ast.Dict):
                        inner = _arch_keys(value)
                        if inner is not None:
                            nested.append((node.targets[0].id, node, outer_key, value, inner))
        elif isinstance(node, ast.Subscript) and isinstance(node.value, ast.Name):
            uses.append((node.value.id, node))
        elif isinstance(node, ast.Subscript) and isinstance(node.value, ast.Dict) and node.value.keys:
            keys = _arch_keys(node.value)
            if keys is not None and isinstance(node.ctx, ast.Load) and not isinstance(node.slice, ast.Constant):
                unbound.append((node, node.value, keys))
        elif isinstance(node, ast.Compare) and len(node.ops) == 1 and isinstance(node.comparators[0], ast.Name):
            uses.append((node.comparators[0].id, node))
    text = PythonText(source)
    if key is not None:
        up = polarity.parents([tree]) if function is not None and nested else {}
        return sorted(
            (
                _gate(source, text, universe, literal, keys, literal.lineno, f"{name}[{_source_of(source, text, outer_key)}]", 0)
                for name, assign, outer_key, literal, keys in nested
                if (assigns is None or name == assigns) and (function is None or _function_of(assign, up) == function)
            ),
            key=lambda gate: gate.start,
        )
    uses = [(name, node) for name, node in uses if name in maps]
    looked_up = _capability_lookups(tree, maps) if any(_table(literal) for _, literal, _ in maps.values()) else []
    if not uses and not unbound and not tables and not looked_up:
        return []  # no map, or none looked up: no parents to find (the costly part)
    up = polarity.parents([tree])
    failing: dict[str, int] = {table: 0 for table in sorted(tables, key=lambda n: maps[n][0].lineno)}
    for table_name, call in looked_up:
        failing.setdefault(table_name, call.lineno)
    for _, node in uses:
        name, line, _ = _failing_lookup(node, maps, up)
        if name is not None and name not in failing:
            failing[name] = line
    gates = []
    for name, line in failing.items():
        assign, literal, keys = maps[name]
        if (assigns is None or name == assigns) and (function is None or _function_of(assign, up) == function):
            gate = _gate(source, text, universe, literal, keys, assign.lineno, name, line)
            if _table(literal):
                gate = replace(gate, detail={**gate.detail, "table": True, "value_from": value_from,
                                             "adds": _adds(literal, keys, universe, value_from)})
            gates.append(gate)
    for lookup, literal, keys in unbound:
        holder = _function_of(lookup, up)
        if assigns is None and (function is None or holder == function) and not _guarded(lookup, "", up):
            gates.append(_gate(source, text, universe, literal, keys, literal.lineno, holder, lookup.lineno, named=False))
    gates.sort(key=lambda gate: gate.start)
    return gates


def _gate(
    source: bytes, text: PythonText, universe: tuple[Arch, ...], literal: ast.Dict, keys: list[str], line: int,
    context: str, lookup: int, named: bool = True,
) -> Gate:
    start, end = text.span(literal)
    return Gate(
        kind=KIND, start=start, end=end, line=line, text=source[start:end].decode("utf-8"),
        admits=ArchSet(universe, frozenset(a for a in universe if any(_admits(k, a) for k in keys))),
        context=context, detail={"map": context if named else None, "lookup": lookup, "adds": _adds(literal, keys, universe)},
    )  # fmt: skip


def _source_of(source: bytes, text: PythonText, node: ast.expr) -> str:
    start, end = text.span(node)
    return source[start:end].decode("utf-8")


def _function_of(node: ast.AST, up: dict[int, ast.AST]) -> str:
    """The name of the function `node` is written in; `<module>` outside any."""
    holder = up.get(id(node))
    while holder is not None and not isinstance(holder, (ast.FunctionDef, ast.AsyncFunctionDef)):
        holder = up.get(id(holder))
    return holder.name if isinstance(holder, (ast.FunctionDef, ast.AsyncFunctionDef)) else "<module>"


def _label(gate: Gate) -> str:
    """How a message names the map: `NAME`, `NAME["key"]`, or the dict looked up where it is written."""
    if gate.detail.get("map") is None:
        return f"the dict looked up in `{gate.context}`"
    return f"`{gate.context}`"


def _adds(literal: ast.Dict, keys: list[str], universe: tuple[Arch, ...], value_from: int | None = None) -> list[str]:
    """The archs of `universe` the map lacks that `widen` can add: a key below of the same major, its value simple;
    for a capability table, only with `value_from` naming a row it has."""
    found = []
    table = _table(literal)
    for arch in universe:
        if any(_admits(k, arch) for k in keys):
            continue
        if table:
            if value_from is not None and str(value_from) in keys:
                found.append(arch.name)
            continue
        family = [(read[0], v) for k, v in zip(keys, literal.values) if (read := _key(k))]
        family = [(code, v) for code, v in family if code // 10 == arch.major and code < arch.code]
        if family:
            nearest = max(code for code, _ in family)
            if all(_copyable(value) for code, value in family if code == nearest):
                found.append(arch.name)
    return found


def _failing_lookup(node: ast.AST, maps: dict, up: dict[int, ast.AST]) -> tuple[str | None, int, ast.expr | None]:
    """(the map's name, the line, the key looked up) when `node` looks a map up so that a missing arch fails."""
    if (
        isinstance(node, ast.Subscript) and isinstance(node.ctx, ast.Load) and isinstance(node.value, ast.Name)
        and node.value.id in maps and not isinstance(node.slice, ast.Constant) and not _guarded(node, node.value.id, up)
    ):
        return node.value.id, node.lineno, node.slice
    if (
        isinstance(node, ast.Compare) and len(node.ops) == 1 and isinstance(node.ops[0], (ast.In, ast.NotIn))
        and isinstance(node.comparators[0], ast.Name) and node.comparators[0].id in maps
    ):
        test, runs = polarity.need(node, up)
        parent = up.get(id(test))
        if test is node and isinstance(parent, (ast.If, ast.Assert)):
            # the guarded path runs only where the key is in the map
            if runs == isinstance(node.ops[0], ast.In) and (isinstance(parent, ast.Assert) or not runs):
                return node.comparators[0].id, node.lineno, node.left
    return None, 0, None


@dataclass(frozen=True)
class KeyedBy:
    """The parameter of a module-level function that a map's failing lookups use as their key."""

    function: str
    parameter: str
    position: int | None  # its index among the positional parameters; None when keyword-only
    keyword: bool  # whether a call may pass it by name (not positional-only)
    default: ast.expr | None  # what a call that omits it passes

    def passes(self, call: ast.Call) -> str | None:
        """The arch string `call` passes for the parameter, when it is a literal one (`"sm_100"`); else None
        (a variable, an expression, `*args`/`**kwargs` that may hold it, or an argument missing with no default)."""
        value: ast.expr | None = None
        if self.keyword:
            value = next((kw.value for kw in call.keywords if kw.arg == self.parameter), None)
        if value is None and self.position is not None:
            before = call.args[: self.position + 1]
            if any(isinstance(arg, ast.Starred) for arg in before):
                return None
            if self.position < len(call.args):
                value = call.args[self.position]
        if value is None:
            if any(kw.arg is None for kw in call.keywords):
                return None  # **kwargs may hold it
            value = self.default
        if isinstance(value, ast.Constant) and isinstance(value.value, str) and _key(value.value):
            return value.value
        return None


def keyed_by(source: bytes, name: str, tree: ast.Module | None = None) -> KeyedBy | None:
    """The parameter every failing lookup of the map `name` uses as its key, when they all use one parameter of
    one module-level function that the function never rebinds; None otherwise (a computed key, a method, a
    nested function, lookups in several functions)."""
    if tree is None:
        try:
            tree = ast_of(source)
        except (SourceError, SyntaxError, ValueError, RecursionError, MemoryError):
            return None
    maps = {name: None}
    up = polarity.parents([tree])
    found: set[tuple[ast.FunctionDef | ast.AsyncFunctionDef, str]] = set()
    for node in tree_index.index(tree).of_type(ast.Subscript, ast.Compare):  # what _failing_lookup can take
        looked_up, _, key = _failing_lookup(node, maps, up)
        if looked_up is None:
            continue
        holder = up.get(id(node))
        while holder is not None and not isinstance(holder, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)):
            holder = up.get(id(holder))
        if not isinstance(key, ast.Name) or not isinstance(holder, (ast.FunctionDef, ast.AsyncFunctionDef)):
            return None
        if up.get(id(holder)) is not tree:
            return None
        found.add((holder, key.id))
    if len(found) != 1:
        return None
    [(function, parameter)] = found
    arguments = function.args
    positional = [*arguments.posonlyargs, *arguments.args]
    names = [a.arg for a in positional]
    rebound = any(
        isinstance(node, ast.Name) and node.id == parameter and not isinstance(node.ctx, ast.Load)
        for node in ast.walk(function)
    ) or any(isinstance(node, (ast.Global, ast.Nonlocal)) and parameter in node.names for node in ast.walk(function))
    if rebound:
        return None
    if parameter in names:
        position = names.index(parameter)
        offset = position - (len(positional) - len(arguments.defaults))
        default = arguments.defaults[offset] if offset >= 0 else None
        return KeyedBy(function.name, parameter, position, position >= len(arguments.posonlyargs), default)
    kwonly = [a.arg for a in arguments.kwonlyargs]
    if parameter in kwonly:
        return KeyedBy(function.name, parameter, None, True, arguments.kw_defaults[kwonly.index(parameter)])
    return None


def names(key: str, arch: Arch) -> bool:
    """Whether the arch string `key` (a map's key, or one a caller passes) stands for `arch`."""
    return _admits(key, arch)


def _guarded(node: ast.AST, name: str, up: dict[int, ast.AST]) -> bool:
    """Whether a lookup sits in a `try` or under a test of the map (`if cc in MAP:`): a missing key is handled."""
    child, parent = node, up.get(id(node))
    while parent is not None:
        if isinstance(parent, ast.Try) and child in parent.body:
            return True
        if isinstance(parent, (ast.If, ast.IfExp, ast.While)) and child is not parent.test:
            if any(isinstance(n, ast.Compare) and any(isinstance(c, ast.Name) and c.id == name for c in n.comparators)
                   for n in ast.walk(parent.test)):
                return True
        child, parent = parent, up.get(id(parent))
    return False


def _admits(key: str, arch: Arch) -> bool:
    read = _key(key)
    if read is None:
        return False
    major, minor = divmod(read[0], 10)
    if read[1] == "f":
        return arch.major == major and arch.minor >= minor
    return (arch.major, arch.minor) == (major, minor)


def admits(text: str, universe: tuple[Arch, ...] = DEFAULT_ARCHS) -> ArchSet:
    """The archs a dict literal's keys name; unknown when the text is not such a dict."""
    try:
        node = ast.parse(text.strip(), mode="eval").body
    except SyntaxError:
        node = None
    keys = _arch_keys(node) if isinstance(node, ast.Dict) else None
    if keys is None:
        return ArchSet(universe, frozenset(), frozenset(universe))
    return ArchSet(universe, frozenset(a for a in universe if any(_admits(k, a) for k in keys)))


def widen(source: bytes, gate: Gate, targets: tuple[Arch, ...]) -> list[Edit]:
    """Add a key for each target the map lacks, its value copied from the nearest key below it of the same major."""
    literal = _literal_at(source, gate)
    text = PythonText(source)
    position = _arch_position(literal)
    entries = [_Entry.read(source, text, key, value, position) for key, value in zip(literal.keys, literal.values)]
    added: list[_Entry] = []
    table = _table(literal)
    value_from = gate.detail.get("value_from")
    for arch in dict.fromkeys(targets):
        if any(_admits(entry.key, arch) for entry in entries + added):
            continue
        below = [e for e in entries if e.code < arch.code]
        if table:
            added.append(_copied_row(gate, entries, below, arch, value_from))
            continue
        family = [e for e in below if e.code // 10 == arch.major]
        if not family:
            raise CannotWiden(
                f"line {gate.line}: {_label(gate)} has no sm_{arch.major}x key below {arch.name} to copy a value "
                "from; add it by hand"
            )
        nearest = max(e.code for e in family)
        siblings = [e for e in family if e.code == nearest]  # one, or with tuple keys each row of that arch
        anchor = max(below, key=lambda e: (e.code, entries.index(e)))
        for sibling in siblings:
            if not sibling.simple:
                raise CannotWiden(
                    f"line {gate.line}: {_label(gate)}'s value for {sibling.quoted} is not a one-line literal or name, "
                    f"or a call of names, to copy for {arch.name}; add it by hand"
                )
            quoted = spell(arch, sibling.quoted)
            if not _admits(quoted[1:-1], arch):
                raise CannotWiden(
                    f"line {gate.line}: {_label(gate)} would gain {quoted}, a key codemod does not read as {arch.name}; "
                    "add it by hand"
                )
            entry = f"{sibling.before}{quoted}{sibling.after_key}{sibling.colon}{sibling.value}"
            added.append(_Entry(quoted[1:-1], quoted, arch.code, entry, True, anchor))
    if not added:
        return []
    return _layout(source, text, gate, literal, entries, added)


def _copied_row(gate: Gate, entries: list[_Entry], below: list[_Entry], arch: Arch, value_from: int | None) -> _Entry:
    """A capability table's new row for `arch`: row `value_from`'s value as written, after the greatest key below it."""
    if value_from is None:
        raise CannotWiden(
            f"line {gate.line}: {_label(gate)} is a capability table of tuning values and has no row for {arch.name}; "
            "codemod copies a row only when the recipe names it (`value_from = 100`), or add the row by hand"
        )
    source_row = next((e for e in entries if e.code == value_from and e.key == str(value_from)), None)
    if source_row is None:
        rows = ", ".join(e.key for e in entries)
        raise CannotWiden(f"line {gate.line}: {_label(gate)} has no row {value_from} to copy for {arch.name} (rows: {rows})")
    anchor = max(below, key=lambda e: (e.code, entries.index(e))) if below else None
    entry = f"{arch.code}{source_row.colon}{source_row.value}"
    return _Entry(str(arch.code), str(arch.code), arch.code, entry, True, anchor)


@dataclass(frozen=True)
class _Entry:
    """A `key: value` entry of the map, as its source spells it."""

    key: str
    quoted: str  # the key's literal, quotes and all
    code: int  # the arch number its key names (120 for "sm_120a")
    entry: str  # `"sm_120": 512` as written
    simple: bool  # whether widen may copy the value (`_simple` on one line, `_copyable` on several)
    after: _Entry | None = None  # for a new entry: the one it follows (None: it comes first)
    colon: str = ": "
    value: str = ""
    start: int = 0
    end: int = 0
    before: str = ""  # a tuple key's text before its arch string (`(`), and after it (`, torch.int)`)
    after_key: str = ""

    @classmethod
    def read(cls, source: bytes, text: PythonText, key: ast.expr | None, value: ast.expr, position: int | None) -> _Entry:
        found = _arch_element(key, position)
        assert key is not None and found is not None  # find keeps only such maps
        element, spelled = found
        key_start, key_end = text.span(key)
        arch_start, arch_end = text.span(element)
        value_start, value_end = text.span(value)
        read = _key(spelled)
        assert read is not None
        return cls(
            key=spelled, quoted=source[arch_start:arch_end].decode("utf-8"), code=read[0],  # an int key: `100`
            entry=source[key_start:value_end].decode("utf-8"),
            simple=_copyable(value),
            colon=source[key_end:value_start].decode("utf-8"), value=source[value_start:value_end].decode("utf-8"),
            start=key_start, end=value_end,
            before=source[key_start:arch_start].decode("utf-8"), after_key=source[arch_end:key_end].decode("utf-8"),
        )  # fmt: skip


def _copyable(value: ast.expr) -> bool:
    """A value a new key may take as written: a one-line literal or name (`_simple`), or a call of a dotted name
    whose arguments are all names, on as many lines as it is written (FlashInfer 0.6.16's deep_gemm.py:
    `"107a": functools.partial(` / `m_grouped_fp8_gemm_nt_contiguous_sm10x,` / `major_a=major_a,` ... `),` copied
    from `"103a"`'s). Not `cols(120)`: a number there may name the arch."""
    if value.lineno == value.end_lineno and _simple(value):
        return True
    return (
        isinstance(value, ast.Call)
        and bool(dotted(value.func))
        and all(dotted(arg) for arg in value.args)
        and all(keyword.arg is not None and dotted(keyword.value) for keyword in value.keywords)
    )


def _simple(value: ast.expr) -> bool:
    """A literal (`512`, `-1`, `"x"`, `(128, 64)`) or a name (`TMEM_COLS`, `enum.VALUE`): nothing computed."""
    if isinstance(value, ast.Constant) or dotted(value):
        return True
    if isinstance(value, ast.UnaryOp) and isinstance(value.op, (ast.USub, ast.UAdd)):
        return isinstance(value.operand, ast.Constant)
    if isinstance(value, (ast.Tuple, ast.List)):
        return all(_simple(item) for item in value.elts)
    return False


def _literal_at(source: bytes, gate: Gate) -> ast.Dict:
    """The dict literal `gate` stands for."""
    try:
        tree = ast_of(source)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        raise CannotWiden(f"line {gate.line}: the file does not parse") from None
    text = PythonText(source)
    for node in ast.walk(tree):
        if isinstance(node, ast.Dict) and node.keys and text.span(node) == (gate.start, gate.end):
            return node
    raise CannotWiden(f"line {gate.line}: {_label(gate)} is no longer where it was found")


def _layout(
    source: bytes, text: PythonText, gate: Gate, literal: ast.Dict, entries: list[_Entry], added: list[_Entry]
) -> list[Edit]:
    """The edits that add `added` to the map, in its own layout."""
    order: list[_Entry] = list(entries)
    for new in sorted(added, key=lambda e: e.code):
        at = 0 if new.after is None else order.index(new.after) + 1
        while at < len(order) and order[at] in added and order[at].code <= new.code:
            at += 1  # after a new key added below this one, or a row of the same arch added before it
        order.insert(at, new)
    first_line = text.line(gate.start)
    line_start = text.starts[first_line - 1]
    line_end = source.find(b"\n", line_start)
    line_end = len(source) if line_end < 0 else line_end
    indent = re.match(rb"[ \t]*", source[line_start:])
    assert indent is not None
    pad = indent.group().decode()
    if literal.lineno == literal.end_lineno:
        one_line = "{" + ", ".join(e.entry for e in order) + "}"
        width = len(source[line_start : gate.start].decode("utf-8", "replace")) + len(one_line)
        width += len(source[gate.end : line_end].rstrip(b"\r").decode("utf-8", "replace"))
        if width <= line_length(source):
            return [Edit(gate.start, gate.end, one_line.encode())]
        newline = "\r\n" if source[line_end - 1 : line_end] == b"\r" else "\n"
        split = "{" + newline + "".join(f"{pad}    {e.entry},{newline}" for e in order) + pad + "}"
        return [Edit(gate.start, gate.end, split.encode())]
    starts, ends = [text.line(e.start) for e in entries], [text.line(e.end) for e in entries]
    last_line = text.line(gate.end - 1)
    # one entry a line, or a value of several lines taking lines of its own (`"103a": functools.partial(` ... `),`)
    if any(ends[i] >= starts[i + 1] for i in range(len(entries) - 1)) or (
        starts[0] == first_line or ends[-1] == last_line
    ):
        raise CannotWiden(
            f"line {gate.line}: {_label(gate)} spans several lines but not one entry a line; add "
            f"{', '.join(e.entry for e in added)} by hand"
        )
    edits: list[Edit] = []
    groups: dict[int, list[_Entry]] = {}  # new entries by the index of the entry they follow (-1: first)
    position = -1
    for entry in order:
        if entry in entries:
            position = entries.index(entry)
        else:
            groups.setdefault(position, []).append(entry)
    for position, new_entries in groups.items():
        anchor = entries[max(position, 0)]
        anchor_line, anchor_end = text.line(anchor.start), text.line(anchor.end)
        entry_pad = re.match(rb"[ \t]*", source[text.starts[anchor_line - 1] :])
        assert entry_pad is not None
        entry_indent = entry_pad.group().decode()
        newline = "\r\n" if source[text.starts[anchor_line] - 2 : text.starts[anchor_line]] == b"\r\n" else "\n"
        body = "".join(f"{entry_indent}{e.entry},{newline}" for e in new_entries).encode()
        if position < 0:
            at = text.starts[anchor_line - 1]
        else:
            at = text.starts[anchor_end] if anchor_end < len(text.starts) - 1 else len(source)
            after = re.match(rb"[ \t]*,", source[anchor.end :])
            if after is None:  # the last entry without a trailing comma gains one
                edits.append(Edit(anchor.end, anchor.end, b","))
        edits.append(Edit(at, at, body))
    return sorted(edits, key=lambda e: e.start)
