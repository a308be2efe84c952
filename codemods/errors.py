"""Every user-facing error: a fixed exit code, a title, a message and what to do next.

The CLI catches `CodemodError` at its boundary and prints
`error[<code>]: <where>: <message>` and `  hint: <hint>` on stderr, then exits
with the error's exit code. Nothing else is caught.

Exit codes (stable, documented in the README):
  0  success (changed, or nothing left to do)
  1  unexpected internal error (a bug: please report it with --debug output)
  2  bad usage (typer's own code for bad options)
  3  plan failed: a gate was not found or cannot be widened; nothing written
  4  work tree not clean in files the recipe would touch
  5  repository state refuses the operation (not a git repo, detached HEAD, foreign branch ...)
  6  project not recognised at --repo
  7  revert refused (commits on top, files changed since apply)
  8  recipe file invalid
  9  file system refused (permissions, path outside the repo)
 10  another codemod holds this repository's lock
 11  verify --build: a tool or header the build needs is missing (nvcc, TVM-FFI, CUTLASS, spdlog)
 12  verify --build: nvcc rejected a source (the first compiler error, with its file and line)
 13  verify --build: FlashInfer's JIT code could not be read for the nvcc flags
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass
class CodemodError(Exception):
    message: str
    where: str = ""
    hint: str = ""
    exit_code: int = 1
    code: str = "internal"

    def __str__(self) -> str:
        return f"{self.where}: {self.message}" if self.where else self.message


def _kind(code: str, exit_code: int, default_hint: str):
    def make(message: str, where: str = "", hint: str = "") -> CodemodError:
        return CodemodError(message, where, hint or default_hint, exit_code, code)

    make.exit_code = exit_code  # type: ignore[attr-defined]
    make.code = code  # type: ignore[attr-defined]
    return make


BadUsage = _kind("bad-usage", 2, "see `codemod COMMAND --help`")
PlanFailed = _kind(
    "plan-failed",
    3,
    "nothing was written; check the project version with `codemod run --dry-run`, "
    "or skip the change with --skip ID",
)
DirtyTree = _kind(
    "dirty-tree", 4, "commit or stash them, then run again"
)
RepoState = _kind("repo-state", 5, "")
UnknownProject = _kind(
    "unknown-project",
    6,
    "point --repo at a FlashInfer or SGLang git checkout, or at site-packages of an installed wheel",
)
RevertRefused = _kind("revert-refused", 7, "")
RecipeInvalid = _kind("recipe-invalid", 8, "fix the recipe file and run again")
FileRefused = _kind("file-refused", 9, "")
Busy = _kind("busy", 10, "wait for it to finish, then run again; a lock whose process is gone is taken over automatically")
BuildNeeds = _kind("build-needs", 11, "")
CompileFailed = _kind("compile-failed", 12, "a source that does not compile for the arch would fail in FlashInfer's JIT too; fix it or revert the change")
JitUnreadable = _kind("jit-unreadable", 13, "the JIT code does something codemod does not evaluate; please report it with the FlashInfer version")
UnknownRecipe = _kind("unknown-recipe", 8, "`codemod list` shows the recipes you can run")

CATALOGUE = {
    k.code: k
    for k in (BadUsage, Busy, PlanFailed, DirtyTree, RepoState, UnknownProject, RevertRefused, RecipeInvalid, FileRefused, UnknownRecipe,
              BuildNeeds, CompileFailed, JitUnreadable)
}
