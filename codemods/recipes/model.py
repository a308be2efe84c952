"""Recipes as data: load them, recognise the project at --repo, plan the edits.

A recipe (TOML under targets/recipes/) names the gates to widen by kind and
selector, per project; a project file (targets/projects/) says where each
layout of the project keeps its files. Planning reads the target files and
asks the gate kinds what to change; it never writes.
"""

from __future__ import annotations

import bisect
import importlib
import inspect
import os
import pkgutil
import re
import tomllib
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from types import ModuleType
from typing import Callable

from codemods import gates
from codemods.core import errors
from codemods.apply import files
from codemods.cpp import hazards
from codemods.cpp.lexer import language as _language
from codemods.audit import kernel_paths
from codemods.core.arch import DEFAULT_ARCHS, Arch, ArchParseError, ArchSet, family
from codemods.gates import CannotWiden, Edit, Gate, NotFound, SourceError, TooDeep, apply_edits, line_of
from codemods.gates import _predicates

OUTCOMES = ("changed", "unchanged", "skipped", "failed")


# ---------------------------------------------------------------- gate kinds


def gate_kinds() -> dict[str, ModuleType]:
    """Every module in codemods.gates that defines KIND, by kind name."""
    kinds = {}
    for info in pkgutil.iter_modules(gates.__path__):
        if info.name.startswith("_"):
            continue
        module = importlib.import_module(f"codemods.gates.{info.name}")
        if hasattr(module, "KIND"):
            kinds[module.KIND] = module
    return kinds


def is_edit_kind(module: ModuleType) -> bool:
    """An edit kind rewrites code the same on every arch (`rewrite`) instead of widening gates (`find`/`widen`)."""
    return bool(getattr(module, "EDIT_KIND", False))


def _entry(module: ModuleType) -> Callable:
    return module.rewrite if is_edit_kind(module) else module.find


def selector_keys(module: ModuleType) -> set[str]:
    """A kind's selectors are the keyword-only parameters of its `find` (or an edit kind's `rewrite`)."""
    params = inspect.signature(_entry(module)).parameters.values()
    return {p.name for p in params if p.kind is inspect.Parameter.KEYWORD_ONLY}


def required_selectors(module: ModuleType) -> set[str]:
    params = inspect.signature(_entry(module)).parameters.values()
    return {p.name for p in params if p.kind is inspect.Parameter.KEYWORD_ONLY and p.default is inspect.Parameter.empty}


# ---------------------------------------------------------------- data files


def data_root() -> Path:
    """targets/ as installed inside the package, or beside it in a source checkout."""
    package = Path(__file__).resolve().parents[1]
    for candidate in (package / "targets", package.parent / "targets"):
        if candidate.is_dir():
            return candidate
    raise errors.RecipeInvalid("the built-in targets/ data is missing from this install", hint="reinstall codemod")


@dataclass(frozen=True)
class Layout:
    name: str
    markers: tuple[str, ...]
    places: dict[str, str]
    version_files: tuple[str, ...]
    include_dirs: tuple[str, ...] = ()


@dataclass(frozen=True)
class Project:
    name: str
    title: str
    layouts: tuple[Layout, ...]
    # Where the project defines its arch predicates ({python}/utils.py), read for what each admits.
    predicate_files: tuple[str, ...] = ()
    # name -> archs it admits, for when the source cannot be read (recipe test); checked against releases.
    predicates: tuple[tuple[str, tuple[str, ...]], ...] = ()

    def predicate_table(self) -> dict:
        return _predicates.table(dict(self.predicates), f"targets/projects/{self.name}.toml")


@dataclass(frozen=True)
class Location:
    """Where a change's gate may live: a file template and the kind's selectors."""

    file: str
    selector: dict


@dataclass(frozen=True)
class Change:
    id: str
    project: str
    file: str
    kind: str
    title: str
    why: str
    selector: dict
    admits: tuple[Arch, ...] = ()
    jit_modules: tuple[str, ...] = ()
    requires_symbol: str = ""
    symbol_files: tuple[str, ...] = ()
    at: tuple[Location, ...] = ()  # candidates tried in order; the first that holds the gate wins
    optional: str = ""  # "absent": no candidate file/function exists -> skipped, not failed
    needs: tuple[str, ...] = ()  # changes that must be applied with this one (its JIT spec needs their guards)
    default: str = "on"  # "off": planned only when named with --only, or offered by --interactive

    @property
    def locations(self) -> tuple[Location, ...]:
        return self.at or (Location(self.file, self.selector),)


@dataclass(frozen=True)
class Recipe:
    id: str
    summary: str
    archs: tuple[Arch, ...]  # `arch = "sm_120"` or `arch = ["sm_80", "sm_90"]`, in the recipe's order
    admit: str  # "family" or "exact"
    notes: tuple[str, ...]
    changes: tuple[Change, ...]
    path: Path
    tests: tuple["Case", ...] = ()
    upstream: tuple["Upstream", ...] = ()

    @property
    def arch(self) -> Arch:
        """The first arch the recipe names."""
        return self.archs[0]

    def targets(self, universe: tuple[Arch, ...]) -> tuple[Arch, ...]:
        """The archs each gate must admit after the recipe: every named arch (and its family), each gate widened once."""
        if self.admit == "family":
            scope = tuple(universe) + self.archs
            members = [member for arch in self.archs for member in family(arch, scope)]
            return tuple(sorted(dict.fromkeys(members)))
        return tuple(dict.fromkeys(self.archs))


@dataclass(frozen=True)
class Upstream:
    """A project release that ships the recipe's changes (and maybe more): upgrading beats patching."""

    project: str
    fixed_in: str  # the first release that has it, e.g. "0.6.17"
    pr: str = ""  # e.g. "#3903"
    ships: str = ""  # what that release has, in a few words


_RECIPE_KEYS = {"id", "summary", "arch", "admit", "notes", "change", "test", "upstream"}
_UPSTREAM_KEYS = {"project", "fixed_in", "pr", "ships"}
_TEST_KEYS = {"name", "change", "file", "before", "after", "outcome"}
_CHANGE_KEYS = {
    "id", "project", "file", "kind", "title", "why", "admits", "jit_modules",
    "requires_symbol", "symbol_files", "at", "optional", "needs", "default",
}
_ID_RE = re.compile(r"^[a-z0-9]+(?:[.-][a-z0-9]+)*$")


