"""`codemod scan --format sarif`: a SARIF 2.1.0 log GitHub code scanning accepts."""

from __future__ import annotations

import hashlib
import re
import urllib.parse
from pathlib import Path

from codemods.audit import areas, classify
from codemods.audit.records import ScanResult, one_line
from codemods.core import distribution

RULES = {
    "gate-excludes-arch": (
        "note",
        "An arch gate excludes the scanned arch",
        "A gate (a CUDA #if guard, a JIT arch list or an arch predicate chain) does not admit the scanned "
        "arch (or codemod cannot tell whether it does), so the code it guards does not run there. The result's classification says what the arch "
        "gets there, as the text audit groups it: blocker and widenable (it gets nothing: warning), "
        "needs-human, other-arch (code written for another kind of arch: review, not widen), tuning and unknown "
        "(note), covered and definition (an arch predicate's own test: none).",
    ),
    "empty-kernel": (
        "error",
        "A JIT module is built for the arch but a guard compiles its code out",
        "The module's JIT gate admits the arch, while a guard in a source it compiles excludes the arch and "
        "keeps the code for the module's other targets. The kernel runs without that code and returns wrong "
        "results with no error. Widen the guard together with the JIT gate (FlashInfer PR #3903).",
    ),
    "unsupported-instruction": (
        "error",
        "A guard admits the arch around instructions it lacks",
        "A guard the arch's compile target takes holds instructions or wrapper names ptxas rejects on that "
        "arch (wgmma, tcgen05/TMEM, 2-SM TMA, block-scaled mma.sync), or a Python gate admits the arch and "
        "selects a JIT module whose sources hold them. Narrow the guard, or keep the module's JIT gate from "
        "building it for this arch.",
    ),
}


# A gate result's level by what the arch gets there: nothing (warning), something to decide (note), other code (none).
_GATE_LEVELS = {
    classify.BLOCKER: "warning",
    classify.WIDENABLE: "warning",
    classify.NEEDS_HUMAN: "note",
    classify.OTHER_ARCH: "note",
    classify.TUNING: "note",
    classify.UNKNOWN: "note",
    classify.COVERED: "none",
    classify.DEFINITION: "none",
}


# What a reader of each rule does about a result (SARIF `help`, required by GitHub code scanning).
RULE_HELP = {
    "gate-excludes-arch": (
        "GateExcludesArch",
        "Blocker: change the gate by hand. Widenable: widen it with a recipe (`codemod run RECIPE --dry-run` "
        "shows the edit). Needs-human: the arch takes a fallback, the code uses instructions it lacks, or the "
        "JIT module is only used by code for other archs: decide, or port. Other-arch: the gate selects code "
        "written for another kind of arch (an SM100 backend default, an SM90 kernel): review it, do not widen it. "
        "Tuning: review the block sizes or "
        "heuristics the arch gets. Unknown: read the code. Covered and definition: nothing to do.",
    ),
    "empty-kernel": (
        "EmptyKernel",
        "Widen the guard together with the JIT gate (`codemod run RECIPE` applies both), or narrow the JIT "
        "gate back; `codemod verify` fails a tree in this state.",
    ),
    "unsupported-instruction": (
        "UnsupportedInstruction",
        "Narrow the guard (or the Python gate that selects the module) so the arch does not compile these "
        "instructions, or keep the module's JIT gate from building it for this arch.",
    ),
}
# A result's SARIF `rank` (0-100, its priority) by the area of its file: the library first (audit.areas); the area
# is also the result's tag (`properties.tags`, which GitHub code scanning filters on).
AREA_RANKS = {areas.LIBRARY: 90.0, areas.BENCHMARKS: 40.0, areas.TESTS: 30.0}
INFORMATION_URI = "https://pypi.org/project/codemod/"


def _fingerprint(*parts: str) -> str:
    return hashlib.sha256("\x1f".join(parts).encode("utf-8", "surrogateescape")).hexdigest()[:32]


