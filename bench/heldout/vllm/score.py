"""Score the held-out vLLM recipes (bench/heldout/vllm/README.md, "Scoring"): run each case_N.toml on its before
release and compare the diff with case_N.expected.diff.

    python bench/heldout/vllm/score.py                      # codemod next to this Python
    python bench/heldout/vllm/score.py --codemod PATH --keep  # keep the trees under /tmp for a look
    python bench/heldout/vllm/score.py --self-check           # the scorer itself: git apply of each expected diff

Prints one line per case and a table in Markdown, for the README's results.
"""

from __future__ import annotations

import argparse
import importlib.util
import re
import shutil
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
CASE_HEAD = re.compile(r"^## case (\d+): vllm (\S+) -> (\S+), `([^`]+)`$", re.M)
REFUSED = {3: "cannot widen / not found", 6: "no such tree", 8: "recipe invalid"}
TIMEOUT = 900


def _selector():
    spec = importlib.util.spec_from_file_location("select_hunks", HERE / "select_hunks.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def changed_lines(diff: str) -> dict[str, list[str]]:
    """Per file (b/ path), the removed and added lines of a unified diff in order (which files a diff touches)."""
    out: dict[str, list[str]] = {}
    current = None
    for line in diff.splitlines():
        if line.startswith("diff --git "):
            current = line.split(" b/", 1)[1]
            out.setdefault(current, [])
        elif line.startswith(("--- ", "+++ ", "@@", "\\", "index ", "new file", "deleted file", "similarity", "rename ")):
            continue
        elif current is not None and line[:1] in "+-":
            out[current].append(line)
    return {k: v for k, v in out.items() if v}


def apply_hunk(before: str, expected: str) -> str:
    """The before file with the expected hunk applied: what line for line means, whatever lines a diff tool pairs."""
    lines = before.splitlines(keepends=True)
    body = expected.split("\n@@", 1)[1].split("\n", 1)
    m = re.match(r" -(\d+)(?:,(\d+))? \+\d+(?:,\d+)? @@", body[0])
    assert m, body[0]
    start = int(m.group(1)) - (0 if m.group(2) == "0" else 1)
    old, new = [], []
    for line in body[1].splitlines(keepends=True):
        if line.startswith("\\"):
            continue
        if line[:1] in " -":
            old.append(line[1:])
        if line[:1] in " +":
            new.append(line[1:])
    assert lines[start : start + len(old)] == old, "the expected hunk does not apply to the before release"
    return "".join(lines[:start] + new + lines[start + len(old) :])


def unpack(wheel: Path, into: Path) -> None:
    """Every member but compiled libraries (README: the .so files are hundreds of MB and hold no gate)."""
    with zipfile.ZipFile(wheel) as z:
        for info in z.infolist():
            if info.is_dir() or re.search(r"\.so(\.\d+)*$", info.filename):
                continue
            z.extract(info, into)


def git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True, text=True).stdout


def gate_statement_came_out(sel, path: str, before_src: str, upstream_src: str, produced_src: str, expected: str) -> str:
    """Whether each gate statement upstream changed in this hunk is in the produced file token for token (layout,
    comments and string contents aside): the measure of the gate edit itself when the hunk carries other edits."""
    header = next(line for line in expected.splitlines() if line.startswith("@@"))
    hunk = next(h for h in sel.hunks(path, before_src.splitlines(True), upstream_src.splitlines(True)) if h["header"].strip() == header.strip())
    pairs = sel.paired_changes(
        sel.touched(sel.gate_units(before_src), hunk["removed"], hunk["bpoints"]),
        sel.touched(sel.gate_units(upstream_src), hunk["added"], hunk["apoints"]),
    )
    produced = [u["tokens"] for u in sel.gate_units(produced_src)]
    found = sum(1 for _, a in pairs if a["tokens"] in produced)
    return f"{found}/{len(pairs)}"