def _line_of_key(text: str, key: str, occurrence: int = 0) -> int:
    hits = [i + 1 for i, line in enumerate(text.splitlines()) if re.match(rf"\s*{re.escape(key)}\s*=", line)]
    return hits[min(occurrence, len(hits) - 1)] if hits else 0


def _invalid(path: Path, text: str, key: str, message: str, hint: str, occurrence: int = 0) -> errors.CodemodError:
    line = _line_of_key(text, key, occurrence)
    where = f"{path}:{line}" if line else str(path)
    return errors.RecipeInvalid(message, where=where, hint=hint)


def load_recipe(path: Path) -> Recipe:
    """Parse and validate one recipe file; errors name the file, the line and the fix."""
    try:
        # never a FIFO or device (it would block or never end); newlines read as read_text would
        text = files.read_regular(path).decode("utf-8").replace("\r\n", "\n").replace("\r", "\n")
    except files.NotRegularFile:
        raise errors.RecipeInvalid("cannot read recipe: not a regular file", where=str(path)) from None
    except OSError as exc:
        raise errors.RecipeInvalid(f"cannot read recipe: {exc.strerror or exc}", where=str(path)) from None
    except UnicodeDecodeError:
        raise errors.RecipeInvalid("recipe is not UTF-8", where=str(path)) from None
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise errors.RecipeInvalid(f"not valid TOML: {exc}", where=str(path)) from None

    kinds = gate_kinds()
    for key in data:
        if key not in _RECIPE_KEYS:
            raise _invalid(path, text, key, f"unknown key {key!r}", f"allowed keys: {', '.join(sorted(_RECIPE_KEYS))}")
    for key in ("id", "summary"):
        if not isinstance(data.get(key), str) or not data[key]:
            raise _invalid(path, text, key, f"{key!r} must be a non-empty string", f"add `{key} = \"...\"`")
    if not _ID_RE.match(data["id"]):
        raise _invalid(path, text, "id", f"recipe id {data['id']!r} must be kebab-case", "for example `sm120-enable`")
    archs = _load_archs(path, text, data.get("arch"))
    admit = data.get("admit", "family")
    if admit not in ("family", "exact"):
        raise _invalid(path, text, "admit", f"admit must be 'family' or 'exact', not {admit!r}", "use admit = \"family\"")
    notes = data.get("notes", [])
    if not isinstance(notes, list) or not all(isinstance(n, str) for n in notes):
        raise _invalid(path, text, "notes", "notes must be a list of strings", 'notes = ["..."]')
    raw_changes = data.get("change", [])
    if not isinstance(raw_changes, list) or not raw_changes:
        raise errors.RecipeInvalid("a recipe needs at least one [[change]] table", where=str(path), hint="see README, 'Writing a recipe'")

    changes = []
    seen = set()
    for n, raw in enumerate(raw_changes):
        changes.append(_load_change(path, text, n, raw, kinds, seen))
    ids = {c.id for c in changes}
    for n, change in enumerate(changes):
        for needed in change.needs:
            if needed not in ids or needed == change.id:
                raise _invalid(
                    path, text, "needs", f"change {change.id!r}: needs {needed!r}, which is not another change of this recipe",
                    f"changes: {', '.join(sorted(ids - {change.id}))}",
                )
    cases = _load_cases(path, text, data.get("test", []), {c.id: c for c in changes})
    upstream = _load_upstream(path, text, data.get("upstream", []))
    return Recipe(data["id"], data["summary"], archs, admit, tuple(notes), tuple(changes), path, cases, upstream)


def _load_archs(path: Path, text: str, raw) -> tuple[Arch, ...]:
    """`arch = "sm_120"` or a non-empty list of arch names, each given once."""
    hint = 'arch = "sm_120" or arch = ["sm_80", "sm_90"]'
    names = [raw] if isinstance(raw, str) else raw
    if not isinstance(names, list) or not names or not all(isinstance(n, str) and n for n in names):
        raise _invalid(path, text, "arch", "'arch' must be an arch name or a non-empty list of arch names", hint)
    archs = []
    for name in names:
        try:
            arch = Arch.parse(name)
        except ArchParseError as exc:
            raise _invalid(path, text, "arch", str(exc), "write each arch like sm_120") from None
        if arch in archs:
            raise _invalid(path, text, "arch", f"{arch.name} is named twice", hint)
        archs.append(arch)
    return tuple(archs)


def _load_upstream(path: Path, text: str, raw) -> tuple[Upstream, ...]:
    tables = [raw] if isinstance(raw, dict) else raw
    if not isinstance(tables, list) or not all(isinstance(t, dict) for t in tables):
        raise _invalid(path, text, "[[upstream]]", "upstream must be a table or an array of tables", "write it as [[upstream]]")
    out = []
    for n, table in enumerate(tables):
        for key, value in table.items():
            if key not in _UPSTREAM_KEYS:
                raise _invalid(path, text, key, f"upstream #{n + 1}: unknown key {key!r}", f"allowed keys: {', '.join(sorted(_UPSTREAM_KEYS))}")
            if not isinstance(value, str):
                raise _invalid(path, text, key, f"upstream #{n + 1}: {key!r} must be a string", f'{key} = "..."')
        for key in ("project", "fixed_in"):
            if not table.get(key):
                raise _invalid(path, text, "[[upstream]]", f"upstream #{n + 1}: {key!r} is required", 'project = "flashinfer", fixed_in = "0.6.17"')
        if _release(table["fixed_in"]) is None:
            raise _invalid(path, text, "fixed_in", f"upstream #{n + 1}: fixed_in {table['fixed_in']!r} is not a version", 'fixed_in = "0.6.17"')
        out.append(Upstream(table["project"], table["fixed_in"], table.get("pr", ""), table.get("ships", "")))
    return tuple(out)


