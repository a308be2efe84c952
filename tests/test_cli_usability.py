"""The CLI reads well: --version, --debug anywhere, revert --dry-run, end of input at a prompt, hints that name what you typed."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from conftest import IDENTITY, ROOT, git, tree_digest


def refs(repo) -> str:
    return git(repo, "for-each-ref", "--format=%(refname) %(objectname)")


def test_version(cli):
    from importlib.metadata import version

    result = cli("--version")
    assert result.exit_code == 0 and result.stdout == f"codemod {version('gpu-arch-codemod')}\n"


def test_python_dash_m_codemods_is_the_command():
    from importlib.metadata import version

    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.run([sys.executable, "-m", "codemods", "--version"], env=env, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0 and proc.stdout == f"codemod {version('gpu-arch-codemod')}\n", proc.stderr


def test_debug_after_the_command_is_accepted(tmp_path):
    env = {**os.environ, **IDENTITY, "PYTHONPATH": str(ROOT)}
    proc = subprocess.run(
        [sys.executable, "-m", "codemods.cli", "status", "--repo", str(tmp_path / "nowhere"), "--debug"],
        env=env, capture_output=True, text=True, timeout=60,
    )
    assert proc.returncode == 6 and "No such option" not in proc.stderr and "path does not exist" in proc.stderr


def test_revert_dry_run_says_what_it_would_do_and_writes_nothing(cli, example_repo):
    repo = example_repo("flashinfer")
    assert cli("run", "sm120-enable", "--repo", repo).exit_code == 0
    before, before_refs = tree_digest(repo), refs(repo)
    result = cli("revert", "sm120-enable", "--repo", repo, "--dry-run", "--clear-jit-cache")
    assert result.exit_code == 0, result.output
    assert "would revert sm120-enable" in result.stderr and "delete branch codemod/sm120-enable (2 commit(s))" in result.stderr
    assert tree_digest(repo) == before and refs(repo) == before_refs
    assert not (repo / ".git" / "codemod" / "lock").exists() or (repo / ".git" / "codemod" / "lock").read_text() == ""
    nothing = cli("revert", "sm120-enable", "--repo", example_repo("sglang"), "--dry-run")
    assert nothing.exit_code == 7 and "not applied here" in nothing.stderr


def test_end_of_input_at_the_prompt_applies_nothing(cli, example_repo):
    repo = example_repo("sglang")
    before, before_refs = tree_digest(repo), refs(repo)
    result = cli("run", "sm120-enable", "--repo", repo, "--interactive", input="y\n")
    assert result.exit_code == 2, result.output
    assert "end of input" in result.stderr and "Aborted" not in result.output
    assert tree_digest(repo) == before and refs(repo) == before_refs


def test_back_out_hint_names_the_package(cli, tmp_path, monkeypatch):
    from conftest import fake_site

    site = fake_site(tmp_path)
    monkeypatch.setenv("PYTHONPATH", str(site))
    result = cli("run", "sm120-enable", "--package", "flashinfer", "--python", sys.executable)
    assert result.exit_code == 0, result.output
    assert "codemod revert sm120-enable --package flashinfer" in result.stderr


COMMANDS = [["list"], ["run"], ["status"], ["revert"], ["verify"], ["scan"], ["doctor"], ["schema"], ["recipe", "test"]]


def test_every_help_page_has_examples_and_readable_types(cli):
    for command in COMMANDS:
        result = cli(*command, "--help")
        assert result.exit_code == 0, (command, result.output)
        assert "Examples:" in result.stdout, command
        assert "<list[" not in result.stdout and "<str>" not in result.stdout.split("Options:")[-1], command
    assert "[[test]]" in cli("recipe", "test", "--help").stdout
    assert "json for scripts" in cli("status", "--help").stdout


def test_shell_completion_offers_recipe_and_change_ids(tmp_path):
    """No $SHELL (a fresh container, CI): completion and every named shell's script still work."""
    from pathlib import Path

    base = {k: v for k, v in os.environ.items() if k != "SHELL"} | {"PYTHONPATH": str(ROOT)}
    env = {**base, "_CODEMOD_COMPLETE": "complete_bash"}
    run = [str(Path(sys.executable).parent / "codemod")]  # completion keys on the program's name
    recipe = subprocess.run(run, env={**env, "COMP_WORDS": "codemod run sm12", "COMP_CWORD": "2"},
                            capture_output=True, text=True, timeout=60)
    assert recipe.stdout.split() == ["sm120-enable"], recipe.stderr
    change = subprocess.run(run, env={**env, "COMP_WORDS": "codemod run sm120-enable --only flashinfer.trt", "COMP_CWORD": "4"},
                            capture_output=True, text=True, timeout=60)
    assert change.stdout.split() == ["flashinfer.trtllm-comm-jit", "flashinfer.trtllm-allreduce-guards"], change.stderr
    tested = subprocess.run([*run, "recipe", "test", "sm1"], env={**env, "COMP_WORDS": "codemod recipe test sm1", "COMP_CWORD": "3"},
                            capture_output=True, text=True, timeout=60)
    assert tested.stdout.split() == ["sm120-enable"], tested.stderr


@pytest.mark.parametrize("shell, marker", [
    ("bash", "complete -o default -F _codemod_completion codemod"),
    ("zsh", "#compdef codemod"),
    ("fish", "complete --command codemod"),
], ids=["bash", "zsh", "fish"])
def test_show_completion_prints_the_named_shells_script(shell, marker):
    from pathlib import Path

    env = {k: v for k, v in os.environ.items() if k != "SHELL"} | {"PYTHONPATH": str(ROOT)}
    script = subprocess.run([str(Path(sys.executable).parent / "codemod"), "--show-completion", shell], env=env,
                            capture_output=True, text=True, timeout=60)
    assert script.returncode == 0 and marker in script.stdout, script.stdout + script.stderr
    others = {"bash": "complete -o default -F", "zsh": "#compdef", "fish": "complete --command"}
    assert not any(text in script.stdout for name, text in others.items() if name != shell)


def test_show_completion_of_an_unknown_shell_is_a_usage_error(cli):
    result = cli("--show-completion", "tcsh")
    assert result.exit_code == 2 and "unknown shell 'tcsh'" in result.output and "bash | zsh | fish" in result.output


def test_scan_and_doctor_take_package_and_python(cli, tmp_path, monkeypatch):
    import json

    from conftest import EXAMPLES, fake_site

    site = fake_site(tmp_path)
    monkeypatch.setenv("PYTHONPATH", str(site))
    scanned = cli("scan", "--package", "flashinfer", "--python", sys.executable, "--arch", "sm_120", "--format", "json")
    assert scanned.exit_code == 0, scanned.output
    assert any(g["file"] == "jit/comm.py" for g in json.loads(scanned.stdout)["gates"])
    log = EXAMPLES / "logs" / "sglang-tp8-healthy.log"
    both = cli("doctor", log, "--package", "flashinfer", "--repo", tmp_path, "--python", sys.executable)
    assert both.exit_code == 2 and "not both" in both.output
    ok = cli("doctor", log, "--package", "flashinfer", "--python", sys.executable)
    assert ok.exit_code == 0, ok.output
