"""Reading the data: recipes (validated, errors naming the file, the line and the fix), projects, detection.

Recipes live in targets/recipes/, in $CODEMOD_RECIPES and in --recipes
folders; projects in targets/projects/. A change's keys are checked against
the selectors its gate kind declares (`codemods.gates.registry`).
"""

from __future__ import annotations

import os
import re
import tomllib
from pathlib import Path, PurePosixPath

from codemods.core.source import NotRegularFile, read_regular
from codemods.core import errors
from codemods.core.targets import data_root, project_files
from codemods.core.arch import Arch, ArchParseError
from codemods.gates.base import GateKind
from codemods.gates.registry import KINDS
from codemods.plan.picks import HINTS as PICK_HINTS, PICKS
from codemods.plan.picks import check as check_pick
from codemods.recipes.model import (
    PLACEHOLDER_RE,
    Case,
    Change,
    Layout,
    Location,
    Project,
    ProjectTree,
    Recipe,
    Upstream,
    release,
)


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
        text = read_regular(path).decode("utf-8").replace("\r\n", "\n").replace("\r", "\n")
    except NotRegularFile:
        raise errors.RecipeInvalid("cannot read recipe: not a regular file", where=str(path)) from None
    except OSError as exc:
        raise errors.RecipeInvalid(f"cannot read recipe: {exc.strerror or exc}", where=str(path)) from None
    except UnicodeDecodeError:
        raise errors.RecipeInvalid("recipe is not UTF-8", where=str(path)) from None
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise errors.RecipeInvalid(f"not valid TOML: {exc}", where=str(path)) from None

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
        raise errors.RecipeInvalid("a recipe needs at least one [[change]] table", where=str(path), hint="see docs/recipes.md")

    changes = []
    seen: set[str] = set()
    for n, raw in enumerate(raw_changes):
        changes.append(_load_change(path, text, n, raw, seen))
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
            arch = Arch.parse_target(name)
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
        if release(table["fixed_in"]) is None:
            raise _invalid(path, text, "fixed_in", f"upstream #{n + 1}: fixed_in {table['fixed_in']!r} is not a version", 'fixed_in = "0.6.17"')
        out.append(Upstream(table["project"], table["fixed_in"], table.get("pr", ""), table.get("ships", "")))
    return tuple(out)


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


def _load_change(path: Path, text: str, n: int, raw: dict, seen: set[str]) -> Change:
    if "at" in raw and "file" not in raw:
        if not isinstance(raw["at"], list) or not raw["at"] or not all(isinstance(a, dict) for a in raw["at"]):
            raise _invalid(path, text, "[[change.at]]", f"change #{n + 1}: 'at' must be a list of [[change.at]] tables", "see docs/recipes.md", n)
        raw = {**raw, "file": raw["at"][0].get("file", "")}
    for key in ("id", "project", "file", "kind"):
        if not isinstance(raw.get(key), str) or not raw[key]:
            raise _invalid(path, text, "[[change]]", f"change #{n + 1}: {key!r} must be a non-empty string", f"add `{key} = \"...\"`", n)
    kind = raw["kind"]
    if kind not in KINDS:
        raise _invalid(path, text, "kind", f"unknown gate kind {kind!r}", f"known kinds: {', '.join(sorted(KINDS))}", n)
    known = sorted(projects())
    if raw["project"] not in known:
        raise _invalid(path, text, "project", f"change {raw['id']!r}: unknown project {raw['project']!r}",
                       f"known projects (targets/projects/): {', '.join(known)}", n)
    gate_kind = KINDS[kind]
    picks = () if gate_kind.edit_kind else PICKS  # an edit kind rewrites what its selectors name: nothing to pick
    allowed = _CHANGE_KEYS | set(gate_kind.selector_names) | set(picks)
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
    admits: tuple[Arch, ...] = ()
    if "admits" in raw and gate_kind.edit_kind:
        raise _invalid(path, text, "admits", f"change {raw['id']!r}: {kind} is an edit kind; it admits no arch", "drop `admits`")
    if "admits" in raw:
        try:
            admits = tuple(Arch.parse_target(a) for a in raw["admits"])
        except (ArchParseError, TypeError) as exc:
            raise _invalid(path, text, "admits", f"change {raw['id']!r}: {exc}", 'admits = ["sm_90", "sm_100"]') from None
    selector = {k: raw[k] for k in (*gate_kind.selector_names, *picks) if k in raw}
    for key, value in selector.items():
        _check_selector(path, text, raw["id"], gate_kind, key, value)
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
        allowed_at = {"file"} | set(gate_kind.selector_names) | set(picks)
        for key, value in candidate.items():
            if key not in allowed_at:
                raise _invalid(path, text, key, f"change {raw['id']!r}: unknown key {key!r} in [[change.at]] #{i + 1}", f"allowed keys: {', '.join(sorted(allowed_at))}")
            if key == "file" and not isinstance(value, str):
                raise _invalid(path, text, key, f"change {raw['id']!r}: {key!r} must be a string", f'{key} = "..."')
            if key != "file":
                _check_selector(path, text, raw["id"], gate_kind, key, value)
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
        if kind.startswith("python_") and not location.file.endswith(".py"):  # else "not valid Python" at run time
            raise _invalid(
                path, text, "file", f"change {raw['id']!r}: {kind} reads Python source, and {location.file!r} is not a .py file",
                "C, C++ and CUDA files take kind = \"cuda_guard\" or \"cpp_runtime_check\"",
            )
        missing = sorted(set(gate_kind.required_selectors) - set(location.selector))
        if missing:
            raise _invalid(path, text, "kind", f"change {raw['id']!r}: kind {kind} needs {', '.join(missing)}", f'add `{missing[0]} = ...`', n)
    return Change(
        id=raw["id"], project=raw["project"], file=raw["file"], kind=kind,
        title=raw.get("title", raw["id"]), why=raw.get("why", ""), selector=selector,
        admits=admits, jit_modules=tuple(raw.get("jit_modules", ())),
        requires_symbol=raw.get("requires_symbol", ""), symbol_files=symbol_files,
        at=tuple(at), optional=optional, needs=tuple(needs), default=default,
    )


