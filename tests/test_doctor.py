"""codemod doctor: verdicts, fatal causes, things that only look fatal, milestones, throughput, A/B, --follow, --revert, preflight."""

from __future__ import annotations

import gzip
import json
import shutil
import threading
import time
from pathlib import Path

import pytest

from codemods import doctor
from tests.conftest import EXAMPLES, git

LOGS = EXAMPLES / "logs"
HEALTHY = LOGS / "sglang-tp8-healthy.log"
FALSE_SIGQUIT = LOGS / "sglang-tp4-false-sigquit.log"
CRASH = LOGS / "sglang-tp8-sm120-crash.log"
BASELINE = LOGS / "sglang-tp8-sm120-baseline.log"
PATCHED = LOGS / "sglang-tp8-sm120-patched.log"

READY = "[2026-02-03 10:00:00] The server is fired up and ready to roll!"
SERVER_ARGS = FALSE_SIGQUIT.read_text().splitlines()[0]  # a real-shaped dump: custom_sigquit_handler, crash_dump_folder, nccl_port ...
ALARMING = (
    "Received sigquit from a child process. It usually means the child failed. SIGQUIT received. It usually means one child failed. "
    "Traceback (most recent call last): RuntimeError: CUDA error: an illegal memory access was encountered "
    "CUDA error: unspecified launch failure NCCL error ncclUnhandledCudaError Fatal Python error: Segmentation fault "
    "Scheduler hit an exception: fatal error"
)
ADVERSARIAL_ARGS = SERVER_ARGS.replace("served_model_name='openai/gpt-oss-120b'", f"served_model_name={ALARMING!r}")


@pytest.fixture(scope="module")
def rules():
    return doctor.load_rules()


def diagnose(lines, rules, tp=None):
    return doctor.diagnose(lines, rules, tp)


# ------------------------------------------------------------------ the sample logs


@pytest.mark.parametrize(
    "log, verdict, ranks, missing, world_size, skips",
    [
        pytest.param(HEALTHY, "ready", list(range(8)), [], 8, 0, id="healthy-tp8"),
        pytest.param(FALSE_SIGQUIT, "ready", [0, 1, 2, 3], [], 4, 0, id="config-dump-says-sigquit-but-server-is-up"),
        pytest.param(CRASH, "crashed", [0, 1, 2, 3, 4, 5, 7], [6], 8, 3, id="tp6-illegal-memory-access"),
        pytest.param(BASELINE, "ready", [], [], None, 3, id="baseline-without-fusion"),
        pytest.param(PATCHED, "ready", list(range(8)), [], 8, 24, id="patched-slow"),
    ],
)
def test_sample_log_verdicts(rules, log, verdict, ranks, missing, world_size, skips):
    report = doctor.diagnose_file(log, rules)
    assert report.verdict == verdict
    assert report.ranks_initialized == ranks
    assert report.ranks_missing == missing
    assert report.world_size == world_size
    assert report.autotuner_skips == skips
    assert report.configured_tp == (4 if log == FALSE_SIGQUIT else 8), "read from the ServerArgs dump"
    if verdict == "ready":
        assert report.fatal is None and report.fatal_signals == []


def test_starting_when_the_log_ends_mid_startup(rules, tmp_path, cli):
    lines = HEALTHY.read_text().splitlines(keepends=True)
    cut = next(i for i, line in enumerate(lines) if "Capture cuda graph end" in line)
    report = diagnose(lines[:cut], rules)
    assert report.verdict == "starting" and report.fatal is None
    assert report.ranks_initialized == list(range(8)) and "weights-loaded" in report.milestones
    assert "cuda-graph-captured" not in report.milestones
    partial = tmp_path / "partial.log"
    partial.write_text("".join(lines[:cut]))
    result = cli("doctor", partial)
    assert result.exit_code == 0 and result.stdout.startswith("verdict: starting")


