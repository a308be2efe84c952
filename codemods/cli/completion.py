"""`codemod --show-completion [SHELL]` and `--install-completion [SHELL]`: the script of the shell named, else of the one codemod runs in.

typer's own pair takes no shell name (`--show-completion zsh` printed bash's
script when $SHELL was bash) and fails with "Shell  not supported." when the
shell cannot be detected; these take the name, and say what to pass when they
cannot tell.
"""

from __future__ import annotations

import typer
from typer import completion as typer_completion

PROG = "codemod"
COMPLETE_VAR = "_CODEMOD_COMPLETE"
SHELLS = ("bash", "zsh", "fish", "powershell", "pwsh")
DETECT = ""  # the flag given without a shell name

typer_completion.completion_init()  # typer registers its shells' completion only for its own pair of options


def _shell(value: str, option: str) -> str:
    shell = value.lower() if value != DETECT else (typer_completion._get_shell_name() or "")
    if shell not in SHELLS:
        said = f"unknown shell {value!r}" if value != DETECT else "cannot tell which shell codemod runs in"
        raise typer.BadParameter(f"{said}; name it: codemod {option} {' | '.join(SHELLS[:3])}")  # a usage error, exit 2
    return shell


def show(value: str | None) -> None:
    if value is None:
        return
    shell = _shell(value, "--show-completion")
    typer.echo(typer_completion.get_completion_script(prog_name=PROG, complete_var=COMPLETE_VAR, shell=shell))
    raise typer.Exit()


def install(value: str | None) -> None:
    if value is None:
        return
    shell = _shell(value, "--install-completion")
    shell, path = typer_completion.install(shell=shell, prog_name=PROG, complete_var=COMPLETE_VAR)
    typer.echo(f"{shell} completion installed in {path}; it takes effect in a new shell")
    raise typer.Exit()


def shell_name_optional(argv: list[str]) -> list[str]:
    """`codemod --show-completion` with no shell name: pass DETECT as its value (typer's options have no optional values)."""
    out = list(argv)
    for n in range(len(out) - 1, 0, -1):
        if out[n] in ("--show-completion", "--install-completion") and (n + 1 == len(out) or out[n + 1].startswith("-")):
            out.insert(n + 1, DETECT)
    return out


SHOW = typer.Option(
    None, "--show-completion", metavar="[SHELL]", callback=lambda value: show(value), is_eager=True,
    help="Print the completion script for SHELL (bash, zsh, fish, powershell, pwsh; default: the shell codemod runs in).",
)
INSTALL = typer.Option(
    None, "--install-completion", metavar="[SHELL]", callback=lambda value: install(value), is_eager=True,
    help="Install completion for SHELL (default: the shell codemod runs in).",
)
