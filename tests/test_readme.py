"""The README is a newcomer's page: short, two set-up commands, the main job, and links; every command in it runs.

The reference text lives in docs/ (exit codes: tests/core/test_errors.py; install
lines: tests/test_install_lines.py). The README's main-workflow commands are the
ones examples/demo.sh runs (tests/test_demo.py); the other commands are run here.
"""

from __future__ import annotations

import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

from conftest import EXAMPLES, ROOT, init_repo

README = (ROOT / "README.md").read_text()
NUMBERS = {"one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7, "eight": 8, "nine": 9, "ten": 10}


def section(title: str) -> str:
    return README.split(f"\n## {title}\n", 1)[1].split("\n## ", 1)[0]


def sh_blocks(text: str) -> list[list[str]]:
    return [[line for line in block.splitlines() if line.strip()] for block in re.findall(r"```sh\n(.*?)```", text, re.S)]


def command(line: str) -> str:
    return re.split(r"\s+#\s", line, maxsplit=1)[0].strip()  # the trailing comment dropped


def test_the_readme_is_short_and_its_first_screen_says_what_the_tool_is():
    assert len(README.splitlines()) <= 250
    first_screen = "\n".join(README.splitlines()[:12])
    assert "FlashInfer" in first_screen and "SGLang" in first_screen and "vLLM" in first_screen and "GPU-architecture gates" in first_screen


def test_two_set_up_commands_install_and_run_the_demo_and_run_the_tests():
    blocks = sh_blocks(section("Set up"))
    assert [len(block) for block in blocks] == [1, 1], "exactly two commands a newcomer pastes"
    (install_and_demo,), (tests,) = blocks
    assert install_and_demo.startswith("python3 -m venv .venv && .venv/bin/pip install -q . && ") and install_and_demo.endswith("examples/demo.sh")
    assert tests.startswith("python3 -m venv .venv && .venv/bin/pip install -q '.[test,build]' && .venv/bin/python -m pytest")
    assert tests in (ROOT / ".ci" / "run").read_text().splitlines(), "CI runs the README's test command as written"


def test_every_docs_page_is_linked_and_every_link_resolves():
    linked = set(re.findall(r"\]\((docs/[^)#]+)\)", README))
    pages = {f"docs/{p.name}" for p in (ROOT / "docs").glob("*.md") if p.name != "index.md"}
    assert linked == pages, (linked ^ pages)
    for page in (ROOT / "docs").glob("*.md"):
        for target in re.findall(r"\]\(([^)#:]+\.md)(?:#[^)]*)?\)", page.read_text()):
            assert (page.parent / target).is_file(), f"{page.name}: broken link {target}"


def test_the_readme_names_every_change_of_sm120_enable_and_counts_them_as_codemod_list_does(cli):
    from codemods.recipes.load import find_recipe

    recipe = find_recipe("sm120-enable")
    ids = [change.id for change in recipe.changes]
    table = re.findall(r"^\| `([a-z0-9.-]+)`", README, re.M)
    assert table == ids, "the table lists the recipe's changes, in order"
    counts = {NUMBERS[word] for word in re.findall(r"\b(\w+) changes\b", README.split("## Set up", 1)[0]) if word in NUMBERS}
    listed = cli("list")
    assert f"{len(ids)} changes]" in listed.stdout and counts == {len(ids)}, (counts, listed.stdout)
    assert "sglang.allreduce-fusion-backend-resolve" in README


def test_the_main_workflow_is_what_the_demo_runs():
    demo = (EXAMPLES / "demo.sh").read_text()
    (workflow,) = sh_blocks(section("The main job: `sm120-enable`"))
    for line in workflow:
        ran = command(line).replace("./flashinfer", '"$work/flashinfer"').replace("./sglang", '"$work/sglang"')
        assert f"step {ran}\n" in demo, f"examples/demo.sh does not run the README's `{command(line)}`"
    assert [w for line in workflow for w in command(line).split()[1:2]] == ["list", "run", "run", "run", "status", "verify", "revert", "revert"]


EXPECTED_EXIT = {"scan": 0, "doctor": 1, "recipe": 0, "schema": 0, "--show-completion": 0}  # doctor: the sample log is a crash


def test_every_other_command_in_the_readme_runs(tmp_path):
    shutil.copytree(EXAMPLES / "flashinfer", tmp_path / "flashinfer")
    init_repo(tmp_path / "flashinfer")
    shutil.copytree(EXAMPLES / "logs", tmp_path / "examples" / "logs")
    codemod = str(Path(sys.executable).parent / "codemod")
    (others,) = sh_blocks(section("Other commands"))
    assert {command(line).split()[1] for line in others} == set(EXPECTED_EXIT), "a new README command needs its expected exit here"
    for line in others:
        words = shlex.split(command(line).split(">>", 1)[0])  # `>> ~/.bashrc`: the script on stdout is what it appends
        assert words[0] == "codemod"
        proc = subprocess.run([codemod, *words[1:]], cwd=tmp_path, capture_output=True, text=True, timeout=600)
        assert proc.returncode == EXPECTED_EXIT[words[1]], f"{line}\n{proc.stdout[-2000:]}{proc.stderr[-2000:]}"
        assert proc.stdout and "internal error" not in proc.stderr and "Traceback" not in proc.stderr, line
