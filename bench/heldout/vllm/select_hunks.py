"""Select the three held-out vLLM arch-gate hunks by the written rule of bench/heldout/vllm/README.md.

Walks consecutive PyPI releases of vLLM (wheels read in place, nothing extracted), diffs `vllm/**/*.py`, and writes
`selected.md` and `case_N.expected.diff` into --out.

    python bench/heldout/vllm/select_hunks.py --out bench/heldout/vllm
"""

from __future__ import annotations

import argparse
import ast
import difflib
import io
import re
import subprocess
import sys
import tokenize
import zipfile
from collections import Counter
from pathlib import Path

RELEASES = (
    "0.11.0 0.11.1 0.11.2 0.12.0 0.13.0 0.14.0 0.14.1 0.15.0 0.15.1 0.16.0 0.17.0 0.17.1 0.18.0 0.18.1 "
    "0.19.0 0.19.1 0.20.0 0.20.1 0.20.2 0.21.0 0.22.0 0.22.1 0.23.0 0.24.0 0.25.0 0.25.1 0.26.0 0.27.0 "
    "0.27.1 0.28.0 0.29.0 0.30.0 0.31.0 0.32.0 0.33.0 0.34.0"
).split()
WANTED = 3
WHEELS = Path.home() / ".cache" / "codemod-tests" / "wheels"

CAPS = {70, 72, 75, 80, 86, 87, 89, 90, 100, 101, 103, 107, 110, 120, 121, 122}
GATE = re.compile(
    r"has_device_capability|is_device_capability(?:_family)?|get_device_capability|device_capability"
    r"|\bto_int\(\)|__CUDA_ARCH__|\bsm_?\d{2,3}[af]?\b"
    r"|\bcapability\b\s*(?:==|!=|>=|<=|<|>)"
    r"|\b(?:major|minor)\b\s*(?:==|!=|>=|<=|<|>|in\b|not\s+in\b)"
    r"|\[0\]\s*(?:==|!=|>=|<=|<|>)\s*\d"
)
TOK = re.compile(
    r"(?P<pred>has_device_capability|is_device_capability_family|is_device_capability)"
    r"|(?P<op>==|!=|>=|<=|<|>|\bnot\s+in\b|\bin\b)"
    r"|(?P<reset>\band\b|\bor\b|\bif\b|\belif\b|\breturn\b|=)"
    r"|(?P<devcap>DeviceCapability\(\s*(?:major\s*=\s*)?(?P<dM>\d+)\s*,\s*(?:minor\s*=\s*)?(?P<dm>\d+)\s*\))"
    r"|(?P<tuple>\(\s*(?P<tM>\d{1,2})\s*,\s*(?P<tm>\d)\s*\))"
    r"|(?P<sm>\bsm_?(?P<smn>\d{2,3})(?P<sms>[af]?)\b)"
    r"|(?P<dotted>[\"'](?P<qM>\d{1,2})\.(?P<qm>\d)(?P<qs>[af]?)[\"'])"
    r"|(?P<num>\b\d+\b)"
)
PRED_KIND = {"has_device_capability": ">=", "is_device_capability": "==", "is_device_capability_family": "family"}


def strip_comment(line: str) -> str:
    quote = None
    for i, ch in enumerate(line):
        if quote:
            if ch == quote:
                quote = None
        elif ch in "\"'":
            quote = ch
        elif ch == "#":
            return line[:i]
    return line


def cap_of(n: int, major_ok: bool) -> int | None:
    if n in CAPS:
        return n
    if n >= 700 and n % 10 == 0 and n // 10 in CAPS:
        return n // 10
    if major_ok and 7 <= n <= 13:
        return n * 10
    return None


def atoms(text: str) -> list[tuple[str, str]]:
    major_ok = bool(re.search(r"\bmajor\b|\[0\]", text))
    out: list[tuple[str, str]] = []
    kind = "ref"
    for m in TOK.finditer(text):
        if m.group("pred"):
            kind = PRED_KIND[m.group("pred")]
        elif m.group("op"):
            kind = re.sub(r"\s+", " ", m.group("op"))
        elif m.group("reset"):
            kind = "ref"
        elif m.group("devcap"):
            out.append((kind, str(int(m.group("dM")) * 10 + int(m.group("dm")))))
        elif m.group("tuple"):
            if 7 <= int(m.group("tM")) <= 13:
                out.append((kind, str(int(m.group("tM")) * 10 + int(m.group("tm")))))
        elif m.group("sm"):
            out.append((kind if kind != "ref" else "sm", m.group("smn") + m.group("sms")))
        elif m.group("dotted"):
            if 7 <= int(m.group("qM")) <= 13:
                out.append((kind, str(int(m.group("qM")) * 10 + int(m.group("qm"))) + m.group("qs")))
        elif m.group("num"):
            cap = cap_of(int(m.group("num")), major_ok)
            if cap is not None:
                out.append((kind, str(cap)))
    return out


