"""codemod doctor for the person on call (issue 16): when and in which phase, one fatal per failure, crash before/after
ready, files that are not server logs, --tp against the log, --follow across log rotation, known failures."""

from __future__ import annotations

import json
import os
import threading
import time

import jsonschema
import pytest

from codemods import doctor
from codemods.render import doctor as render
from tests.conftest import EXAMPLES

LOGS = EXAMPLES / "logs"
HEALTHY = LOGS / "sglang-tp8-healthy.log"
CRASH = LOGS / "sglang-tp8-sm120-crash.log"
ARCH_9_10 = LOGS / "sglang-tp4-sm120-capture-arch-9-10.log"
ARCH_10 = LOGS / "sglang-tp1-mxfp4-capture-arch-10.log"
FMHA = LOGS / "sglang-tp1-sm120-fmha-unsupported-arch.log"
TOPO = sorted(LOGS.glob("nvidia-smi-topo-*.txt"))

READY = "[2026-02-03 10:00:30] The server is fired up and ready to roll!"
ILLEGAL = [
    "[2026-02-03 10:00:40 TP0] Scheduler hit an exception: Traceback (most recent call last):",
    '  File "/usr/local/lib/python3.12/dist-packages/sglang/srt/managers/scheduler.py", line 1100, in event_loop_overlap',
    "    self.process_batch_result(tmp_batch, tmp_result)",
    "torch.AcceleratorError: CUDA error: an illegal memory access was encountered",
    "Search for `cudaErrorIllegalAddress' in https://docs.nvidia.com/cuda/cuda-runtime-api/group__CUDART__TYPES.html for more information.",
    "CUDA kernel errors might be asynchronously reported at some other API call, so the stacktrace below might be incorrect.",
    "For debugging consider passing CUDA_LAUNCH_BLOCKING=1",
    "",
]


@pytest.fixture(scope="module")
def rules():
    return doctor.load_rules()


def schema(cli) -> dict:
    result = cli("schema", "doctor")
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


# ------------------------------------------------------------------ when, and in which phase


@pytest.mark.parametrize(
    "lines, phase, began, at",
    [
        pytest.param(["[2026-02-03 10:00:00 TP0] Load weight begin. avail mem=93.58 GB",
                      "Loading safetensors checkpoint shards:  20% Completed | 3/15 [00:12<00:48,  3.92s/it]",
                      "[2026-02-03 10:00:12 TP0] Fatal Python error: Segmentation fault"],
                     "weight loading", "2026-02-03 10:00:00", "2026-02-03 10:00:12", id="weight-loading"),
        pytest.param(["[2026-02-03 10:00:20 TP0] Capture cuda graph begin. This can take up to several minutes. avail mem=14.04 GB",
                      "[2026-02-03 10:00:21 TP3] Fatal Python error: Segmentation fault"],
                     "CUDA graph capture", "2026-02-03 10:00:20", "2026-02-03 10:00:21", id="cuda-graph-capture"),
        pytest.param(["[2026-02-03 10:00:25 TP0] Capture cuda graph end. Time elapsed: 5.00 s. mem usage=1.00 GB. avail mem=13.00 GB.",
                      "[2026-02-03 10:00:26] INFO:     Uvicorn running on http://0.0.0.0:30000 (Press CTRL+C to quit)",
                      "[2026-02-03 10:00:27] Initialization failed. warmup error: Traceback (most recent call last):",
                      '  File "/sglang/srt/entrypoints/http_server.py", line 1600, in _execute_server_warmup',
                      "AssertionError: res=<Response [500]>"],
                     "warm-up", "2026-02-03 10:00:25", "2026-02-03 10:00:27", id="warm-up"),
        pytest.param([READY, *ILLEGAL], "serving", "2026-02-03 10:00:30", "2026-02-03 10:00:40", id="serving"),
    ],
)
def test_crash_says_when_and_in_which_phase(rules, lines, phase, began, at):
    report = doctor.diagnose(lines, rules)
    assert report.verdict == "crashed"
    assert (report.fatal.phase, report.fatal.phase_began, report.fatal.time) == (phase, began, at)
    first = render.report_text(report)[0]
    assert f") at {at}, during {phase} (began {began[11:]}, " in first