def test_crash_names_the_first_cause_not_the_sigquit_echo(rules):
    report = doctor.diagnose_file(CRASH, rules)
    fatal = report.fatal
    assert fatal.rule == "subprocess-exception" and fatal.source == "TP6"
    assert fatal.message == "RuntimeError: CUDA error: an illegal memory access was encountered"
    # the exception line's own rule explains it, alone (issue 16: not two explanations joined)
    by_id = {r.id: r for r in rules}
    assert fatal.matched_rule == "cuda-illegal-address"
    assert fatal.explanation == by_id["cuda-illegal-address"].explanation
    assert fatal.context[0].endswith("Scheduler hit an exception: Traceback (most recent call last):")
    assert any("trtllm_lamport_initialize_all" in line for line in fatal.context)
    assert "For debugging consider passing CUDA_LAUNCH_BLOCKING=1" in fatal.context, "lines after the cause"
    lines = CRASH.read_text().splitlines()
    assert lines[fatal.line - 1] == fatal.message and lines[fatal.first_line - 1] == fatal.context[0]
    rules_seen = [s.rule for s in report.fatal_signals]
    assert rules_seen[0] == "subprocess-exception" and rules_seen[-1] == "sigquit-from-child"
    assert "nccl-error" in rules_seen


def test_crash_text_and_exit_code(cli):
    result = cli("doctor", CRASH)
    assert result.exit_code == 1
    out = result.stdout
    assert out.startswith("verdict: crashed (line 93 in TP6: RuntimeError: CUDA error: an illegal memory access was encountered)")
    assert "missing [6]" in out and "3 x MoERunner, Failed to initialize cutlass TMA WS grouped gemm" in out


# ------------------------------------------------------------------ fatal signals, one by one

FATAL_CASES = [
    pytest.param(
        ["[2026-02-03 10:00:05] Received sigquit from a child process. It usually means the child failed."],
        "sigquit-from-child", "Received sigquit", id="launch-phase-sigquit",
    ),
    pytest.param(
        ["[2026-02-03 10:00:05] SIGQUIT received. signum=None, frame=None. It usually means one child failed."],
        "sigquit-from-child", "SIGQUIT received", id="tokenizer-manager-sigquit",
    ),
    pytest.param(
        ["[rank3]:[E203 10:00:05.123456789 ProcessGroupNCCL.cpp:1895] [PG ID 2 PG GUID 3 Rank 3] Process group watchdog thread "
         "terminated with exception: CUDA error: unspecified launch failure"],
        "cuda-launch-failure", "watchdog thread", id="watchdog-names-the-cuda-error-first",
    ),
    pytest.param(
        ["[2026-02-03 10:00:05 TP2] CUDA error: unspecified launch failure"],
        "cuda-launch-failure", "unspecified launch failure", id="cuda-launch-failure",
    ),
    pytest.param(
        ["torch.distributed.DistBackendError: NCCL error in: /pytorch/torch/csrc/distributed/c10d/NCCLUtils.cpp:77, "
         "unhandled cuda error (run with NCCL_DEBUG=INFO for details), NCCL version 2.27.3"],
        "nccl-error", "NCCL error in", id="nccl-error",
    ),
    pytest.param(["Fatal Python error: Segmentation fault", "", "Thread 0x00007f3c2c1e5740 (most recent call first):"],
                 "segmentation-fault", "Segmentation fault", id="segfault"),
    pytest.param(
        ["[2026-02-03 10:00:05] DetokenizerManager hit an exception: Traceback (most recent call last):",
         '  File "/usr/local/lib/python3.12/dist-packages/sglang/srt/managers/detokenizer_manager.py", line 420, in run_detokenizer_process',
         "    manager.event_loop()",
         "KeyError: 'rid-17'"],
        "subprocess-exception", "KeyError: 'rid-17'", id="detokenizer-exception",
    ),
    pytest.param(
        ["Traceback (most recent call last):", '  File "/x.py", line 3, in <module>', "    main()",
         "ValueError: no such model"],
        "python-traceback", "ValueError: no such model", id="bare-traceback",
    ),
    pytest.param(
        ["Traceback (most recent call last):", '  File "/x.py", line 3, in <module>', "KeyError: 'a'", "",
         "During handling of the above exception, another exception occurred:", "",
         "Traceback (most recent call last):", '  File "/x.py", line 5, in <module>',
         "RuntimeError: CUDA error: no kernel image is available for execution on the device"],
        "python-traceback", "KeyError: 'a'", id="chained-traceback-first-exception-decides",
    ),
    pytest.param(
        ["[2026-02-03 10:00:05] Rank 3 scheduler is dead. Please check if there are relevant logs.",
         "[2026-02-03 10:00:05] Exit code: -11"],
        "scheduler-dead", "Rank 3 scheduler is dead", id="scheduler-dead",
    ),
    pytest.param(
        ["[2026-02-03 10:00:05] Initialization failed. warmup error: Traceback (most recent call last):",
         '  File "/usr/local/lib/python3.12/dist-packages/sglang/srt/entrypoints/http_server.py", line 1600, in _execute_server_warmup',
         "AssertionError: res=<Response [500]>"],
        "initialization-failed", "AssertionError", id="warmup-failed",
    ),
    pytest.param(
        ["[2026-02-03 10:00:05 TP0] Scheduler hit an exception: Traceback (most recent call last):",
         '  File "/x.py", line 1, in f',
         "[2026-02-03 10:00:05 TP1] Load weight end. type=X, dtype=torch.bfloat16, avail mem=1.00 GB, mem usage=1.00 GB.",
         '  File "/y.py", line 2, in g',
         "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB."],
        "subprocess-exception", "torch.OutOfMemoryError", id="traceback-interleaved-with-another-rank",
    ),
]