def _release(version: str) -> tuple[tuple[int, ...], bool] | None:
    """(release numbers, is a pre-release) of a PEP 440-ish version; None when it has no numbers."""
    match = re.match(r"^\s*v?(\d+(?:\.\d+)*)(.*)$", version)
    if match is None:
        return None
    rest = match.group(2).lower()
    return tuple(int(n) for n in match.group(1).split(".")), bool(re.match(r"^[._-]?(?:a|b|c|rc|alpha|beta|pre|preview|dev)(?:[._-]?\d|$)", rest))


def _older(version: str, than: str) -> bool | None:
    """Whether `version` is older than release `than`; None when `version` cannot be read."""
    mine, theirs = _release(version), _release(than)
    if mine is None or theirs is None:
        return None
    width = max(len(mine[0]), len(theirs[0]))
    a, b = mine[0] + (0,) * (width - len(mine[0])), theirs[0] + (0,) * (width - len(theirs[0]))
    return a < b or (a == b and mine[1] and not theirs[1])


def upstream_advice(recipe: Recipe, target: "Target") -> list[str]:
    """What to say before the notes: upgrade instead of patching, when the project's release is older than the fix."""
    out = []
    for up in recipe.upstream:
        if up.project != target.project.name:
            continue
        version = target.version()
        older = _older(version, up.fixed_in) if version else None
        if older is False:
            continue
        pr = f" (PR {up.pr})" if up.pr else ""
        ships = f": {up.ships}" if up.ships else ""
        title = target.project.title
        unknown = f"its version {version!r} cannot be compared" if version else "its version is unknown here: no version file"
        if older:
            out.append(
                f"upgrade {title} to {up.fixed_in} or later: this tree is {title} {version}, and {up.fixed_in}+ ships "
                f"this recipe's {title} changes upstream{pr}{ships}. Patch this tree only if you cannot upgrade."
            )
        else:
            out.append(
                f"if this {title} is older than {up.fixed_in} ({unknown}), upgrade it to "
                f"{up.fixed_in} or later, which ships this recipe's {title} changes upstream{pr}{ships}. "
                "Patch this tree only if you cannot upgrade."
            )
    return out


@dataclass(frozen=True)
class Case:
    """A before/after example of one change, run by `codemod recipe test`."""

    name: str
    change: str
    file: str  # only its extension matters (picks the grammar)
    before: str
    after: str | None  # None: the change must leave `before` alone
    outcome: str  # "changed", "unchanged" or "failed"


def _load_cases(path: Path, text: str, raw_cases, changes: dict) -> tuple[Case, ...]:
    if not isinstance(raw_cases, list):
        raise _invalid(path, text, "[[test]]", "test must be an array of tables", "write each case as [[test]]")
    cases = []
    for n, raw in enumerate(raw_cases):
        if not isinstance(raw, dict):
            raise _invalid(path, text, "test", f"test #{n + 1} must be a [[test]] table", "write each case as [[test]]")
        for key in raw:
            if key not in _TEST_KEYS:
                raise _invalid(path, text, key, f"test #{n + 1}: unknown key {key!r}", f"allowed keys: {', '.join(sorted(_TEST_KEYS))}")
        if not isinstance(raw.get("change"), str) or raw["change"] not in changes:
            raise _invalid(path, text, "change", f"test #{n + 1}: change {raw.get('change')!r} is not in this recipe", f"one of: {', '.join(changes)}", len(changes) + n)
        if not isinstance(raw.get("before"), str):
            raise _invalid(path, text, "before", f"test #{n + 1}: 'before' must be a string", "write before as a multi-line string")
        after = raw.get("after")
        for key in ("after", "name", "file"):
            if raw.get(key) is not None and not isinstance(raw[key], str):
                raise _invalid(path, text, key, f"test #{n + 1}: {key!r} must be a string", f'{key} = "..."')
        outcome = raw.get("outcome", "changed" if after is not None and after != raw["before"] else "unchanged")
        if outcome not in ("changed", "unchanged", "failed"):
            raise _invalid(path, text, "outcome", f"test #{n + 1}: outcome must be changed, unchanged or failed", 'outcome = "unchanged"')
        file = raw.get("file") or changes[raw["change"]].file
        cases.append(Case(raw.get("name", f"{raw['change']} #{n + 1}"), raw["change"], file, raw["before"], after, outcome))
    return tuple(cases)


@dataclass
class CaseResult:
    case: Case
    ok: bool
    message: str
    got: str = ""
    too_deep: str = ""  # why the case's source cannot be read at all (nested too deeply)


def run_cases(recipe: Recipe, universe: tuple[Arch, ...] = DEFAULT_ARCHS) -> list[CaseResult]:
    """Apply each change to its example `before`: the output must equal `after`, and a second pass change nothing."""
    kinds = gate_kinds()
    targets = recipe.targets(universe)
    universe = tuple(dict.fromkeys(tuple(universe) + targets))
    changes = {c.id: c for c in recipe.changes}
    results = []
    for case in recipe.tests:
        change = changes[case.change]
        for location in change.locations:  # the case stands for whichever candidate holds its gate
            pc = PlannedChange(change, case.file, before=case.before.encode(), selector=location.selector)
            _plan_change(pc, kinds[change.kind], universe, targets, None, None)
            if not pc.missed:
                break
        got = pc.after.decode("utf-8", errors="replace")
        if pc.outcome != case.outcome:
            detail = f": {pc.reason}" if pc.reason else ""
            results.append(CaseResult(case, False, f"expected {case.outcome}, got {pc.outcome}{detail}", got, pc.reason if pc.too_deep else ""))
            continue
        if case.outcome == "changed" and got != case.after:
            results.append(CaseResult(case, False, "output differs from 'after'", got))
            continue
        if case.outcome == "changed":
            again = PlannedChange(change, case.file, before=pc.after, selector=pc.selector)
            _plan_change(again, kinds[change.kind], universe, targets, None, None)
            if again.outcome != "unchanged":
                results.append(CaseResult(case, False, f"a second pass is not a no-op ({again.outcome})", got))
                continue
        results.append(CaseResult(case, True, case.outcome, got))
    return results


