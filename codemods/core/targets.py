"""The targets/ data folder: where it is, and its project files read as plain tables.

Light on purpose (no import of the recipe loader): `codemod scan` reads the
projects' layouts to find a FlashInfer tree's JIT folder on every run.
"""

from __future__ import annotations

import tomllib
from functools import lru_cache
from pathlib import Path

from codemods.core import errors


def data_root() -> Path:
    """targets/ as installed inside the package, or beside it in a source checkout."""
    package = Path(__file__).resolve().parents[1]
    for candidate in (package / "targets", package.parent / "targets"):
        if candidate.is_dir():
            return candidate
    raise errors.RecipeInvalid("the built-in targets/ data is missing from this install", hint="reinstall codemod")


def project_files() -> list[Path]:
    """targets/projects/*.toml, sorted."""
    return sorted((data_root() / "projects").glob("*.toml"))


@lru_cache(maxsize=1)
def project_tables() -> tuple[dict, ...]:
    """Every project file as its TOML table (recipes.model.load_project builds the model from the same files)."""
    return tuple(tomllib.loads(path.read_text(encoding="utf-8")) for path in project_files())
