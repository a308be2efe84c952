"""Numbered predicates (vLLM's `Platform.has_device_capability(N)` and kin): read from their definitions with the
number bound, for every number, so the meaning is the release's own and never a list in codemod."""

import zipfile
from pathlib import Path

import pytest

from codemods.gates.python.predicates import reading
from conftest import fetch_wheel

INTERFACE = Path(__file__).resolve().parents[2] / "examples" / "vllm" / "vllm" / "platforms" / "interface.py"


def _majors(first: int) -> list[str]:
    """Every major from `first` on, as `describe` folds them (DOMAIN runs to 15.9)."""
    return [f"sm_{major}x" for major in range(first, 16)]


def _describe(meanings, key):
    return reading.describe(meanings[key])


def test_the_example_platform_reads_at_least_exactly_and_family():
    meanings = reading.read(INTERFACE.read_bytes(), "interface.py")
    assert _describe(meanings, ".has_device_capability(100)") == _majors(10)
    assert _describe(meanings, ".is_device_capability(90)") == ["sm_90"]
    assert _describe(meanings, ".is_device_capability_family(120)") == ["sm_12x"]
    assert not any(key.startswith(".get_device_capability(") or key.startswith(".is_cuda(") for key in meanings)


def test_a_different_definition_means_something_else():
    """The meaning follows the body: a platform whose `has_device_capability` tests `>` admits less."""
    source = INTERFACE.read_bytes().replace(b"return current_capability.to_int() >= capability", b"return current_capability.to_int() > capability")
    meanings = reading.read(source, "interface.py")
    assert _describe(meanings, ".has_device_capability(100)") == ["sm_101", "sm_102", "sm_103", "sm_104", "sm_105",
                                                                  "sm_106", "sm_107", "sm_108", "sm_109", *_majors(11)]


def test_a_body_the_reader_does_not_follow_defines_no_numbered_predicate():
    source = b"class P:\n    @classmethod\n    def has_device_capability(cls, capability):\n        for x in range(3):\n            pass\n        return True\n"
    assert not any("(" in key for key in reading.read(source, "p.py"))


@pytest.mark.real
@pytest.mark.parametrize("version, family", [("0.11.0", False), ("0.13.0", True), ("0.20.0", True), ("0.34.0", True)])
def test_vllm_releases_define_them_as_read(version, family):
    with zipfile.ZipFile(fetch_wheel("vllm", version)) as wheel:
        source = wheel.read("vllm/platforms/interface.py")
    meanings = reading.read(source, "vllm/platforms/interface.py")
    assert _describe(meanings, ".has_device_capability(90)") == _majors(9)
    assert _describe(meanings, ".is_device_capability(100)") == ["sm_100"]
    assert (".is_device_capability_family(100)" in meanings) is family  # added in 0.12/0.13
    if family:
        assert _describe(meanings, ".is_device_capability_family(120)") == ["sm_12x"]
