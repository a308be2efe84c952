"""`codemod list` and `codemod recipe test`: the recipes, and the before/after cases embedded in one."""

from __future__ import annotations

import os
from pathlib import Path

import typer

from codemods.core import errors
from codemods.core.lazy import LazyModule
from codemods.cli.common import complete_recipe, out, universe as parse_universe

recipes = LazyModule("codemods.recipes.load")
recipe_cases = LazyModule("codemods.recipes.cases")
text = LazyModule("codemods.render.text")

recipe_app = typer.Typer(help="Work with recipe files.", no_args_is_help=True)


def list_(
    recipes_dir: list[Path] = typer.Option([], "--recipes", metavar="DIR", help="Extra folder of recipe .toml files (also $CODEMOD_RECIPES)."),
) -> None:
    """List the recipes, one line each.

    Examples:

    \b
      codemod list
      codemod list --recipes ./my-recipes
    """
    for recipe in recipes.available_recipes(recipes_dir).values():
        out(text.recipe_line(recipe) + "\n")


def recipe_test(
    recipe: str = typer.Argument(
        ..., metavar="RECIPE", autocompletion=complete_recipe, help="A recipe id (see `codemod list`) or a recipe .toml file with [[test]] cases."
    ),
    archs: str | None = typer.Option(None, "--archs", metavar="ARCHS", help="Arch universe, e.g. sm_90,sm_100,sm_120."),
    recipes_dir: list[Path] = typer.Option([], "--recipes", metavar="DIR", help="Extra folder of recipe .toml files (also $CODEMOD_RECIPES)."),
) -> None:
    """Run the before/after cases embedded in a recipe; exit 1 if any fails.

    Examples:

    \b
      codemod recipe test sm120-enable
      codemod recipe test ./my-recipes/sm110-enable.toml
    """
    is_file = recipe.endswith(".toml") or os.sep in recipe or Path(recipe).is_file()
    chosen = recipes.load_recipe(Path(recipe)) if is_file else recipes.find_recipe(recipe, recipes_dir)
    file = recipe
    if not chosen.tests:
        raise errors.RecipeInvalid("has no [[test]] cases", where=str(file), hint="add [[test]] tables with change, before and after")
    results = recipe_cases.run_cases(chosen, parse_universe(archs))
    out(text.case_text(results))
    deep = [r for r in results if r.too_deep]
    if deep:
        raise errors.PlanFailed(deep[0].too_deep, where=f"{file}: case {deep[0].case.name!r}", hint="nest it less deeply")
    if any(not r.ok for r in results):
        raise typer.Exit(1)