@pytest.mark.parametrize("lines, rule, message", FATAL_CASES)
def test_fatal_signals(rules, lines, rule, message):
    before = diagnose(lines, rules)
    assert before.verdict == "crashed"
    assert before.fatal.rule == rule and message in before.fatal.message
    after = diagnose([READY, *lines], rules)
    assert after.verdict == "crashed" and after.fatal.rule == rule, "a fatal line after ready is a crash too"


def test_fatal_before_ready_is_a_note_when_the_server_still_came_up(rules):
    report = diagnose(["Fatal Python error: Segmentation fault", READY], rules)
    assert report.verdict == "ready" and report.fatal is None
    assert report.fatal_before_ready.rule == "segmentation-fault"


# ------------------------------------------------------------------ things that only look fatal

NOT_FATAL = [
    pytest.param([SERVER_ARGS], id="real-server-args-dump"),
    pytest.param([ADVERSARIAL_ARGS], id="server-args-dump-quoting-every-fatal-message"),
    pytest.param(["[2026-02-03 10:00:01] Using custom SIGQUIT handler: <function my_handler at 0x7f00>"], id="custom-sigquit-handler"),
    pytest.param(
        ["2026-02-03 10:00:01,320 - WARNING - autotuner.py:496 - flashinfer.jit: [Autotuner]: Skipping tactic "
         "<flashinfer.fused_moe.core.get_cutlass_fused_moe_module.<locals>.MoERunner object at 0x7f2a1c3b9e50> 3, due to failure "
         "while profiling: [TensorRT-LLM][ERROR] Assertion failed: Failed to initialize cutlass TMA WS grouped gemm. Error: Error "
         "Internal (/workspace/moe_gemm_tma_ws_launcher.inl:698)",
         "1       0x7f2a8b529b4a tensorrt_llm::common::throwRuntimeError(char const*, int, std::string const&) + 98"],
        id="autotuner-skip-with-backtrace",
    ),
    pytest.param(['[2026-02-03 10:00:01] INFO:     10.0.0.1:5100 - "GET /Traceback%20NCCL%20error%20Segmentation%20fault HTTP/1.1" 404 Not Found'],
                 id="access-log-with-scary-path"),
    pytest.param(
        ["[2026-02-03 10:00:01] ERROR:    Exception in ASGI application", "Traceback (most recent call last):",
         '  File "/usr/local/lib/python3.12/dist-packages/uvicorn/protocols/http/httptools_impl.py", line 409, in run_asgi',
         "ValueError: The input (140000 tokens) is longer than the model's context length (131072 tokens)."],
        id="one-failed-request",
    ),
    pytest.param(["/usr/local/lib/python3.12/dist-packages/torch/cuda/__init__.py:63: FutureWarning: The pynvml package is deprecated."],
                 id="library-warning"),
    pytest.param(["[2026-02-03 10:00:01 TP0] sglang is using nccl==2.27.3", "[Gloo] Rank 0 is connected to 7 peer ranks. Expected number of connected peer ranks is : 7"],
                 id="nccl-and-gloo-info"),
]


