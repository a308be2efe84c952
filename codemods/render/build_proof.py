"""Text and JSON of `codemod verify --build` (codemods.prove.build's report)."""

from __future__ import annotations

from codemods.prove.build_results import WATCHED, BuildReport, SideBuild

_SHOWN = 10  # failing kernels listed per line in text; JSON lists all


def _totals(build: SideBuild) -> str:
    if not build.built:
        return f"not built (FlashInfer's JIT: {build.reason})"
    kernels = [k for s in build.sources for k in s.kernels]
    counts = {op: sum(k.opcodes.get(op, 0) for k in kernels) for op in WATCHED}
    pdl = ", ".join(f"{op} {n}" for op, n in counts.items())
    cached = sum(s.cached for s in build.sources)
    note = f", {cached}/{len(build.sources)} from cache" if cached else ""
    return (
        f"{len(build.sources)} source(s), {len(kernels)} kernels, {sum(k.empty for k in kernels)} empty, "
        f"{sum(k.instructions for k in kernels)} instructions, {pdl} [{build.gencode}{note}]"
    )


def to_text(report: BuildReport) -> list[str]:
    lines = [f"build proof of {report.root}: base {report.base_label}" + (f" @ {report.base[:12]}" if report.base else "")]
    if report.headers is not None and report.headers.note():
        lines.append(report.headers.note())
    for proof in report.modules:
        lines.append(f"module {proof.module} ({proof.spec})")
        for arch in (*report.targets, *report.compared):
            sides = proof.archs.get(arch, {})
            role = "target" if arch in report.targets else "compared"
            for side in ("base", "work"):
                build = sides.get(side)
                if build is None:
                    continue
                text = _totals(build)
                if side == "work" and arch in report.compared and "base" in sides and build.built and sides["base"].built:
                    same = all(a.digest == b.digest for a, b in zip(sides["base"].sources, build.sources))
                    text = "same PTX as the base" if same else text + "; PTX differs from the base"
                lines.append(f"  {arch:<7} {role:<8} {side:<4}  {text}")
        for arch, kernels in proof.empty.items():
            lines.append(f"  empty on {arch} ({len(kernels)}):")
            lines += [f"    {report.names.get(k.name, k.name)}  [{k.source}]" for k in kernels[:_SHOWN]]
            if len(kernels) > _SHOWN:
                lines.append(f"    ... and {len(kernels) - _SHOWN} more (--format json lists them all)")
        for arch, missing in proof.missing.items():
            lines.append(f"  missing on {arch} ({len(missing)}):")
            lines += [f"    {report.names.get(k.name, k.name)}: no {op}  [{k.source}]" for k, op in missing[:_SHOWN]]
        for arch, names in proof.differs.items():
            lines.append(f"  differs from the base on {arch} ({len(names)}):")
            lines += [f"    {n}" for n in names[:_SHOWN]]
        if proof.promised:
            ops = sorted({op for _, _, op in proof.promised})
            lines.append(f"  the widened guards promise {', '.join(ops)} ({len(proof.promised)} guard(s))")
        for failure in proof.failures:
            lines.append(f"FAIL {proof.module}: {failure}")
    timing = f"{report.compiled} compiled, {report.cached} from cache, {report.seconds:.1f} s"
    if report.ok:
        lines.append(
            f"passed: no kernel compiles empty on {', '.join(report.targets)} that has a body elsewhere, the promised "
            f"instructions are there, and every compared arch builds the base's PTX ({timing})"
        )
    else:
        lines.append(f"failed ({timing})")
    return lines


def to_json(report: BuildReport) -> dict:
    modules = []
    for proof in report.modules:
        archs = []
        for arch, sides in proof.archs.items():
            entry = {"arch": arch, "target": arch in report.targets}
            for side, build in sides.items():
                entry[side] = {
                    "built": build.built, "reason": build.reason or None, "gencode": build.gencode or None,
                    "sources": [
                        {
                            "source": s.source, "cached": s.cached, "kernels": len(s.kernels),
                            "empty": sum(k.empty for k in s.kernels), "instructions": sum(k.instructions for k in s.kernels),
                            **{op: sum(k.opcodes.get(op, 0) for k in s.kernels) for op in WATCHED},
                        }
                        for s in build.sources
                    ],
                }
            if "base" in sides and "work" in sides and sides["base"].built and sides["work"].built:
                entry["same_as_base"] = all(a.digest == b.digest for a, b in zip(sides["base"].sources, sides["work"].sources))
            archs.append(entry)
        kernels = []
        for arch in report.targets:
            work = proof.archs.get(arch, {}).get("work")
            if work is None or not work.built:
                continue
            refs = {r: proof.archs[r]["work"].kernels() for r in proof.reference.get(arch, [])}
            for k in (k for s in work.sources for k in s.kernels):
                kernels.append({
                    "arch": arch, "source": k.source, "kernel": k.name, "instructions": k.instructions, "empty": k.empty,
                    "opcodes": k.opcodes,
                    "reference": {r: {"instructions": ks[(k.source, k.name)].instructions, "opcodes": ks[(k.source, k.name)].opcodes}
                                  for r, ks in refs.items() if (k.source, k.name) in ks},
                })
        modules.append({
            "module": proof.module, "spec": proof.spec, "ok": not proof.failures, "failures": proof.failures,
            "archs": archs,
            "empty": {a: [{"kernel": k.name, "name": report.names.get(k.name), "source": k.source} for k in ks] for a, ks in proof.empty.items()},
            "missing": {a: [{"kernel": k.name, "name": report.names.get(k.name), "source": k.source, "instruction": op} for k, op in ks]
                        for a, ks in proof.missing.items()},
            "differs": proof.differs,
            "promised": [{"file": f, "line": line, "instruction": op} for f, line, op in proof.promised],
            "kernels": kernels,
        })
    return {
        "ok": report.ok, "status": "passed" if report.ok else "failed", "root": report.root, "base": report.base,
        "base_label": report.base_label, "targets": list(report.targets), "compared": list(report.compared),
        "compiled": report.compiled, "cached": report.cached, "seconds": round(report.seconds, 2),
        "headers": _headers_json(report), "modules": modules,
    }


def _headers_json(report: BuildReport) -> dict:
    """Where the third-party headers came from: "tree" when the tree holds every folder the flags name."""
    headers = report.headers
    if headers is None:
        return {"source": "tree", "folders": [], "installed": None, "wheel": None, "versions": None}
    return {
        "source": headers.kind, "folders": headers.folders, "installed": headers.installed or None,
        "wheel": headers.wheel or None, "versions": headers.versions or None,
    }
