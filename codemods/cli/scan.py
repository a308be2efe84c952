"""`codemod scan`: audit trees for an arch and print the findings as text, JSON or SARIF."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import typer

from codemods.core.lazy import LazyModule
from codemods.cli.common import (
    PACKAGE_HELP, PYTHON_HELP, ScanFormat, arch as parse_arch, err, out, progress_bar, universe as parse_universe, workspaces,
)

document = LazyModule("codemods.render.document")
files = LazyModule("codemods.apply.files")
locate = LazyModule("codemods.apply.locate")
scanner = LazyModule("codemods.audit.scan")
scan_cache = LazyModule("codemods.audit.cache")
scan_json = LazyModule("codemods.render.scan_json")
scan_text = LazyModule("codemods.render.scan_text")
text = LazyModule("codemods.render.text")


def scan(
    repo: list[Path] = typer.Option([], "--repo", metavar="PATH", help="A tree to scan (repeatable)."),
    package: list[str] = typer.Option([], "--package", metavar="NAME", help=PACKAGE_HELP),
    python: str | None = typer.Option(None, "--python", metavar="PYTHON", help=PYTHON_HELP),
    arch: str = typer.Option("sm_120", "--arch", metavar="ARCH", help="The arch to check gates against, e.g. sm_120, 12.0, 120."),
    fmt: ScanFormat = typer.Option(ScanFormat.text, "--format", metavar="FORMAT", help="text, json or sarif."),
    check: bool = typer.Option(False, "--check", help="Exit 1 when a (non-potential) hazard is found: for CI and pre-commit."),
    jobs: int = typer.Option(0, "--jobs", metavar="N", help="Parallel workers (default: one per CPU this process may use; --verbose says how many)."),
    archs: str | None = typer.Option(None, "--archs", metavar="ARCHS", help="Arch universe for the admits lists."),
    include_all: bool = typer.Option(False, "--all", help="Also scan binary files and files .gitignore excludes."),
    no_cache: bool = typer.Option(False, "--no-cache", help="Neither read nor write the per-file cache ($CODEMOD_HOME/scan-cache)."),
    gates_only: bool = typer.Option(False, "--gates-only", help="List the gates only: no widenability, no hazards (faster)."),
    quiet: bool = typer.Option(False, "--quiet", "-q", help="Text: print only the summary and the hazards."),
    verbose: bool = typer.Option(False, "--verbose", "-v", help="Text: also list covered and admitting gates; print the scan statistics."),
    exclude: list[str] = typer.Option(
        [], "--exclude", metavar="GLOB",
        help="Leave files matching GLOB (or under a folder matching it) out of the report (repeatable); "
             "adds to the project's [scan] exclude.",
    ),
) -> None:
    """Audit a tree for --arch: what it gets nothing from (blockers, widenable), what needs a human, and hazards.

    Examples:

    \b
      codemod scan --repo ./flashinfer --arch sm_121
      codemod scan --repo ./flashinfer --arch sm_121 --quiet
      codemod scan --repo . --arch sm_120 --format sarif > codemod.sarif
      codemod scan --repo ./sglang --arch sm_120 --exclude 'test/*' --exclude 'benchmark'
    """
    roots = [tree.path for tree in workspaces(repo, package, python)]
    target = parse_arch(arch)
    if check and gates_only:
        raise typer.BadParameter("--check needs the hazards, which --gates-only skips; drop one", param_hint="--gates-only")
    for root in roots:
        files.require_folder(root)
    bar, running = progress_bar("scanning {task.description}")  # progress goes to stderr, and only to a terminal
    with running:
        task = bar.add_task(str(roots[0]) if len(roots) == 1 else f"{len(roots)} trees", total=None) if bar is not None else None
        scanned = scanner.scan_many(
            roots, target, parse_universe(archs), jobs, include_all=include_all, hazards=not gates_only,
            cache=None if no_cache else scan_cache.default_cache(),
            progress=(lambda done, total: bar.update(task, completed=done, total=total)) if bar is not None else None,
            exclude=tuple(exclude),
        )
    results = list(zip(roots, scanned))
    if fmt is ScanFormat.text:
        color = sys.stdout.isatty() and not os.environ.get("NO_COLOR")
        for root, result in results:
            if len(results) > 1:
                out(f"== {root}\n")
            report = scan_text.to_text(result, verbose=verbose, quiet=quiet, color=color)
            out(report if report.endswith("\n") else report + "\n")
    elif fmt is ScanFormat.json:
        out(scan_json.dumps(document.document(document.scan_json(results))) + "\n")
    else:
        import json

        provenances = [locate.provenance(Path(root)) for root in roots]
        out(json.dumps(document.scan_sarif(results, provenances), indent=2) + "\n")
    for root, result in results if verbose else ():
        err.print(text.scan_stats_line(root, result))
    if check and any(scanner.check(result) for _, result in results):
        raise typer.Exit(1)
