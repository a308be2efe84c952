"""The recipe model: recipes, their changes and cases, projects and their layouts, a project found at a path.

A recipe (TOML under targets/recipes/) names the gates to widen by kind and
selector, per project; a project file (targets/projects/) says where each
layout of the project keeps its files. `codemods.recipes.load` reads and
validates both; `codemods.plan` plans a recipe's edits on a `ProjectTree`.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from codemods.core import errors
from codemods.core.arch import Arch, family
from codemods.gates.python.predicates import reading

OUTCOMES = ("changed", "unchanged", "skipped", "failed")

# The placeholders a project layout defines; a path template may use them whole and nothing else
# (they are substituted as text, never through str.format, which a data file could steer).
PLACEHOLDERS = ("python", "include", "csrc")
PLACEHOLDER_RE = re.compile(r"\{(python|include|csrc)\}")


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
    # `[style] number_membership`: "list" or "tuple", how the project writes `x in [10, 12]` in a file with no
    # example of its own
    number_membership: str = ""
    # `[predicates_since]`: name -> the first release that defines it, where the table's entry is checked
    predicates_since: tuple[tuple[str, str], ...] = ()

    def predicate_table(self, version: str = "") -> dict:
        """The `[predicates]` table; for a tree of a known `version`, without the names `[predicates_since]` says
        a later release defines (a 0.3.1 checkout has no `is_sm12x_supported` to import)."""
        since = dict(self.predicates_since)
        return reading.table(
            {name: archs for name, archs in self.predicates if not (version and name in since and older(version, since[name]))},
            f"targets/projects/{self.name}.toml",
        )


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
    tests: tuple[Case, ...] = ()
    upstream: tuple[Upstream, ...] = ()

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

    def scope(self, universe: tuple[Arch, ...]) -> tuple[tuple[Arch, ...], tuple[Arch, ...]]:
        """(targets, the universe gates are read over): `universe` with the targets and every arch a change's
        `admits` names (`admits = ["sm_107"]` picks gates admitting sm_107, which no default universe holds)."""
        targets = self.targets(universe)
        named = (arch for change in self.changes for arch in change.admits)
        return targets, tuple(dict.fromkeys((*universe, *targets, *named)))


@dataclass(frozen=True)
class Upstream:
    """A project release that ships the recipe's changes (and maybe more): upgrading beats patching."""

    project: str
    fixed_in: str  # the first release that has it, e.g. "0.6.17"
    pr: str = ""  # e.g. "#3903"
    ships: str = ""  # what that release has, in a few words


@dataclass(frozen=True)
class Case:
    """A before/after example of one change, run by `codemod recipe test`."""

    name: str
    change: str
    file: str  # only its extension matters (picks the grammar)
    before: str
    after: str | None  # None: the change must leave `before` alone
    outcome: str  # "changed", "unchanged" or "failed"


@dataclass(frozen=True)
class ProjectTree:
    """A recognised project at a path, in one layout (what `codemods.recipes.load.detect` finds at --repo)."""

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

        filled = PLACEHOLDER_RE.sub(place, template)
        return os.path.normpath(filled).replace(os.sep, "/")

    def version(self, read: Callable[[str], bytes] | None = None) -> str:
        """The release the tree holds, from its version files; through `read` (a path relative to the root, as the
        planner reads the files it edits: a replay reads a commit's) when given, else from the disk."""
        for rel in self.layout.version_files:
            try:
                data = read(rel) if read is not None else (self.root / rel).read_bytes()
            except OSError:
                continue
            text = data.decode("utf-8", errors="replace")
            match = re.search(
                r"""^(?:__version__|version)\s*(?::\s*str\s*)?=\s*(?:version\s*=\s*)?["']([^"']+)["']""", text, re.M,
            )
            if match and match.group(1) != "0.0.0.dev0":  # SGLang's fallback when setuptools_scm is absent
                return match.group(1)
            first = text.strip().splitlines()
            if first and re.match(r"^\d+\.\d+", first[0]):
                return first[0]
        return ""


def release(version: str) -> tuple[tuple[int, ...], bool] | None:
    """(release numbers, is a pre-release) of a PEP 440-ish version; None when it has no numbers."""
    match = re.match(r"^\s*v?(\d+(?:\.\d+)*)(.*)$", version)
    if match is None:
        return None
    rest = match.group(2).lower()
    return tuple(int(n) for n in match.group(1).split(".")), bool(re.match(r"^[._-]?(?:a|b|c|rc|alpha|beta|pre|preview|dev)(?:[._-]?\d|$)", rest))


def older(version: str, than: str) -> bool | None:
    """Whether `version` is older than release `than`; None when `version` cannot be read."""
    mine, theirs = release(version), release(than)
    if mine is None or theirs is None:
        return None
    width = max(len(mine[0]), len(theirs[0]))
    a, b = mine[0] + (0,) * (width - len(mine[0])), theirs[0] + (0,) * (width - len(theirs[0]))
    return a < b or (a == b and mine[1] and not theirs[1])


def upstream_advice(recipe: Recipe, tree: ProjectTree) -> list[str]:
    """What to say before the notes: upgrade instead of patching, when the project's release is older than the fix."""
    out = []
    for up in recipe.upstream:
        if up.project != tree.project.name:
            continue
        version = tree.version()
        behind = older(version, up.fixed_in) if version else None
        if behind is False:
            continue
        pr = f" (PR {up.pr})" if up.pr else ""
        ships = f": {up.ships}" if up.ships else ""
        title = tree.project.title
        unknown = f"its version {version!r} cannot be compared" if version else "its version is unknown here: no version file"
        if behind:
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