def _load_change(path, text, n, raw, kinds, seen) -> Change:
    if "at" in raw and "file" not in raw:
        if not isinstance(raw["at"], list) or not raw["at"] or not all(isinstance(a, dict) for a in raw["at"]):
            raise _invalid(path, text, "[[change.at]]", f"change #{n + 1}: 'at' must be a list of [[change.at]] tables", "see README, 'Writing a recipe'", n)
        raw = {**raw, "file": raw["at"][0].get("file", "")}
    for key in ("id", "project", "file", "kind"):
        if not isinstance(raw.get(key), str) or not raw[key]:
            raise _invalid(path, text, "[[change]]", f"change #{n + 1}: {key!r} must be a non-empty string", f"add `{key} = \"...\"`", n)
    kind = raw["kind"]
    if kind not in kinds:
        raise _invalid(path, text, "kind", f"unknown gate kind {kind!r}", f"known kinds: {', '.join(sorted(kinds))}", n)
    module = kinds[kind]
    allowed = _CHANGE_KEYS | selector_keys(module)
    for key in raw:
        if key not in allowed:
            raise _invalid(
                path, text, key, f"change {raw['id']!r}: unknown key {key!r} for kind {kind}",
                f"allowed keys: {', '.join(sorted(allowed))}",
            )
    if not _ID_RE.match(raw["id"]) or raw["id"] in seen:
        raise _invalid(path, text, "id", f"change id {raw['id']!r} must be unique and kebab-case", "for example `flashinfer.trtllm-comm-jit`", n + 1)
    seen.add(raw["id"])
    _check_relative(path, text, raw["file"])
    admits = ()
    if "admits" in raw and is_edit_kind(module):
        raise _invalid(path, text, "admits", f"change {raw['id']!r}: {kind} is an edit kind; it admits no arch", "drop `admits`")
    if "admits" in raw:
        try:
            admits = tuple(Arch.parse(a) for a in raw["admits"])
        except (ArchParseError, TypeError) as exc:
            raise _invalid(path, text, "admits", f"change {raw['id']!r}: {exc}", 'admits = ["sm_90", "sm_100"]') from None
    selector = {k: raw[k] for k in selector_keys(module) if k in raw}
    for key, value in selector.items():
        _check_selector(path, text, raw["id"], module, key, value)
    for key in ("title", "why", "requires_symbol"):
        if not isinstance(raw.get(key, ""), str):
            raise _invalid(path, text, key, f"change {raw['id']!r}: {key!r} must be a string", f'{key} = "..."', n)
    for key in ("symbol_files", "jit_modules"):
        value = raw.get(key, [])
        if not isinstance(value, list) or not all(isinstance(x, str) and x for x in value):
            raise _invalid(path, text, key, f"change {raw['id']!r}: {key!r} must be a list of strings", f'{key} = ["..."]', n)
    symbol_files = tuple(raw.get("symbol_files", ()))
    for f in symbol_files:
        _check_relative(path, text, f, "symbol_files")
    at = []
    for i, candidate in enumerate(raw.get("at", [])):
        allowed_at = {"file"} | selector_keys(kinds[kind])
        for key, value in candidate.items():
            if key not in allowed_at:
                raise _invalid(path, text, key, f"change {raw['id']!r}: unknown key {key!r} in [[change.at]] #{i + 1}", f"allowed keys: {', '.join(sorted(allowed_at))}")
            if key == "file" and not isinstance(value, str):
                raise _invalid(path, text, key, f"change {raw['id']!r}: {key!r} must be a string", f'{key} = "..."')
            if key != "file":
                _check_selector(path, text, raw["id"], module, key, value)
        if "file" not in candidate:
            raise _invalid(path, text, "[[change.at]]", f"change {raw['id']!r}: [[change.at]] #{i + 1} needs a file", 'file = "{python}/..."')
        _check_relative(path, text, candidate["file"])
        at.append(Location(candidate["file"], {**selector, **{k: v for k, v in candidate.items() if k != "file"}}))
    needs = raw.get("needs", [])
    if not isinstance(needs, list) or not all(isinstance(x, str) for x in needs):
        raise _invalid(path, text, "needs", f"change {raw['id']!r}: needs must be a list of change ids", 'needs = ["flashinfer.trtllm-allreduce-guards"]')
    optional = raw.get("optional", "")
    if optional not in ("", "absent"):
        raise _invalid(path, text, "optional", f"change {raw['id']!r}: optional must be \"absent\"", 'optional = "absent"')
    default = raw.get("default", "on")
    if default not in ("on", "off"):
        raise _invalid(path, text, "default", f"change {raw['id']!r}: default must be \"on\" or \"off\"", 'default = "off"')
    for location in at or [Location(raw["file"], selector)]:
        missing = sorted(required_selectors(module) - set(location.selector))
        if missing:
            raise _invalid(path, text, "kind", f"change {raw['id']!r}: kind {kind} needs {', '.join(missing)}", f'add `{missing[0]} = ...`', n)
    return Change(
        id=raw["id"], project=raw["project"], file=raw["file"], kind=kind,
        title=raw.get("title", raw["id"]), why=raw.get("why", ""), selector=selector,
        admits=admits, jit_modules=tuple(raw.get("jit_modules", ())),
        requires_symbol=raw.get("requires_symbol", ""), symbol_files=symbol_files,
        at=tuple(at), optional=optional, needs=tuple(needs), default=default,
    )


def _check_selector(path: Path, text: str, change_id: str, module: ModuleType, key: str, value) -> None:
    """A selector is a string unless its kind says otherwise (check_selector)."""
    if hasattr(module, "check_selector"):
        problem = module.check_selector(key, value)
    else:
        problem = "" if isinstance(value, str) else f"{key!r} must be a string"
    if problem:
        hint = getattr(module, "SELECTOR_HINTS", {}).get(key) or (f'{key} = "..."' if key != "replace" else 'replace = [{from = "...", to = "..."}]')
        raise _invalid(path, text, key, f"change {change_id!r}: {problem}", hint)


# The placeholders a project layout defines; a path template may use them whole and nothing else
# (they are substituted as text, never through str.format, which a data file could steer).
PLACEHOLDERS = ("python", "include", "csrc")
_PLACEHOLDER_RE = re.compile(r"\{(python|include|csrc)\}")