def score_case(sel, n: int, old: str, new: str, path: str, codemod: str, keep: bool) -> dict:
    recipe = HERE / f"case_{n}.toml"
    expected = (HERE / f"case_{n}.expected.diff").read_text()
    work = Path(tempfile.mkdtemp(prefix=f"heldout-vllm-{n}-"))
    try:
        unpack(sel.wheel(old), work)
        git(work, "init", "-q", "-b", "main")
        git(work, "add", "-A")
        git(work, "-c", "user.name=heldout", "-c", "user.email=heldout@example.invalid", "commit", "-qm", f"vllm {old}")
        base = git(work, "rev-parse", "HEAD").strip()
        before_src = (work / path).read_text()
        command = ["git", "-C", str(work), "apply", str(HERE / f"case_{n}.expected.diff")] if codemod == "SELF-CHECK" else [
            codemod, "run", str(recipe), "--repo", str(work)
        ]
        try:
            run = subprocess.run(command, capture_output=True, text=True, timeout=TIMEOUT)
            code, out, err = run.returncode, run.stdout, run.stderr
        except subprocess.TimeoutExpired:
            code, out, err = None, "", f"timeout after {TIMEOUT} s"
        produced = git(work, "diff", "--no-color", base)
        produced_src = (work / path).read_text() if (work / path).exists() else ""
        with zipfile.ZipFile(sel.wheel(new)) as z:
            upstream_src = z.read(path).decode("utf-8", "replace")
        gate = gate_statement_came_out(sel, path, before_src, upstream_src, produced_src, expected)
        first = next((line.strip() for line in err.splitlines() if line.strip()), "")
        if code is None or "Traceback" in err or "internal error" in err.lower():
            verdict = "error"
        elif code == 0:
            only_file = set(changed_lines(produced)) == {path}
            verdict = "line-for-line" if only_file and produced_src == apply_hunk(before_src, expected) else "different edit"
        elif code in REFUSED:
            verdict = "refused-inexpressible"
        else:
            verdict = "error"
        return {
            "case": n, "pair": f"{old} -> {new}", "path": path, "exit": code, "verdict": verdict, "gate": gate,
            "message": first[:200], "produced": produced, "stdout": out, "stderr": err, "tree": str(work) if keep else None,
        }
    finally:
        if not keep:
            shutil.rmtree(work, ignore_errors=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--codemod", default=str(Path(sys.executable).with_name("codemod")))
    parser.add_argument(
        "--self-check", action="store_true", help="apply each expected diff with git apply instead of codemod: every case must score line-for-line"
    )
    parser.add_argument("--keep", action="store_true", help="keep each case's tree and print where")
    parser.add_argument("--show", action="store_true", help="print codemod's stderr and the produced diff per case")
    args = parser.parse_args()
    sel = _selector()
    if args.self_check:
        args.codemod = "SELF-CHECK"
    cases = CASE_HEAD.findall((HERE / "selected.md").read_text())
    results = [score_case(sel, int(n), old, new, path, args.codemod, args.keep) for n, old, new, path in cases]
    version = "(git apply)" if args.self_check else subprocess.run([args.codemod, "--version"], capture_output=True, text=True).stdout.strip()
    commit = subprocess.run(["git", "-C", str(HERE), "rev-parse", "--short", "HEAD"], capture_output=True, text=True).stdout.strip()
    for r in results:
        if args.show:
            print(f"--- case {r['case']} stderr\n{r['stderr']}\n--- case {r['case']} produced diff\n{r['produced']}")
        if r["tree"]:
            print(f"case {r['case']} tree: {r['tree']}")
    print(f"codemod {version}, checkout {commit}")
    print("| case | release pair | file | exit | result | upstream gate statement out | first line of stderr |")
    print("|---|---|---|---|---|---|---|")
    for r in results:
        msg = r["message"].replace("|", "\\|")
        print(f"| {r['case']} | {r['pair']} | `{r['path']}` | {r['exit']} | {r['verdict']} | {r['gate']} | {msg} |")
    exact = sum(r["verdict"] == "line-for-line" for r in results)
    print(f"\n{exact} of {len(results)} line for line")


if __name__ == "__main__":
    main()
