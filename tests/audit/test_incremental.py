"""audit.incremental: after a file changes, a scan with the cache makes only that file's records again when nothing
the assembly read depends on it, and assembles the whole tree when something does; either way the result is the
bytes a cold scan gives (issue 35, decision 5). Trees in FlashInfer's shape (tests/test_scan.py `flashinfer`)."""

from __future__ import annotations

import hashlib
import os
import shutil
import time
from pathlib import Path

import pytest

from codemods.audit import cache as cache_module
from codemods.audit.cache import CACHE_VERSION
from codemods.audit.scan import project_meanings, scan
from codemods.core.targets import project_files
from codemods.core.arch import Arch
from codemods.render.sarif import to_sarif
from codemods.render.scan_json import to_json
from codemods.render.scan_text import to_text
from test_scan import HEADER, NEW_GUARD, OLD_GUARD, flashinfer

SM120 = Arch.parse("sm_120")
OTHER = "csrc/standalone.cu"  # a file no JIT module compiles: the assembly never reads it
STANDALONE = """\
__global__ void k(int* out) {
#if __CUDA_ARCH__ >= 800
  out[0] = 1;
#endif
}
"""
ADDED_GUARD = """\
#if (defined(__CUDA_ARCH__) && (__CUDA_ARCH__ >= 900) && (__CUDA_ARCH__ < 1200))
__device__ void fence() { asm volatile("fence.proxy.async;"); }
#endif
"""
HELPER_PY = "def helper(x):\n    return x + 1\n"


def _age(root: Path, seconds: float = 100.0) -> None:
    """Every file modified `seconds` ago: the cache trusts a stamp only well before its index was written."""
    past = time.time() - seconds
    for path in root.rglob("*"):
        if path.is_file():
            os.utime(path, (past, past))


def _edit(root: Path, rel: str, text: str | None, seconds: float = 50.0) -> None:
    """Write (None: delete) one file and date it `seconds` ago: a change the index sees by its stamp."""
    path = root / rel
    if text is None:
        path.unlink()
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    past = time.time() - seconds
    os.utime(path, (past, past))


def _tree(tmp_path: Path) -> Path:
    root = flashinfer(tmp_path, extra={OTHER: STANDALONE, "flashinfer/helper.py": HELPER_PY})
    _age(root)
    return root


def _rendered(result) -> tuple[str, str, str]:
    return to_json(result), to_text(result, verbose=True), str(to_sarif(result))


def _rescan(root: Path, cache: Path):
    """A scan with the cache, and a cold one: the first must render as the second does."""
    warm = scan(root, SM120, cache=cache)
    cold = scan(root, SM120)
    assert _rendered(warm) == _rendered(cold)
    return warm


def test_a_changed_file_no_module_compiles_is_the_only_one_made_again_and_its_new_gate_appears(tmp_path):
    root, cache = _tree(tmp_path), tmp_path / "cache"
    first = scan(root, SM120, cache=cache)
    assert first.stats["incremental"] is False
    _edit(root, OTHER, STANDALONE + ADDED_GUARD)
    again = _rescan(root, cache)
    assert again.stats["incremental"] is True
    assert again.stats["analysed"] == 1  # only the changed file was read
    lines = [g["line"] for g in again.gates if g["file"] == OTHER]
    assert lines == [2, 6]  # the added guard is reported
    added = next(g for g in again.gates if g["file"] == OTHER and g["line"] == 6)
    assert added["excludes_arch"] is True
    hazards = [h for h in again.hazards if h["file"] == OTHER]
    assert [h["kind"] for h in hazards] == []  # fence.proxy.async is on sm_120: no unsupported instruction
    assert again.gates != first.gates