def _check_relative(path: Path, text: str, file: str, key: str = "file") -> None:
    if not isinstance(file, str) or not file:
        raise _invalid(path, text, key, f"{key} must be a non-empty string (a path), not {file!r}", f'{key} = "{{python}}/..."')
    line = _line_of_value(text, file)
    where = f"{path}:{line}" if line else ""
    leftover = _PLACEHOLDER_RE.sub("", file)
    if "{" in leftover or "}" in leftover:
        message = f"path {file!r}: a path may use only the placeholders {{python}}, {{include}} and {{csrc}}, whole"
        hint = 'for example file = "{python}/jit/comm.py"'
        raise errors.RecipeInvalid(message, where=where, hint=hint) if where else _invalid(path, text, key, message, hint)
    pure = PurePosixPath(file)
    if pure.is_absolute() or ".." in pure.parts or file.startswith("~"):
        raise _invalid(path, text, "file", f"path {file!r} leaves the repository", "paths are relative to --repo and cannot use '..' or start with '/'")


def _line_of_value(text: str, value: str) -> int:
    """The line of the first string literal in `text` that spells `value` as written (0: not found)."""
    for quoted in (f'"{value}"', f"'{value}'"):
        at = text.find(quoted)
        if at >= 0:
            return text.count("\n", 0, at) + 1
    return 0


def load_project(path: Path) -> Project:
    data = tomllib.loads(path.read_text(encoding="utf-8"))
    layouts = []
    for raw in data["layout"]:
        places = {k: v for k, v in raw.items() if k not in ("name", "markers", "version_files", "include_dirs")}
        layouts.append(
            Layout(
                raw["name"], tuple(raw["markers"]), places,
                tuple(raw.get("version_files", ())), tuple(raw.get("include_dirs", ())),
            )
        )
    predicates = tuple((name, tuple(archs)) for name, archs in data.get("predicates", {}).items())
    return Project(
        data["name"], data.get("title", data["name"]), tuple(layouts),
        tuple(data.get("predicate_files", ())), predicates,
    )


def recipe_dirs(extra: list[Path] | None = None) -> list[Path]:
    dirs = [data_root() / "recipes"]
    env = os.environ.get("CODEMOD_RECIPES")
    if env:
        dirs += [Path(p) for p in env.split(os.pathsep) if p]
    dirs += list(extra or [])
    return dirs


def available_recipes(extra: list[Path] | None = None) -> dict[str, Recipe]:
    recipes: dict[str, Recipe] = {}
    for directory in recipe_dirs(extra):
        if not directory.is_dir():
            raise errors.RecipeInvalid("recipe folder does not exist", where=str(directory), hint="check --recipes / $CODEMOD_RECIPES")
        for file in sorted(directory.glob("*.toml")):
            recipe = load_recipe(file)
            recipes[recipe.id] = recipe
    return recipes


def find_recipe(name: str, extra: list[Path] | None = None) -> Recipe:
    if name.endswith(".toml") and Path(name).is_file():
        return load_recipe(Path(name))
    recipes = available_recipes(extra)
    if name not in recipes:
        raise errors.UnknownRecipe(f"no recipe named {name!r}", hint=f"known recipes: {', '.join(sorted(recipes))}")
    return recipes[name]


def projects() -> dict[str, Project]:
    return {p.name: p for p in (load_project(f) for f in sorted((data_root() / "projects").glob("*.toml")))}


# ---------------------------------------------------------------- detection


@dataclass(frozen=True)
class Target:
    """A recognised project at a path, in one layout."""

    project: Project
    layout: Layout
    root: Path

    def resolve(self, template: str) -> str:
        """Fill {python}/{include}/{csrc} (as text) and normalise to a POSIX path relative to root."""

        def place(match: re.Match) -> str:
            name = match.group(1)
            if name not in self.layout.places:
                raise errors.RecipeInvalid(
                    f"placeholder {{{name}}} is not defined for {self.project.name} ({self.layout.name} layout)",
                    where=template,
                )
            return self.layout.places[name]

        filled = _PLACEHOLDER_RE.sub(place, template)
        return os.path.normpath(filled).replace(os.sep, "/")

    def version(self) -> str:
        for rel in self.layout.version_files:
            file = self.root / rel
            if file.is_file():
                match = re.search(
                    r"""^(?:__version__|version)\s*(?::\s*str\s*)?=\s*(?:version\s*=\s*)?["']([^"']+)["']""",
                    file.read_text(errors="replace"), re.M,
                )
                if match and match.group(1) != "0.0.0.dev0":  # SGLang's fallback when setuptools_scm is absent
                    return match.group(1)
                first = file.read_text(errors="replace").strip().splitlines()
                if first and re.match(r"^\d+\.\d+", first[0]):
                    return first[0]
        return ""


def detect(root: Path, names: list[str] | None = None) -> Target:
    """Which project (and layout) lives at root."""
    known = projects()
    candidates = [known[n] for n in (names or known) if n in known]
    for project in candidates:
        for layout in project.layouts:
            if all((root / m).exists() for m in layout.markers):
                return Target(project, layout, root)
    raise errors.UnknownProject(
        f"no {' or '.join(p.title for p in candidates)} tree found here",
        where=str(root),
    )


# ---------------------------------------------------------------- planning


@dataclass
class GateChange:
    gate: Gate
    outcome: str  # changed / unchanged / failed
    after_text: str = ""
    admits_after: ArchSet | None = None
    reason: str = ""
    forced: list[str] = field(default_factory=list)  # blockers overridden with --force
    warnings: list[str] = field(default_factory=list)  # potential blockers: what codemod could not follow


@dataclass
class PlannedChange:
    change: Change
    file: str
    outcome: str = "unchanged"
    reason: str = ""
    before: bytes = b""
    after: bytes = b""
    gates: list[GateChange] = field(default_factory=list)
    edits: list[Edit] = field(default_factory=list)  # on `before`; what report builds the diff from
    selector: dict | None = None  # the matched location's selectors (default: the change's)
    tried: list[str] = field(default_factory=list)  # candidates that did not hold the gate, and why
    missed: bool = False  # the file holds no gate the selectors pick (another candidate may)
    too_deep: bool = False  # the file nests deeper than codemod reads
    rewrites: list[tuple[int, str, str]] = field(default_factory=list)  # edit kinds: (line, before, after) per edited line

    @property
    def id(self) -> str:
        return self.change.id


