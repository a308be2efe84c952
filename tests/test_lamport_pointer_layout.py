"""sm120-enable's host-side change flashinfer.lamport-pointer-layout (FlashInfer PR #3903), an edit-kind change:
off by default, its own commit with --only or --interactive, upgrade advice first, verify accounts for it."""

from __future__ import annotations

import json
import re
import shutil

import pytest

from conftest import git

CU = "csrc/trtllm_allreduce.cu"
LAMPORT = "flashinfer.lamport-pointer-layout"
GATE_CHANGES = ("flashinfer.trtllm-comm-jit", "flashinfer.trtllm-allreduce-guards")
OLD_LINES = [
    "      params.fusion_params.lamport_peer_comm_buffer_ptrs[i + tp_size] = reinterpret_cast<void*>(",
    "      params.fusion_params.lamport_peer_comm_buffer_ptrs[i + tp_size * 2] =",
]
NEW_LINES = [
    "      params.fusion_params.lamport_peer_comm_buffer_ptrs[i + MAX_RANKS_PER_NODE] = reinterpret_cast<void*>(",
    "      params.fusion_params.lamport_peer_comm_buffer_ptrs[i + MAX_RANKS_PER_NODE * 2] =",
]
# The index expressions FlashInfer commit 2deed6c15 (PR #3903) writes in trtllm_custom_all_reduce.
UPSTREAM_ADDED = [
    "        params.fusion_params.lamport_peer_comm_buffer_ptrs[i + MAX_RANKS_PER_NODE] =",
    "        params.fusion_params.lamport_peer_comm_buffer_ptrs[i + MAX_RANKS_PER_NODE * 2] =",
]
UPSTREAM_REMOVED = [
    "        params.fusion_params.lamport_peer_comm_buffer_ptrs[i + tp_size] = reinterpret_cast<void*>(",
    "        params.fusion_params.lamport_peer_comm_buffer_ptrs[i + tp_size * 2] =",
]
needs_nvcc = pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc (CUDA 13) is installed here and in CI")


def diff_lines(repo, rel: str, base: str = "main", tip: str = "HEAD") -> tuple[list[str], list[str]]:
    diff = git(repo, "diff", "-U0", base, tip, "--", rel)
    removed = [l[1:] for l in diff.splitlines() if l.startswith("-") and not l.startswith("---")]
    added = [l[1:] for l in diff.splitlines() if l.startswith("+") and not l.startswith("+++")]
    return removed, added


def indices(lines: list[str]) -> list[str]:
    return [m for line in lines for m in re.findall(r"lamport_peer_comm_buffer_ptrs\[([^\]]*)\]", line)]


def test_off_by_default_plain_run_does_not_touch_the_wrapper(cli, example_repo):
    repo = example_repo("flashinfer")
    before = (repo / CU).read_bytes()
    result = cli("run", "sm120-enable", "--repo", repo)
    assert result.exit_code == 0, result.output
    assert (repo / CU).read_bytes() == before
    assert CU not in git(repo, "diff", "--name-only", "main", "HEAD").split()
    assert f"Codemod-Change: {LAMPORT}" not in git(repo, "log", "--format=%B", "main..HEAD")
    assert f"{LAMPORT}:" not in result.stderr, "not planned, so not in the summary"


def test_only_applies_it_in_its_own_commit(cli, example_repo):
    repo = example_repo("flashinfer")
    result = cli("run", "sm120-enable", "--repo", repo, "--only", LAMPORT)
    assert result.exit_code == 0, result.output
    shas = git(repo, "log", "--format=%H", "main..HEAD").split()
    assert len(shas) == 1
    assert git(repo, "diff", "--name-only", "main", "HEAD").split() == [CU]
    assert diff_lines(repo, CU) == (OLD_LINES, NEW_LINES)
    message = git(repo, "log", "-1", "--format=%B")
    assert message.startswith("codemod(sm120-enable): Write the lamport buffer pointers at the stride the kernels read\n")
    assert f"Codemod-Change: {LAMPORT}" in message and "PR #3903" in message
    assert "Replaced (host code, the same on every arch):" in message and "Gates widened" not in message
    assert f"{CU}:50  params.fusion_params.lamport_peer_comm_buffer_ptrs[i + tp_size] = " in message
    again = cli("run", "sm120-enable", "--repo", repo, "--only", LAMPORT, "--dry-run")
    assert again.exit_code == 0 and "already made" in again.stderr and again.stdout == ""


