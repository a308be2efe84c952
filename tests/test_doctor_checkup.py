"""doctor's checkup: the order of a doctor run (findings, then revert), what it returns, and its exit status."""

from __future__ import annotations

from codemods import doctor
from tests.conftest import EXAMPLES

LOGS = EXAMPLES / "logs"
HEALTHY = LOGS / "sglang-tp8-healthy.log"
BASELINE = LOGS / "sglang-tp8-sm120-baseline.log"
PATCHED = LOGS / "sglang-tp8-sm120-patched.log"


def test_revert_runs_after_the_findings_only_when_the_ab_recommends_it():
    steps: list[str] = []
    found = doctor.checkup(
        PATCHED, baseline=BASELINE, revert=lambda: steps.append("revert") or "backed out",
        on_findings=lambda found: steps.append(f"findings: {found.comparison.recommend_revert}"),
    )
    assert steps == ["findings: True", "revert"]
    assert found.reverted == "backed out" and found.report.verdict == "ready" and found.baseline.verdict == "ready"
    assert found.comparison.regression_pct > 5 and found.exit_code == 1

    steps.clear()
    kept = doctor.checkup(BASELINE, baseline=BASELINE, revert=lambda: steps.append("revert"),
                          on_findings=lambda found: steps.append("findings"))
    assert steps == ["findings"] and kept.reverted is None and kept.exit_code == 0


def test_a_healthy_log_alone():
    found = doctor.checkup(HEALTHY, tp=8)
    assert found.report.verdict == "ready" and found.baseline is found.comparison is found.preflight is None
    assert found.stopped == "" and found.exit_code == 0


def test_following_a_log_that_stays_starting(tmp_path):
    log = tmp_path / "live.log"
    log.write_text("[2026-02-03 10:00:00 TP0] Init torch distributed ends. mem usage=1.0 GB\n")
    events = []
    found = doctor.checkup(log, follow=True, timeout=0.3, on_event=events.append)
    assert [e.kind for e in events] == ["milestone"]
    assert found.report.verdict == "starting" and found.stopped == "no final verdict after 0.3 s" and found.exit_code == 1


def test_preflight_only():
    found = doctor.checkup(None, check_p2p=True, topology=[LOGS / "nvidia-smi-topo-pcie-no-p2p.txt"])
    assert found.report is None and found.preflight.status == "blocked" and found.exit_code == 1
