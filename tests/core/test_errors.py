"""The error catalogue: one class per kind, the exit code on the class, and docs/exit-codes.md's table says the same."""

from __future__ import annotations

import pickle
import re
from pathlib import Path

import pytest

from codemods.core import errors

EXIT_CODES = Path(__file__).resolve().parents[2] / "docs" / "exit-codes.md"


def _documented_codes() -> set[int]:
    return {int(m) for m in re.findall(r"^\| (\d+) \|", EXIT_CODES.read_text(), re.M)}


def test_every_kind_in_the_catalogue_has_its_exit_code_in_the_docs():
    codes = {kind.exit_code for kind in errors.CATALOGUE.values()}
    assert codes <= _documented_codes()
    assert _documented_codes() - codes == {0}, "every documented failure code is raised by some kind"


def test_kinds_are_distinct_classes_a_caller_can_catch():
    kinds = list(errors.CATALOGUE.values())
    assert len({k.code for k in kinds}) == len(kinds) == 17
    with pytest.raises(errors.DirtyTree) as caught:
        raise errors.DirtyTree("uncommitted changes", where="flashinfer/jit/comm.py")
    assert caught.value.exit_code == 4 and isinstance(caught.value, errors.CodemodError)
    assert str(caught.value) == "flashinfer/jit/comm.py: uncommitted changes"
    assert caught.value.hint == "commit or stash them, then run again"
    assert not isinstance(caught.value, errors.PlanFailed)


def test_a_given_hint_replaces_the_default_and_an_error_survives_a_process_boundary():
    error = errors.PlanFailed("not found", where="a.py", hint="skip it")
    copy = pickle.loads(pickle.dumps(error))
    assert type(copy) is errors.PlanFailed
    assert (copy.message, copy.where, copy.hint, copy.exit_code) == ("not found", "a.py", "skip it", 3)
