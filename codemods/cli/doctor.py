"""`codemod doctor`: read an SGLang server log (ready, starting or crashed, and why), compare with a baseline, preflight."""

from __future__ import annotations

import json
from pathlib import Path

import typer

from codemods.core.lazy import LazyModule
from codemods.cli.common import PYTHON_HELP as _PYTHON_HELP, Format, err, notify as _notify, out as _out
from codemods.render.document import document as _document

revert_service = LazyModule("codemods.apply.revert")
workspace = LazyModule("codemods.apply.workspace")


def _targets(repos: list[Path], packages: list[str], python: str | None) -> list[tuple[Path, str | None]]:
    """--package's folder and project, as the command body below reads them."""
    return [(tree.path, tree.project) for tree in workspace.resolve(repos, packages, python)]


def doctor(
    log: Path | None = typer.Argument(None, help="An SGLang server log (plain or .gz; - reads stdin)."),
    baseline: Path | None = typer.Option(None, "--baseline", metavar="LOG", help="The unpatched run's log: compare verdicts and throughput (A/B)."),
    tp: int | None = typer.Option(None, "--tp", metavar="N", min=1, help="Expected tensor-parallel size (default: the world_size the log reports)."),
    fmt: Format = typer.Option(Format.text, "--format", metavar="FORMAT", help="text, or json for scripts."),
    max_regression: float = typer.Option(5.0, "--max-regression", metavar="PERCENT", min=0, help="Percent slower than --baseline that recommends a revert."),
    revert: bool = typer.Option(False, "--revert", help="When the A/B recommends it, back --recipe out of --repo."),
    repo: Path | None = typer.Option(None, "--repo", metavar="PATH", help="The patched project folder (for --revert and the advice)."),
    package: str | None = typer.Option(None, "--package", metavar="NAME", help="The patched installed package, instead of --repo."),
    python: str | None = typer.Option(None, "--python", metavar="PYTHON", help=_PYTHON_HELP),
    recipe: str = typer.Option("sm120-enable", "--recipe", metavar="ID", help="The recipe the patched run was built with."),
    follow: bool = typer.Option(False, "--follow", "-f", help="Tail a live log, print state changes, stop once ready or crashed."),
    timeout: float | None = typer.Option(None, "--timeout", metavar="SECONDS", min=0, help="With --follow: give up after this many seconds (exit 1)."),
    rules: list[Path] = typer.Option([], "--rules", metavar="FILE", help="Extra rules file (TOML, tried before the built-in ones; repeatable)."),
    preflight: bool = typer.Option(False, "--preflight", help="Check that the GPUs have P2P, which FlashInfer's allreduce fusion needs."),
    topo: list[Path] = typer.Option([], "--topo", metavar="FILE", help="Saved `nvidia-smi topo -m` / `topo -p2p r` output for --preflight (repeatable)."),
) -> None:
    """Read an SGLang server log: ready, starting or crashed (and why), fusion ranks, autotuner skips, throughput.

    Exit 0 when nothing is wrong (ready, or still starting); 1 when the server crashed, the patched run
    is more than --max-regression slower than --baseline, --preflight finds GPUs without P2P, or
    --follow --timeout ran out before a final verdict; 130 on Ctrl-C.

    Examples:

    \b
      codemod doctor server.log --tp 8
      codemod doctor patched.log --baseline before.log --revert --repo ./flashinfer
    """
    from codemods.doctor.checkup import checkup
    from codemods.render import doctor as render

    if log is None and not preflight:
        raise typer.BadParameter("give a LOG file, or --preflight", param_hint="LOG")
    if package is not None:
        if repo is not None:
            raise typer.BadParameter("give --repo PATH or --package NAME, not both", param_hint="--package")
        repo = _targets([], [package], python)[0][0]
    if revert and (baseline is None or repo is None):
        raise typer.BadParameter("--revert needs --baseline LOG and --repo PATH (or --package NAME)", param_hint="--revert")

    def show_event(event) -> None:
        if fmt is Format.text:
            _out(render.event_text(event) + "\n")
        else:
            err.print(render.event_text(event))

    def show_findings(found) -> None:
        if fmt is Format.json:
            _out(json.dumps(_document(render.checkup_json(found)), indent=2) + "\n")
        else:
            _out("".join(line + "\n" for line in render.checkup_text(found, recipe, str(repo) if repo else None)))
        if found.stopped:
            err.print(render.stopped_text(found))

    found = checkup(
        log, rules, tp=tp, baseline=baseline, max_regression=max_regression, follow=follow, timeout=timeout,
        check_p2p=preflight, topology=topo, revert=(lambda: revert_service.revert(recipe, repo, notify=_notify)) if revert else None,
        on_event=show_event, on_wait=_notify, on_findings=show_findings,
    )
    if revert and found.comparison is not None:
        err.print(render.revert_text(found, recipe, repo))
    if found.exit_code:
        raise typer.Exit(found.exit_code)
