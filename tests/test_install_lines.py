"""Every `pip install` line codemod prints or its docs show installs this project (or a requirement it declares).

PyPI's `codemod` is an unrelated 2017 project: `pip install 'codemod[build]'` in a
fresh venv installs it and warns that it has no extra 'build'. The distribution is
`gpu-arch-codemod`; the command stays `codemod`, the import package `codemods`.
"""

from __future__ import annotations

import re
import shlex
import subprocess
import sys
import tomllib
from importlib import metadata

import pytest
from packaging.requirements import InvalidRequirement, Requirement

from conftest import ROOT
from codemods.audit import finder
from codemods.core import distribution
from codemods.core.errors import BuildNeeds, InstallBroken
from codemods.prove import compile as build_compile

PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
EXTRAS = set(PYPROJECT["optional-dependencies"])
DECLARED = {Requirement(req) for req in [*PYPROJECT["dependencies"], *(r for reqs in PYPROJECT["optional-dependencies"].values() for r in reqs)]}
_LINE = re.compile(r"pip install ([^`#\n]*)")


def _name(req: str) -> str:
    return re.sub(r"[-_.]+", "-", re.match(r"[A-Za-z0-9._-]+", req).group(0)).lower()


def _same(word: str, req: Requirement) -> bool:
    try:
        given = Requirement(word)
    except InvalidRequirement:
        return False
    return _name(given.name) == _name(req.name) and set(map(str, given.specifier)) == set(map(str, req.specifier))


def problems(line: str) -> list[str]:
    """What is wrong with the arguments of one `pip install ...`: each must install this project or a declared requirement."""
    found = []
    words = [w for w in shlex.split(line.split("&&", 1)[0]) if not w.startswith("-")]
    assert words, f"`pip install {line}` installs nothing"
    for word in words:
        match = re.fullmatch(r"(\.|[A-Za-z0-9._-]+)(?:\[([^\]]*)\])?", word)
        project, extras = (match.group(1), match.group(2)) if match else (None, None)
        if project == "." or (project and _name(project) == distribution.DIST):
            unknown = {e.strip() for e in (extras or "").split(",") if e.strip()} - EXTRAS
            found += [f"{word}: no extra {e!r} in pyproject.toml" for e in sorted(unknown)]
        elif not any(_same(word, req) for req in DECLARED):
            found.append(f"{word}: neither this project ({distribution.DIST}, or `.` in its checkout) nor a requirement pyproject.toml declares")
    return found


def documented_lines() -> list[tuple[str, str]]:
    files = [ROOT / "README.md", ROOT / ".ci" / "run", *sorted((ROOT / "docs").rglob("*.md")), *sorted((ROOT / "examples").rglob("*.sh"))]
    return [(f"{path.relative_to(ROOT)}:{n}", m.group(1)) for path in files for n, text in enumerate(path.read_text().splitlines(), 1) for m in _LINE.finditer(text)]


def test_pyproject_names_the_distribution_codemod_ships_as():
    assert PYPROJECT["name"] == distribution.DIST != "codemod"
    dist = metadata.distribution(distribution.DIST)
    scripts = {ep.name: ep.value for ep in dist.entry_points if ep.group == "console_scripts"}
    assert scripts == {"codemod": "codemods.cli.app:main"}, "the command users type stays `codemod`"
    assert distribution.version() == dist.version


def test_the_checker_refuses_the_unrelated_pypi_codemod():
    assert problems("'codemod[build]'") and problems("codemod") and problems("'.[docs2]'")
    assert problems("-q '.[test,build]'") == [] and problems("'gpu-arch-codemod[build]'") == [] and problems("ripgrep==14.1.0") == []


def test_every_documented_pip_install_installs_this_project():
    lines = documented_lines()
    assert any(where.startswith("README.md") for where, _ in lines), "the README's set-up commands install the project"
    bad = {where: problems(line) for where, line in lines if problems(line)}
    assert not bad, bad


def test_code_writes_pip_install_lines_only_through_distribution():
    """A hint built at run time goes through distribution.pip_install; a literal one must pass the same check."""
    for path in sorted((ROOT / "codemods").rglob("*.py")):
        if path.name == "distribution.py":
            continue
        for n, text in enumerate(path.read_text().splitlines(), 1):
            for m in _LINE.finditer(text):
                assert "{" not in m.group(1), f"{path}:{n}: build install lines with distribution.pip_install"
                assert not problems(m.group(1).strip("\"' ")), f"{path}:{n}: {problems(m.group(1))}"


def test_missing_tvm_ffi_prints_a_line_that_works_in_a_fresh_venv(tmp_path):
    bare = tmp_path / "bare venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(bare)], check=True)
    with pytest.raises(BuildNeeds) as caught:
        build_compile.find_tvm_ffi(str(bare / "bin" / "python"))
    line = re.search(r"`([^`]*pip install[^`]*)`", caught.value.hint).group(1)
    assert line.startswith(f"'{bare}/bin/python' -m pip install "), line
    assert problems(line.split("pip install", 1)[1]) == []
    assert "apache-tvm-ffi" in line


def test_missing_rg_prints_a_line_that_works_in_a_fresh_venv(monkeypatch, tmp_path):
    monkeypatch.setattr(finder.sysconfig, "get_path", lambda name: str(tmp_path))
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(InstallBroken) as caught:
        finder.find(tmp_path, ["a.cu"])
    line = re.search(r"`([^`]*pip install[^`]*)`", caught.value.hint).group(1)
    assert line == f"{shlex.quote(sys.executable)} -m pip install ripgrep==14.1.0"
    assert problems(line.split("pip install", 1)[1]) == []