def _check_selector(path: Path, text: str, change_id: str, kind: GateKind, key: str, value) -> None:
    """A selector is a string unless its kind says otherwise (its check_selector); `body`, `nth`, `all` as
    plan.picks says."""
    if key in PICKS:
        problem = check_pick(key, value)
        if not problem and key == "body" and not kind.name.startswith("python_"):
            problem = "body reads Python `if` statements; this kind's gates are not Python"
        if problem:
            raise _invalid(path, text, key, f"change {change_id!r}: {problem}", PICK_HINTS[key])
        return
    problem = kind.check_selector(key, value)
    if problem:
        raise _invalid(path, text, key, f"change {change_id!r}: {problem}", kind.hint(key))


# The placeholders a project layout defines; a path template may use them whole and nothing else
# (they are substituted as text, never through str.format, which a data file could steer).


def _check_relative(path: Path, text: str, file: str, key: str = "file") -> None:
    if not isinstance(file, str) or not file:
        raise _invalid(path, text, key, f"{key} must be a non-empty string (a path), not {file!r}", f'{key} = "{{python}}/..."')
    line = _line_of_value(text, file)
    where = f"{path}:{line}" if line else ""
    leftover = PLACEHOLDER_RE.sub("", file)
    if "{" in leftover or "}" in leftover:
        message = f"path {file!r}: a path may use only the placeholders {{python}}, {{include}} and {{csrc}}, whole"
        hint = 'for example file = "{python}/jit/comm.py"'
        raise errors.RecipeInvalid(message, where=where, hint=hint) if where else _invalid(path, text, key, message, hint)
    pure = PurePosixPath(file)
    if pure.is_absolute() or ".." in pure.parts or file.startswith("~"):
        raise _invalid(path, text, "file", f"path {file!r} leaves the repository", "paths are relative to --repo and cannot use '..' or start with '/'")
    if any(part.lower() == ".git" for part in pure.parts):
        raise _invalid(path, text, "file", f"path {file!r} goes through .git, git's own folder, which no recipe edits",
                       "name a source file of the project; codemod never writes into a repository's .git")


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
    since = tuple((name, str(version)) for name, version in data.get("predicates_since", {}).items())
    unknown = [name for name, _ in since if name not in dict(predicates)]
    if unknown:
        raise errors.RecipeInvalid(f"[predicates_since] names {', '.join(unknown)}, not in [predicates]", where=str(path))
    membership = data.get("style", {}).get("number_membership", "")
    if membership not in ("", "list", "tuple"):
        raise errors.RecipeInvalid(
            f"[style] number_membership must be \"list\" or \"tuple\", not {membership!r}", where=str(path)
        )
    return Project(
        data["name"], data.get("title", data["name"]), tuple(layouts),
        tuple(data.get("predicate_files", ())), predicates, membership, since,
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
    return {p.name: p for p in (load_project(f) for f in project_files())}


def detect(root: Path, names: list[str] | None = None) -> ProjectTree:
    """Which project (and layout) lives at root."""
    known = projects()
    unknown = [n for n in names or () if n not in known]
    if unknown:
        raise errors.UnknownProject(
            f"unknown project {', '.join(map(repr, unknown))}; known projects: {', '.join(sorted(known))}",
            where=str(root),
        )
    candidates = [known[n] for n in (names or known)]
    for project in candidates:
        for layout in project.layouts:
            if all((root / m).exists() for m in layout.markers):
                return ProjectTree(project, layout, root)
    titles = [p.title for p in candidates]
    named = " or ".join(titles) if len(titles) < 3 else f"{', '.join(titles[:-1])} or {titles[-1]}"
    raise errors.UnknownProject(f"no {named} tree found here", where=str(root))