@pytest.mark.parametrize("lines", NOT_FATAL)
def test_not_fatal(rules, lines):
    for order in ([READY, *lines], [*lines, READY]):
        report = diagnose(order, rules)
        assert report.verdict == "ready" and report.fatal_signals == [] and report.fatal_before_ready is None


def test_fatal_patterns_are_specific_without_the_dump_rule(rules):
    """No fatal rule matches a real ServerArgs dump on its own: the shield rule is a second line of defence."""
    words = SERVER_ARGS.replace("served_model_name='openai/gpt-oss-120b'",
                                "served_model_name='error fatal FATAL Error nccl NCCL sigquit SIGQUIT segfault traceback cuda illegal'")
    for dump in (SERVER_ARGS, words):
        assert [r.id for r in rules if r.klass == "fatal" and r.search(dump)] == []
    for word in ("sigquit", "crash_dump_folder", "nccl", "watchdog_timeout", "abort_on_priority"):
        assert word in SERVER_ARGS.lower()
    assert rules[0].id == "server-args-dump" and rules[0].search(ADVERSARIAL_ARGS)


def test_autotuner_skips_are_grouped_by_kernel_and_reason(rules):
    report = doctor.diagnose_file(PATCHED, rules)
    [group] = report.skip_groups
    assert group.key == {"runner": "MoERunner", "reason": "Failed to initialize cutlass TMA WS grouped gemm. Error: Error Internal"}
    assert group.count == 24 and group.tactics == [str(t) for t in range(8, 32)]
    assert report.benign["native-backtrace-frame"] == 8, "frames under the first two skips"


def test_needles_never_change_what_matches(rules):
    lines = [line for log in LOGS.glob("*.log") for line in log.read_text().splitlines()]
    lines += [line for case in FATAL_CASES + NOT_FATAL for line in case.values[0] if isinstance(line, str)]
    for rule in rules:
        for line in lines:
            assert bool(rule.search(line)) == bool(rule.pattern.search(line)), (rule.id, line[:120])


# ------------------------------------------------------------------ milestones


def test_ranks_against_tp(rules):
    lines = [f"[2026-02-03 10:00:00 TP{r}] FlashInfer workspace initialized for rank {r}, world_size 4" for r in (0, 2)]
    report = diagnose(lines, rules)
    assert report.ranks_initialized == [0, 2] and report.ranks_missing == [1, 3] and report.world_size == 4
    report = diagnose(lines, rules, tp=8)
    assert report.expected_world_size == 8 and report.ranks_missing == [1, 3, 4, 5, 6, 7]


def test_milestones_recorded_in_order(rules):
    report = doctor.diagnose_file(HEALTHY, rules)
    order = sorted(report.milestones, key=report.milestones.get)
    assert order == ["distributed-init", "weights-loaded", "kv-cache-allocated", "fusion-workspace",
                     "cuda-graph-captured", "http-listening", "server-ready"]
    assert report.ready_line == report.milestones["server-ready"]


# ------------------------------------------------------------------ throughput


def decode(value: float, ranks: str = " TP0") -> str:
    return (f"[2026-02-03 10:00:00{ranks}] Decode batch, #running-req: 64, #token: 7000, token usage: 0.10, cuda graph: True, "
            f"gen throughput (token/s): {value:.2f}, #queue-req: 0, ")


def test_throughput_of_the_ab_logs(rules):
    patched = doctor.diagnose_file(PATCHED, rules).throughput
    baseline = doctor.diagnose_file(BASELINE, rules).throughput
    assert 230 < patched.median < 242 and patched.p10 < patched.median < patched.p90
    assert 3700 < baseline.median < 3780
    assert patched.samples == baseline.samples == 45 and patched.warmup_dropped == 5
    assert patched.sources == ["TP0"]


def test_warmup_rule(rules):
    """Samples before the ready line, then the first 10% (rounded up) of the rest, are warm-up."""
    lines = [decode(100), decode(100), READY] + [decode(v) for v in range(1, 21)]
    t = diagnose(lines, rules).throughput
    assert t.warmup_dropped == 4 and t.samples == 18
    assert t.median == 11.5 and t.p10 == 4.7 and t.p90 == 18.3


