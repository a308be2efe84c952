"""GPU topology for --preflight: whether every GPU pair has P2P, read from `nvidia-smi topo` matrices.

FlashInfer's allreduce fusion maps each rank's workspace into the others and
reads it with peer loads, so it needs P2P between every pair of GPUs.
"""

from __future__ import annotations

import re
import subprocess
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

from codemods.core import errors
from codemods.doctor.logfile import read_text

P2P_STATUS = {
    "X": "self", "OK": "ok", "CNS": "chipset not supported", "GNS": "GPU not supported",
    "TNS": "topology not supported", "NS": "not supported", "DR": "disabled by regkey", "U": "unknown",
}
LINK_KINDS = {
    "X": "self",
    "SYS": "PCIe + the SMP interconnect between NUMA nodes",
    "NODE": "PCIe + the interconnect between PCIe host bridges in a NUMA node",
    "PHB": "PCIe + a PCIe host bridge",
    "PXB": "several PCIe bridges",
    "PIX": "at most one PCIe bridge",
}
_GPU_LABEL = re.compile(r"^GPU(\d+)$")
_COLUMN = re.compile(r"^(?:GPU|NIC)\d+$")


@dataclass
class Preflight:
    gpus: list[int]
    links: dict[tuple[int, int], str]  # from `nvidia-smi topo -m`
    p2p: dict[tuple[int, int], str]  # from `nvidia-smi topo -p2p r`
    status: str  # "ok", "blocked" or "unknown"
    blockers: list[tuple[int, int, str, str]]  # (gpu, gpu, P2P status, link) of each pair without P2P
    notes: list[str]


def parse_topology(text: str) -> tuple[dict[tuple[int, int], str], dict[tuple[int, int], str]]:
    """GPU-to-GPU cells of every matrix in text: (links, p2p), told apart by their values."""
    links: dict[tuple[int, int], str] = {}
    p2p: dict[tuple[int, int], str] = {}
    columns: list[str] = []
    for raw in text.splitlines():
        tokens = raw.split()
        if len(tokens) >= 1 and _COLUMN.match(tokens[0]) and (len(tokens) == 1 or _COLUMN.match(tokens[1]) or tokens[1] == "CPU"):
            columns = [t for t in tokens if _COLUMN.match(t)]
            continue
        m = _GPU_LABEL.match(tokens[0]) if tokens else None
        if not m or not columns:
            if not raw.strip() or raw.strip().startswith("Legend"):
                columns = [] if raw.strip().startswith("Legend") else columns
            continue
        row = int(m.group(1))
        for label, cell in zip(columns, tokens[1:1 + len(columns)]):
            col = _GPU_LABEL.match(label)
            if not col or int(col.group(1)) == row:
                continue
            pair = (row, int(col.group(1)))
            if cell in P2P_STATUS and cell != "X":
                p2p[pair] = cell
            elif cell in LINK_KINDS or re.fullmatch(r"NV\d+", cell):
                links[pair] = cell
    return links, p2p


def preflight(texts: Iterable[str], tp: int | None = None) -> Preflight:
    """Whether every GPU pair (the first tp GPUs, when given) can reach the others peer-to-peer.

    FlashInfer's allreduce fusion maps each rank's workspace into the other
    ranks through CUDA IPC and reads it with peer loads, so it needs P2P
    between every pair. PCIe topology without P2P is a known blocker.
    """
    links: dict[tuple[int, int], str] = {}
    p2p: dict[tuple[int, int], str] = {}
    for text in texts:
        l, p = parse_topology(text)
        links.update(l)
        p2p.update(p)
    gpus = sorted({g for pair in [*links, *p2p] for g in pair})
    if tp:
        gpus = [g for g in gpus if g < tp]
    pairs = [(a, b) for a in gpus for b in gpus if a < b]
    blockers: list[tuple[int, int, str, str]] = []
    notes: list[str] = []
    if not gpus:
        return Preflight([], links, p2p, "unknown", [], ["no GPU matrix found: give the output of `nvidia-smi topo -m` and `nvidia-smi topo -p2p r`"])
    if tp and len(gpus) < tp:
        notes.append(f"--tp {tp} but only {len(gpus)} GPU(s) in the topology")
    for a, b in pairs:
        status = p2p.get((a, b)) or p2p.get((b, a))
        link = links.get((a, b)) or links.get((b, a)) or ""
        if status and status != "OK":
            blockers.append((a, b, status, link))
    if blockers:
        state = "blocked"
        pcie = all(not (links.get(p) or links.get(p[::-1]) or "").startswith("NV") for p in pairs)
        if pcie and links:
            notes.append("PCIe topology without P2P: FlashInfer's allreduce fusion cannot run here (SGLang falls back, or fails at workspace setup)")
    elif p2p and all((p2p.get(p) or p2p.get(p[::-1])) == "OK" for p in pairs):
        state = "ok"
    elif links and all((links.get(p) or links.get(p[::-1]) or "").startswith("NV") for p in pairs):
        state = "ok"
        notes.append("every pair is on NVLink, which carries P2P (run `nvidia-smi topo -p2p r` to confirm)")
    else:
        state = "unknown"
        notes.append("PCIe links without a P2P matrix: run `nvidia-smi topo -p2p r` and pass its output too")
    return Preflight(gpus, links, p2p, state, blockers, notes)


def read_topology_files(paths: Iterable[Path]) -> list[str]:
    """Saved `nvidia-smi topo -m` / `nvidia-smi topo -p2p r` output, one or both per file."""
    return [read_text(path, "--topo") for path in paths]


def read_live_topology(run: Callable = subprocess.run) -> list[str]:
    """The output of `nvidia-smi topo -m` and `nvidia-smi topo -p2p r` on this machine."""
    out = []
    for args in (["nvidia-smi", "topo", "-m"], ["nvidia-smi", "topo", "-p2p", "r"]):
        try:
            proc = run(args, capture_output=True, text=True, timeout=60)
        except FileNotFoundError:
            raise errors.FileRefused(
                "nvidia-smi is not installed or not on PATH", where="preflight",
                hint="run on the GPU machine, or save `nvidia-smi topo -m` and `nvidia-smi topo -p2p r` there and pass them with --topo FILE",
            ) from None
        except subprocess.TimeoutExpired:
            raise errors.FileRefused(f"`{' '.join(args)}` did not answer in 60 s", where="preflight", hint="pass saved output with --topo FILE") from None
        if proc.returncode != 0:
            raise errors.FileRefused(
                f"`{' '.join(args)}` failed: {(proc.stderr or proc.stdout).strip()[:300]}", where="preflight",
                hint="pass saved output with --topo FILE",
            )
        out.append(proc.stdout)
    return out