@dataclass
class Plan:
    recipe: Recipe
    target: Target
    universe: tuple[Arch, ...]
    targets: tuple[Arch, ...]
    changes: list[PlannedChange]
    # changes left out by --only/--skip that a selected change `needs`, planned to see whether they would change
    unselected: list[PlannedChange] = field(default_factory=list)

    @property
    def failed(self) -> list[PlannedChange]:
        return [c for c in self.changes if c.outcome == "failed"]

    @property
    def changed(self) -> list[PlannedChange]:
        return [c for c in self.changes if c.outcome == "changed"]

    def files(self) -> list[str]:
        """The files the plan writes."""
        return list(dict.fromkeys(c.file for c in self.changed))

    def jit_modules(self) -> list[str]:
        return list(dict.fromkeys(m for c in self.changed for m in c.change.jit_modules))


def _find(kind: ModuleType, source: bytes, file: str, universe, selector: dict, meanings=None) -> list[Gate]:
    params = inspect.signature(kind.find).parameters
    extra = {"language": _language(file)} if "language" in params else {}
    if "meanings" in params and meanings is not None:
        extra["meanings"] = meanings
    return kind.find(source, universe, **extra, **selector)


def _with_meanings(function: Callable, meanings) -> dict:
    """`meanings=` for a kind function that reads predicates, else nothing."""
    return {"meanings": meanings} if meanings is not None and "meanings" in inspect.signature(function).parameters else {}


def meanings_for(project: Project, file: str, source: bytes, target: Target | None = None, read=None) -> dict:
    """What each arch predicate `file` can use admits: the project's table, then the definitions in its
    predicate files (through `read`), then those in `file` itself; the later wins."""
    known = project.predicate_table()
    if target is not None and read is not None:
        for template in project.predicate_files:
            rel = target.resolve(template)
            try:
                data = read(rel)
            except OSError:
                continue
            known.update(_predicates.read(data, rel, known))
    known.update(_predicates.read(source, file, known))
    return known


def _span_after(gate: Gate, shifts: tuple[list[Edit], list[int], list[int]]) -> tuple[int, int]:
    """Where the gate's text sits after the edits; pure insertions at its edges belong to it.

    O(log n) per gate with `shifts` from _shifts, for files with thousands of edits.
    """
    ordered, ends, deltas = shifts
    lo, hi = bisect.bisect_left(ends, gate.start), bisect.bisect_right(ends, gate.start)
    inserted_at_start = sum(len(e.text) for e in ordered[lo:hi] if e.start == e.end == gate.start)
    start = gate.start + deltas[hi] - inserted_at_start
    end = gate.end + deltas[bisect.bisect_right(ends, gate.end)]
    return start, end


def _shifts(edits: list[Edit]) -> tuple[list[Edit], list[int], list[int]]:
    """Edits sorted by end, their ends, and prefix sums of their length changes."""
    ordered = sorted(edits, key=lambda e: (e.end, e.start))
    deltas = [0]
    for e in ordered:
        deltas.append(deltas[-1] + len(e.text) - (e.end - e.start))
    return ordered, [e.end for e in ordered], deltas


def _describe(change: Change, selector: dict | None = None) -> str:
    chosen = change.selector if selector is None else selector
    parts = [f"{k}={v}" for k, v in chosen.items()]
    if change.admits:
        parts.append("admits " + "+".join(a.name for a in change.admits))
    return f"{change.kind} gate" + (f" ({', '.join(parts)})" if parts else "")


def _symbol_defined(name: str, source: bytes) -> bool:
    pattern = rf"^(?:def\s+{re.escape(name)}\b|{re.escape(name)}\s*=|from\s+\S+\s+import\s+.*\b{re.escape(name)}\b)"
    return re.search(pattern.encode(), source, re.M) is not None


def plan(
    recipe: Recipe,
    target: Target,
    universe: tuple[Arch, ...] = DEFAULT_ARCHS,
    only: list[str] | None = None,
    skip: list[str] | None = None,
    read: Callable[[str], bytes] | None = None,
    force: bool = False,
    offer_off: bool = False,
) -> Plan:
    """Plan every change of the recipe for the project at target.root. Reads, never writes.

    A CUDA guard around instructions a target arch lacks (hazards.blockers_for)
    is not widened unless `force`; forced gates keep their blockers in `GateChange.forced`.
    A change with `default = "off"` is planned only when `only` names it, or
    with `offer_off` (--interactive asks about it).
    """
    kinds = gate_kinds()
    targets = recipe.targets(universe)
    universe = tuple(dict.fromkeys(tuple(universe) + targets))
    read = read or (lambda rel: (target.root / rel).read_bytes())
    relevant = [c for c in recipe.changes if c.project == target.project.name]
    if not relevant:
        raise errors.PlanFailed(
            f"recipe {recipe.id} has no changes for {target.project.title}",
            where=str(target.root),
            hint=f"it targets: {', '.join(sorted({c.project for c in recipe.changes}))}",
        )
    for selected in (only or []) + (skip or []):
        if selected not in {c.id for c in recipe.changes}:
            raise errors.UnknownRecipe(
                f"no change {selected!r} in recipe {recipe.id}",
                hint=f"changes: {', '.join(c.id for c in recipe.changes)}",
            )
    every = relevant
    if only:
        relevant = [c for c in relevant if c.id in only]
    elif not offer_off:
        relevant = [c for c in relevant if c.default != "off"]
    if skip:
        relevant = [c for c in relevant if c.id not in skip]
    wanted = {n for c in relevant for n in c.needs}
    left_out = [c for c in every if c not in relevant and c.id in wanted]

    current: dict[str, bytes] = {}
    planned = []
    for change in relevant:
        pc = _plan_locations(change, target, kinds[change.kind], universe, targets, current, read, force)
        if pc.outcome == "failed" and change.default == "off" and not only:  # offered, not asked for: no reason to stop
            pc.outcome, pc.reason = "skipped", f"off by default, and cannot be made here: {pc.reason}"
        planned.append(pc)
        if pc.outcome == "changed":
            current[pc.file] = pc.after
    unselected = [
        _plan_locations(change, target, kinds[change.kind], universe, targets, dict(current), read, force)
        for change in left_out
    ]
    return Plan(recipe, target, universe, targets, planned, unselected)


