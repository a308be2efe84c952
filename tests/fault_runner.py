"""Run the codemod CLI with a fault hook at its step boundaries (tests only; production has no such switch).

    python tests/fault_runner.py run sm120-enable --repo R

CODEMOD_TEST_KILL_AT=<step>[#n] SIGKILLs the process at the n-th time it
reaches that step (default the first); CODEMOD_TEST_PAUSE_AT=<step>:<path>
writes `<path>.reached` there and waits (60 s at most) until `<path>` exists.
"""

from __future__ import annotations

import os
import signal
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from codemods.apply import journal  # noqa: E402
from codemods.cli.app import main  # noqa: E402

_hits: dict[str, int] = {}


def _fault(step: str) -> None:
    _hits[step] = _hits.get(step, 0) + 1
    kill = os.environ.get("CODEMOD_TEST_KILL_AT")
    if kill:
        name, _, nth = kill.partition("#")
        if name == step and _hits[step] == int(nth or 1):
            sys.stdout.flush()
            sys.stderr.flush()
            os.kill(os.getpid(), signal.SIGKILL)
    pause = os.environ.get("CODEMOD_TEST_PAUSE_AT")
    if pause:
        name, _, path = pause.partition(":")
        if name == step:
            Path(path + ".reached").write_text(str(os.getpid()))
            deadline = time.monotonic() + 60
            while not Path(path).exists() and time.monotonic() < deadline:
                time.sleep(0.05)


if __name__ == "__main__":
    journal._hook = _fault
    sys.argv[0] = "codemod"
    main()