def test_sample_crash_is_placed_in_cuda_graph_capture(cli):
    result = cli("doctor", CRASH)
    assert result.exit_code == 1
    assert result.stdout.splitlines()[0].endswith(
        ") at 2026-02-03 09:13:13, during CUDA graph capture (began 09:13:12, 1 s before), before the ready line")
    data = json.loads(cli("doctor", CRASH, "--format", "json").stdout)
    assert data["fatal"]["time"] == "2026-02-03 09:13:13" and data["fatal"]["phase"] == "CUDA graph capture"
    assert data["fatal"]["phase_began"] == "2026-02-03 09:13:12"
    assert data["first_time"] == "2026-02-03 09:12:01" and data["phase"] == "CUDA graph capture"


def test_a_log_cut_mid_startup_says_where_it_stopped(rules):
    lines = HEALTHY.read_text().splitlines()
    cut = next(i for i, line in enumerate(lines) if "Capture cuda graph begin" in line)
    report = doctor.diagnose(lines[:cut + 1], rules)
    assert report.verdict == "starting" and report.phase == "CUDA graph capture"
    assert render.report_text(report)[0].endswith(f"at {report.last_time}, during CUDA graph capture)")


# ------------------------------------------------------------------ one fatal is one fatal


def test_pytorch_search_hint_is_not_a_second_fatal(rules, cli, tmp_path):
    report = doctor.diagnose(ILLEGAL, rules)
    assert report.fatal_lines == 1 and [s.rule for s in report.fatal_signals] == ["subprocess-exception"]
    assert report.fatal.matched_rule == "cuda-illegal-address"
    assert report.benign.get("pytorch-cuda-error-hint") == 1
    log = tmp_path / "serving.log"
    log.write_text("\n".join([READY, *ILLEGAL]) + "\n")
    out = cli("doctor", log).stdout
    assert "more fatal line" not in out
    why = next(line for line in out.splitlines() if line.startswith("  why: "))
    by_id = {r.id: r for r in rules}
    assert why == f"  why: (cuda-illegal-address) {by_id['cuda-illegal-address'].explanation}"
    assert by_id["subprocess-exception"].explanation not in out, "one rule's explanation, not two joined"


def test_a_chained_exception_is_one_event(rules):
    report = doctor.diagnose_file(ARCH_9_10, rules)
    assert [(s.rule, s.matched_rule) for s in report.fatal_signals] == [
        ("subprocess-exception", "jit-gate-excludes-major-9-10"), ("sigquit-from-child", "")]
    assert report.fatal.message == "RuntimeError: No supported CUDA architectures found for major versions [9, 10]."


# ------------------------------------------------------------------ fatal_before_ready


def test_fatal_before_ready_tells_a_crash_before_ready_from_one_after(rules, cli, tmp_path):
    before = doctor.diagnose(ILLEGAL, rules)
    assert before.fatal_before_ready is before.fatal and render.report_json(before)["crashed_before_ready"] is True
    after = doctor.diagnose([READY, *ILLEGAL], rules)
    assert after.fatal_before_ready is None and render.report_json(after)["crashed_before_ready"] is False
    survived = doctor.diagnose(["[2026-02-03 10:00:01] Fatal Python error: Segmentation fault", READY], rules)
    data = render.report_json(survived)
    assert data["crashed_before_ready"] is None and data["fatal_before_ready"]["rule"] == "segmentation-fault"
    for lines, words in ((ILLEGAL, "before the ready line"), ([READY, *ILLEGAL], "after the ready line")):
        log = tmp_path / "x.log"
        log.write_text("\n".join(lines) + "\n")
        result = cli("doctor", log)
        assert result.exit_code == 1 and result.stdout.splitlines()[0].endswith(words)
        jsonschema.validate(json.loads(cli("doctor", log, "--format", "json").stdout), schema(cli))


# ------------------------------------------------------------------ not a server log