def half_patches(plan: Plan, selected: list[PlannedChange]) -> list[tuple[str, str, str]]:
    """Why applying only `selected` would leave a half-patch: (change, needed change, why) for each need left unmet.

    A needed change that would change nothing (its gates already admit the
    target) is no reason; one that would change files, or cannot be planned,
    is: a JIT spec widened without its kernels' guards builds empty kernels.
    """
    chosen = {c.id for c in selected}
    by_id = {c.id: c for c in [*plan.changes, *plan.unselected]}
    problems = []
    for pc in selected:
        for needed in pc.change.needs:
            other = by_id.get(needed)
            if other is None or needed in chosen or other.outcome in ("unchanged", "skipped"):
                continue
            state = "is left out" if other.outcome == "changed" else f"cannot be applied ({other.reason})"
            problems.append((pc.id, needed, state))
    return problems


def _plan_locations(change: Change, target: Target, kind: ModuleType, universe, targets, current: dict, read, force: bool) -> PlannedChange:
    """Try the change's candidate locations in order; the first that holds its gate is planned.

    A candidate misses when its file does not exist or holds no such gate.
    When all miss, the change fails naming each candidate and why; with
    `optional = "absent"` it is skipped instead, but only if no candidate's
    file and function exist at all (a gate that moved away must not pass silently).
    """
    tried: list[str] = []
    anchors_absent = True
    last: PlannedChange | None = None
    for location in change.locations:
        file = target.resolve(location.file)
        pc = PlannedChange(change, file, selector=location.selector)
        last = pc
        if file not in current:
            try:
                current[file] = read(file)
            except FileNotFoundError:
                tried.append(f"{file}: not found")
                continue
            except IsADirectoryError:
                tried.append(f"{file}: is a directory")
                continue
            except files.NotRegularFile:
                tried.append(f"{file}: not a regular file")
                anchors_absent = False  # it exists; codemod will not read a FIFO or a device
                continue
            except PermissionError:
                tried.append(f"{file}: permission denied")
                anchors_absent = False  # it exists; we just cannot read it
                continue
        pc.before = current[file]
        _plan_change(pc, kind, universe, targets, target, read, force)
        if not pc.missed:
            pc.tried = tried
            return pc
        function = location.selector.get("function")
        if function is None or re.search(rb"def\s+" + re.escape(function.encode()) + rb"\b", pc.before):
            anchors_absent = False
        tried.append(pc.reason)
    assert last is not None
    last.tried = tried
    last.before = last.after = current.get(last.file, b"")
    if change.optional == "absent" and anchors_absent:
        last.outcome, last.reason = "skipped", "not in this version (" + "; ".join(tried) + ")"
    else:
        last.outcome = "failed"
        last.reason = tried[0] if len(tried) == 1 else "no candidate holds the gate: " + "; ".join(tried)
    return last


def _plan_change(pc: PlannedChange, kind: ModuleType, universe, targets, target: Target | None, read, force: bool = False) -> None:
    change = pc.change
    source = pc.before
    pc.after = source
    if b"\0" in source[:8192]:
        pc.outcome, pc.reason = "failed", f"{pc.file}: looks like a binary file (NUL bytes), not source"
        return
    if is_edit_kind(kind):
        _plan_rewrite(pc, kind)
        return
    meanings = None
    if "meanings" in inspect.signature(kind.find).parameters:
        project = target.project if target is not None else projects().get(change.project)
        if project is not None:
            meanings = meanings_for(project, pc.file, source, target, read)
    try:
        found = _find(kind, source, pc.file, universe, pc.selector if pc.selector is not None else change.selector, meanings)
    except SourceError as exc:
        pc.outcome, pc.reason = "failed", f"{pc.file}: {exc}"
        pc.too_deep = isinstance(exc, TooDeep)
        return
    found = [g for g in found if all(g.admits.admits(a) for a in change.admits)]
    if not found:
        pc.outcome, pc.reason = "failed", f"{_describe(change, pc.selector)} not found in {pc.file}"
        pc.missed = True
        return
    edits: list[Edit] = []
    symbol_missing = False
    for gate in found:
        if all(gate.admits.admits(a) for a in targets):
            pc.gates.append(GateChange(gate, "unchanged", gate.text, gate.admits, "already admits " + ", ".join(a.name for a in targets)))
            continue
        blockers = _blockers(source, gate, targets)
        paths = _kernel_paths(pc.file, source, gate, targets, target, read)
        warnings = paths.warnings() if paths is not None else []
        if paths is not None:
            blockers += paths.blockers()
        if blockers and not force:
            pc.gates.append(
                GateChange(gate, "failed", reason="not widenable: " + "; ".join(blockers) + " (--force overrides)", warnings=warnings)
            )
            continue
        try:
            gate_edits = kind.widen(source, gate, targets, universe, **_with_meanings(kind.widen, meanings))
        except CannotWiden as exc:
            if change.requires_symbol and target is not None and not _symbol_available(change, target, source, read):
                symbol_missing = True  # said below, the way every version without the predicate is refused
                pc.gates.append(GateChange(gate, "changed"))
                continue
            pc.gates.append(GateChange(gate, "failed", reason=str(exc), warnings=warnings))
            continue
        edits += gate_edits
        pc.gates.append(GateChange(gate, "changed", forced=blockers, warnings=warnings))
    failed = [g for g in pc.gates if g.outcome == "failed"]
    if failed:
        pc.outcome = "failed"
        pc.reason = "; ".join(f"{pc.file}:{g.gate.line}: cannot widen `{g.gate.text.strip()}`: {g.reason}" for g in failed)
        return
    if not edits and not symbol_missing:
        pc.outcome, pc.reason = "unchanged", "already enabled: every gate admits " + ", ".join(a.name for a in targets)
        return
    if symbol_missing or change.requires_symbol and target is not None and not _symbol_available(change, target, source, read):
        pc.outcome = "failed"
        pc.reason = (
            f"{change.requires_symbol} is not defined in this {target.project.title} "
            f"(looked in {', '.join(target.resolve(f) for f in change.symbol_files) or pc.file}); "
            "this version has no predicate for the arch, so none can be imported"
        )
        return
    try:
        after = apply_edits(source, edits)
    except ValueError as exc:
        pc.outcome, pc.reason = "failed", f"{pc.file}: {exc}"
        return
    shifts = _shifts(edits)
    if meanings is not None:  # the edits may define a predicate in this file (`_is_sm120_supported = ...`)
        meanings = {**meanings, **_predicates.read(after, pc.file, meanings)}
    for gc in pc.gates:
        if gc.outcome != "changed":
            continue
        start, end = _span_after(gc.gate, shifts)
        gc.after_text = after[start:end].decode("utf-8", errors="replace")
        extra = {"detail": gc.gate.detail} if "detail" in inspect.signature(kind.admits).parameters else {}
        gc.admits_after = kind.admits(gc.after_text, universe, **extra, **_with_meanings(kind.admits, meanings))
        if not all(gc.admits_after.admits(a) for a in targets):
            pc.outcome, pc.reason = "failed", f"{pc.file}:{gc.gate.line}: the rewritten gate does not admit the target (internal check)"
            return
    pc.after = after
    pc.edits = sorted(set(edits))
    pc.outcome = "changed"