def test_throughput_without_ready_keeps_the_first_ten_percent_out(rules):
    t = diagnose([decode(v) for v in range(1, 11)], rules).throughput
    assert t.warmup_dropped == 1 and t.samples == 9 and t.median == 6.0


def test_throughput_per_rank_prefix(rules):
    lines = [READY] + [decode(1000 + i, " DP0 TP0") for i in range(10)] + [decode(2000 + i, " DP1 TP4") for i in range(10)]
    lines.append("Decode batch, #running-req: 1, #token: 10, token usage: 0.00, cuda graph: True, gen throughput (token/s): 7.00, #queue-req: 0, ")
    t = diagnose(lines, rules).throughput
    assert t.sources == ["-", "DP0 TP0", "DP1 TP4"] and t.samples == 18


def test_a_rank_that_starts_logging_after_ready_keeps_its_samples(rules):
    lines = [decode(50, " DP0 TP0"), READY] + [decode(100 + i, " DP1 TP4") for i in range(10)]
    t = diagnose(lines, rules).throughput
    assert t.samples == 9 and t.warmup_dropped == 2 and t.median == 105.0


def test_samples_stay_bounded(monkeypatch):
    monkeypatch.setattr(doctor.throughput, "SAMPLE_CAP", 64)
    samples = doctor.Samples()
    for v in range(1000):
        samples.add(float(v))
    assert samples.count == 1000 and len(samples.values) < 64 and samples.stride == 16
    assert list(samples.values) == [float(v) for v in range(0, 1000, 16)], "every stride-th value, in order"
    t = doctor.steady_state({"TP0": samples}, {})
    assert t.samples == 900 and t.warmup_dropped == 100 and abs(t.median - 549.5) <= 16


def test_no_throughput_lines(rules):
    assert doctor.diagnose_file(CRASH, rules).throughput is None


# ------------------------------------------------------------------ A/B


def test_ab_regression_recommends_revert(rules):
    comparison = doctor.compare(doctor.diagnose_file(PATCHED, rules), doctor.diagnose_file(BASELINE, rules), 5.0)
    assert 93 < comparison.regression_pct < 94.5
    assert comparison.recommend_revert and comparison.clearly_slower


def test_ab_within_threshold(rules):
    same = doctor.diagnose_file(BASELINE, rules)
    comparison = doctor.compare(same, same, 5.0)
    assert comparison.regression_pct == 0 and not comparison.recommend_revert
    slightly = diagnose([READY] + [decode(96) for _ in range(20)], rules)
    base = diagnose([READY] + [decode(100) for _ in range(20)], rules)
    assert doctor.compare(slightly, base, 5.0).recommend_revert is False
    assert doctor.compare(slightly, base, 3.0).recommend_revert is True


def test_ab_crashed_patched_run_recommends_revert(rules):
    comparison = doctor.compare(doctor.diagnose_file(CRASH, rules), doctor.diagnose_file(BASELINE, rules))
    assert comparison.regression_pct is None and comparison.recommend_revert
    assert comparison.reasons == ["patched run crashed; baseline is ready"]


def test_ab_cli_says_slower_plainly(cli):
    result = cli("doctor", PATCHED, "--baseline", BASELINE)
    assert result.exit_code == 1
    assert "A/B: the patched run is SLOWER: median 235.7 vs 3,741.3 tok/s, 93.7% slower" in result.stdout
    assert "recommend: codemod revert sm120-enable --repo PATH" in result.stdout
    relaxed = cli("doctor", PATCHED, "--baseline", BASELINE, "--max-regression", "95")
    assert relaxed.exit_code == 0 and "keep the patch" in relaxed.stdout


# ------------------------------------------------------------------ JSON


def test_json_keys(cli):
    result = cli("doctor", PATCHED, "--baseline", BASELINE, "--format", "json")
    assert result.exit_code == 1
    data = json.loads(result.stdout)
    assert data["verdict"] == "ready" and data["fatal"] is None
    assert data["ranks_initialized"] == list(range(8)) and data["world_size"] == 8
    assert data["autotuner_skips"] == 24
    assert set(data["throughput"]) >= {"median", "p10", "p90", "samples"}
    assert data["comparison"]["recommend_revert"] is True and 93 < data["comparison"]["regression_pct"] < 94.5
    assert data["baseline"]["verdict"] == "ready"

    crashed = json.loads(cli("doctor", CRASH, "--format", "json").stdout)
    assert crashed["verdict"] == "crashed" and crashed["throughput"] is None and "comparison" not in crashed
    assert set(crashed["fatal"]) >= {"line", "message", "context"} and crashed["ranks_missing"] == [6]


