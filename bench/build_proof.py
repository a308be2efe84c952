"""Cold and warm wall time of `codemod verify --build` for trtllm_comm on FlashInfer 0.6.3 (sm_90, sm_120).

    PYTHONPATH=. python bench/build_proof.py [--jobs N]

Builds the checkout layout from the 0.6.3 wheel (tests/conftest.py's cache,
downloaded once), widens comm.py's JIT gate by hand (the PR #3903 half-patch),
then runs `verify --build --arch sm_120 --archs sm_90,sm_120` twice against an
empty PTX cache: cold (every source preprocessed and compiled) and warm (every
source preprocessed, every PTX from the cache). Prints both times, the nvcc
compile counts and the verdict. A benchmark, not a test: numbers depend on the
machine's cores and load.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from conftest import flashinfer_checkout, init_repo, unpack_wheel  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--jobs", type=int, default=0)
    args = parser.parse_args()
    wheel = unpack_wheel("flashinfer-python", "0.6.3")
    with tempfile.TemporaryDirectory(prefix="bench-build-proof-") as temp:
        root = init_repo(flashinfer_checkout(wheel, Path(temp) / "flashinfer", third_party=True))
        comm = root / "flashinfer/jit/comm.py"
        comm.write_text(comm.read_text().replace("supported_major_versions=[9, 10]\n    )\n    return gen_jit_spec(\n        \"trtllm_comm\"",
                                                 "supported_major_versions=[9, 10, 12]\n    )\n    return gen_jit_spec(\n        \"trtllm_comm\""))
        env = {**os.environ, "CODEMOD_HOME": str(Path(temp) / "home"), "CODEMOD_BUILD_CACHE": str(Path(temp) / "cache")}
        command = [sys.executable, "-c", "from codemods.cli.app import main; main()", "verify", "--build", "--repo", str(root),
                   "--arch", "sm_120", "--archs", "sm_90,sm_120", "--format", "json", "--jobs", str(args.jobs)]
        for label in ("cold", "warm"):
            started = time.monotonic()
            proc = subprocess.run(command, capture_output=True, text=True, env=env)
            seconds = time.monotonic() - started
            data = json.loads(proc.stdout)
            empty = sum(len(v) for m in data["modules"] for v in m["empty"].values())
            print(f"{label}: {seconds:.1f} s wall, {data['compiled']} compiled, {data['cached']} from cache, "
                  f"status {data['status']} (exit {proc.returncode}), {empty} kernels empty on sm_120")


if __name__ == "__main__":
    main()