ARCH_STRING = re.compile(r"^[\"']+(?:sm_?)?\d{2,3}[af]?[\"']+$|^[\"']+\d{1,2}\.\d[af]?[\"']+$")


def code_only(source: str) -> list[str]:
    """The file's lines with comments blanked and string literals replaced by `S`, except a literal that is only an
    arch spelling ("sm_90a", "100", "9.0a"), which is kept (README: rule v2, 2)."""
    lines = source.splitlines()
    chars = [list(line) for line in lines]
    try:
        tokens = list(tokenize.generate_tokens(io.StringIO(source).readline))
    except (tokenize.TokenError, IndentationError, SyntaxError):
        return lines
    for tok in tokens:
        if tok.type not in (tokenize.STRING, tokenize.COMMENT):
            continue
        if tok.type == tokenize.STRING and ARCH_STRING.match(tok.string):
            continue
        (r0, c0), (r1, c1) = tok.start, tok.end
        for r in range(r0, r1 + 1):
            row = chars[r - 1]
            lo = c0 if r == r0 else 0
            hi = c1 if r == r1 else len(row)
            for c in range(lo, min(hi, len(row))):
                row[c] = " "
        if tok.type == tokenize.STRING and c0 < len(chars[r0 - 1]):
            chars[r0 - 1][c0] = "S"
    return ["".join(row) for row in chars]