# ------------------------------------------------------------------ --follow


def _writer(path: Path, lines: list[str], pause_after: str | None = None, release: threading.Event | None = None,
            delay: float = 0.002, create_after: float = 0.0):
    def write():
        time.sleep(create_after)
        with open(path, "a", encoding="utf-8") as f:
            for line in lines:
                if line.startswith("[") and len(line) > 40:  # a line written in two parts
                    f.write(line[:20])
                    f.flush()
                    time.sleep(delay)
                    f.write(line[20:] + "\n")
                else:
                    f.write(line + "\n")
                f.flush()
                time.sleep(delay)
                if pause_after and pause_after in line and release is not None:
                    release.wait(20)

    thread = threading.Thread(target=write, daemon=True)
    thread.start()
    return thread


def test_follow_prints_state_changes_and_stops_when_ready(cli, tmp_path):
    log = tmp_path / "live.log"
    release = threading.Event()
    thread = _writer(log, HEALTHY.read_text().splitlines(), "ready to roll", release, create_after=0.3)
    started = time.monotonic()
    result = cli("doctor", "--follow", log, "--timeout", "60")
    elapsed = time.monotonic() - started
    release.set()
    thread.join(10)
    assert result.exit_code == 0, result.output
    assert elapsed < 20, "stopped at the ready line, while the writer was still paused there"
    events = [line for line in result.stdout.splitlines() if line.startswith("line ")]
    lines = HEALTHY.read_text().splitlines()
    first = next(i for i, line in enumerate(lines) if "Init torch distributed ends" in line)
    assert events[0] == f"line {first + 1}: distributed-init: {lines[first]}"
    assert any(e.endswith("fusion-workspace: rank 0 up (1 of 8)") for e in events)
    assert any(e.endswith("fusion-workspace: rank 7 up (8 of 8)") for e in events)
    ready = next(i for i, line in enumerate(lines) if "ready to roll" in line)
    assert events[-1] == f"line {ready + 1}: ready: {lines[ready]}"
    assert "verdict: ready" in result.stdout
    assert "waiting for" in result.stderr


def test_follow_stops_at_a_crash(cli, tmp_path):
    log = tmp_path / "live.log"
    thread = _writer(log, CRASH.read_text().splitlines())
    result = cli("doctor", "--follow", log, "--timeout", "60")
    thread.join(10)
    assert result.exit_code == 1
    assert "crashed: TP6 RuntimeError: CUDA error: an illegal memory access was encountered (subprocess-exception)" in result.stdout
    assert any(line.startswith("line ") and "autotuner-skip: MoERunner" in line for line in result.stdout.splitlines())


def test_follow_timeout_while_starting(cli, tmp_path):
    log = tmp_path / "live.log"
    log.write_text("".join(HEALTHY.read_text().splitlines(keepends=True)[:20]))
    result = cli("doctor", "--follow", log, "--timeout", "0.5", "--format", "json")
    assert result.exit_code == 1
    assert json.loads(result.stdout)["verdict"] == "starting"
    assert "no final verdict after 0.5 s" in result.stderr


def test_follow_stdin(cli):
    result = cli("doctor", "--follow", "-", input=HEALTHY.read_text())
    assert result.exit_code == 0 and "ready: " in result.stdout


# ------------------------------------------------------------------ --revert


def test_revert_when_the_ab_regresses(cli, example_repo):
    repo = example_repo("flashinfer")
    assert cli("run", "sm120-enable", "--repo", repo).exit_code == 0
    assert "codemod/sm120-enable" in git(repo, "branch")

    kept = cli("doctor", BASELINE, "--baseline", BASELINE, "--revert", "--repo", repo)
    assert kept.exit_code == 0 and "not reverting sm120-enable" in kept.stderr
    assert "codemod/sm120-enable" in git(repo, "branch")

    result = cli("doctor", PATCHED, "--baseline", BASELINE, "--revert", "--repo", repo)
    assert result.exit_code == 1, result.output
    assert f"recommend: codemod revert sm120-enable --repo {repo}" in result.stdout
    assert "reverted sm120-enable" in result.stderr
    assert "codemod/sm120-enable" not in git(repo, "branch")
    assert git(repo, "branch", "--show-current").strip() == "main"


