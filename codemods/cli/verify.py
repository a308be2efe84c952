"""`codemod verify`: prove a rewrite with nvcc -E per arch (or, with --build, by compiling the JIT modules to PTX)."""

from __future__ import annotations

from pathlib import Path

import typer

from codemods.core import errors
from codemods.core.lazy import LazyModule
from codemods.cli.common import PYTHON_HELP, Format, arch as parse_arch, err, out, out_lines, progress_bar, universe as parse_universe

build_proof = LazyModule("codemods.prove.build")
document = LazyModule("codemods.render.document")
packages = LazyModule("codemods.apply.packages")
text = LazyModule("codemods.render.text")
verify_service = LazyModule("codemods.prove.verify")
build_render = LazyModule("codemods.render.build_proof")


def verify(
    repo: Path | None = typer.Option(None, "--repo", metavar="PATH", help="The project folder (checkout or installed package)."),
    package: str | None = typer.Option(None, "--package", metavar="NAME", help="An installed package (flashinfer), found with importlib.metadata."),
    python: str | None = typer.Option(
        None, "--python", metavar="PYTHON",
        help=PYTHON_HELP + " Also where --build finds TVM-FFI's headers, and where a same-version FlashInfer lends its bundled third-party headers.",
    ),
    build: bool = typer.Option(False, "--build", help="Compile the changed JIT modules to PTX (nvcc -ptx), base and work tree, and check every kernel has a body."),
    module: list[str] = typer.Option([], "--module", metavar="NAME", help="With --build: the JIT module to build (default: those changed since the base; repeatable)."),
    recipe: str | None = typer.Option(None, "--recipe", metavar="ID", help="The applied recipe whose base to compare with."),
    base: str | None = typer.Option(None, "--base", metavar="REV", help="Compare the work tree with this revision instead."),
    arch: str | None = typer.Option(None, "--arch", metavar="ARCH", help="Target arch (default: the recipe's), e.g. sm_120, 12.0, 120."),
    archs: str | None = typer.Option(None, "--archs", metavar="ARCHS", help="Archs to preprocess, e.g. sm_80,sm_90,sm_100,sm_120."),
    jobs: int = typer.Option(0, "--jobs", metavar="N", help="Parallel nvcc runs (default: one per CPU)."),
    include: list[Path] = typer.Option(
        [], "--include", metavar="DIR",
        help="A folder of third-party headers the tree lacks, e.g. cutlass/include (repeatable); used by --build too.",
    ),
    fmt: Format = typer.Option(Format.text, "--format", metavar="FORMAT", help="text, or json for scripts."),
) -> None:
    """Prove a rewrite: nvcc -E every changed CUDA file per arch, base vs work tree.

    Exit 0 only when verified: non-target archs identical, targets gained exactly the planned regions, no JIT
    module half-patched. Exit 1 when an arch FAILs, or when an arch is unknown because a guard deciding the
    change reads a macro of a missing third-party header; exit 15 when there is nothing to prove (no CUDA
    file changed since the base). JSON `status`: verified, nothing-to-prove, unknown or failed.

    With --build: compile the changed JIT modules to PTX with FlashInfer's own flags, base and work tree,
    per arch. Exit 0 when no kernel compiles empty on the target that has a body on a compared arch, the
    instructions the widened guards promise are there, and every compared arch's PTX equals the base's;
    exit 1 when not; 11 when nvcc or headers are missing, 12 on a compile error, 13 when FlashInfer's
    JIT code cannot be read for the flags or sets one codemod refuses to pass to nvcc, 15 on a tree
    without JIT modules (SGLang: nothing to prove).

    Third-party headers (CUTLASS, spdlog) a plain clone lacks (submodules not initialised) come from, first
    found: --include DIR; the bundled copy of a FlashInfer of the same version installed in --python (or
    codemod's own Python); that release's wheel (flashinfer-python==VERSION) from PyPI, which --build
    downloads once into codemod's cache (a proof without --build uses it when it is there). The output names
    the source and the CUTLASS and spdlog versions. Without --build, headers found nowhere are stood in by
    empty files; --build never stands them in (exit 11).

    Examples:

    \b
      codemod verify --repo ./flashinfer
      codemod verify --repo ./flashinfer --base v0.6.3 --arch sm_120 --include ~/cutlass/include
      codemod verify --build --package flashinfer --arch sm_120 --module trtllm_comm
      codemod verify --build --repo ./flashinfer --arch sm_120 --include ~/cutlass/include --include ~/spdlog/include
    """
    target_arch = parse_arch(arch) if arch else None
    if (repo is None) == (package is None):
        raise typer.BadParameter("give --repo PATH or --package NAME", param_hint="--repo")
    if repo is None:
        repo = packages.folder(package, python)
    if module and not build:
        raise typer.BadParameter("--module needs --build", param_hint="--module")
    if build:
        verify_build(repo, target_arch, parse_universe(archs), tuple(module), base, recipe, python, jobs, fmt, include)
        return
    result, ctx = verify_service.verify_repo(
        repo, recipe_id=recipe, base=base, arch=target_arch, universe=parse_universe(archs), jobs=jobs, includes=include,
        python=python,
    )
    if fmt is Format.json:
        out(document.dumps(document.verify_json(result, ctx)))
    else:
        out_lines(text.verify_lines(result, ctx))
    for note in text.verify_notes(result, ctx):
        err.print(note)
    if result.status == "nothing-to-prove":
        raise typer.Exit(errors.NothingToProve.exit_code)
    if not result.ok:
        raise typer.Exit(1)


def verify_build(repo, target_arch, universe, modules, base, recipe, python, jobs, fmt, includes) -> None:
    """`verify --build`: the build proof (codemods.prove.build), with a progress bar per arch and source."""
    bar, running = progress_bar("{task.description}")
    rows: dict[str, int] = {}

    def progress(label: str, done: int, total: int) -> None:
        if bar is None:
            return
        if label not in rows:
            rows[label] = bar.add_task(label, total=total)
        bar.update(rows[label], completed=done, total=total)

    with running:
        report = build_proof.prove(
            repo, arch=target_arch, universe=universe, modules=modules, base=base, recipe_id=recipe, python=python,
            jobs=jobs, progress=progress, includes=list(includes),
        )
    if fmt is Format.json:
        out(document.dumps(build_render.to_json(report)))
    else:
        out_lines(build_render.to_text(report))
    if not report.ok:
        raise typer.Exit(1)
