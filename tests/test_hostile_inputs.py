"""Hostile input never crashes codemod, never hangs it, and never changes the tree.

Cases that used to kill the process (SIGSEGV in libcst's native parser) or hang it run the
CLI in a subprocess with a timeout, so a crash or a hang fails the test instead of pytest.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from conftest import IDENTITY, ROOT, git, tree_digest

COMM = "flashinfer/jit/comm.py"
HEADER = "include/flashinfer/comm/trtllm_allreduce.cuh"


def codemod(*args, timeout: float = 120, env: dict | None = None) -> subprocess.CompletedProcess:
    """The real CLI in its own process (a crash is a return code, a hang a timeout)."""
    full_env = {**os.environ, **IDENTITY, "PYTHONPATH": str(ROOT), **(env or {})}
    return subprocess.run(
        [sys.executable, "-c", "from codemods.cli.app import main; main()", *map(str, args)],
        capture_output=True, text=True, env=full_env, timeout=timeout,
    )


def state(repo):
    return tree_digest(repo), git(repo, "for-each-ref", "--format=%(refname) %(objectname)")


def commit(repo, rel, data: bytes):
    (repo / rel).write_bytes(data)
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", f"edit {rel}")


def clean_refusal(output: str) -> None:
    assert "internal error" not in output and "Traceback" not in output, output


# ------------------------------------------------------------------ deep nesting in Python

DEEP = {
    "brackets-500": lambda: b"x = " + b"(" * 500 + b"1" + b")" * 500 + b"\n",
    "brackets-2000": lambda: b"x = " + b"[" * 2000 + b"1" + b"]" * 2000 + b"\n",
    "brackets-100000": lambda: b"x = " + b"(" * 100_000 + b"1" + b")" * 100_000 + b"\n",
    "unary-100000": lambda: b"x = " + b"-" * 100_000 + b"1\n",
    "or-chain-100000": lambda: b"x = " + b"a or " * 100_000 + b"a\n",
    "calls-150": lambda: b"x = " + b"f(" * 150 + b"1" + b")" * 150 + b"\n",
}


@pytest.mark.parametrize("shape", DEEP)
def test_deep_python_in_a_target_is_refused(example_repo, shape):
    repo = example_repo("flashinfer")
    commit(repo, COMM, (repo / COMM).read_bytes() + DEEP[shape]())
    before = state(repo)
    proc = codemod("run", "sm120-enable", "--repo", repo)
    assert proc.returncode == 3, (proc.returncode, proc.stderr[-2000:])
    assert f"{COMM}: nested too deeply" in proc.stderr
    clean_refusal(proc.stderr)
    assert state(repo) == before


def test_deep_python_with_syntax_python_rejects_is_refused_by_its_brackets(example_repo):
    """A file the running Python cannot parse (here a stray `$`) is measured by its brackets alone."""
    repo = example_repo("flashinfer")
    commit(repo, COMM, (repo / COMM).read_bytes() + b"x = $" + b"{" * 5000 + b"}" * 5000 + b"\n")
    proc = codemod("run", "sm120-enable", "--repo", repo, "--dry-run")
    assert proc.returncode == 3 and f"{COMM}: nested too deeply: line 38" in proc.stderr, proc.stderr[-2000:]


def test_nesting_real_code_uses_is_read(example_repo):
    """Forty levels (real FlashInfer and SGLang files nest at most about fifty) are fine."""
    repo = example_repo("flashinfer")
    commit(repo, COMM, (repo / COMM).read_bytes() + b"x = " + b"f(" * 40 + b"1" + b")" * 40 + b"\n")
    proc = codemod("run", "sm120-enable", "--repo", repo, "--dry-run")
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "supported_major_versions=[9, 10, 12]" in proc.stdout


DEEP_CASE = '''\
id = "deep-case"
summary = "a case nested too deeply"
arch = "sm_120"

[[change]]
id = "flashinfer.jit"
project = "flashinfer"
file = "{python}/jit/comm.py"
kind = "python_arch_list"
function = "gen_module"

[[test]]
name = "deep"
change = "flashinfer.jit"
before = """
def gen_module():
    return f(supported_major_versions=[9, 10], x=NEST)
"""
after = """
def gen_module():
    return f(supported_major_versions=[9, 10, 12], x=NEST)