def test_revert_needs_baseline_and_repo(cli):
    result = cli("doctor", PATCHED, "--revert")
    assert result.exit_code == 2 and "--revert needs --baseline LOG and --repo PATH" in result.stderr


# ------------------------------------------------------------------ rules files and inputs


def test_user_rules_come_first(cli, tmp_path):
    only_sigquit = tmp_path / "sigquit.log"
    only_sigquit.write_text("[2026-02-03 10:00:05] Received sigquit from a child process. It usually means the child failed.\n")
    assert cli("doctor", only_sigquit).exit_code == 1
    mine = tmp_path / "mine.toml"
    mine.write_text(
        "[[rule]]\nid = \"drill-sigquit\"\nclass = \"benign\"\n"
        "pattern = 'Received sigquit'\nexplanation = \"our fire drill sends SIGQUIT\"\n"
    )
    result = cli("doctor", only_sigquit, "--rules", mine, "--format", "json")
    assert result.exit_code == 0
    assert json.loads(result.stdout)["benign"] == {"drill-sigquit": 1}


def test_user_rule_replaces_a_builtin_of_the_same_id(rules, tmp_path):
    mine = tmp_path / "mine.toml"
    mine.write_text("[[rule]]\nid = \"server-ready\"\nclass = \"milestone\"\nmarks = \"ready\"\n"
                    "pattern = 'Our server is up'\nexplanation = \"a wrapper's ready line\"\n")
    custom = doctor.load_rules([mine])
    assert [r.id for r in custom].count("server-ready") == 1
    assert diagnose(["Our server is up"], custom).verdict == "ready"
    assert diagnose([READY], custom).verdict == "starting"


@pytest.mark.parametrize(
    "text, message",
    [
        pytest.param("[[rule]]\nid = \"x\"\nclass = \"fatal\"\npattern = '(unclosed'\nexplanation = \"e\"\n",
                     "rule x: pattern is not a valid regular expression", id="bad-regex"),
        pytest.param("[[rule]]\nid = \"x\"\nclass = \"scary\"\npattern = 'a'\nexplanation = \"e\"\n",
                     "class 'scary' is not one of", id="unknown-class"),
        pytest.param("[[rule]]\nid = \"x\"\nclass = \"fatal\"\npattern = 'a'\n", "needs `explanation`", id="no-explanation"),
        pytest.param("[[rule]]\nid = \"x\"\nclass = \"metric\"\nmetric = \"m\"\npattern = 'a'\nexplanation = \"e\"\n",
                     "(?P<value>...)", id="metric-without-value"),
        pytest.param("[[rule]]\nid = \"x\"\nclass = \"fatal\"\npattern = 'a'\nexplanation = \"e\"\nseverity = 3\n",
                     "unknown key(s): severity", id="unknown-key"),
        pytest.param("rule = [", "not valid TOML", id="not-toml"),
    ],
)
def test_bad_rules_file(cli, tmp_path, text, message):
    bad = tmp_path / "bad.toml"
    bad.write_text(text)
    result = cli("doctor", HEALTHY, "--rules", bad)
    assert result.exit_code == 8
    assert result.stderr.startswith("error[recipe-invalid]: ") and message in result.stderr


def test_missing_log_and_missing_arguments(cli, tmp_path):
    result = cli("doctor", tmp_path / "nope.log")
    assert result.exit_code == 9 and "log file does not exist" in result.stderr
    assert cli("doctor").exit_code == 2


def test_gzip_stdin_and_long_lines(rules, cli, tmp_path):
    packed = tmp_path / "healthy.log.gz"
    with gzip.open(packed, "wt") as f:
        f.write(HEALTHY.read_text())
    assert doctor.diagnose_file(packed, rules).verdict == "ready"
    assert cli("doctor", "-", input=CRASH.read_text()).exit_code == 1
    long = tmp_path / "long.log"
    with open(long, "w") as f:
        f.write("x" * (3 * doctor.MAX_LINE) + " Received sigquit from a child process. It usually means the child failed.\n")
        f.write(READY + "\n")
    report = doctor.diagnose_file(long, rules)
    assert report.lines == 2 and report.verdict == "ready", "a line over 1 MiB is cut, not split into several"


