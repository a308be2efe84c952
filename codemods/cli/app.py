"""The `codemod` command: the typer app, one module per command, and the error boundary.

Each command (codemods/cli/<command>.py) parses its options, calls one
service, renders and exits. A CodemodError becomes its message on stderr (and
a JSON document under --format json) and its exit code; anything else is a
bug, reported in one line unless --debug.
"""

from __future__ import annotations

import functools
import os
import sys
import traceback

import typer

from codemods.core import errors
from codemods.core.source import quiet_compiler_warnings
from codemods.cli import completion, doctor, recipes, revert, run, scan, schema, status, verify
from codemods.cli.common import err, out
from codemods.render.document import error_document

app = typer.Typer(
    add_completion=False,  # cli/completion's pair takes the shell's name
    rich_markup_mode=None,
    pretty_exceptions_enable=False,
    no_args_is_help=True,
    help="Find and rewrite GPU-architecture gates in ML inference stacks, on a git branch you can back out.",
)
_state = {"debug": False}


def report_error(exc: errors.CodemodError, as_json: bool = False) -> None:
    err.print(f"error[{exc.code}]: {exc}")
    if exc.hint:
        err.print(f"  hint: {exc.hint}")
    if as_json:  # scripts get the same error as one document on stdout
        import json

        out(json.dumps(error_document(exc), indent=2) + "\n")


def boundary(command):
    """Turn a CodemodError into its message on stderr (and a JSON document under --format json) and its exit code."""

    @functools.wraps(command)
    def wrapper(*args, **kwargs):
        try:
            return command(*args, **kwargs)
        except errors.CodemodError as exc:
            fmt = kwargs.get("fmt")
            report_error(exc, as_json=getattr(fmt, "value", fmt) == "json")
            raise typer.Exit(exc.exit_code) from None

    return wrapper


def _version(value: bool) -> None:
    if value:
        from codemods.core import distribution

        found = distribution.version()
        out(f"codemod {found}\n" if found else "codemod (not installed: running from a source tree)\n")
        raise typer.Exit()


@app.callback()
def _main(
    debug: bool = typer.Option(False, "--debug", help="Show tracebacks for internal errors (also accepted after the command)."),
    version: bool = typer.Option(False, "--version", callback=_version, is_eager=True, help="Print the version and exit."),
    install_completion: str | None = completion.INSTALL,
    show_completion: str | None = completion.SHOW,
) -> None:
    _state["debug"] = debug or _state["debug"] or bool(os.environ.get("CODEMOD_DEBUG"))


app.command("list")(boundary(recipes.list_))
app.command("run")(boundary(run.run))
app.command("status")(boundary(status.status))
app.command("revert")(boundary(revert.revert))
app.command("verify")(boundary(verify.verify))
app.command("scan")(boundary(scan.scan))
app.command("doctor")(boundary(doctor.doctor))
recipes.recipe_app.command("test")(boundary(recipes.recipe_test))
app.add_typer(recipes.recipe_app, name="recipe")
app.command("schema")(boundary(schema.schema))


def main() -> None:
    quiet_compiler_warnings()
    if "--debug" in sys.argv[2:]:  # accepted after the command too: `codemod run ... --debug`
        sys.argv = [sys.argv[0], *(a for a in sys.argv[1:] if a != "--debug")]
        _state["debug"] = True
    sys.argv = completion.shell_name_optional(sys.argv)
    try:
        app()
    except errors.CodemodError as exc:
        report_error(exc)
        sys.exit(exc.exit_code)
    except Exception as exc:  # a bug: one line unless --debug
        if _state["debug"] or "--debug" in sys.argv:
            traceback.print_exc()
        else:
            err.print(f"internal error: {type(exc).__name__}: {exc} (run with --debug for the traceback)")
        sys.exit(1)


if __name__ == "__main__":
    main()
