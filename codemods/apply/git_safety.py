"""The environment and the ownership rule of every git command codemod runs; repo.py's commands stand on it.

codemod runs git on trees it does not trust yet (`scan` is an audit), so no
git process of codemod's may start a program that the tree, its .git, or a
config key names, nor work in a repository that is not the tree's own.
This module, repo.py, shadow.py and locate.py (the git layer of codemods.apply) are the only code that runs git.
"""

from __future__ import annotations

import functools
import os
import re
import subprocess
from pathlib import Path

from codemods.core import errors

# Every git process gets git_environment(): the inherited
# GIT_* variables cut down to _KEPT_GIT_VARIABLES, the fixed values below, and
# the config overrides of _PROGRAMS_OFF (plus, for a Repo, one per filter, diff
# and merge driver its config defines, see driver_overrides), passed as
# GIT_CONFIG_COUNT/KEY/VALUE, which outrank every config file like `-c` does
# and reach the git processes git starts itself.

# The GIT_* variables codemod keeps from its own environment: who commits, and which config files are the user's.
# Every other one (GIT_DIR, GIT_WORK_TREE, GIT_INDEX_FILE, GIT_EXEC_PATH, GIT_EXTERNAL_DIFF, GIT_PAGER,
# GIT_SSH_COMMAND, GIT_CONFIG_PARAMETERS, GIT_CONFIG_COUNT, GIT_TRACE ...) is dropped: it redirects git or runs a program.
_KEPT_GIT_VARIABLES = frozenset({
    "GIT_AUTHOR_NAME", "GIT_AUTHOR_EMAIL", "GIT_AUTHOR_DATE",
    "GIT_COMMITTER_NAME", "GIT_COMMITTER_EMAIL", "GIT_COMMITTER_DATE",
    "GIT_CONFIG_GLOBAL", "GIT_CONFIG_SYSTEM", "GIT_CONFIG_NOSYSTEM",
    "GIT_PYTHON_GIT_EXECUTABLE", "GIT_PYTHON_REFRESH", "GIT_PYTHON_TRACE",  # GitPython's own; git ignores them
})
# No prompt, no editor (":" is git's "none"), no pager ("cat" is git's "none"), no optional index refresh writes.
_FIXED_VARIABLES = {
    "GIT_TERMINAL_PROMPT": "0", "GIT_EDITOR": ":", "GIT_SEQUENCE_EDITOR": ":", "GIT_PAGER": "cat", "GIT_OPTIONAL_LOCKS": "0",
}
# Every config key that makes git start a program in the commands codemod runs (and the network ones, which
# codemod never reaches: protocol.allow=never makes sure). An empty value is git's "not set" for each.
_PROGRAMS_OFF = (
    ("core.hooksPath", os.devnull),
    ("core.fsmonitor", ""),
    ("core.pager", "cat"),
    ("core.editor", ":"),
    ("sequence.editor", ":"),
    ("core.askPass", ""),
    ("core.sshCommand", ""),
    ("core.alternateRefsCommand", ""),
    ("credential.helper", ""),
    ("commit.gpgSign", "false"),  # gpg.program, gpg.ssh.program ... are programs: codemod's commits are not signed
    ("tag.gpgSign", "false"),
    ("log.showSignature", "false"),
    ("submodule.recurse", "false"),
    ("protocol.allow", "never"),
    ("gc.auto", "0"),  # no background `git gc --auto` left running in the user's repository
    ("maintenance.auto", "false"),
)
# Per driver name its config defines: filter.<x>.clean/smudge/process run on add, checkout, status and diff;
# diff.<x>.textconv/command on diff (codemod's diffs also pass --no-ext-diff --no-textconv); merge.<x>.driver on revert.
_DRIVER_KEYS_OFF = {
    "filter": (("clean", ""), ("smudge", ""), ("process", ""), ("required", "false")),
    "diff": (("textconv", ""), ("command", "")),
    "merge": (("driver", ""),),
}
_MIN_GIT = (2, 31)  # GIT_CONFIG_COUNT


def drop_inherited_git_variables() -> None:
    """Remove from os.environ every GIT_* variable not in _KEPT_GIT_VARIABLES.

    GitPython starts each git from a copy of os.environ and reads GIT_DIR,
    GIT_WORK_TREE and GIT_COMMON_DIR itself when it opens a repository, so
    the process's own environment is where they must go.
    """
    for key in [key for key in os.environ if key.startswith("GIT_") and key not in _KEPT_GIT_VARIABLES]:
        del os.environ[key]


