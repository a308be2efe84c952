"""doctor's needles: literal text every match of a rule contains, read from the pattern's text (the fast pre-check)."""

from __future__ import annotations

import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from codemods import doctor
from codemods.doctor.needles import required


@pytest.mark.parametrize("pattern, needles", [
    pytest.param("The server is fired up and ready to roll!", ("The server is fired up and ready to roll!",), id="plain-text"),
    pytest.param(r"Load weight begin\. ", ("Load weight begin. ",), id="escaped-punctuation-is-literal"),
    pytest.param(r"Rank \d+ scheduler is dead\. ", (" scheduler is dead. ",), id="longest-run-wins"),
    pytest.param("cudaErrorLaunchFailure|CUDA_ERROR_LAUNCH_FAILED", ("cudaErrorLaunchFailure", "CUDA_ERROR_LAUNCH_FAILED"),
                 id="top-level-alternatives-each-give-one"),
    pytest.param("CUDA error: (?:unknown error|out of memory)", ("unknown error", "out of memory"),
                 id="a-group-of-alternatives-beats-a-shorter-run"),
    pytest.param("x(?:abc)de", ("xabcde",), id="a-group-of-one-alternative-joins-the-run"),
    pytest.param("abcd(?:efg)?hij", ("abcd",), id="an-optional-group-breaks-the-run"),
    pytest.param("abcde+fgh", ("abcd",), id="a-repeated-character-breaks-the-run"),
    pytest.param("abcd{2}efghi", ("efghi",), id="a-counted-repeat-breaks-the-run"),
    pytest.param("a{}bcd", ("a{}bcd",), id="empty-braces-are-literal"),
    pytest.param(r"^(?=.*fmhaRunner\.cuh).*Unsupported architecture", ("Unsupported architecture",), id="lookahead-matches-no-text"),
    pytest.param("[Ww]atchdog thread", ("atchdog thread",), id="a-class-is-not-literal"),
    pytest.param("abc[.]def", ("abc.def",), id="a-one-character-class-is-literal"),
    pytest.param(r"\x41BC", ("ABC",), id="hex-escape"),
    pytest.param(r"ab(?#note)cd", ("abcd",), id="a-comment-is-nothing"),
    pytest.param("abc|de", (), id="one-alternative-too-short"),
    pytest.param("ab", (), id="too-short"),
    pytest.param("(?i)server ready", (), id="case-insensitive-no-needles"),
    pytest.param("(?i:server) ready", (" ready",), id="case-insensitive-group-is-not-literal"),
    pytest.param("(?x) server  ready", (), id="verbose-no-needles"),
    pytest.param(r"(abc)\1def", (), id="backreference-no-needles"),
    pytest.param(r"(?P<a>x)?(?(a)abc|abd)", (), id="conditional-no-needles"),
    pytest.param("(unclosed", (), id="not-a-regex"),
])
def test_needles(pattern, needles):
    assert required(pattern) == needles


def test_the_builtin_rules_get_needles():
    rules = doctor.load_rules()
    assert {r.id for r in rules if not r.needles} == {"native-backtrace-frame"}, "a rule without needles is searched on every line"
    by_id = {r.id: r.needles for r in rules}
    assert by_id["flashinfer-workspace-setup"] == (" allocated ipc_handles: ", " workspace[", "set flag_ptr[3] = lamport_comm_size: ")
    assert by_id["decode-throughput"] == ("gen throughput (token/s): ",)


ATOMS = ["a", "b", "ab", "abc", "x", ".", r"\d", "[ab]", "[a]", r"\.", "(?:", "(", ")", "|", "*", "+", "?", "{2}", "{1,}",
         "{}", "{", "(?=a)", "(?!b)", "^", "$", r"\b", "(?i:ab)", "(?#c)", "[^a]", "(?P<n>", " ", r"\x61", "(?<=a)", "(?>ab)"]
PIECES = ["a", "b", "ab", "abc", "x", "{}", "{", " ", ".", "1", "A", "aab"]


@pytest.mark.exhaustive
@settings(max_examples=300, deadline=None)
@given(st.lists(st.sampled_from(ATOMS), min_size=1, max_size=10), st.lists(st.lists(st.sampled_from(PIECES), max_size=8), max_size=30))
def test_every_match_contains_a_needle(atoms, texts):
    pattern = "".join(atoms)
    try:
        compiled = re.compile(pattern)
    except re.error:
        return
    needles = required(pattern)
    for text in map("".join, texts):
        if needles and compiled.search(text):
            assert any(n in text for n in needles), (pattern, needles, text)