@pytest.mark.parametrize("path", TOPO, ids=[p.name for p in TOPO])
def test_nvidia_smi_topology_is_refused(cli, path):
    result = cli("doctor", path)
    assert result.exit_code == 2 and result.stdout == ""
    assert result.stderr.startswith("error[bad-usage]: ")
    assert "not an SGLang or vLLM server log: it looks like `nvidia-smi topo -m` output" in result.stderr
    assert "--preflight --topo FILE" in result.stderr
    data = json.loads(cli("doctor", path, "--format", "json").stdout)
    assert data["error"]["exit_code"] == 2 and "nvidia-smi topo -m" in data["error"]["message"]


@pytest.mark.parametrize(
    "text, looks",
    [
        pytest.param("\tGPU0\tGPU1\nGPU0\t X \tOK\nGPU1\tOK\t X \n", "`nvidia-smi topo -p2p r` output", id="p2p-matrix"),
        pytest.param('{"model": "x"}\n', "a JSON document", id="json"),
        pytest.param("hello\nworld\n", "text without SGLang's", id="plain-text"),
    ],
)
def test_other_non_logs_are_refused_and_named(cli, tmp_path, text, looks):
    path = tmp_path / "thing.txt"
    path.write_text(text)
    result = cli("doctor", path)
    assert result.exit_code == 2 and f"it looks like {looks}" in result.stderr


def test_follow_refuses_a_non_log_too(cli):
    result = cli("doctor", "--follow", TOPO[0], "--timeout", "0.5")
    assert result.exit_code == 2 and "nvidia-smi topo -m" in result.stderr


def test_an_empty_or_early_log_is_not_refused(cli, tmp_path):
    empty = tmp_path / "empty.log"
    empty.write_text("")
    assert cli("doctor", empty).exit_code == 0
    early = tmp_path / "early.log"
    early.write_text("[2026-02-03 10:00:00] Starting server\n")
    result = cli("doctor", early)
    assert result.exit_code == 0 and result.stdout.startswith("verdict: starting")


# ------------------------------------------------------------------ --tp against the log


def test_tp_mismatch_is_said(cli):
    result = cli("doctor", HEALTHY, "--tp", "4")
    assert result.exit_code == 0
    assert "8/4" not in result.stdout
    assert "allreduce fusion: --tp 4, but the log is from a TP 8 server (8 rank(s) initialized" in result.stdout
    data = json.loads(cli("doctor", HEALTHY, "--tp", "4", "--format", "json").stdout)
    assert data["tp_mismatch"].startswith("--tp 4, but the log is from a TP 8 server")
    jsonschema.validate(data, schema(cli))
    assert json.loads(cli("doctor", HEALTHY, "--tp", "8", "--format", "json").stdout)["tp_mismatch"] is None
    assert "8/8 rank(s) initialized" in cli("doctor", HEALTHY, "--tp", "8").stdout


# ------------------------------------------------------------------ --follow across rotation


def test_follow_survives_rotation(cli, tmp_path):
    log = tmp_path / "server.log"
    lines = HEALTHY.read_text().splitlines(keepends=True)
    cut = next(i for i, line in enumerate(lines) if "Load weight end" in line) + 1
    log.write_text("".join(lines[:cut]))

    def rotate():
        time.sleep(0.8)
        os.rename(log, tmp_path / "server.log.1")  # logrotate's default: rename, then a new file
        time.sleep(0.5)
        with open(log, "w", encoding="utf-8") as f:
            for line in lines[cut:]:
                f.write(line)
                f.flush()

    thread = threading.Thread(target=rotate, daemon=True)
    thread.start()
    started = time.monotonic()
    result = cli("doctor", "--follow", log, "--timeout", "30")
    thread.join(10)
    assert result.exit_code == 0, result.output
    assert time.monotonic() - started < 25
    assert f"{log} was rotated; following the new file" in result.stderr
    events = [line for line in result.stdout.splitlines() if line.startswith("line ")]
    assert any("distributed-init" in e for e in events), "the old file's lines were read"
    ready = next(i for i, line in enumerate(lines) if "ready to roll" in line)
    assert events[-1].startswith(f"line {ready + 1}: ready: "), "line numbers run on across the rotation"
    assert "verdict: ready" in result.stdout


# ------------------------------------------------------------------ known failures


