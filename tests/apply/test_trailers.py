"""The trailers codemod writes read back as written, whatever the path (codemods.apply.trailers)."""

from __future__ import annotations

import pytest

from codemods.apply.trailers import FileChange, read_branch, recorded_files

A, B = "a" * 40, "b" * 40


@pytest.mark.parametrize("path", [
    pytest.param("flashinfer/jit/comm.py", id="plain"),
    pytest.param("my dir/comm file.py", id="spaces"),
    pytest.param('"quoted".py', id="leading-quote"),
    pytest.param("line\nbreak.py", id="line-break"),
    pytest.param(" edge.py ", id="edge-spaces"),
    pytest.param("ünï/cödé.py", id="unicode"),
])
def test_file_trailer_round_trips(path):
    change = FileChange(path, A, B)
    line = change.trailer()
    assert "\n" not in line
    assert recorded_files(f"subject\n\nCodemod-Recipe: r\n{line}\n") == frozenset({change})


def test_older_commit_records_no_files():
    assert recorded_files("subject\n\nCodemod-Recipe: r\nCodemod-Change: c\n") is None


def _commit(sha, subject, recipe=None, base="main@" + "0" * 40, branch="codemod/r"):
    message = f"{subject}\n"
    if recipe:
        message += f"\nCodemod-Recipe: {recipe}\nCodemod-Change: c\nCodemod-Base: {base}\nCodemod-Branch: {branch}\n"
    return sha, subject, message


def test_read_branch_sorts_commits_on_top_below_and_reverts():
    base = "0" * 40
    log = [  # newest first
        _commit("6" * 40, "mine on top"),
        ("5" * 40, 'Revert "c2"', f'Revert "c2"\n\nThis reverts commit {"4" * 40}.\n'),
        _commit("4" * 40, "c2", "r"),
        _commit("3" * 40, "moved under", None),
        _commit("2" * 40, "c1", "r"),
        _commit("1" * 40, "also under", None),
        _commit(base, "base"),
    ]
    record = read_branch("codemod/r", log)
    assert [c.subject for c in record.commits] == ["c1", "c2"]
    assert record.foreign == [("6" * 40, "mine on top")]
    assert record.reverts == [("5" * 40, "4" * 40)] and not record.reverted
    assert record.below == [("3" * 40, "moved under"), ("1" * 40, "also under")]
    assert record.base_found and record.made_on == "codemod/r"


def test_read_branch_without_the_base_names_the_commit_under_codemods():
    log = [_commit("2" * 40, "c1", "r"), _commit("1" * 40, "elsewhere"), _commit("9" * 40, "older")]
    record = read_branch("codemod/r", log)
    assert not record.base_found and record.below == [("1" * 40, "elsewhere")]
