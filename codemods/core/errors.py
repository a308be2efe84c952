"""Every user-facing error: a fixed exit code, a title, a message and what to do next.

The CLI catches `CodemodError` at its boundary and prints
`error[<code>]: <where>: <message>` and `  hint: <hint>` on stderr, then exits
with the error's exit code. Nothing else is caught.

Exit codes (stable, documented in docs/exit-codes.md):
  0  success (changed, or nothing left to do)
  1  unexpected internal error (a bug: please report it with --debug output)
  2  bad usage (typer's own code for bad options)
  3  plan failed: a gate was not found or cannot be widened; nothing written
  4  work tree not clean in files the recipe would touch
  5  repository state refuses the operation (not a git repo, detached HEAD, foreign branch ...)
  6  project not recognised at --repo
  7  revert refused (commits on top, files changed since apply, or a branch holding work codemod cannot prove is its own)
  8  recipe file invalid
  9  file system refused (permissions, path outside the repo)
 10  another codemod holds this repository's lock
 11  verify --build: a tool or header the build needs is missing (nvcc, TVM-FFI, CUTLASS, spdlog)
 12  verify --build: nvcc rejected a source (the first compiler error, with its file and line)
 13  verify --build: FlashInfer's JIT code could not be read for the nvcc flags, or gives nvcc a flag
     codemod refuses to pass (one that could run a program the tree chose: -ccbin, @file, ...)
 14  codemod's installation lacks a part it needs (ripgrep, which scan finds files with)
 15  verify: nothing to prove (no CUDA file changed since the base; --build on a tree without JIT modules)
 16  scan: a worker process ended abruptly (killed by a signal: often the system's out-of-memory killer)
"""

from __future__ import annotations

from typing import ClassVar


class CodemodError(Exception):
    """The base of every error a user sees; one subclass per kind, its exit code on the class."""

    exit_code: ClassVar[int] = 1
    code: ClassVar[str] = "internal"
    default_hint: ClassVar[str] = ""

    def __init__(self, message: str, where: str = "", hint: str = "") -> None:
        super().__init__(message)
        self.message = message
        self.where = where
        self.hint = hint or self.default_hint

    def __str__(self) -> str:
        return f"{self.where}: {self.message}" if self.where else self.message

    def __reduce__(self):
        return (type(self), (self.message, self.where, self.hint))

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.message!r}, where={self.where!r})"


class BadUsage(CodemodError):
    exit_code = 2
    code = "bad-usage"
    default_hint = "see `codemod COMMAND --help`"


class PlanFailed(CodemodError):
    exit_code = 3
    code = "plan-failed"
    default_hint = (
        "nothing was written; check the project version with `codemod run --dry-run`, "
        "or skip the change with --skip ID"
    )


class AmbiguousSelector(PlanFailed):
    """A change's selectors match several gates to widen (codemods.plan.picks); the message lists each."""

    code = "ambiguous-selector"
    default_hint = (
        "nothing was written; add to the change the field its match lists (body, assigns, call, admits, or nth as a "
        "last resort), or `all = true` if every match is meant"
    )


class ChangesDispatch(PlanFailed):
    """Widening an `if`/`elif` arm would take an arch from a later arm that handles it today (codemods.plan.dispatch)."""

    code = "needs-human"
    default_hint = (
        "nothing was written; that arm picks an implementation, it does not admit the arch: change the dispatch by "
        "hand, or select the gate that refuses the arch (a `raise` guard)"
    )


class UnknownProject(CodemodError):
    exit_code = 6
    code = "unknown-project"
    default_hint = "point --repo at a FlashInfer, SGLang or vLLM git checkout, or at site-packages of an installed wheel"


class DirtyTree(CodemodError):
    exit_code = 4
    code = "dirty-tree"
    default_hint = "commit or stash them, then run again"


class RepoState(CodemodError):
    exit_code = 5
    code = "repo-state"


class RevertRefused(CodemodError):
    exit_code = 7
    code = "revert-refused"


class RecipeInvalid(CodemodError):
    exit_code = 8
    code = "recipe-invalid"
    default_hint = "fix the recipe file and run again"


class FileRefused(CodemodError):
    exit_code = 9
    code = "file-refused"


class Busy(CodemodError):
    exit_code = 10
    code = "busy"
    default_hint = "wait for it to finish, then run again; a lock whose process is gone is taken over automatically"


class BuildNeeds(CodemodError):
    exit_code = 11
    code = "build-needs"


class CompileFailed(CodemodError):
    exit_code = 12
    code = "compile-failed"
    default_hint = "a source that does not compile for the arch would fail in FlashInfer's JIT too; fix it or revert the change"


class JitUnreadable(CodemodError):
    exit_code = 13
    code = "jit-unreadable"
    default_hint = "the JIT code does something codemod does not evaluate; please report it with the FlashInfer version"


class FlagRefused(CodemodError):
    exit_code = 13
    code = "flag-refused"
    default_hint = "the tree's JIT code sets an nvcc flag FlashInfer's own JIT does not use: check it before building this tree"


class UnknownRecipe(CodemodError):
    exit_code = 8
    code = "unknown-recipe"
    default_hint = "`codemod list` shows the recipes you can run"


class InstallBroken(CodemodError):
    exit_code = 14
    code = "install-broken"
    default_hint = "reinstall codemod with its dependencies: `pip install .` from its checkout"


class NothingToProve(CodemodError):
    exit_code = 15
    code = "nothing-to-prove"
    default_hint = "a proof needs a change to CUDA sources; `codemod status` shows what is applied"


class WorkerDied(CodemodError):
    exit_code = 16
    code = "worker-died"
    default_hint = (
        "a process killed by a signal is often the system's out-of-memory killer (see `dmesg`): run it again with "
        "`--jobs 1` (one process, less memory at once). A scan writes nothing to the tree, and its cache only whole entries"
    )


CATALOGUE: dict[str, type[CodemodError]] = {kind.code: kind for kind in CodemodError.__subclasses__()}