def test_with_the_gate_changes_each_in_its_own_commit(cli, example_repo):
    repo = example_repo("flashinfer")
    args = [a for cid in (*GATE_CHANGES, LAMPORT) for a in ("--only", cid)]
    result = cli("run", "sm120-enable", "--repo", repo, *args)
    assert result.exit_code == 0, result.output
    changes = re.findall(r"Codemod-Change: (\S+)", git(repo, "log", "--reverse", "--format=%B", "main..HEAD"))
    assert changes == [*GATE_CHANGES, LAMPORT]
    assert git(repo, "diff", "--name-only", "HEAD~1", "HEAD").split() == [CU]


def test_dry_run_says_upgrade_first_then_the_notes(cli, example_repo):
    repo = example_repo("flashinfer")
    result = cli("run", "sm120-enable", "--repo", repo, "--dry-run")
    assert result.exit_code == 0, result.output
    err = result.stderr
    first = err.splitlines()[0]
    assert first.startswith("first option: upgrade FlashInfer to 0.6.17 or later: this tree is FlashInfer 0.6.3+example")
    assert "PR #3903" in first and "lamport pointer layout fix" in first
    assert err.index("first option:") < err.index("note:")
    notes = err[err.index("note:"):]
    assert "PR #3903" in notes and "MAX_RANKS_PER_NODE" in notes and "stride tp_size" in notes
    assert LAMPORT in notes and "off by default" in notes and "cudaOccupancyMaxPotentialClusterSize" in notes
    assert "exact change" not in err, "the notes no longer claim an exact match"
    assert CU not in result.stdout, "the diff leaves the wrapper alone"


def test_real_run_also_says_upgrade_first(cli, example_repo):
    repo = example_repo("flashinfer")
    result = cli("run", "sm120-enable", "--repo", repo)
    assert result.exit_code == 0 and result.stderr.startswith("first option: upgrade FlashInfer to 0.6.17 or later")


def test_upgrade_advice_when_the_version_is_unknown_or_new_enough(cli, example_repo):
    repo = example_repo("flashinfer")
    (repo / "flashinfer/_build_meta.py").write_text('"""Build metadata (example tree)."""\n')
    git(repo, "commit", "-qam", "no version")
    unknown = cli("run", "sm120-enable", "--repo", repo, "--dry-run")
    assert unknown.exit_code == 0
    assert unknown.stderr.startswith(
        "first option: if this FlashInfer is older than 0.6.17 (its version is unknown here: no version file), "
        "upgrade it to 0.6.17 or later"
    )
    (repo / "flashinfer/_build_meta.py").write_text('__version__ = "0.6.17"\n')
    git(repo, "commit", "-qam", "0.6.17")
    new = cli("run", "sm120-enable", "--repo", repo, "--dry-run")
    assert new.exit_code == 0 and "first option" not in new.stderr and "upgrade" not in new.stderr.split("note:")[0]
    data = json.loads(cli("run", "sm120-enable", "--repo", repo, "--dry-run", "--format", "json").stdout)["results"][0]
    assert data["upstream_advice"] == []


@pytest.mark.parametrize(
    ("version", "advised"),
    [("0.6.16.post4", True), ("0.6.17rc1", True), ("0.6.17.dev20260801", True), ("0.6.17+cu128", False), ("0.7.0", False)],
)
def test_upgrade_advice_compares_releases(cli, example_repo, version, advised):
    repo = example_repo("flashinfer")
    (repo / "flashinfer/_build_meta.py").write_text(f'__version__ = "{version}"\n')
    git(repo, "commit", "-qam", version)
    data = json.loads(cli("run", "sm120-enable", "--repo", repo, "--dry-run", "--format", "json").stdout)["results"][0]
    assert bool(data["upstream_advice"]) is advised
    if advised:
        assert f"this tree is FlashInfer {version}" in data["upstream_advice"][0]


def test_json_carries_the_advice_and_the_rewrites(cli, example_repo):
    repo = example_repo("flashinfer")
    data = json.loads(cli("run", "sm120-enable", "--repo", repo, "--dry-run", "--format", "json", "--only", LAMPORT).stdout)["results"][0]
    assert data["upstream_advice"][0].startswith("upgrade FlashInfer to 0.6.17 or later")
    (change,) = data["changes"]
    assert change["id"] == LAMPORT and change["gates"] == []
    assert [r["line"] for r in change["rewrites"]] == [50, 52]
    assert [r["after"] for r in change["rewrites"]] == [line.strip() for line in NEW_LINES]


