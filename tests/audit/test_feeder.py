"""audit.pool.Feeder: the scan's chunks go to the pool a few at a time, so that a part of an assembly the scan's
process submits meanwhile (audit.parallel) runs before the chunks still waiting, and every chunk is run once."""

from __future__ import annotations

import os
import signal
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import pytest

from codemods.audit.pool import Feeder


def _drain(feeder: Feeder) -> list:
    results, pending = [], set()
    while True:
        pending |= set(feeder.taken(block=not pending))
        if not pending:
            return results
        done = {future for future in pending if future.done()}
        if not done:
            time.sleep(0.001)
            continue
        pending -= done
        results += [future.result() for future in done]


def test_every_chunk_runs_once_and_a_task_submitted_later_overtakes_the_waiting_ones():
    order: list[str] = []
    gate = threading.Event()

    def chunk(name: str) -> str:
        if name == "c0":
            gate.wait()
        order.append(name)
        return name

    with ThreadPoolExecutor(1) as pool:
        feeder = Feeder(pool, 2)
        for n in range(6):
            feeder.add(chunk, f"c{n}")
        task = pool.submit(chunk, "task")  # as audit.parallel does, past the feeder
        gate.set()
        assert sorted(_drain(feeder)) == [f"c{n}" for n in range(6)]
        task.result()
    # two chunks were handed to the pool before the task; the other four after it
    assert order[:3] == ["c0", "c1", "task"] and sorted(order[3:]) == ["c2", "c3", "c4", "c5"]


def test_taken_does_not_block_when_nothing_is_left():
    with ThreadPoolExecutor(2) as pool:
        feeder = Feeder(pool, 4)
        assert feeder.taken(block=True) == []
        feeder.add(lambda x: x, 1)
        assert _drain(feeder) == [1]
        assert feeder.taken(block=True) == []


def test_closed_it_hands_nothing_more_to_the_pool():
    ran: list[int] = []
    gate = threading.Event()
    with ThreadPoolExecutor(1) as pool:
        feeder = Feeder(pool, 1)
        feeder.add(lambda n: (gate.wait(), ran.append(n)), 0)
        for n in range(1, 4):
            feeder.add(ran.append, n)
        feeder.close()
        gate.set()
        assert feeder.taken(block=True)  # the one handed over before closing
    assert ran == [0]


def test_a_pool_shut_down_under_it_ends_the_feeding_quietly(caplog):
    pool = ThreadPoolExecutor(1)
    gate = threading.Event()
    feeder = Feeder(pool, 1)
    feeder.add(lambda _: gate.wait(), 0)
    feeder.add(lambda _: None, 1)
    pool.shutdown(wait=False, cancel_futures=True)
    gate.set()
    pool.shutdown(wait=True)
    assert feeder.taken(block=True) is not None  # returns: nothing left that will run
    assert "exception calling callback" not in caplog.text


@pytest.mark.parametrize("workers", [1, 2])
def test_a_scan_of_many_chunks_gives_what_one_process_gives(tmp_path, workers):
    from codemods.audit.scan import scan
    from codemods.core.arch import Arch

    for n in range(300):
        (tmp_path / f"k{n}.cu").write_text(f"#if __CUDA_ARCH__ >= 900\n__device__ int f{n}() {{ return {n}; }}\n#endif\n")
    arch = Arch.parse("sm_120")
    alone = scan(tmp_path, arch, jobs=1)
    pooled = scan(tmp_path, arch, jobs=workers + 1)
    assert pooled.gates == alone.gates and len(alone.gates) == 300


def _killed(chunk):
    """A worker killed mid-chunk (as the out-of-memory killer does)."""
    os.kill(os.getpid(), signal.SIGKILL)


def test_a_killed_worker_is_a_clear_error_not_an_internal_one(tmp_path, monkeypatch, cli):
    from codemods.audit import pool, scan as scan_module

    for n in range(100):
        (tmp_path / f"k{n}.cu").write_text(f"#if __CUDA_ARCH__ >= 900\n__device__ int f{n}() {{ return {n}; }}\n#endif\n")
    monkeypatch.setattr(scan_module, "scan_chunk", _killed)
    monkeypatch.setattr(pool, "scan_chunk", _killed)  # what the worker looks the function up as
    out = cli("scan", "--repo", tmp_path, "--arch", "sm_120", "--jobs", "2", "--no-cache")
    assert out.exit_code == 16, out.output
    assert "error[worker-died]" in out.stderr and "ended abruptly" in out.stderr
    assert "--jobs 1" in out.stderr and "internal error" not in out.output + out.stderr