"""
'''


@pytest.mark.parametrize("depth", [500, 2000, 100_000])
def test_recipe_test_refuses_a_deep_case(tmp_path, depth):
    recipe = tmp_path / "deep-case.toml"
    recipe.write_text(DEEP_CASE.replace("NEST", "(" * depth + "1" + ")" * depth))
    proc = codemod("recipe", "test", recipe)
    assert proc.returncode == 3, (proc.returncode, proc.stderr[-2000:])
    assert "case 'deep': " in proc.stderr and "nested too deeply" in proc.stderr
    clean_refusal(proc.stderr)


def test_scan_skips_deep_python(tmp_path):
    tree = tmp_path / "tree"
    (tree / "flashinfer/jit").mkdir(parents=True)
    spec = b"def gen_module():\n    return gen_jit_spec('m', [], supported_major_versions=[9, 10])\n"
    (tree / "flashinfer/jit/ok.py").write_bytes(spec)
    (tree / "flashinfer/jit/deep.py").write_bytes(spec + b"x = " + b"(" * 2000 + b"1" + b")" * 2000 + b"\n")
    (tree / "flashinfer/jit/deeper.py").write_bytes(spec + b"x = " + b"-" * 100_000 + b"1\n")
    before = tree_digest(tree)
    for jobs in ("1", "2"):
        proc = codemod("scan", "--repo", tree, "--format", "json", "--jobs", jobs, "--no-cache")
        assert proc.returncode == 0, proc.stderr[-2000:]
        clean_refusal(proc.stderr)
        import json

        skipped = {entry["file"]: entry["reason"] for entry in json.loads(proc.stdout)["skipped"]}
        assert skipped["flashinfer/jit/deep.py"].startswith("nested too deeply: line 3")
        assert skipped["flashinfer/jit/deeper.py"].startswith("nested too deeply")
        assert "flashinfer/jit/ok.py" not in skipped
    assert tree_digest(tree) == before


# ------------------------------------------------------------------ nested #if in a header

NESTED_GUARD = b"#if __CUDA_ARCH__ >= 900 && __CUDA_ARCH__ < 1200\n"
NESTED_WIDENED = b"#if __CUDA_ARCH__ >= 900\n"


@pytest.mark.slow
def test_ten_thousand_nested_guards_are_all_widened(example_repo):
    """Was cubic (a parent walk per guard): 2,000 levels took a minute, 10,000 never finished."""
    repo = example_repo("flashinfer")
    levels = 10_000
    original = (repo / HEADER).read_bytes()
    nest = NESTED_GUARD * levels + b"  cudaGridDependencySynchronize();\n" + b"#endif\n" * levels
    commit(repo, HEADER, original + nest)
    proc = codemod("run", "sm120-enable", "--repo", repo, "--format", "json", timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    widened = original.replace(
        b"\n#if (defined(__CUDA_ARCH__) && (__CUDA_ARCH__ >= 900) && (__CUDA_ARCH__ < 1200))",
        b"\n#if (defined(__CUDA_ARCH__) && (__CUDA_ARCH__ >= 900))",
    ) + NESTED_WIDENED * levels + b"  cudaGridDependencySynchronize();\n" + b"#endif\n" * levels
    assert (repo / HEADER).read_bytes() == widened
    assert git(repo, "status", "--porcelain") == ""


def test_guard_around_a_deep_ifdef_nest(example_repo):
    """The hazard scan of a guard's body walks nested groups without recursion (was RecursionError)."""
    repo = example_repo("flashinfer")
    levels = 5_000
    original = (repo / HEADER).read_bytes()
    nest = b"#ifdef FOO\n" * levels + b"  cudaGridDependencySynchronize();\n" + b"#endif\n" * levels
    commit(repo, HEADER, original + NESTED_GUARD + nest + b"#endif\n")
    proc = codemod("run", "sm120-enable", "--repo", repo, "--dry-run", timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    clean_refusal(proc.stderr)
    line = original.count(b"\n") + 1
    assert f"{HEADER}:{line}  __CUDA_ARCH__ >= 900 && __CUDA_ARCH__ < 1200  ->  __CUDA_ARCH__ >= 900" in proc.stderr
    assert "\n-#if __CUDA_ARCH__ >= 900 && __CUDA_ARCH__ < 1200\n+#if __CUDA_ARCH__ >= 900\n #ifdef FOO\n" in proc.stdout
    proc = codemod("scan", "--repo", repo, "--no-cache", "--jobs", "1", "--format", "json", timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    import json

    lines = {gate["line"] for gate in json.loads(proc.stdout)["gates"] if gate["file"] == HEADER}
    assert line in lines


@pytest.mark.slow
def test_recipe_case_with_many_guards(tmp_path):
    guards = 20_000
    guard = "#if (defined(__CUDA_ARCH__) && (__CUDA_ARCH__ >= 900) && (__CUDA_ARCH__ < 1200))\n"
    before = (guard + "  cudaGridDependencySynchronize();\n#endif\n") * guards
    after = before.replace(guard, "#if (defined(__CUDA_ARCH__) && (__CUDA_ARCH__ >= 900))\n")
    recipe = tmp_path / "many-guards.toml"
    recipe.write_text(
        'id = "many-guards"\nsummary = "many"\narch = "sm_120"\n\n[[change]]\nid = "flashinfer.guards"\n'
        'project = "flashinfer"\nfile = "{include}/x.cuh"\nkind = "cuda_guard"\nadmits = ["sm_90", "sm_100"]\n\n'
        f'[[test]]\nname = "many"\nchange = "flashinfer.guards"\nbefore = """\n{before}"""\nafter = """\n{after}"""\n'
    )
    proc = codemod("recipe", "test", recipe, timeout=600)
    assert proc.returncode == 0 and proc.stdout.endswith("1 passed, 0 failed\n"), proc.stdout[-500:] + proc.stderr[-2000:]


# ------------------------------------------------------------------ special files


def test_fifo_as_a_run_target_is_not_read(example_repo):
    """A FIFO where a target file should be: `run --dry-run` hung reading it."""
    repo = example_repo("flashinfer")
    (repo / COMM).unlink()
    os.mkfifo(repo / COMM)
    before = state(repo)
    for extra in (["--dry-run"], []):
        proc = codemod("run", "sm120-enable", "--repo", repo, *extra, timeout=60)
        assert proc.returncode == 3, proc.stderr[-2000:]
        assert f"{COMM}: not a regular file" in proc.stderr
        clean_refusal(proc.stderr)
        assert state(repo) == before


@pytest.mark.parametrize("follow", [[], ["--follow", "--timeout", "5"]], ids=["read", "follow"])
@pytest.mark.parametrize("special", ["/dev/zero", "fifo"])
def test_doctor_refuses_a_special_file_as_a_log(tmp_path, special, follow):
    """`doctor /dev/zero` ran forever; a FIFO blocked in open()."""
    if special == "fifo":
        special = tmp_path / "server.log"
        os.mkfifo(special)
    proc = codemod("doctor", special, *follow, timeout=60)
    assert proc.returncode == 9, proc.stderr[-2000:]
    assert f"{special}: not a regular file" in proc.stderr
    clean_refusal(proc.stderr)


@pytest.mark.parametrize("option", ["--rules", "--baseline", "--topo"])
def test_doctor_refuses_a_device_as_an_input_file(option):
    log = ROOT / "examples/logs/sglang-tp8-healthy.log"
    extra = ["--preflight", "--tp", "8"] if option == "--topo" else []
    proc = codemod("doctor", log, option, "/dev/zero", *extra, timeout=60)
    assert proc.returncode == 9, proc.stderr[-2000:]
    assert "/dev/zero" in proc.stderr and "not a regular file" in proc.stderr
    clean_refusal(proc.stderr)


# ------------------------------------------------------------------ symlink loops


def make_loop(folder, a="loop-a", b="loop-b"):
    (folder / a).symlink_to(b)
    (folder / b).symlink_to(a)
    return folder / a


@pytest.mark.parametrize("extra", [[], ["--dry-run"]], ids=["run", "dry-run"])
def test_symlink_loop_as_a_target_file(cli, example_repo, extra):
    repo = example_repo("flashinfer")
    (repo / COMM).unlink()
    make_loop(repo / "flashinfer/jit")
    (repo / COMM).symlink_to("loop-a")
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "loop")
    before = state(repo)
    result = cli("run", "sm120-enable", "--repo", repo, *extra)
    assert result.exit_code == 9, result.output
    assert f"{COMM}: is a symlink loop" in result.stderr
    clean_refusal(result.output)
    assert state(repo) == before


@pytest.mark.parametrize(
    "command", [["run", "sm120-enable"], ["run", "sm120-enable", "--dry-run"], ["scan"], ["status"], ["revert", "sm120-enable"]]
)
def test_symlink_loop_as_repo(cli, tmp_path, command):
    loop = make_loop(tmp_path)
    result = cli(*command, "--repo", loop)
    assert result.exit_code == 9, result.output
    assert f"{loop}: is a symlink loop" in result.stderr
    clean_refusal(result.output)


def test_scan_passes_over_a_symlink_loop_in_the_tree(cli, example_repo):
    repo = example_repo("flashinfer")
    make_loop(repo / "include/flashinfer", "a.cuh", "b.cuh")
    before = tree_digest(repo)
    result = cli("scan", "--repo", repo, "--no-cache")
    assert result.exit_code == 0, result.output
    assert "include/flashinfer/comm/trtllm_allreduce.cuh:23" in result.stdout
    assert tree_digest(repo) == before


# ------------------------------------------------------------------ a broken --python

FAKE_PYTHONS = {
    "garbage": ("echo 'Welcome to my shell'", "'Welcome to my shell'"),
    "json-list": ("echo '[1, 2]'", "'[1, 2]'"),
    "json-wrong-types": ("echo '{\"name\": 1, \"root\": 2, \"version\": 3}'", "'{\"name\": 1"),
    "json-missing-keys": ("echo '{}'", "'{}'"),
    "binary": ("printf '\\377\\376\\000\\001bin'", "\\x00\\x01bin'"),
    "endless-line": ("head -c 300000 /dev/zero | tr '\\0' x", "(300,000 characters)"),
    "fails": ("echo 'Segmentation fault' >&2; exit 139", "failed: 'Segmentation fault'"),
    "fails-silently": ("exit 4", "failed: 'exit status 4'"),
}


@pytest.mark.parametrize("fake", FAKE_PYTHONS)
def test_broken_python_is_refused_with_what_it_printed(cli, tmp_path, fake):
    script, shown = FAKE_PYTHONS[fake]
    python = tmp_path / "python"
    python.write_text(f"#!/bin/sh\n{script}\n")
    python.chmod(0o755)
    result = cli("run", "sm120-enable", "--package", "flashinfer", "--python", python, "--dry-run")
    assert result.exit_code == 5, result.output
    assert f"--python: {python}" in result.stderr and shown in result.stderr
    assert max(len(line) for line in result.stderr.splitlines()) < 400  # a bounded excerpt
    clean_refusal(result.output)


# ------------------------------------------------------------------ non-finite throughput


def test_doctor_ignores_throughput_that_overflows_to_inf(cli, tmp_path):
    """400 digits parse as inf: the A/B median became nan, and doctor said to keep the patch."""
    import re

    logs = ROOT / "examples/logs"
    patched = (logs / "sglang-tp8-sm120-patched.log").read_text()
    count = iter(range(10**6))
    huge = "9" * 400
    hostile = re.sub(
        r"gen throughput \(token/s\): [\d.]+",
        lambda m: f"gen throughput (token/s): {huge}" if next(count) % 2 else m.group(),
        patched,
    )
    log = tmp_path / "patched.log"
    log.write_text(hostile)
    clean = cli("doctor", logs / "sglang-tp8-sm120-patched.log", "--baseline", logs / "sglang-tp8-sm120-baseline.log")
    result = cli("doctor", log, "--baseline", logs / "sglang-tp8-sm120-baseline.log")
    clean_refusal(result.output)
    assert " nan " not in result.stdout and " inf " not in result.stdout
    assert "value(s) that are not finite numbers (inf, nan) ignored" in result.stdout
    assert "A/B: the patched run is SLOWER" in clean.stdout
    assert "A/B: the patched run is SLOWER" in result.stdout, result.stdout
    assert result.exit_code == clean.exit_code == 1, result.output
    data = cli("doctor", log, "--format", "json")
    import json

    assert json.loads(data.stdout)["throughput"]["not_finite"] == 25


# ------------------------------------------------------------------ recipe path templates

RECIPE = """\
id = "my-recipe"
summary = "test recipe"
arch = "sm_120"

[[change]]
id = "flashinfer.jit"
project = "flashinfer"
file = "FILE"
kind = "python_arch_list"
function = "gen_trtllm_comm_module"

[[change]]
id = "sglang.gate"
project = "sglang"
kind = "python_arch_or"
requires_symbol = "is_sm120_supported"
symbol_files = ["SYMBOLS"]
  [[change.at]]
  file = "AT"
  function = "apply_flashinfer_allreduce_fusion"
"""

TAIL = '  function = "apply_flashinfer_allreduce_fusion"\n'
BAD_TEMPLATES = ["{0}/x.py", "{python/x.py", "{python:>99999999999}", "{python.__class__}", "{}/x.py", "{{python}}/x.py", "{pythonx}/a.py", "python}/a.py", "{include!r}"]
LINES = {"FILE": 8, "SYMBOLS": 17, "AT": 19}


@pytest.mark.parametrize("slot", LINES)
@pytest.mark.parametrize("template", BAD_TEMPLATES)
def test_bad_placeholder_is_refused_at_load(cli, example_repo, tmp_path, slot, template):
    repo = example_repo("flashinfer")
    fill = {"FILE": "{python}/jit/comm.py", "SYMBOLS": "{python}/srt/utils/common.py", "AT": "{python}/srt/layers/communicator.py"}
    fill[slot] = template
    text = RECIPE
    for key, value in fill.items():
        text = text.replace(key, value)
    path = tmp_path / "my-recipe.toml"
    path.write_text(text)
    before = state(repo)
    for args in (["run", path, "--repo", repo, "--dry-run"], ["list", "--recipes", tmp_path]):
        result = cli(*args)
        assert result.exit_code == 8, result.output
        assert f"{path}:{LINES[slot]}: path {template!r}" in result.stderr, result.stderr
        clean_refusal(result.output)
    assert state(repo) == before


@pytest.mark.parametrize(
    "edit, message",
    [
        (('symbol_files = ["SYMBOLS"]', "symbol_files = 3"), "'symbol_files' must be a list of strings"),
        (('symbol_files = ["SYMBOLS"]', 'symbol_files = "abc"'), "'symbol_files' must be a list of strings"),
        (('requires_symbol = "is_sm120_supported"', "requires_symbol = 12"), "'requires_symbol' must be a string"),
        (('kind = "python_arch_list"', 'kind = "python_arch_list"\njit_modules = [1]'), "'jit_modules' must be a list of strings"),
        (('kind = "python_arch_list"', 'kind = "python_arch_list"\ntitle = 5'), "'title' must be a string"),
        ((TAIL, TAIL + '[[test]]\nchange = "flashinfer.jit"\nbefore = "x"\nafter = 3\n'), "'after' must be a string"),
        ((TAIL, TAIL + '[[test]]\nchange = ["x"]\nbefore = "x"\n'), "is not in this recipe"),
    ],
)
def test_wrong_types_in_a_recipe(cli, tmp_path, edit, message):
    text = RECIPE.replace(*edit)
    for key, value in {"FILE": "{python}/jit/comm.py", "SYMBOLS": "{python}/a.py", "AT": "{python}/b.py"}.items():
        text = text.replace(key, value)
    path = tmp_path / "my-recipe.toml"
    path.write_text(text)
    result = cli("list", "--recipes", tmp_path)
    assert result.exit_code == 8, result.output
    assert message in result.stderr and f"{path}:" in result.stderr
    clean_refusal(result.output)


# ------------------------------------------------------------------ permissions and odd paths


@pytest.fixture
def immutable():
    """chattr +i a folder (root ignores mode bits, not the immutable flag); undone after the test."""
    made = []

    def make(folder):
        folder.mkdir(parents=True, exist_ok=True)
        if subprocess.run(["chattr", "+i", str(folder)], capture_output=True).returncode != 0:
            pytest.skip("chattr +i is not available here")
        made.append(folder)
        return folder

    yield make
    for folder in made:
        subprocess.run(["chattr", "-i", str(folder)], capture_output=True)


def refused_run(cli, repo, where, *extra):
    before = state(repo) if (repo / ".git").exists() else (tree_digest(repo), "")
    result = cli("run", "sm120-enable", "--repo", repo, *extra)
    assert result.exit_code == 9, result.output
    assert f"error[file-refused]: {where}: " in result.stderr and "hint: " in result.stderr
    clean_refusal(result.output)
    after = state(repo) if (repo / ".git").exists() else (tree_digest(repo), "")
    assert after == before
    return result


def test_git_codemod_is_a_file(cli, example_repo):
    repo = example_repo("flashinfer")
    (repo / ".git/codemod").write_text("not a folder\n")
    refused_run(cli, repo, repo / ".git/codemod")
    assert cli("revert", "sm120-enable", "--repo", repo).exit_code == 9
    assert (repo / ".git/codemod").read_text() == "not a folder\n"


def test_git_codemod_is_immutable(cli, example_repo, immutable):
    repo = example_repo("flashinfer")
    immutable(repo / ".git/codemod")
    refused_run(cli, repo, repo / ".git/codemod")


def plain_folder(tmp_path, name="site-packages"):
    """The example tree outside git, as an installed package is."""
    import shutil

    from conftest import EXAMPLES

    dest = tmp_path / name
    shutil.copytree(EXAMPLES / "flashinfer", dest)
    return dest


@pytest.mark.parametrize("kind", ["file", "under-a-file"])
def test_codemod_home_is_a_file(cli, tmp_path, monkeypatch, kind):
    home = tmp_path / "home-file"
    home.write_text("x")
    if kind == "under-a-file":
        home = home / "codemod"
    monkeypatch.setenv("CODEMOD_HOME", str(home))
    folder = plain_folder(tmp_path)
    before = tree_digest(folder)
    result = cli("run", "sm120-enable", "--repo", folder)
    assert result.exit_code == 9, result.output
    assert f"error[file-refused]: {home}" in result.stderr and "CODEMOD_HOME" in result.stderr
    clean_refusal(result.output)
    assert tree_digest(folder) == before and (tmp_path / "home-file").read_text() == "x"


def test_codemod_home_is_immutable(cli, tmp_path, monkeypatch, immutable):
    home = immutable(tmp_path / "home")
    monkeypatch.setenv("CODEMOD_HOME", str(home))
    folder = plain_folder(tmp_path)
    before = tree_digest(folder)
    result = cli("run", "sm120-enable", "--repo", folder)
    assert result.exit_code == 9, result.output
    assert f"error[file-refused]: {home}" in result.stderr and "CODEMOD_HOME" in result.stderr
    clean_refusal(result.output)
    assert tree_digest(folder) == before


def test_newline_in_a_folder_outside_git(cli, tmp_path):
    folder = plain_folder(tmp_path, "site\npackages")
    before = tree_digest(folder)
    result = cli("run", "sm120-enable", "--repo", folder)
    assert result.exit_code == 9, result.output
    assert "the path has a line break" in result.stderr
    clean_refusal(result.output)
    assert tree_digest(folder) == before
    assert cli("run", "sm120-enable", "--repo", folder, "--dry-run").exit_code == 0


def test_deep_python_in_a_file_the_plan_only_reads(cli, example_repo):
    """SGLang's predicate module, read for what its is_smXX_supported mean (MemoryError from Python's parser)."""
    repo = example_repo("sglang")
    common = "python/sglang/srt/utils/common.py"
    commit(repo, common, (repo / common).read_bytes() + b"x = " + b"-" * 100_000 + b"1\n")
    before = state(repo)
    result = cli("run", "sm120-enable", "--repo", repo, "--dry-run")
    assert result.exit_code in (0, 3), result.output
    clean_refusal(result.output)
    assert result.exception is None or isinstance(result.exception, SystemExit)
    assert state(repo) == before


def test_fifo_among_the_jit_specs_does_not_hang_verify(example_repo):
    """verify reads every JIT spec file for the empty-kernel check: a FIFO there is skipped, as scan skips it."""
    repo = example_repo("flashinfer")
    assert codemod("run", "sm120-enable", "--repo", repo, timeout=120).returncode == 0
    os.mkfifo(repo / "flashinfer/jit/a_fifo.py")
    proc = codemod("verify", "--repo", repo, "--format", "json", timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert json.loads(proc.stdout)["status"] == "verified"
    assert "Traceback" not in proc.stderr


def test_python_compiler_warnings_about_the_tree_are_not_printed(tmp_path):
    """`1if x` and `"\\d"` in the user's code make Python's compiler warn (`<unknown>:3: SyntaxWarning: invalid
    decimal literal`): that is their code, not codemod's output, in the CLI and in the scan's workers alike."""
    tree = tmp_path / "tree"
    (tree / "pkg").mkdir(parents=True)
    gate = b"import torch\n\ndef f(x):\n    if torch.cuda.get_device_capability()[0] == 9or x:\n        return '\\d'\n"
    for n in range(40):  # enough files for --jobs 2 to start workers
        (tree / f"pkg/m{n}.py").write_bytes(gate)
    for jobs in ("1", "2"):
        proc = codemod("scan", "--repo", tree, "--format", "json", "--jobs", jobs, "--no-cache")
        assert proc.returncode == 0, proc.stderr[-2000:]
        assert len(json.loads(proc.stdout)["gates"]) == 40
        assert "Warning" not in proc.stderr, proc.stderr[-2000:]