def test_interactive_offers_it_and_all_does_not_take_it(cli, example_repo):
    repo = example_repo("flashinfer")
    result = cli("run", "sm120-enable", "--repo", repo, "--interactive", input="a\nn\n")
    assert result.exit_code == 0, result.output
    assert f"{LAMPORT}: Write the lamport buffer pointers at the stride the kernels read (off by default)" in result.stderr
    assert CU not in git(repo, "diff", "--name-only", "main", "HEAD").split()

    git(repo, "checkout", "-q", "main")
    git(repo, "branch", "-D", "codemod/sm120-enable")
    accepted = cli("run", "sm120-enable", "--repo", repo, "--interactive", input="n\nn\ny\n")
    assert accepted.exit_code == 0, accepted.output
    assert re.findall(r"Codemod-Change: (\S+)", git(repo, "log", "--format=%B", "main..HEAD")) == [LAMPORT]


@needs_nvcc
def test_verify_counts_it_as_intended_on_every_arch(cli, example_repo):
    repo = example_repo("flashinfer")
    args = [a for cid in (*GATE_CHANGES, LAMPORT) for a in ("--only", cid)]
    assert cli("run", "sm120-enable", "--repo", repo, *args).exit_code == 0
    result = cli("verify", "--repo", repo, "--archs", "sm_80,sm_90,sm_100,sm_120", "--format", "json")
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert data["ok"] and data["intended"] == [{"change": LAMPORT, "file": CU, "lines": [50, 52]}]
    by_arch = {a["arch"]: a for a in data["archs"]}
    assert [by_arch[a]["status"] for a in ("sm_80", "sm_90", "sm_100")] == ["identical"] * 3
    assert by_arch["sm_120"]["ok"] and len(by_arch["sm_120"]["gained"]) == 4 and not by_arch["sm_120"]["lost"]
    text = cli("verify", "--repo", repo, "--archs", "sm_90,sm_120").stdout
    assert f"intended host-side change ({LAMPORT}), on every arch: {CU}:50,52" in text
    assert "FAIL" not in text and text.rstrip().endswith("the targets gained exactly the planned regions")


@needs_nvcc
def test_verify_still_fails_a_host_edit_the_recipe_did_not_plan(cli, example_repo):
    repo = example_repo("flashinfer")
    assert cli("run", "sm120-enable", "--repo", repo, "--only", LAMPORT).exit_code == 0
    text = (repo / CU).read_text()
    (repo / CU).write_text(text.replace("AllReduceParams params{};", "AllReduceParams params{};\n  params.peer_comm_buffer_ptrs[0] = nullptr;"))
    result = cli("verify", "--repo", repo, "--archs", "sm_90,sm_120")
    assert result.exit_code == 1 and "FAIL sm_90" in result.stdout


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        pytest.param(('default = "off"', 'default = "maybe"'), 'default must be "on" or "off"', id="bad-default"),
        pytest.param(('kind = "cpp_replace"', 'kind = "cpp_replace"\nadmits = ["sm_90"]'), "edit kind; it admits no arch", id="admits-on-edit-kind"),
        pytest.param(('{from = "i + tp_size", to', '{from = "i +", to'), "`i +` is not a C++ expression", id="unparsable-expression"),
        pytest.param(('{from = "i + tp_size", to', '{form = "i + tp_size", to'), "exactly `from` and `to`", id="misspelt-from"),
        pytest.param(("replace = [", "replace_ = ["), "unknown key 'replace_'", id="unknown-key"),
    ],
)
def test_recipe_validation_names_file_and_line(cli, tmp_path, edit, message):
    from codemods.recipes.load import data_root

    text = (data_root() / "recipes" / "sm120-enable.toml").read_text()
    assert edit[0] in text
    path = tmp_path / "sm120-enable.toml"
    path.write_text(text.replace(edit[0], edit[1], 1))
    result = cli("run", path, "--repo", tmp_path, "--dry-run")
    assert result.exit_code == 8, result.output
    assert re.search(rf"{re.escape(str(path))}:\d+: ", result.stderr) and message in result.stderr


