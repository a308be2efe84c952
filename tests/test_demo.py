"""The README's first command runs examples/demo.sh: it must keep working end to end."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from conftest import ROOT


def test_demo_script_runs_the_main_job_and_backs_it_out(tmp_path):
    bin_dir = Path(sys.executable).parent  # the venv the README's command installs codemod into
    env = {**os.environ, "PATH": f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}", "TMPDIR": str(tmp_path)}
    proc = subprocess.run(["bash", str(ROOT / "examples" / "demo.sh")], env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    for project in ("flashinfer", "sglang"):
        assert f"{project}: tree is byte-identical to its base after revert" in proc.stdout
    assert "internal error" not in proc.stdout + proc.stderr
    assert "verified: every other arch is byte-identical and the targets gained exactly the planned regions" in proc.stdout
    assert "applied 2 change(s) to FlashInfer" in proc.stderr and "applied 2 change(s) to SGLang" in proc.stderr