def units(source: str) -> list[dict]:
    """Statements as the rule reads them: a simple statement whole, a compound one by its header (an `if`/`elif`/
    `while` by its test, a `def`/`class` by its decorators and signature), each with its code-only text."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return []
    code = code_only(source)
    out = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.stmt):
            continue
        start, end = node.lineno, node.end_lineno or node.lineno
        if isinstance(node, (ast.If, ast.While)):
            end = node.test.end_lineno or start
        elif hasattr(node, "body") and isinstance(node.body, list) and node.body:
            decos = [d.lineno - 1 for d in getattr(node, "decorator_list", [])]  # "@" is one line above
            start = min([start, *decos])
            end = max(start, node.body[0].lineno - 1)
        text = " ".join(code[start - 1 : end])
        out.append({"start": start, "end": end, "text": text, "node": node})
    return out


def keyed_dict(unit: dict, code: str) -> list[str]:
    """The capability rows of an assignment of a dict that the file looks up on a line saying `capabilit` or
    `to_int()` (README: capability-keyed dict row); [] when the unit is no such assignment."""
    node = unit["node"]
    value = getattr(node, "value", None)
    targets = node.targets if isinstance(node, ast.Assign) else [node.target] if isinstance(node, ast.AnnAssign) else []
    if not isinstance(value, ast.Dict) or len(targets) != 1 or not isinstance(targets[0], (ast.Name, ast.Attribute)):
        return []
    name = targets[0].id if isinstance(targets[0], ast.Name) else targets[0].attr
    uses = [
        line for k, line in enumerate(code.splitlines(), 1)
        if not (unit["start"] <= k <= unit["end"]) and re.search(rf"(?<!\w){re.escape(name)}\b", line)
        and ("capabilit" in line or "to_int()" in line)
    ]
    if not uses:
        return []
    return [str(k.value) for k in value.keys if isinstance(k, ast.Constant) and type(k.value) is int and k.value in CAPS]


def gate_units(source: str) -> list[dict]:
    out = []
    for u in units(source):
        rows = keyed_dict(u, source)
        if rows or GATE.search(u["text"]):
            text = u["text"]
            u["atoms"] = Counter(atoms(text)) + Counter(("row", r) for r in rows)
            u["tokens"] = re.findall(r"\w+|[^\w\s]", text)
            out.append(u)
    return out


def touched(gunits: list[dict], lines: set[int], points: set[int]) -> list[dict]:
    """Gate units overlapping the changed lines of one side, or holding strictly inside them a point where the other
    side inserted lines (a row added inside a dict)."""
    return [
        u for u in gunits
        if any(u["start"] <= k <= u["end"] for k in lines) or any(u["start"] <= p < u["end"] for p in points)
    ]


def is_gate(line: str) -> bool:
    return bool(GATE.search(strip_comment(line)))


def wanted(name: str) -> bool:
    if not name.startswith("vllm/") or not name.endswith(".py"):
        return False
    parts = name.split("/")
    base = parts[-1]
    return not (
        any(p in ("tests", "test") for p in parts[:-1])
        or base.startswith("test_") or base.endswith("_test.py") or base == "conftest.py"
    )


def wheel(version: str) -> Path:
    def found() -> Path | None:
        return next((p for p in sorted(WHEELS.glob(f"vllm-{version}-*.whl"))), None)

    path = found()
    if path is None:
        subprocess.run(
            [sys.executable, "-m", "pip", "download", "-q", "--no-deps", f"vllm=={version}", "-d", str(WHEELS)],
            check=True,
        )
        path = found()
    assert path is not None, version
    return path


def read_py(path: Path) -> dict[str, list[str]]:
    with zipfile.ZipFile(path) as z:
        return {n: z.read(n).decode("utf-8", "replace").splitlines(keepends=True) for n in z.namelist() if wanted(n)}


def hunks(name: str, before: list[str], after: list[str]) -> list[dict]:
    diff = list(difflib.unified_diff(before, after, n=3))[2:]
    out: list[dict] = []
    bi = ai = 0
    for line in diff:
        if line.startswith("@@"):
            m = re.match(r"@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@", line)
            assert m
            b0, a0 = int(m.group(1)), int(m.group(3))
            bi = b0 - 1 if m.group(2) != "0" else b0
            ai = a0 - 1 if m.group(4) != "0" else a0
            out.append({"path": name, "header": line, "lines": [], "removed": set(), "added": set(), "bpoints": set(), "apoints": set()})
            continue
        h = out[-1]
        h["lines"].append(line)
        if line.startswith("-"):
            bi += 1
            h["removed"].add(bi)
            h["apoints"].add(ai)
        elif line.startswith("+"):
            ai += 1
            h["added"].add(ai)
            h["bpoints"].add(bi)
        else:
            bi += 1
            ai += 1
    return out


def paired_changes(bunits: list[dict], aunits: list[dict]) -> list[tuple[dict, dict]]:
    """Pair before and after gate units one to one, most similar first (token ratio >= 0.5); return the pairs whose
    atoms differ (README: rule v2, 3)."""
    scored = sorted(
        ((difflib.SequenceMatcher(None, b["tokens"], a["tokens"], autojunk=False).ratio(), i, j) for i, b in enumerate(bunits) for j, a in enumerate(aunits)),
        reverse=True,
    )
    used_b: set[int] = set()
    used_a: set[int] = set()
    changed = []
    for ratio, i, j in scored:
        if ratio < 0.5 or i in used_b or j in used_a:
            continue
        used_b.add(i)
        used_a.add(j)
        if bunits[i]["atoms"] != aunits[j]["atoms"]:
            changed.append((bunits[i], aunits[j]))
    return changed


def select(pair: tuple[str, str]) -> list[dict]:
    old, new = pair
    before, after = read_py(wheel(old)), read_py(wheel(new))
    chosen = []
    for name in sorted(set(before) & set(after)):
        if before[name] == after[name]:
            continue
        bsrc, asrc = "".join(before[name]), "".join(after[name])
        bgates, agates = gate_units(bsrc), gate_units(asrc)
        if not bgates or not agates:
            continue
        for h in hunks(name, before[name], after[name]):
            bu = touched(bgates, h["removed"], h["bpoints"])
            au = touched(agates, h["added"], h["apoints"])
            changed = paired_changes(bu, au)
            if changed:
                ra = sum((b["atoms"] for b, _ in changed), Counter())
                aa = sum((a["atoms"] for _, a in changed), Counter())
                chosen.append({**h, "pair": pair, "atoms_before": ra, "atoms_after": aa})
    return chosen


def fmt_atoms(c: Counter) -> str:
    return ", ".join(f"{k} {v}" + (f" x{n}" if n > 1 else "") for (k, v), n in sorted(c.items())) or "-"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args()
    cases: list[dict] = []
    for pair in zip(RELEASES, RELEASES[1:]):
        print(f"pair {pair[0]} -> {pair[1]}", file=sys.stderr)
        cases += select(pair)
        if len(cases) >= WANTED:
            break
    cases = cases[:WANTED]
    md = ["# The selected hunks (generated by select_hunks.py; do not edit)", ""]
    for n, c in enumerate(cases, 1):
        path = c["path"]
        diff = f"diff --git a/{path} b/{path}\n--- a/{path}\n+++ b/{path}\n{c['header']}" + "".join(
            line if line.endswith("\n") else line + "\n\\ No newline at end of file\n" for line in c["lines"]
        )
        (args.out / f"case_{n}.expected.diff").write_text(diff)
        md += [
            f"## case {n}: vllm {c['pair'][0]} -> {c['pair'][1]}, `{path}`",
            "",
            f"atoms before: {fmt_atoms(c['atoms_before'])}  ",
            f"atoms after: {fmt_atoms(c['atoms_after'])}",
            "",
            "```diff",
            diff.rstrip("\n"),
            "```",
            "",
        ]
        print(f"case {n}: {c['pair'][0]} -> {c['pair'][1]}  {path}  {c['header'].strip()}")
    (args.out / "selected.md").write_text("\n".join(md))


if __name__ == "__main__":
    main()
