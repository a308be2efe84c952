"""Select the three held-out vLLM arch-gate hunks by the written rule of bench/heldout/vllm/README.md.

Walks consecutive PyPI releases of vLLM (wheels read in place, nothing extracted), diffs `vllm/**/*.py`, and writes
`selected.md` and `case_N.expected.diff` into --out.

    python bench/heldout/vllm/select_hunks.py --out bench/heldout/vllm
"""

from __future__ import annotations

import argparse
import difflib
import re
import subprocess
import sys
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
ROW = re.compile(r"^\s*(\d{2,3})\s*:")
DICT_HEAD = re.compile(r"^(\s*)([A-Za-z_][\w.]*)\s*(?::[^=]*)?=\s*\{")
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


def atoms(line: str, is_row: bool) -> list[tuple[str, str]]:
    text = strip_comment(line)
    major_ok = bool(re.search(r"\bmajor\b|\[0\]", text))
    out: list[tuple[str, str]] = []
    if is_row:
        row = ROW.match(text)
        assert row
        out.append(("row", row.group(1)))
        text = text[row.end():]
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


def keyed_rows(lines: list[str]) -> set[int]:
    """0-based indices of the capability-keyed dict rows of a file (README: "capability-keyed dict row")."""
    rows = set()
    for i, line in enumerate(lines):
        row = ROW.match(line)
        if not row or int(row.group(1)) not in CAPS:
            continue
        indent = len(line) - len(line.lstrip())
        for j in range(i - 1, -1, -1):
            stripped = lines[j].strip()
            if not stripped or stripped.startswith("#") or len(lines[j]) - len(lines[j].lstrip()) >= indent:
                continue
            head = DICT_HEAD.match(lines[j])  # the first less indented line above: the dict's own head, or no name
            if head:
                name = head.group(2)
                uses = [
                    k for k, other in enumerate(lines)
                    if k != j and re.search(rf"(?<![\w.]){re.escape(name)}\b", other)
                    and ("capabilit" in other or "to_int()" in other)
                ]
                if uses:
                    rows.add(i)
            break
    return rows


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
    rows_b, rows_a = keyed_rows(before), keyed_rows(after)
    out: list[dict] = []
    bi = ai = 0
    for line in diff:
        if line.startswith("@@"):
            m = re.match(r"@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@", line)
            assert m
            b0, a0 = int(m.group(1)), int(m.group(3))
            bi = b0 - 1 if m.group(2) != "0" else b0
            ai = a0 - 1 if m.group(4) != "0" else a0
            out.append({"path": name, "header": line, "lines": [], "removed": [], "added": [], "ctx_gate": [False, False]})
            continue
        h = out[-1]
        h["lines"].append(line)
        body = line[1:]
        if line.startswith("-"):
            h["removed"].append((body, is_gate(body) or bi in rows_b, bi in rows_b))
            bi += 1
        elif line.startswith("+"):
            h["added"].append((body, is_gate(body) or ai in rows_a, ai in rows_a))
            ai += 1
        else:
            if is_gate(body) or bi in rows_b:
                h["ctx_gate"][0] = True
            if is_gate(body) or ai in rows_a:
                h["ctx_gate"][1] = True
            bi += 1
            ai += 1
    return out


def side_atoms(side: list[tuple[str, bool, bool]]) -> Counter:
    c: Counter = Counter()
    for body, gate, row in side:
        if gate:
            c.update(atoms(body, row))
    return c


def select(pair: tuple[str, str]) -> list[dict]:
    old, new = pair
    before, after = read_py(wheel(old)), read_py(wheel(new))
    all_hunks = []
    for name in sorted(set(before) & set(after)):
        if before[name] != after[name]:
            all_hunks += hunks(name, before[name], after[name])
    chosen = []
    for k, h in enumerate(all_hunks):
        rem_g = [b for b, g, _ in h["removed"] if g]
        add_g = [b for b, g, _ in h["added"] if g]
        if not rem_g and not add_g:
            continue                                             # 1
        before_has = bool(rem_g) or h["ctx_gate"][0]
        after_has = bool(add_g) or h["ctx_gate"][1]
        if not (before_has and after_has):
            continue                                             # 2
        ra, aa = side_atoms(h["removed"]), side_atoms(h["added"])
        if ra == aa:
            continue                                             # 3
        others = [o for j, o in enumerate(all_hunks) if j != k]
        removed_elsewhere = Counter(b.strip() for o in others for b, _, _ in o["removed"])
        added_elsewhere = Counter(b.strip() for o in others for b, _, _ in o["added"])
        if add_g and not (Counter(b.strip() for b in add_g) - removed_elsewhere):
            continue                                             # 4 moved in
        if rem_g and not (Counter(b.strip() for b in rem_g) - added_elsewhere):
            continue                                             # 4 moved out
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
