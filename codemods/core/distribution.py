"""The distribution codemod is installed as, and the one place that writes a `pip install` line for the user.

PyPI's `codemod` is an unrelated project (a 2017 refactoring tool), so this one
is distributed as `gpu-arch-codemod`; the command stays `codemod` and the import
package `codemods`. A hint that tells the user to install something names a
requirement exactly as pyproject.toml declares it (read from the installed
metadata, else from the source tree's pyproject.toml), so it works in a fresh
environment whether or not this project is on a package index.
"""

from __future__ import annotations

import re
import shlex
import tomllib
from functools import cache
from importlib import metadata
from pathlib import Path

DIST = "gpu-arch-codemod"


def version() -> str | None:
    """The installed version, or None when running from a source tree that is not installed."""
    try:
        return metadata.version(DIST)
    except metadata.PackageNotFoundError:
        return None


def _name(requirement: str) -> str:
    match = re.match(r"[A-Za-z0-9][A-Za-z0-9._-]*", requirement.strip())
    return re.sub(r"[-_.]+", "-", match.group(0)).lower() if match else ""


@cache
def declared() -> tuple[str, ...]:
    """Every requirement pyproject.toml declares (dependencies and every extra's), environment markers dropped."""
    try:
        found = metadata.requires(DIST) or []
    except metadata.PackageNotFoundError:
        pyproject = Path(__file__).resolve().parents[2] / "pyproject.toml"
        project = tomllib.loads(pyproject.read_text()).get("project", {}) if pyproject.is_file() else {}
        found = [*project.get("dependencies", []), *(r for reqs in project.get("optional-dependencies", {}).values() for r in reqs)]
    return tuple(req.split(";", 1)[0].strip() for req in found)


def requirement(name: str) -> str:
    """The requirement pyproject.toml declares for `name` (`ripgrep==14.1.0`), or the bare name if it declares none."""
    return next((req for req in declared() if _name(req) == _name(name)), name)


def pip_install(name: str, python: str | None = None) -> str:
    """A `pip install` line for the declared requirement `name`, into `python` when given: it works in a fresh venv."""
    pip = f"{shlex.quote(python)} -m pip install" if python else "pip install"
    return f"{pip} {shlex.quote(requirement(name))}"