def to_sarif(result: ScanResult, provenance: dict | None = None) -> dict:
    """The scan as a SARIF 2.1.0 log GitHub code scanning accepts: rules gate-excludes-arch, empty-kernel, unsupported-instruction.

    `provenance` (from locate.provenance: the repository's top folder, and its
    remote, commit and branch when known) makes every URI relative to the
    repository root, even when the scanned tree is a subfolder. Each result
    carries a partial fingerprint that survives line shifts: the rule, the
    file, the enclosing symbol and the normalized gate text (and which of the
    identical ones it is).
    """
    rule_ids = list(RULES)
    driver: dict = {
        "name": "codemod",
        "informationUri": INFORMATION_URI,
        "rules": [
            {
                "id": rule,
                "name": RULE_HELP[rule][0],
                "shortDescription": {"text": short},
                "fullDescription": {"text": full},
                "help": {"text": f"{full} {RULE_HELP[rule][1]}", "markdown": f"**{short}.** {full}\n\n**What to do:** {RULE_HELP[rule][1]}"},
                "defaultConfiguration": {"level": level},
            }
            for rule, (level, short, full) in RULES.items()
        ],
    }
    driver["version"] = distribution.version() or "0+unknown"
    root = Path(result.root).resolve()
    top = Path(provenance["root"]) if provenance else root
    prefix = root.relative_to(top).as_posix() if root != top and top in root.parents else ""
    prefix = prefix + "/" if prefix else ""
    seen: dict[str, int] = {}

    def fingerprint(rule: str, where: dict, text: str) -> dict:
        key = _fingerprint(rule, prefix + where["file"], where.get("symbol") or "", " ".join(text.split()))
        seen[key] = seen.get(key, 0) + 1
        return {"codemodGate/v1": f"{key}:{seen[key]}"}
    results = []
    first = classify.sibling(result.arch, result.universe)
    for gate in sorted(_listed(result), key=lambda g: areas.rank(g.get("area", areas.LIBRARY))):
        admitted = ", ".join(gate["admits"]) or (f"none: needs {', '.join(gate['features'])} features"
                                                  if gate.get("features") else "none")
        classification = gate.get("classification")
        where = f" in {gate['symbol']}" if gate.get("symbol") else ""
        where += f" [{gate['owner']}]" if gate.get("owner") else ""
        verb = "excludes" if gate["excludes_arch"] else "may exclude"
        text = f"{classification}: {gate['kind']} `{one_line(gate['text'])}`{where} {verb} {result.arch.name} (admits {admitted})"
        properties = {"kind": gate["kind"], "classification": classification, "reason": gate.get("reason", "")}
        if gate.get("symbol"):
            properties["symbol"] = gate["symbol"]
        if gate.get("owner"):
            properties["owner"] = gate["owner"]
        if first is not None:
            properties["specific"] = classify.differs(gate, first.name)
        text += f"; {gate['reason']}" if gate.get("reason") else ""
        if "widenable" in gate:
            properties["widenable"] = gate["widenable"]
            properties["blockers"] = gate["blockers"]
            if not gate["widenable"]:
                text += f"; instructions {result.arch.name} lacks in the region: {'; '.join(gate['blockers'])}"
        level = _GATE_LEVELS.get(str(classification), "note")
        found = _sarif_result("gate-excludes-arch", rule_ids, level, text, gate, properties, prefix,
                              fingerprint("gate-excludes-arch", gate, gate["text"]))
        if gate.get("symbol"):
            found["locations"][0]["logicalLocations"] = [{"name": gate["symbol"], "kind": "function"}]
        results.append(found)
    for hazard in sorted(result.hazards, key=lambda h: areas.rank(h.get("area", areas.LIBRARY))):
        level = "warning" if hazard["potential"] else "error"
        properties = {"potential": hazard["potential"], "module": hazard.get("module")}
        if "tokens" in hazard:
            properties["tokens"] = hazard["tokens"]
        stable = re.sub(r"\b(?:line )?\d+\b", "#", hazard["message"])  # line numbers move; the finding does not
        results.append(_sarif_result(hazard["kind"], rule_ids, level, hazard["message"], hazard, properties, prefix,
                                     fingerprint(hazard["kind"], hazard, stable)))
    run: dict = {
        "tool": {"driver": driver},
        "originalUriBaseIds": {"SRCROOT": {"uri": top.as_uri() + "/"}},
        "results": results,
        "invocations": [_sarif_invocation(result.skipped, prefix)],
        "properties": {
            "arch": result.arch.name,
            # the audit's groups, as the text summary counts them
            "classifications": {
                name: sum(g.get("classification") == name for g in _listed(result))
                for name in (*classify.GROUPS, classify.COVERED, classify.DEFINITION)
            },
        },
    }
    if provenance and provenance.get("revision"):
        remote = provenance.get("remote")
        vcs = {"repositoryUri": remote or top.as_uri(),  # locate.provenance gives the remote without credentials
               "revisionId": provenance["revision"],
               "mappedTo": {"uriBaseId": "SRCROOT"}}
        if provenance.get("branch"):
            vcs["branch"] = provenance["branch"]
        run["versionControlProvenance"] = [vcs]
    return {
        "$schema": "https://docs.oasis-open.org/sarif/sarif/v2.1.0/errata01/os/schemas/sarif-schema-2.1.0.json",
        "version": "2.1.0",
        "runs": [run],
    }


def _listed(result: ScanResult) -> list[dict]:
    """The gates that are results: those that exclude the arch, and those the audit cannot decide (unknown)."""
    return [g for g in result.gates if g["excludes_arch"] or g.get("classification") == classify.UNKNOWN]


def _sarif_invocation(skipped: list[dict], prefix: str = "") -> dict:
    """The run's invocation: each file or folder skipped is a notification (with its reason), so it is not missed."""
    invocation: dict = {"executionSuccessful": True}
    if skipped:
        invocation["toolExecutionNotifications"] = [
            {
                "level": "warning",
                "message": {"text": f"skipped: {item['reason']}"},
                "locations": [
                    {
                        "physicalLocation": {
                            "artifactLocation": {"uri": urllib.parse.quote(prefix + item["file"]), "uriBaseId": "SRCROOT"}
                        }
                    }
                ],
            }
            for item in skipped
        ]
    return invocation


def _sarif_result(rule: str, rule_ids: list[str], level: str, text: str, where: dict, properties: dict,
                  prefix: str = "", fingerprints: dict | None = None) -> dict:
    area = where.get("area", areas.LIBRARY)
    return {
        "ruleId": rule,
        "ruleIndex": rule_ids.index(rule),
        "level": level,
        "rank": AREA_RANKS.get(area, 0.0),
        "message": {"text": text},
        "partialFingerprints": fingerprints or {},
        "locations": [
            {
                "physicalLocation": {
                    "artifactLocation": {"uri": urllib.parse.quote(prefix + where["file"]), "uriBaseId": "SRCROOT"},
                    "region": {"startLine": where["line"]},
                }
            }
        ],
        "properties": {**properties, "area": area, "tags": [area]},
    }
