"""`codemod scan --format json`: the scan's records, one per line."""

from __future__ import annotations

import json

from codemods.audit import classify
from codemods.audit.records import ScanResult


def dumps(data: dict) -> str:
    """JSON for `{"gates": [...], ...}` with one item per line: as readable as indent=2 for a few gates, and
    json's C encoder keeps it fast for tens of thousands (indent= falls back to the pure-Python one)."""
    parts = []
    for key, value in data.items():
        if isinstance(value, list):
            items = ",\n    ".join(json.dumps(item) for item in value)
            parts.append(f'  {json.dumps(key)}: [\n    {items}\n  ]' if value else f"  {json.dumps(key)}: []")
        else:
            parts.append(f"  {json.dumps(key)}: {json.dumps(value)}")
    return "{\n" + ",\n".join(parts) + "\n}"


def to_json(result: ScanResult) -> dict:
    """`{"gates", "skipped", "hazards"}`; gates that exclude the arch carry `widenable` and `blockers` (cuda_guard).

    Each gate carries the audit's `classification` and `reason` (the group the text prints it in), `symbol`
    (enclosing function) and `owner` (JIT module) where known; for an arch with a sibling (sm_121: sm_120),
    a gate that excludes it also says whether it is `specific` (admits the sibling).
    """
    first = classify.sibling(result.arch, result.universe)

    def record(gate: dict) -> dict:
        out = dict(gate)
        if first is not None and gate["excludes_arch"]:
            out["specific"] = classify.differs(gate, first.name)
        return out

    return {
        "gates": [record(gate) for gate in result.gates],
        "skipped": [dict(item) for item in result.skipped],
        "hazards": [dict(hazard) for hazard in result.hazards],
    }
