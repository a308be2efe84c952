"""audit.finder: ripgrep answers what the prefilter's byte tests would, on the bytes as they are."""

from __future__ import annotations

import re

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from codemods.audit import finder, prefilter
from codemods.core.errors import InstallBroken
from codemods.gates.python import python_predicate

# (file, bytes): each names why it is here. The regex is runtime_check_pattern, as Python's re reads it.
CASES = [
    ("same_line.cu", b"if (sm_version >= 90) { fast(); }\n"),
    ("across_lines.cu", b"if (sm_version\n    >=\n    90) {}\n"),  # \s spans newlines in re: rg --multiline
    ("reversed.h", b"return 100 <= props.major;\n"),
    ("check_macro.cuh", b"TORCH_CHECK_GE(\n  cc_major, 9);\n"),
    ("word_inside.cu", b"int smem_size >= 4;\nasm >= 3;\n"),  # \b: `smem`, `asm` are no `sm`
    ("after_nul.cu", b"\0\x01binary header\n" + b"x" * 9000 + b"\nif (sm >= 90) {}\n"),  # --text: a NUL stops nothing
    ("latin1.cu", b"// caf\xe9\nif (major == 9) {}\n"),  # --no-unicode: invalid UTF-8 is bytes
    ("bom16.h", b"\xff\xfei\x00f\x00 \x00(\x00"),  # --encoding none: no UTF-16 sniffing
    ("unicode_word.cu", "int \u00e9sm >= 9;\n".encode()),  # ASCII \b: a non-ASCII byte is no word byte, so `sm` is a word
    ("nothing.cu", b"#include <cuda.h>\nint main() { return 0; }\n"),
    ("-dash.cu", b"if (sm >= 90) {}\n"),  # a path that looks like an option
    ("spaced name.h", b"if (sm_version >= 90) {}\n"),
    ("plain.py", b"if major >= 9:\n    pass\n"),  # a Python file: never searched for runtime checks
]


@pytest.fixture
def tree(tmp_path):
    for rel, data in CASES:
        (tmp_path / rel).write_bytes(data)
    (tmp_path / "arch.cuh").write_bytes(b"#if __CUDA_ARCH__ >= 900\n#endif\n")
    (tmp_path / "jit.py").write_bytes(b"spec = gen_jit_spec('x', [])\n")
    (tmp_path / "cap.py").write_bytes(b"major, _ = torch.cuda.get_device_capability()\n")
    return tmp_path


def test_runtime_checks_are_the_files_pythons_re_matches(tree):
    pattern = re.compile(prefilter.runtime_check_pattern())
    rels = [rel for rel, _ in CASES]
    found = finder.find(tree, rels)
    expected = {rel for rel, data in CASES if prefilter.is_c_file(rel) and pattern.search(data)}
    assert found.runtime == expected
    assert {"same_line.cu", "across_lines.cu", "reversed.h", "check_macro.cuh", "after_nul.cu", "latin1.cu", "unicode_word.cu"} <= expected
    assert not {"word_inside.cu", "nothing.cu", "plain.py"} & found.runtime


def test_candidates_are_every_file_holding_a_token(tree):
    rels = [rel for rel, _ in CASES] + ["arch.cuh", "jit.py", "cap.py"]
    found = finder.find(tree, rels)
    tokens = [re.escape(t) for t in prefilter.FINDER_TOKENS]
    holding = {rel for rel in rels if re.search(b"|".join(tokens), (tree / rel).read_bytes())}
    assert found.candidates == holding | found.runtime
    assert {"arch.cuh", "jit.py", "cap.py"} <= found.candidates
    assert "nothing.cu" not in found.candidates and "bom16.h" not in found.candidates


def test_an_unreadable_file_is_left_to_the_worker_that_reads_it(tree):
    (tree / "locked.cu").write_bytes(b"nothing here\n")
    (tree / "locked.cu").chmod(0)
    try:
        if _readable(tree / "locked.cu"):
            pytest.skip("running as a user who reads any file")
        found = finder.find(tree, ["locked.cu", "nothing.cu"])
    finally:
        (tree / "locked.cu").chmod(0o644)
    assert "locked.cu" in found.candidates


def _readable(path) -> bool:
    try:
        path.read_bytes()
    except PermissionError:
        return False
    return True


def test_many_files_are_searched_in_batches(tree, monkeypatch):
    monkeypatch.setattr(finder, "_ARGUMENT_BYTES", 64)  # a few paths per rg command
    rels = [rel for rel, _ in CASES] + ["arch.cuh", "jit.py", "cap.py"]
    assert finder.find(tree, rels) == finder.find(tree, list(reversed(rels)))
    assert "arch.cuh" in finder.find(tree, rels).candidates


def test_without_rg_scan_says_the_install_is_broken(monkeypatch, tmp_path):
    monkeypatch.setattr(finder.sysconfig, "get_path", lambda name: str(tmp_path))
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(InstallBroken) as caught:
        finder.find(tmp_path, ["a.cu"])
    assert caught.value.exit_code == 14 and "-m pip install ripgrep==14.1.0" in caught.value.hint