def test_an_instruction_the_arch_lacks_in_a_changed_file_is_a_hazard_as_a_cold_scan_says(tmp_path):
    root, cache = _tree(tmp_path), tmp_path / "cache"
    scan(root, SM120, cache=cache)
    wgmma = "#if __CUDA_ARCH__ >= 900\n__device__ void w() { asm volatile(\"wgmma.fence.sync.aligned;\"); }\n#endif\n"
    _edit(root, OTHER, STANDALONE + wgmma)
    again = _rescan(root, cache)
    assert again.stats["incremental"] is True
    assert [h["kind"] for h in again.hazards if h["file"] == OTHER] == ["unsupported-instruction"]


def test_a_header_a_jit_module_compiles_makes_the_whole_tree_assembled_again(tmp_path):
    root, cache = _tree(tmp_path), tmp_path / "cache"
    before = scan(root, SM120, cache=cache)
    assert [h for h in before.hazards if h["kind"] == "empty-kernel"] == []
    _edit(root, "flashinfer/jit/comm.py", (root / "flashinfer/jit/comm.py").read_text().replace("[9, 10]", "[9, 10, 12]"))
    again = _rescan(root, cache)
    assert again.stats["incremental"] is False
    assert [h["line"] for h in again.hazards if h["kind"] == "empty-kernel"] == [6, 10]  # the JIT list now admits sm_120
    _edit(root, HEADER, (root / HEADER).read_text().replace(OLD_GUARD, NEW_GUARD), seconds=40)
    fixed = _rescan(root, cache)
    assert fixed.stats["incremental"] is False  # the header is in trtllm_comm's closure
    assert [h for h in fixed.hazards if h["kind"] == "empty-kernel"] == []


def test_a_header_touched_but_unchanged_is_answered_without_assembly(tmp_path):
    root, cache = _tree(tmp_path), tmp_path / "cache"
    first = scan(root, SM120, cache=cache)
    os.utime(root / HEADER)  # `touch`: same bytes, stamped now
    again = _rescan(root, cache)
    assert again.stats["incremental"] is True
    assert _rendered(again) == _rendered(first)


def test_a_python_file_that_gains_a_gate_makes_the_tree_assembled_again(tmp_path):
    root, cache = _tree(tmp_path), tmp_path / "cache"
    scan(root, SM120, cache=cache)
    _edit(root, "flashinfer/helper.py", HELPER_PY + "\n\nSUPPORTED = dict(supported_major_versions=[9, 10])\n")
    again = _rescan(root, cache)
    assert again.stats["incremental"] is False
    assert [g["kind"] for g in again.gates if g["file"] == "flashinfer/helper.py"] == ["python_arch_list"]


def test_a_python_file_without_gates_and_a_deleted_file_are_patched(tmp_path):
    root, cache = _tree(tmp_path), tmp_path / "cache"
    scan(root, SM120, cache=cache)
    _edit(root, "flashinfer/helper.py", HELPER_PY + "\n\ndef other():\n    return 2\n")
    _edit(root, OTHER, None)
    again = _rescan(root, cache)
    assert again.stats["incremental"] is True
    assert [g for g in again.gates if g["file"] == OTHER] == []


@pytest.mark.parametrize("settings", [{"hazards": False}, {"universe": (Arch.parse("sm_90"), SM120)}], ids=["gates-only", "universe"])
def test_a_scan_with_other_settings_is_patched_from_its_own_last_result(tmp_path, settings):
    root, cache = _tree(tmp_path), tmp_path / "cache"
    scan(root, SM120, cache=cache)
    scan(root, SM120, cache=cache, **settings)
    _edit(root, OTHER, STANDALONE + ADDED_GUARD)
    warm, cold = scan(root, SM120, cache=cache, **settings), scan(root, SM120, **settings)
    assert warm.stats["incremental"] is True
    assert _rendered(warm) == _rendered(cold)


