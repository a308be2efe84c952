"""Generated hostile input to the CLI: always a catalogued exit code, one clear message, the tree unchanged.

Names (--branch, recipe ids), paths (missing, files, FIFOs, symlink loops, line breaks), recipe
fields (placeholders, wrong types) and nesting depth are generated with hypothesis and driven through
typer's CliRunner; a few sizes that used to crash the process run the CLI in a subprocess.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from conftest import EXAMPLES, IDENTITY, ROOT, git, init_repo, tree_digest

# errors.py: 0 success, 2..10 the catalogued refusals; 1 is an internal error (a bug) for these commands
CATALOGUED = {0, *range(2, 11)}
COMM = "flashinfer/jit/comm.py"
SETTINGS = settings(max_examples=50, deadline=None, suppress_health_check=list(HealthCheck), derandomize=True)


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    """One example repository and a set of bad paths, made once for all generated cases."""
    base = tmp_path_factory.mktemp("hostile")
    repo = base / "flashinfer"
    shutil.copytree(EXAMPLES / "flashinfer", repo)
    init_repo(repo)
    (base / "a-file.txt").write_text("not a folder\n")
    os.mkfifo(base / "a-fifo")
    os.mkfifo(base / "fifo.toml")
    (base / "loop.toml").symlink_to("loop.toml")
    (base / "loop-a").symlink_to("loop-b")
    (base / "loop-b").symlink_to("loop-a")
    (base / "empty-folder").mkdir()
    line_break = base / "site\npackages"
    shutil.copytree(EXAMPLES / "flashinfer", line_break)
    paths = [
        base / "missing", base / "a-file.txt", base / "a-fifo", base / "loop-a", base / "empty-folder",
        line_break, base / "missing" / "deeper", repo / COMM, repo / ".git", "/dev/null",
        base / "fifo.toml", base / "loop.toml", base / "missing.toml",
    ]  # fmt: skip
    return repo, base, paths


def invoke(*args):
    from codemods.cli.app import app

    result = CliRunner().invoke(app, [str(a) for a in args])
    return result


def check(result, *trees_before):
    output = result.output
    assert result.exit_code in CATALOGUED, output
    assert result.exception is None or isinstance(result.exception, SystemExit), repr(result.exception)
    assert "internal error" not in output and "Traceback" not in output, output
    if result.exit_code not in (0,):
        errors = [line for line in result.stderr.splitlines() if line.startswith("error")]
        assert len(errors) <= 1, output
    for path, before in trees_before:
        assert snapshot(path) == before, f"{path} changed"


def snapshot(path):
    if not os.path.isdir(path) or os.path.islink(path):
        return None
    refs = git(path, "for-each-ref", "--format=%(refname) %(objectname)") if (path / ".git").is_dir() else ""
    return tree_digest(path), refs


# ------------------------------------------------------------------ names

BRANCH_CHARS = st.sampled_from(list("ab-_./@{}~^:?*[]\\ \t\n") + ["..", "@{", ".lock", "ü", "\x7f", "refs/heads/"])
branches = st.lists(BRANCH_CHARS, max_size=8).map("".join)


def test_generated_branch_names(world):
    repo, _, _ = world

    @SETTINGS
    @given(branches)
    def case(name):
        before = snapshot(repo)
        check(invoke("run", "sm120-enable", "--repo", repo, "--dry-run", "--branch", name), (repo, before))

    case()


RECIPE = """\
id = {id}
summary = "generated"
arch = "sm_120"

[[change]]
id = {change_id}
project = "flashinfer"
file = {file}
kind = "python_arch_list"
function = "gen_trtllm_comm_module"
jit_modules = {jit}
symbol_files = {symbols}