def git_overrides(config: tuple[tuple[str, str], ...] = ()) -> dict[str, str]:
    """The variables codemod sets for every git command: _FIXED_VARIABLES and the config of _PROGRAMS_OFF plus `config`."""
    _require_git_version()
    pairs = (*_PROGRAMS_OFF, *config)
    env = dict(_FIXED_VARIABLES, GIT_CONFIG_COUNT=str(len(pairs)))
    for index, (key, value) in enumerate(pairs):
        env[f"GIT_CONFIG_KEY_{index}"] = key
        env[f"GIT_CONFIG_VALUE_{index}"] = value
    return env


def git_environment(config: tuple[tuple[str, str], ...] = (), extra: dict[str, str] | None = None) -> dict[str, str]:
    """The whole environment of a git process codemod starts itself (see the comment above _KEPT_GIT_VARIABLES)."""
    drop_inherited_git_variables()
    return {**os.environ, **git_overrides(config), **(extra or {})}


@functools.cache
def _git_version() -> tuple[int, ...] | None:
    try:
        out = subprocess.run(["git", "version"], capture_output=True, text=True, timeout=60, env=_bare_environment()).stdout
    except (OSError, subprocess.SubprocessError):
        return None  # no git: each caller says so in its own way
    found = re.search(r"(\d+)\.(\d+)", out)
    return tuple(int(part) for part in found.groups()) if found else None


def _bare_environment() -> dict[str, str]:
    drop_inherited_git_variables()
    return dict(os.environ)


def _require_git_version() -> None:
    version = _git_version()
    if version is not None and version < _MIN_GIT:
        raise errors.InstallBroken(
            f"git {'.'.join(map(str, version))} is too old: codemod needs git {'.'.join(map(str, _MIN_GIT))} or newer "
            "to switch off the config keys that run programs (core.fsmonitor, filters ...) for its own git commands",
            where="git",
            hint="install a newer git (https://git-scm.com/downloads), then run again",
        )


