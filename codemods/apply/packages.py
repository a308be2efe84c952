"""Installed packages: find the site-packages folder that holds a distribution.

`--package flashinfer` (or the distribution name, `flashinfer-python`) is
resolved with importlib.metadata, in this interpreter or in the one given by
`--python PATH` (asked in a subprocess, so its own sys.path decides).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from importlib import metadata
from pathlib import Path

from codemods.core import errors

# project name -> distribution names that install it (first found wins)
DISTRIBUTIONS = {
    "flashinfer": ("flashinfer-python", "flashinfer"),
    "sglang": ("sglang",),
    "vllm": ("vllm",),
}

# `-I` keeps the folder codemod runs in (an inspected tree, perhaps) off sys.path, so its json.py or
# *.dist-info cannot answer; it also drops PYTHONPATH and the user site, which are the user's and put back.
_ISOLATED = """
import os, site, sys
sys.path[:0] = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if os.path.isabs(p)]
if sys.prefix == sys.base_prefix and os.path.isdir(site.getusersitepackages()):
    site.addsitedir(site.getusersitepackages())
"""


def probe(python: str, code: str, *args: str) -> subprocess.CompletedProcess[str]:
    """Run `code` in `python` in isolated mode (`-I`), with the user's PYTHONPATH and user site, nothing from the current folder.

    Raises OSError or subprocess.TimeoutExpired when it cannot be run.
    """
    return subprocess.run(
        [python, "-I", "-c", _ISOLATED + code, *args], capture_output=True, text=True, errors="replace", timeout=60
    )


_PROBE = """
import json
from importlib import metadata
for name in sys.argv[1:]:
    try:
        dist = metadata.distribution(name)
    except metadata.PackageNotFoundError:
        continue
    print(json.dumps({"name": name, "version": dist.version, "root": str(dist.locate_file(""))}))
    break
"""


_PYTHON_HINT = "pass the python of the environment that runs your server"


def _excerpt(text: str, limit: int = 200) -> str:
    """At most `limit` characters of what a program printed, quoted, control characters escaped."""
    text = text.strip()
    cut = text[:limit]
    return repr(cut) + (f" ... ({len(text):,} characters)" if len(text) > limit else "")


def distributions_for(name: str) -> tuple[str, ...]:
    for project, dists in DISTRIBUTIONS.items():
        if name == project or name in dists:
            return dists
    return (name,)


def locate(name: str, python: str | None = None) -> tuple[Path, str, str]:
    """(site-packages folder, distribution name, version) of the installed package `name`."""
    dists = distributions_for(name)
    if python is None:
        here = os.path.realpath(os.getcwd())
        path = [p for p in sys.path if p and os.path.realpath(p) != here]  # `python -m codemods` puts the current folder first
        for dist_name in dists:
            dist = next(iter(metadata.distributions(name=dist_name, path=path)), None)
            if dist is not None:
                return Path(str(dist.locate_file(""))).resolve(), dist_name, dist.version
        where = "this interpreter"
    else:
        try:
            proc = probe(python, _PROBE, *dists)
        except (OSError, subprocess.TimeoutExpired) as exc:
            raise errors.RepoState(f"cannot run {python}: {exc}", where="--python", hint=_PYTHON_HINT) from None
        if proc.returncode != 0:
            last = proc.stderr.strip().splitlines()[-1:] or [f"exit status {proc.returncode}"]
            raise errors.RepoState(f"{python} failed: {_excerpt(last[0])}", where="--python", hint=_PYTHON_HINT)
        if proc.stdout.strip():
            try:
                found = json.loads(proc.stdout.strip().splitlines()[-1])
                root, name, version = found["root"], found["name"], found["version"]
                if not all(isinstance(value, str) for value in (root, name, version)):
                    raise TypeError
                return Path(root).resolve(), name, version
            except (ValueError, KeyError, TypeError, RuntimeError):
                raise errors.RepoState(
                    f"{python} is not a Python that answers codemod's probe; it printed {_excerpt(proc.stdout)}",
                    where="--python",
                    hint=_PYTHON_HINT,
                ) from None
        where = python
    raise errors.UnknownProject(
        f"no installed distribution {' or '.join(dists)} in {where}",
        where=f"--package {name}",
        hint="install it, pass --python PATH of the environment that has it, or use --repo DIR",
    )


def project_of(name: str) -> str | None:
    """The project a --package name means (flashinfer for flashinfer-python)."""
    for project, dists in DISTRIBUTIONS.items():
        if name == project or name in dists:
            return project
    return None


def folder(name: str, python: str | None = None) -> Path:
    """The installed package's own folder (site-packages/flashinfer), so each package keeps its own record.

    Falls back to the site-packages folder when the import folder is not there.
    """
    root = locate(name, python)[0]
    project = project_of(name)
    inside = root / project if project else None
    return inside if inside is not None and inside.is_dir() else root