def test_follow_cuts_long_lines_like_a_full_read(rules, tmp_path):
    log = tmp_path / "long.log"
    log.write_text("y" * (2 * doctor.MAX_LINE + 5) + " Fatal Python error: Segmentation fault\n" + READY + "\n")
    diagnosis = doctor.Diagnosis(rules)
    events = list(doctor.follow(log, diagnosis, timeout=5, sleep=lambda s: None))
    assert [e.kind for e in events] == ["ready"] and diagnosis.lineno == 2


# ------------------------------------------------------------------ preflight


def test_preflight_pcie_without_p2p_is_a_blocker(cli):
    result = cli("doctor", "--preflight", "--topo", LOGS / "nvidia-smi-topo-pcie-no-p2p.txt")
    assert result.exit_code == 1
    assert result.stdout.startswith("preflight: blocked")
    assert "no P2P read (GNS: GPU not supported) over SYS" in result.stdout
    assert "PCIe topology without P2P" in result.stdout


def test_preflight_ok_and_unknown(cli, tmp_path):
    data = json.loads(cli("doctor", "--preflight", "--topo", LOGS / "nvidia-smi-topo-pcie-p2p.txt", "--format", "json").stdout)
    assert data["preflight"]["status"] == "ok" and data["preflight"]["gpus"] == list(range(8))
    assert data["preflight"]["links"]["0-1"] == "PIX" and data["preflight"]["p2p"]["0-7"] == "OK"
    nvlink = cli("doctor", "--preflight", "--topo", LOGS / "nvidia-smi-topo-nvlink.txt")
    assert nvlink.exit_code == 0 and nvlink.stdout.startswith("preflight: ok")
    topo_only = tmp_path / "topo.txt"
    topo_only.write_text((LOGS / "nvidia-smi-topo-pcie-no-p2p.txt").read_text().split("$ nvidia-smi topo -p2p r")[0])
    unknown = cli("doctor", "--preflight", "--topo", topo_only)
    assert unknown.exit_code == 0 and unknown.stdout.startswith("preflight: unknown") and "topo -p2p r" in unknown.stdout


def test_preflight_with_nics_and_tp():
    topo = (
        "\tGPU0\tGPU1\tGPU2\tNIC0\tCPU Affinity\tNUMA Affinity\tGPU NUMA ID\n"
        "GPU0\t X \tPIX\tSYS\tPIX\t0-31\t0\t\tN/A\n"
        "GPU1\tPIX\t X \tSYS\tPIX\t0-31\t0\t\tN/A\n"
        "GPU2\tSYS\tSYS\t X \tSYS\t32-63\t1\t\tN/A\n"
        "NIC0\tPIX\tPIX\tSYS\t X \t\t\t\t\n\nLegend:\n\n  X    = Self\n\nNIC Legend:\n\n  NIC0: mlx5_0\n"
    )
    p2p = " \tGPU0\tGPU1\tGPU2\t\n GPU0\tX\tOK\tCNS\t\n GPU1\tOK\tX\tCNS\t\n GPU2\tCNS\tCNS\tX\t\n\nLegend:\n\n  X    = Self\n  OK   = Status Ok\n"
    links, status = doctor.parse_topology(topo + "\n" + p2p)
    assert links[(0, 1)] == "PIX" and links[(0, 2)] == "SYS" and (0, 3) not in links
    assert status[(0, 1)] == "OK" and status[(2, 0)] == "CNS"
    assert doctor.preflight([topo, p2p]).status == "blocked"
    assert doctor.preflight([topo, p2p], tp=2).status == "ok"


@pytest.mark.skipif(shutil.which("nvidia-smi") is not None, reason="this machine has nvidia-smi")
def test_preflight_live_without_nvidia_smi(cli):
    result = cli("doctor", "--preflight")
    assert result.exit_code == 9 and "nvidia-smi is not installed" in result.stderr and "--topo FILE" in result.stderr