# One file per Python test of may_hold_gates: each must be found by the finder's literal tokens.
PYTHON_SHAPES = {
    "helper.py": b"major, minor = get_compute_capability(q.device)\nif major == 12 and minor == 0:\n    pass\n",
    "sm.py": b"if get_device_sm() == 120:\n    pass\n",
    "arch_string.py": b"if sm_version != 'sm_120':\n    raise ValueError(sm_version)\n",
    "compute_string.py": b'if target in ("compute_100", "compute_103"):\n    pass\n',
    "arch_map.py": b'_COLUMNS = {"sm100": 512, "sm120": 512}\n\ndef cols(cc):\n    return _COLUMNS[cc]\n',
    "cc_map.py": b'_COLUMNS = {"10.0": 512, "12.0": 512}\n\ndef cols(cc):\n    return _COLUMNS[cc]\n',
    "arch_table.py": b"def k_major():\n    return {'90a': True, '100a': False}[get_device_arch()]\n",
    "predicate.py": b"def is_hopper_tma_supported():\n    return True\n",
    "blackwell.py": b"def has_blackwell_tmem():\n    return major == 10\n",
    "pairs.py": b"class R:\n    supported_capabilities = {(9, 0), (10, 0)}\n",
    "or_chain.py": b"ok = is_sm90a_supported(d) or is_sm100a_supported(d)\n",
}


@pytest.mark.parametrize("rel", sorted(PYTHON_SHAPES))
def test_every_python_file_the_prefilter_passes_holds_a_finder_token(tmp_path, rel):
    data = PYTHON_SHAPES[rel]
    assert prefilter.may_hold_gates(rel, data, True, False), "the shape is one the prefilter passes"
    (tmp_path / rel).write_bytes(data)
    assert rel in finder.find(tmp_path, [rel]).candidates


@pytest.mark.real
@pytest.mark.parametrize("project", ["flashinfer", "sglang"])
def test_the_finder_tokens_cover_every_file_the_prefilter_passes_in_a_release(real_unpacked, project):
    root = real_unpacked[project]
    passed = 0
    for path in root.rglob("*.py"):
        data = path.read_bytes()
        if prefilter.may_hold_gates(path.name, data, True, False):
            passed += 1
            assert any(token in data for token in prefilter.FINDER_TOKENS), path
    assert passed > 20


# ---------------------------------------------------------------- holding: which files hold a word (jit_users.Trees)

WORDS = [b"sm", b"major", b"sm_version", b"cuda", b"binary", b"caf", b"-dash", b"i", b"absent_word"]


@pytest.mark.parametrize("word", WORDS)
def test_holding_is_the_files_pythons_in_finds(tree, word):
    rels = [rel for rel, _ in CASES]
    assert finder.holding(tree, rels, word) == {rel for rel, data in CASES if word in data}


def test_holding_searches_in_batches_and_counts_an_unreadable_file(tree, monkeypatch):
    monkeypatch.setattr(finder, "_ARGUMENT_BYTES", 64)
    rels = [rel for rel, _ in CASES]
    assert finder.holding(tree, rels, b"sm") == {rel for rel, data in CASES if b"sm" in data}
    (tree / "locked.py").write_bytes(b"nothing\n")
    (tree / "locked.py").chmod(0)
    try:
        if _readable(tree / "locked.py"):
            pytest.skip("running as a user who reads any file")
        assert "locked.py" in finder.holding(tree, ["locked.py", "plain.py"], b"major")
    finally:
        (tree / "locked.py").chmod(0o644)


def test_holding_each_is_holding_word_by_word_in_one_search(tree, monkeypatch):
    rels = [rel for rel, _ in CASES]
    started = []
    real_start = finder._start
    monkeypatch.setattr(finder, "_start", lambda *args: started.append(args) or real_start(*args))
    found = finder.holding_each(tree, rels, [*WORDS, b"sm", b""])  # overlapping words ("sm", "sm_version"), twice
    assert len(started) == 1
    assert set(found) == {*WORDS, b""}
    for word in WORDS:
        assert found[word] == {rel for rel, data in CASES if word in data}, word
    assert found[b""] == set(rels)
    with pytest.raises(ValueError):
        finder.holding_each(tree, rels, [b"sm", "caf\u00e9".encode()])


def test_holding_takes_ascii_words_only(tree):
    with pytest.raises(ValueError):
        finder.holding(tree, ["latin1.cu"], "caf\u00e9".encode())
    assert finder.holding(tree, [], b"sm") == set()


_FRAGMENTS = st.sampled_from(
    ["is_sm", "has_sm", "is_", "has_", "sm", "_", "1", "2", "0", "a", "f", "_supported", "blackwell", "hopper", "is_blackwell",
     "if ", "elif ", "not ", "and ", "=", "==", " ", "\n", "(", ")", ".", "x", "def ", "async ", ":", "bool"]
)


@settings(max_examples=2000, deadline=None)
@given(st.lists(_FRAGMENTS, max_size=14).map("".join))
@example("if has_sm100():\n")
@example("use = is_sm120a_supported(dev)\n")
@example("assert not is_blackwell()\n")
@example("_is_sm90 = major == 9\n")
@example("def has_hopper():\n")
@example("async def is_sm100f_supported():\n")
def test_each_python_prefilter_literal_test_is_necessary_for_its_regex(text):
    """The literal tests before the regexes only skip what the regex could not match (they decide nothing)."""
    data = text.encode()
    for (kind, regex), literals in zip(prefilter.PYTHON_PREFILTERS, prefilter._PREFILTER_LITERALS):
        if regex.search(data):
            assert any(literal in data for literal in literals), (kind.__name__, data)
    if b"def" in data and python_predicate.PREFILTER.search(data):
        assert prefilter.defines_predicates(data), data