@pytest.mark.parametrize(
    "log, rule, command, words",
    [
        pytest.param(ARCH_9_10, "jit-gate-excludes-major-9-10", "codemod run sm120-enable --repo PATH",
                     ["FlashInfer 0.6.17 or later first", "--enable-flashinfer-allreduce-fusion", "trtllm_comm"], id="sglang-15650"),
        pytest.param(ARCH_10, "jit-gate-excludes-major-10", "codemod scan --arch <the GPU's arch, e.g. sm_120> --repo PATH",
                     ["A gate other than the allreduce fusion's"], id="sglang-13342"),
        pytest.param(FMHA, "fmha-unsupported-architecture", None,
                     ["No gate edit helps", "--attention-backend flashinfer", "trtllm_mha"], id="flashinfer-5445"),
    ],
)
def test_known_failures(cli, rules, log, rule, command, words):
    report = doctor.diagnose_file(log, rules)
    assert report.verdict == "crashed" and report.fatal.matched_rule == rule
    result = cli("doctor", log)
    assert result.exit_code == 1
    out = result.stdout.splitlines()
    assert out[1].startswith(f"  why: ({rule}) ")
    assert out[2].startswith("  cause: ") and out[3].startswith("  remedy: ")
    text = "\n".join(out)
    for w in words:
        assert w in text
    if command:
        assert out[4] == f"  run: {command}"
    else:
        assert not any(line.startswith("  run: ") for line in out)
    printed_advice = "Possible solutions:" in log.read_text()
    assert ('SGLang\'s own "Possible solutions" list' in text and "does not help here" in text) == printed_advice
    data = json.loads(cli("doctor", log, "--format", "json").stdout)
    assert data["fatal"]["matched_rule"] == rule and data["fatal"]["known_failure"]["command"] == command
    assert data["fatal"]["known_failure"]["cause"] and data["fatal"]["known_failure"]["remedy"]
    jsonschema.validate(data, schema(cli))


def test_possible_solutions_lines_are_not_events(rules):
    report = doctor.diagnose_file(ARCH_10, rules)
    assert report.benign["sglang-possible-solutions"] == 1
    assert report.fatal.phase == "CUDA graph capture"


def test_a_phase_rule_needs_its_phase(cli, tmp_path):
    bad = tmp_path / "bad.toml"
    bad.write_text("[[rule]]\nid = \"x\"\nclass = \"phase\"\npattern = 'a'\nexplanation = \"e\"\n")
    result = cli("doctor", HEALTHY, "--rules", bad)
    assert result.exit_code == 8 and "a phase rule needs `phase = NAME`" in result.stderr


README_QUOTING_ERRORS = """\
# Troubleshooting

If the server dies during start-up with

```
Process group watchdog thread terminated with exception: NCCL error: unhandled cuda error (run with NCCL_DEBUG=INFO for details)
Received sigquit from a child process. It usually means the child failed.
```

run `codemod doctor server.log`: it names the cause.
"""


def test_a_document_that_quotes_error_text_is_refused_not_judged(cli, tmp_path):
    readme = tmp_path / "README.md"
    readme.write_text(README_QUOTING_ERRORS)
    result = cli("doctor", readme)
    assert result.exit_code == 2 and result.stdout == "", result.output
    assert "verdict" not in result.output
    assert result.stderr.startswith(f"error[bad-usage]: {readme}: not an SGLang or vLLM server log: it looks like text without SGLang's")


@pytest.mark.parametrize(
    "text",
    [
        pytest.param("[rank0]: Traceback (most recent call last):\n[rank0]:   File \"/x.py\", line 1, in <module>\n"
                     "[rank0]: RuntimeError: CUDA error: an illegal memory access was encountered\n", id="torch-rank-prefix"),
        pytest.param("Traceback (most recent call last):\n  File \"/x.py\", line 1, in <module>\n"
                     "RuntimeError: CUDA error: an illegal memory access was encountered\n", id="crash-before-logging"),
        pytest.param("Feb 03 10:00:00 host python[7]: [2026-02-03 10:00:00] Starting server\n", id="journald-prefix"),
    ],
)
def test_server_output_without_leading_timestamps_is_still_read(cli, tmp_path, text):
    log = tmp_path / "server.log"
    log.write_text(text)
    result = cli("doctor", log)
    assert result.stdout.startswith("verdict: "), result.output