def run_git(args: list[str], *, cwd: Path | None = None, extra: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    """One plain git process (no GitPython) with git_environment(); raises OSError/SubprocessError as subprocess does."""
    return subprocess.run(
        ["git", *args], cwd=cwd, capture_output=True, timeout=120, stdin=subprocess.DEVNULL,
        env=git_environment(extra=extra),
    )


def driver_overrides(cwd: Path, extra: dict[str, str]) -> tuple[tuple[str, str], ...]:
    """Config that switches off every filter, diff and merge driver the repository's config (all its files) defines.

    Drivers are chosen by .gitattributes, which the tree controls, but run
    only when a config file defines them, so `git config --list` names every
    one that could run. A name git's config keys cannot carry is refused.
    """
    try:
        proc = run_git(["config", "--list", "--name-only", "-z"], cwd=cwd, extra=extra)
    except (OSError, subprocess.SubprocessError):
        return ()
    found: dict[str, None] = {}
    for key in os.fsdecode(proc.stdout).split("\0"):
        section, _, rest = key.partition(".")
        name, _, _ = rest.rpartition(".")
        if section.lower() in _DRIVER_KEYS_OFF and name:
            found[f"{section.lower()}.{name}"] = None
    pairs = []
    for driver in found:
        section, _, name = driver.partition(".")
        if "\n" in name or "\0" in name:
            raise errors.RepoState(f"the git config defines a {section} driver whose name has a line break", where=str(cwd))
        pairs += [(f"{driver}.{key}", value) for key, value in _DRIVER_KEYS_OFF[section]]
    return tuple(pairs)


def work_tree_top(folder: Path) -> Path | None:
    """The top of the git work tree `folder` is in; None when git cannot tell (or is missing).

    Refuses (RepoState) a repository that is not the folder's own (see own_dot_git).
    """
    dot_git = own_dot_git(folder)
    if dot_git is None:
        return None
    try:
        proc = run_git(["-C", str(folder), "rev-parse", "--show-toplevel"])
    except (OSError, subprocess.SubprocessError):
        return None
    if proc.returncode != 0 or not proc.stdout.strip():
        return None
    top = Path(os.fsdecode(proc.stdout.rstrip(b"\r\n"))).resolve()
    if top != dot_git.parent.resolve():  # core.worktree in the repository's config names another folder
        raise _foreign(dot_git, f"its config names {top} as the work tree")
    return top


def own_dot_git(folder: Path) -> Path | None:
    """The `.git` of the repository git would use for folder, once it is shown to be the folder's own; None outside git.

    The first `.git` (folder, file or symlink) at or above folder is what git
    takes. A `.git` file (`gitdir: X`) or symlink can name any repository on
    the machine, so it is used only when X holds a repository that names this
    folder as its work tree: a linked worktree whose X/gitdir points back at
    this `.git`, or a repository whose core.worktree is this folder (a
    submodule; `git config core.worktree` says so for a separate git dir). A
    `.git` shipped in an unpacked release that names another repository, or
    none, is refused (RepoState): git is never run there.
    """
    here = folder.resolve()
    for place in (here, *here.parents):
        dot_git = place / ".git"
        if dot_git.is_dir() and not dot_git.is_symlink():
            return dot_git
        if dot_git.is_symlink() or dot_git.exists():
            _check_pointer(dot_git)
            return dot_git
        if is_git_dir(place):  # inside a bare repository: git says it has no work tree
            return None
    return None


def is_git_dir(folder: Path) -> bool:
    """A git dir as git recognises one: HEAD, and objects of its own or a linked worktree's `commondir`."""
    return (folder / "HEAD").is_file() and ((folder / "objects").is_dir() or (folder / "commondir").is_file())


def _foreign(dot_git: Path, why: str) -> errors.RepoState:
    return errors.RepoState(
        f"{dot_git} is not this folder's repository: {why}; codemod runs no git there",
        where=str(dot_git.parent),
        hint="if the folder came from an archive or a wheel, its .git is no checkout of yours: remove it "
        f"(rm -rf '{dot_git}') or scan without git (codemod scan --all); if it is yours, tell git this folder is its "
        f"work tree (git --git-dir=GITDIR config core.worktree '{dot_git.parent}'), then run again",
    )


def _check_pointer(dot_git: Path) -> None:
    """Refuse a `.git` file or symlink unless the repository it names claims its folder (see own_dot_git)."""
    if dot_git.is_symlink():
        target = Path(os.path.realpath(dot_git))
    elif not dot_git.is_file():  # a FIFO or a device: never opened
        raise _foreign(dot_git, "it is neither a folder nor a file")
    else:
        try:
            text = dot_git.read_bytes()[:4096].decode("utf-8", "replace")
        except OSError as exc:
            raise _foreign(dot_git, f"it cannot be read ({exc.strerror})") from None
        line = text.splitlines()[0] if text.splitlines() else ""
        if not line.startswith("gitdir: "):
            raise _foreign(dot_git, "it is a file, but no `gitdir: PATH` pointer")
        target = Path(os.path.realpath(dot_git.parent / line[len("gitdir: "):].strip()))
    if not is_git_dir(target):
        raise _foreign(dot_git, f"it points to {target}, which holds no git repository")
    claimed = _claimed_work_tree(target)
    here = Path(os.path.realpath(dot_git.parent))
    if claimed is None:
        raise _foreign(dot_git, f"it points to {target}, a repository that names no work tree")
    if claimed != here:
        raise _foreign(dot_git, f"it points to {target}, the repository of {claimed}")


def _claimed_work_tree(git_dir: Path) -> Path | None:
    """The folder a git dir says is its work tree: a linked worktree's back-pointer, core.worktree, or the parent of a `.git`."""
    try:
        if (git_dir / "commondir").is_file() and (git_dir / "gitdir").is_file():
            back = (git_dir / "gitdir").read_text(encoding="utf-8", errors="replace").strip()
            return Path(os.path.realpath(git_dir / back)).parent
        proc = run_git(["config", "--file", str(git_dir / "config"), "--includes", "--get", "core.worktree"])
    except (OSError, subprocess.SubprocessError):
        return None
    configured = os.fsdecode(proc.stdout.rstrip(b"\r\n")) if proc.returncode == 0 else ""
    if configured:
        return Path(os.path.realpath(git_dir / configured))
    return Path(os.path.realpath(git_dir.parent)) if git_dir.name == ".git" else None


# The shadow repository's git reads none of the user's config files and none of the folder's attributes:
# installed files are recorded and given back byte for byte (no eol conversion, filter, or ignore rule applies).
SHADOW_ENVIRONMENT = {"GIT_CONFIG_GLOBAL": os.devnull, "GIT_CONFIG_NOSYSTEM": "1"}
SHADOW_CONFIG = (
    ("core.autocrlf", "false"), ("core.eol", "lf"), ("core.safecrlf", "false"), ("core.symlinks", "true"),
    ("status.showUntrackedFiles", "no"), ("gc.auto", "0"),
)
# $GIT_DIR/info/attributes outranks every .gitattributes in the work tree.
SHADOW_ATTRIBUTES = "* -text -eol -filter -diff -merge -ident -working-tree-encoding\n"


def shadow_attributes(git_dir: Path) -> None:
    info = git_dir / "info" / "attributes"
    if not info.is_file() or info.read_text(encoding="utf-8", errors="replace") != SHADOW_ATTRIBUTES:
        info.parent.mkdir(parents=True, exist_ok=True)
        info.write_text(SHADOW_ATTRIBUTES, encoding="utf-8")


def checked(proc: subprocess.CompletedProcess) -> subprocess.CompletedProcess:
    if proc.returncode != 0:
        stderr = os.fsdecode(proc.stderr).strip()
        raise OSError(0, (stderr.splitlines() or [f"git exited with {proc.returncode}"])[-1])
    return proc