def test_a_whole_assembly_reads_again_the_files_whose_results_the_cache_pruned(tmp_path):
    root, cache = _tree(tmp_path), tmp_path / "cache"
    scan(root, SM120, cache=cache)
    for folder in cache.glob("v*/objects"):
        shutil.rmtree(folder)  # what prune_cache does to the oldest entries
    _edit(root, "flashinfer/helper.py", HELPER_PY + "\n\nSUPPORTED = dict(supported_major_versions=[9, 10])\n")
    again = _rescan(root, cache)
    assert again.stats["incremental"] is False
    assert again.stats["analysed"] > 1  # the unchanged files with gates were read again
    assert any(g["file"] == HEADER for g in again.gates)


# ---------------------------------------------------------------- the project's predicate meanings

UTILS_PY = """\
import torch


def is_sm120a_supported(device=None) -> bool:
    major, minor = torch.cuda.get_device_capability(device)
    return major == {major}
"""
USER_PY = """\
from flashinfer.utils import is_sm120a_supported


def check_supported():
    if not is_sm120a_supported():
        raise RuntimeError("needs an SM120 GPU")
"""


def test_a_warm_scan_reads_the_predicates_again_when_their_file_changes(tmp_path):
    root = flashinfer(tmp_path, extra={"flashinfer/utils.py": UTILS_PY.format(major=12), "flashinfer/user.py": USER_PY})
    _age(root)
    cache = tmp_path / "cache"
    cold = project_meanings(root)
    assert cold is not None and (12, 0) in cold["is_sm120a_supported"].caps and (10, 0) not in cold["is_sm120a_supported"].caps
    assert project_meanings(root, cache) == cold  # written
    assert list((cache / f"v{CACHE_VERSION}" / "meanings").glob("*.json"))
    assert project_meanings(root, cache) == cold  # read back: the same meanings
    first = scan(root, SM120, cache=cache)
    gate = next(g for g in first.gates if g["file"] == "flashinfer/user.py")
    assert "sm_120" in gate["admits"]

    _edit(root, "flashinfer/utils.py", UTILS_PY.format(major=10))  # the predicate now means SM10x
    changed = project_meanings(root, cache)
    assert changed == project_meanings(root)
    assert (12, 0) not in changed["is_sm120a_supported"].caps and (10, 0) in changed["is_sm120a_supported"].caps
    again = _rescan(root, cache)  # renders as a cold scan does
    gate = next(g for g in again.gates if g["file"] == "flashinfer/user.py")
    assert "sm_120" not in gate["admits"]

    _edit(root, "flashinfer/utils.py", None)  # gone: the project's table says what it means again
    gone = project_meanings(root, cache)
    assert gone == project_meanings(root)
    assert gone is not None and gone["is_sm120a_supported"].where == "targets/projects/flashinfer.toml"
    assert changed["is_sm120a_supported"].where == "flashinfer/utils.py:4"
    _rescan(root, cache)


def test_an_unreadable_meanings_memo_is_read_again_from_the_files(tmp_path):
    root = flashinfer(tmp_path, extra={"flashinfer/utils.py": UTILS_PY.format(major=12)})
    cache = tmp_path / "cache"
    expected = project_meanings(root, cache)
    for memo in (cache / f"v{CACHE_VERSION}" / "meanings").glob("*.json"):
        memo.write_bytes(b'{"files": [["flashinfer/utils.py", 3]], "meanings": ')  # cut short
    assert project_meanings(root, cache) == expected


def test_the_cache_key_holds_the_compiled_lexer_source():
    package = Path(cache_module.__file__).resolve().parents[1]
    assert (package / "cpp" / "_lex.c").is_file()
    digest = hashlib.sha256(str(CACHE_VERSION).encode())
    for path in sorted([*package.rglob("*.py"), *package.rglob("*.c")]):
        digest.update(path.relative_to(package).as_posix().encode() + b"\0" + path.read_bytes())
    for path in project_files():
        digest.update(path.name.encode() + b"\0" + path.read_bytes())
    assert cache_module.code_fingerprint() == digest.hexdigest()[:32]
