"""What every command shares: the output streams, --format, the tree options, arch parsing and shell completion."""

from __future__ import annotations

import contextlib
import functools
import os
import sys
from enum import Enum
from pathlib import Path

import typer

from codemods.core.arch import DEFAULT_ARCHS, Arch, ArchParseError, parse_archs
from codemods.core.lazy import LazyModule

# imported on first use: `codemod scan` needs none of them, and they pull in libcst and GitPython
recipes = LazyModule("codemods.recipes.load")
workspace = LazyModule("codemods.apply.workspace")


class Stderr:
    """Reports on stderr: plain lines, and on a terminal rich's rendering (bold heads, dim asides, progress bars).

    rich is imported only for a terminal: a command whose stderr is a pipe or a file (CI, scripts, the
    benchmarks) spends no twentieth of a second loading it.
    """

    @property
    def is_terminal(self) -> bool:
        return sys.stderr.isatty()

    @functools.cached_property
    def console(self):
        from rich.console import Console

        return Console(stderr=True, highlight=False, soft_wrap=True)

    def print(self, text: str) -> None:
        """One line, as it is (no markup, no emoji codes)."""
        if self.is_terminal:
            self.console.print(text, markup=False, emoji=False, overflow="ignore", crop=False)
        else:
            sys.stderr.write(text + "\n")
            sys.stderr.flush()

    def styled(self, *parts: tuple[str, str]) -> None:
        """One line of (text, rich style) parts: styled on a terminal, their text elsewhere."""
        if self.is_terminal:
            from rich.text import Text

            self.console.print(Text.assemble(*parts), overflow="ignore", crop=False)
        else:
            self.print("".join(text for text, _ in parts))


err = Stderr()

REPO_HELP = "The project folder: a git checkout, or site-packages holding the installed wheel (repeatable)."
PACKAGE_HELP = "An installed package (flashinfer, sglang, vllm), found with importlib.metadata (repeatable)."
PYTHON_HELP = "The Python whose installed packages --package means (default: this one)."
_EMPHASISED = ("first option", "note", "warning")  # line heads printed bold on a terminal


class Format(str, Enum):
    text = "text"
    json = "json"


class ScanFormat(str, Enum):
    text = "text"
    json = "json"
    sarif = "sarif"


def out(text: str) -> None:
    """Data, on stdout."""
    sys.stdout.write(text)
    sys.stdout.flush()


def out_lines(lines: list[str]) -> None:
    out("".join(line + "\n" for line in lines))


def say(line: str) -> None:
    """A report line, on stderr; a leading `note:`, `warning:` or `first option:` is bold on a terminal."""
    head, sep, rest = line.partition(": ")
    if sep and head in _EMPHASISED:
        err.styled((f"{head}:", "bold"), (f" {rest}", ""))
    else:
        err.print(line)


def notify(message: str) -> None:
    err.print(f"note: {message}")


def print_diff(diff: str) -> None:
    if not diff:
        return
    if sys.stdout.isatty():
        from rich.console import Console
        from rich.syntax import Syntax

        Console(highlight=False).print(Syntax(diff, "diff", theme="ansi_dark", background_color="default"))
    else:
        out(diff)


def progress_bar(label: str):
    """A progress bar on stderr when it is a terminal (else None), and the context to run under it."""
    if not err.is_terminal:
        return None, contextlib.nullcontext()
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    bar = Progress(TextColumn(label), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(), console=err.console, transient=True)
    return bar, bar


def universe(archs: str | None):
    if not archs:
        return DEFAULT_ARCHS
    try:
        return parse_archs(archs)
    except ArchParseError as exc:
        raise typer.BadParameter(str(exc), param_hint="--archs") from None


def arch(value: str, option: str = "--arch") -> Arch:
    try:
        return Arch.parse_target(value)
    except ArchParseError as exc:
        raise typer.BadParameter(str(exc), param_hint=option) from None


def workspaces(repos: list[Path], packages: list[str], python: str | None):
    """The trees of --repo and --package, each resolved once (codemods.apply.workspace)."""
    found = workspace.resolve(repos, packages, python)
    if not found:
        raise typer.BadParameter("give --repo PATH or --package NAME (repeatable)")
    return found


def complete_recipe(incomplete: str) -> list[str]:
    """Shell completion: recipe ids (built-in and $CODEMOD_RECIPES)."""
    try:
        return [rid for rid in recipes.available_recipes() if rid.startswith(incomplete)]
    except Exception:  # completion must never print a traceback into the shell
        return []


def complete_change(ctx: typer.Context, incomplete: str) -> list[str]:
    """Shell completion: the change ids of the recipe already on the command line."""
    try:
        line = os.environ.get("COMP_WORDS") or os.environ.get("_TYPER_COMPLETE_ARGS") or ""
        known = recipes.available_recipes()
        words = [ctx.params.get("recipe") or "", *line.split()]
        named = next((w for w in words if w in known or w.endswith(".toml")), "")
        return [c.id for c in recipes.find_recipe(named).changes if c.id.startswith(incomplete)]
    except Exception:  # completion must never print a traceback into the shell
        return []
