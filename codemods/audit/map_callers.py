"""The keys an arch-keyed map sees: a lookup keyed by a parameter sees what its function's callers pass.

FlashInfer 0.6.10's `_TMEM_MAX_ALLOC_COLUMNS_MAP` (python_arch_map) lacks
sm_110 and sm_121, and `get_max_tmem_alloc_cols(compute_capability)` raises
for a missing key; but its only callers (cute_dsl/attention/mla_decode.py and
mla_decode_fp8.py, which import it as `_get_max_tmem_alloc_cols`) pass the
literal `"sm_100"`: the lookup never sees sm_110 or sm_121.

`keys_callers_pass` runs once per scan over the assembled records (the
per-file records stay as cached). For a python_arch_map record that excludes
the arch, when every failing lookup of the map is keyed by one parameter of
a module-level function (python_arch_map.keyed_by) and every reference to
that function over the project's Python files (jit_users.calls) is a call
passing a literal arch string for it (positional, by keyword, or the
default), the map sees those strings only: when none is the arch, the map
still excludes it (a caller passing it would fail: the maintainers added
sm_121 to this map, 5a767523c) but nothing reaches it with the arch today,
so it is no blocker: a human decides whether to add the key (needs-human,
its reason naming the callers). Otherwise (a call passing a variable, a reference that is
not a call, no call found, a package `__init__.py` exporting the function)
the record is left as it is. Pure: files come through a `Trees`.
"""

from __future__ import annotations

from collections.abc import Iterable

from codemods.audit import classify
from codemods.audit.jit_users import Reference, Trees, calls
from codemods.core.arch import Arch
from codemods.gates.python import python_arch_map

_SHOWN = 3  # callers named in a reason


def keys_callers_pass(gates: list[dict], known: Trees, files: tuple[str, ...], arch: Arch) -> None:
    """Read the keys the callers pass into each python_arch_map record that excludes `arch` (see the module);
    files come through `known`, the scan's one `Trees`."""
    read: dict[tuple[str, str], python_arch_map.KeyedBy | None] = {}  # a file's maps share its one tree
    asked = asked_of(gates)
    for record in asked:
        lookup = (record["file"], record["symbol"])
        if lookup not in read:
            read[lookup] = python_arch_map.keyed_by(known.source(lookup[0]), lookup[1], known.tree(lookup[0]))
    known.prefetch(keyed.function.encode() for keyed in read.values() if keyed is not None)  # calls' one search
    for record in asked:
        keyed = read[(record["file"], record["symbol"])]
        if keyed is None:
            continue
        passed = _literal_keys(keyed, calls(known, files, record["file"], keyed.function))
        if passed is None:
            continue
        where = [f"{reference.file}:{reference.line} passes \"{key}\"" for reference, key in passed]
        keys = [key for _, key in passed]
        shown = ", ".join(where[:_SHOWN]) + (f" (and {len(where) - _SHOWN} more)" if len(where) > _SHOWN else "")
        reaching = [item for item, key in zip(where, keys) if python_arch_map.names(key, arch)]
        if reaching:
            record["reason"] += f"; `{keyed.function}`'s callers pass {arch.name}: {', '.join(reaching[:_SHOWN])}"
            continue
        record["classification"] = classify.NEEDS_HUMAN
        record["reason"] = (
            f"`{record['symbol']}` is looked up with `{keyed.function}`'s `{keyed.parameter}`, and every call passes a "
            f"literal: {shown}; the lookup never sees {arch.name} today (a caller passing it would fail: add the key "
            "if one will)"
        )


def asked_of(gates: list[dict]) -> list[dict]:
    """The records `keys_callers_pass` reads and may change: the python_arch_map records that exclude the arch."""
    return [record for record in gates if record["kind"] == python_arch_map.KIND and record["excludes_arch"]]


def _literal_keys(keyed: python_arch_map.KeyedBy, references: Iterable[Reference | None]) -> list[tuple[Reference, str]] | None:
    """Each reference with the literal arch string its call passes; None when none is found, or at the first
    that passes none (an export, a reference that is no call, a call passing a variable): the references after
    it are never looked for."""
    passed = []
    for reference in references:
        key = keyed.passes(reference.call) if reference is not None and reference.call is not None else None
        if reference is None or key is None:
            return None
        passed.append((reference, key))
    return passed or None