def _rewrite(kind: ModuleType, source: bytes, file: str, selector: dict) -> list[Edit]:
    params = inspect.signature(kind.rewrite).parameters
    extra = {"language": _language(file)} if "language" in params else {}
    return kind.rewrite(source, **extra, **selector)


def _plan_rewrite(pc: PlannedChange, kind: ModuleType) -> None:
    """An edit kind's change: its edits, or unchanged when already made, or a miss naming what is not there."""
    source = pc.before
    try:
        edits = _rewrite(kind, source, pc.file, pc.selector if pc.selector is not None else pc.change.selector)
    except SourceError as exc:
        pc.outcome, pc.reason = "failed", f"{pc.file}: {exc}"
        return
    except NotFound as exc:
        pc.outcome, pc.reason, pc.missed = "failed", f"{pc.file}: {exc}", True
        return
    if not edits:
        pc.outcome, pc.reason = "unchanged", f"already made: {pc.file} has the replacement and not the original"
        return
    try:
        pc.after = apply_edits(source, edits)
    except ValueError as exc:
        pc.outcome, pc.reason = "failed", f"{pc.file}: {exc}"
        return
    pc.edits = sorted(set(edits))
    pc.rewrites = _edited_lines(source, pc.edits)
    pc.outcome = "changed"


def _edited_lines(source: bytes, edits: list[Edit]) -> list[tuple[int, str, str]]:
    """Each source line an edit touches, before and after (edits sorted, non-overlapping)."""
    out: list[tuple[int, str, str]] = []
    i = 0
    while i < len(edits):
        start = source.rfind(b"\n", 0, edits[i].start) + 1
        end = source.find(b"\n", edits[i].end)
        end = len(source) if end < 0 else end
        group = [edits[i]]
        while i + 1 < len(edits) and edits[i + 1].start <= end:
            i += 1
            group.append(edits[i])
            end = source.find(b"\n", edits[i].end)
            end = len(source) if end < 0 else end
        i += 1
        after = apply_edits(source[start:end], [Edit(e.start - start, e.end - start, e.text) for e in group])
        out.append((line_of(source, start), source[start:end].decode("utf-8", "replace").strip(), after.decode("utf-8", "replace").strip()))
    return out


def intended_rewrites(recipe: Recipe, target: Target, file: str, base: bytes, work: bytes) -> tuple[bytes, list[tuple[str, list[int]]]]:
    """`base` with the recipe's edit-kind changes to `file` made, for those `work` already has; and (change id, base lines) of each.

    `verify` compares the work tree with this instead of the bare base, so a
    host-side fix the recipe planned is not taken for an unexplained change.
    """
    kinds = gate_kinds()
    made = []
    for change in recipe.changes:
        kind = kinds.get(change.kind)
        if kind is None or not is_edit_kind(kind) or change.project != target.project.name:
            continue
        for location in change.locations:
            if target.resolve(location.file) != file:
                continue
            try:
                edits = _rewrite(kind, base, file, location.selector)
                done = not _rewrite(kind, work, file, location.selector)
            except (NotFound, SourceError):
                continue
            if edits and done:
                made.append((change.id, sorted({line_of(base, e.start) for e in edits})))
                base = apply_edits(base, edits)
            break
    return base, made


def _blockers(source: bytes, gate: Gate, targets: tuple[Arch, ...]) -> list[str]:
    """Instructions inside a CUDA guard's region that a target lacks (ARCH_FACTS section 3)."""
    if gate.kind != "cuda_guard":
        return []
    found: list[str] = []
    for arch in targets:
        for blocker in hazards.blockers_for(source, gate, arch):
            if blocker not in found:
                found.append(blocker)
    return found


def _kernel_paths(file: str, source: bytes, gate: Gate, targets: tuple[Arch, ...], target: Target | None, read):
    """What widening a Python gate that selects a JIT module makes the targets compile (kernel_paths.check).

    None for a CUDA guard, without a tree to read (recipe test), or in a
    project whose layout names no csrc and include folders (no JIT specs).
    """
    if gate.kind not in kernel_paths.SELECTING_KINDS or target is None or read is None:
        return None
    places = target.layout.places
    if not {"python", "csrc", "include"} <= places.keys():
        return None
    csrc, include = target.resolve("{csrc}"), target.resolve("{include}")
    libraries = tuple(d for d in target.layout.include_dirs if d not in (csrc, include))
    tree = kernel_paths.tree(read, target.resolve("{python}"), csrc, include, libraries)
    return kernel_paths.check(tree, file, source, gate.kind, gate.line, gate.context, targets)


def _symbol_available(change: Change, target: Target, source: bytes, read) -> bool:
    if _symbol_defined(change.requires_symbol, source):
        return True
    for template in change.symbol_files:
        try:
            if _symbol_defined(change.requires_symbol, read(target.resolve(template))):
                return True
        except OSError:
            continue
    return False