[[test]]
name = {name}
change = "flashinfer.jit"
before = "def gen_trtllm_comm_module():\\n    f(supported_major_versions=[9, 10])\\n"
after = {after}
"""
VALID = {
    "id": '"generated"', "change_id": '"flashinfer.jit"', "file": '"{python}/jit/comm.py"', "jit": '["trtllm_comm"]',
    "symbols": '["{python}/jit/core.py"]', "name": '"a case"',
    "after": '"def gen_trtllm_comm_module():\\n    f(supported_major_versions=[9, 10, 12])\\n"',
}  # fmt: skip


def quoted(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") + '"'


templates = st.one_of(
    st.sampled_from(["{0}/x.py", "{python/x.py", "{python:>99999999999}", "{python.__class__}", "{}", "{{python}}/x", "{include!r}/x"]),
    st.lists(st.sampled_from(["{", "}", "python", "include", "csrc", "{python}", "/", "0", ":", ".", "!r", "x.py"]), max_size=6).map("".join),
)
toml_strings = st.lists(
    st.sampled_from(list("ab-_.{}:!>0/\\'\" \n") + ["{python}", "{include}", "{0}", "ü"]), max_size=12
).map("".join)
toml_values = st.one_of(
    toml_strings.map(quoted),
    templates.map(quoted),
    templates.map(lambda t: f"[{quoted(t)}]"),
    st.integers(-3, 10**30).map(str),
    st.sampled_from(["true", "[]", '["x"]', "[1, 2]", "{}", "{a = 1}", "1.5", "nan", "inf", '[""]', '"x"']),
)


def test_generated_recipe_fields(world, tmp_path_factory):
    """One field at a time gets a generated value; the others stay valid, so the bad one is what is met."""
    repo, _, _ = world

    @SETTINGS
    @given(st.sampled_from(sorted(VALID)), toml_values)
    def case(slot, value):
        folder = tmp_path_factory.mktemp("recipes")
        path = folder / "generated.toml"
        path.write_text(RECIPE.format(**{**VALID, slot: value}))
        before = snapshot(repo)
        check(invoke("list", "--recipes", folder))
        check(invoke("run", path, "--repo", repo, "--dry-run"), (repo, before))
        result = invoke("recipe", "test", path)
        assert result.exit_code in CATALOGUED | {1}, result.output  # 1: a case fails
        assert result.exception is None or isinstance(result.exception, SystemExit), repr(result.exception)

    case()


# ------------------------------------------------------------------ paths


COMMANDS = [
    ["run", "sm120-enable", "--dry-run"],
    ["run", "sm120-enable"],
    ["scan"],
    ["status"],
    ["revert", "sm120-enable"],
]


def test_generated_paths(world):
    repo, base, paths = world

    @SETTINGS
    @given(st.sampled_from(paths), st.sampled_from(COMMANDS), st.booleans())
    def case(path, command, as_repo):
        before = snapshot(repo), snapshot(base / "site\npackages")
        if as_repo:
            result = invoke(*command, "--repo", path)
        elif command[0] == "status":  # a recipe file to test, or a recipe folder holding it
            folder = base / "recipes"
            if str(path).endswith(".toml"):
                folder.mkdir(exist_ok=True)
                link = folder / "linked.toml"
                link.unlink(missing_ok=True)
                link.symlink_to(path)
                check(invoke("list", "--recipes", folder))
                link.unlink()
            result = invoke("recipe", "test", path)
        else:  # as a recipe file, or as the log for doctor
            result = invoke("run", path, "--repo", repo, "--dry-run") if command[0] != "scan" else invoke("doctor", path)
        check(result, (repo, before[0]), (base / "site\npackages", before[1]))

    case()


# ------------------------------------------------------------------ nesting


SHAPES = {
    "brackets": lambda n: b"x = " + b"(" * n + b"1" + b")" * n + b"\n",
    "calls": lambda n: b"x = " + b"f(" * n + b"1" + b")" * n + b"\n",
    "unary": lambda n: b"x = " + b"-" * n + b"1\n",
    "or": lambda n: b"x = " + b"a or " * n + b"a\n",
    "lists": lambda n: b"x = " + b"[" * n + b"]" * n + b"\n",
    "strings": lambda n: b"x = (" + b"'a' " * n + b")\n",
    "if": lambda n: b"".join(b"    " * i + b"if x:\n" for i in range(min(n, 120))) + b"    " * min(n, 120) + b"pass\n",
}


def test_generated_nesting(world, tmp_path_factory):
    repo, _, _ = world
    original = (repo / COMM).read_bytes()

    depths = st.one_of(st.sampled_from([1, 50, 63, 64, 65, 100, 199, 201, 500, 1000, 3000]), st.integers(1, 3000))

    @SETTINGS
    @given(st.sampled_from(sorted(SHAPES)), depths, st.sampled_from(["run", "recipe test", "scan"]))
    def case(shape, depth, command):
        deep = original + SHAPES[shape](depth)
        if command == "recipe test":
            folder = tmp_path_factory.mktemp("deep")
            text = (ROOT / "examples/recipes/sm110-enable.toml").read_text()
            case_text = deep.decode().replace("\\", "\\\\").replace('"""', '\\"\\"\\"')
            path = folder / "sm110-enable.toml"
            path.write_text(
                text + f'\n[[test]]\nname = "deep"\nchange = "flashinfer.trtllm-comm-jit"\nbefore = """\n{case_text}"""\noutcome = "changed"\n'
            )
            result = invoke("recipe", "test", path)
            assert result.exit_code in {0, 1, 3}, result.output  # 1: the case fails (a wrong expectation), 3: refused
            assert "internal error" not in result.output and result.exception is None or isinstance(result.exception, SystemExit)
            return
        tree = tmp_path_factory.mktemp("nest") / "flashinfer"
        shutil.copytree(EXAMPLES / "flashinfer", tree)
        (tree / COMM).write_bytes(deep)
        init_repo(tree)
        before = snapshot(tree)
        if command == "run":
            result = invoke("run", "sm120-enable", "--repo", tree, "--dry-run")
        else:
            result = invoke("scan", "--repo", tree, "--no-cache", "--jobs", "1")
        check(result, (tree, before))
        if result.exit_code == 3:
            assert f"{COMM}: nested too deeply" in result.stderr or f"{COMM}: not valid Python" in result.stderr

    case()


@pytest.mark.parametrize("depth", [5_000, 100_000])
@pytest.mark.parametrize("command", [["run", "sm120-enable"], ["scan", "--no-cache"]])
def test_crash_sizes_in_a_subprocess(tmp_path, depth, command):
    """Sizes that killed the process (SIGSEGV in libcst's native parser) run in their own process."""
    tree = tmp_path / "flashinfer"
    shutil.copytree(EXAMPLES / "flashinfer", tree)
    (tree / COMM).write_bytes((tree / COMM).read_bytes() + b"x = " + b"[" * depth + b"]" * depth + b"\n")
    init_repo(tree)
    before = snapshot(tree)
    env = {**os.environ, **IDENTITY, "PYTHONPATH": str(ROOT)}
    proc = subprocess.run(
        [sys.executable, "-c", "from codemods.cli.app import main; main()", *command, "--repo", str(tree)],
        capture_output=True, text=True, env=env, timeout=300,
    )
    assert proc.returncode in CATALOGUED, (proc.returncode, proc.stderr[-2000:])
    assert "internal error" not in proc.stderr and "Traceback" not in proc.stderr
    assert snapshot(tree) == before