def test_recipe_without_replace_is_rejected(cli, tmp_path):
    path = tmp_path / "r.toml"
    path.write_text(
        'id = "r"\nsummary = "s"\narch = "sm_120"\n\n[[change]]\nid = "a.b"\nproject = "flashinfer"\n'
        'file = "{csrc}/x.cu"\nkind = "cpp_replace"\nfunction = "f"\n'
    )
    result = cli("recipe", "test", path)
    assert result.exit_code == 8 and f"{path}:9: " in result.stderr and "kind cpp_replace needs replace" in result.stderr


@pytest.mark.real
@pytest.mark.parametrize("layout", ["wheel", "checkout"])
def test_real_flashinfer_063_gets_upstreams_two_index_expressions(cli, real_unpacked, tmp_path, layout):
    from test_real_releases import flashinfer_tree

    repo = tmp_path / "fi"
    repo.mkdir()
    flashinfer_tree(real_unpacked["flashinfer"], repo, layout)
    cu = "flashinfer/data/csrc/trtllm_allreduce.cu" if layout == "wheel" else "csrc/trtllm_allreduce.cu"
    plain = cli("run", "sm120-enable", "--repo", repo, "--dry-run")
    assert plain.exit_code == 0 and cu not in plain.stdout
    assert plain.stderr.startswith("first option: upgrade FlashInfer to 0.6.17 or later: this tree is FlashInfer 0.6.3,")

    result = cli("run", "sm120-enable", "--repo", repo, "--only", LAMPORT)
    assert result.exit_code == 0, result.output
    assert git(repo, "diff", "--name-only", "main", "HEAD").split() == [cu]
    removed, added = diff_lines(repo, cu)
    assert removed == UPSTREAM_REMOVED, "exactly the two lines upstream rewrote"
    assert indices(added) == indices(UPSTREAM_ADDED) == ["i + MAX_RANKS_PER_NODE", "i + MAX_RANKS_PER_NODE * 2"]
    assert [a[: len(u)] for a, u in zip(added, UPSTREAM_ADDED)] == UPSTREAM_ADDED, "upstream's lines, before its reflow"
    assert indices(removed) == ["i + tp_size", "i + tp_size * 2"]
    # The real wrapper includes tvm-ffi headers that are not in the wheel; it needs no preprocessing: only the intended edit changed it.
    proof = cli("verify", "--repo", repo, "--format", "json")
    assert proof.exit_code == 0, proof.output
    data = json.loads(proof.stdout)
    assert data["ok"] and data["files"] == [] and data["intended"] == [{"change": LAMPORT, "file": cu, "lines": [149, 151]}]


def test_doctor_advice_names_the_lamport_fix_and_the_upgrade(cli, tmp_path):
    from conftest import EXAMPLES

    crash = cli("doctor", EXAMPLES / "logs" / "sglang-tp8-sm120-crash.log")
    assert crash.exit_code == 1
    why = next(line for line in crash.stdout.splitlines() if line.startswith("  why: "))
    assert "(cuda-illegal-address)" in why and "stride tp_size" in why and "MAX_RANKS_PER_NODE" in why
    assert "Upgrade to FlashInfer 0.6.17 or later" in why and LAMPORT in why and "--interactive" in why

    log = tmp_path / "nan.log"
    log.write_text(
        "[2026-02-03 10:00:00 TP0] Decode batch. #running-req: 1, gen throughput (token/s): 10.0\n"
        "[2026-02-03 10:00:01 TP0] Detected errors during sampling! NaN in the logits.\n"
        "[2026-02-03 10:00:01 TP0] Scheduler hit an exception: Traceback (most recent call last):\n"
        '  File "/sglang/srt/layers/sampler.py", line 63, in _preprocess_logits\n'
        "ValueError: Detected errors during sampling! NaN in the logits.\n"
    )
    nan = cli("doctor", log)
    assert nan.exit_code == 1
    assert "verdict: crashed (line 5 in TP0: ValueError: Detected errors during sampling! NaN in the logits.)" in nan.stdout
    why = next(line for line in nan.stdout.splitlines() if line.startswith("  why: "))
    assert "(nan-in-logits)" in why and "garbage" in why and "0.6.17" in why and LAMPORT in why

    warned = tmp_path / "warned.log"
    warned.write_text("".join(log.read_text().splitlines(keepends=True)[:2]))
    assert cli("doctor", warned).exit_code == 0, "the warning alone (no crash-on-warnings) is no crash"
