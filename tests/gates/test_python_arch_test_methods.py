"""A predicate called on `cls` or `self` means what the class defines, never a module function of the same name.

Fixtures in the shape of SGLang's multimodal platform (`Platform.is_blackwell`, a classmethod testing
`major == 10`) beside srt's module-level `is_blackwell` (a partial over majors 10, 11 and 12) and the
platform-facts table (`"is_blackwell": "is_blackwell_supported"`, read as `.is_blackwell`).
"""

from textwrap import dedent

import pytest

from codemods.core.arch import parse_archs
from codemods.gates import CannotWiden, apply_edits
from codemods.gates.python.predicates.reading import inherited, read
from codemods.gates.python.python_arch_test import find, widen

# srt/utils/common.py and runtime_context.py: module functions and the platform table
COMMON = dedent(
    """\
    from functools import lru_cache, partial

    def _check_cuda_device_version(device_capability_majors):
        major, minor = torch.cuda.get_device_capability()
        return major in device_capability_majors

    is_blackwell_supported = is_blackwell = lru_cache(maxsize=1)(
        partial(_check_cuda_device_version, device_capability_majors=[10, 11, 12])
    )
    is_sm100_supported = lru_cache(maxsize=1)(partial(_check_cuda_device_version, device_capability_majors=[10]))

    _PLATFORM_PROBES = {"is_blackwell": "is_blackwell_supported", "is_sm100": "is_sm100_supported"}
    """
).encode()

PLATFORM = '''\
class Platform:
    @classmethod
    def is_cuda_static(cls) -> bool:
        return True

    @classmethod
    def is_blackwell(cls):
        if not cls.is_cuda_static():
            return False
        return torch.cuda.get_device_capability()[0] == 10

    @classmethod
    def is_sm100(cls):
        return torch.cuda.get_device_capability()[0] == 10

    @classmethod
    def is_sm120(cls):
        return torch.cuda.get_device_capability()[0] == 12


'''

CUDA = '''\
class CudaPlatformBase(Platform):
    @classmethod
    def _prepare_flash_attention_for_blackwell(cls) -> bool:
        if not cls.{test}():
            return True
        return _install_fa4()
'''


def _meanings(source: bytes) -> dict:
    known = read(COMMON, "common.py")
    return {**known, **read(source, "cuda.py", known)}


def test_module_function_and_table_are_read_as_wider_than_the_method() -> None:
    known = read(COMMON, "common.py")
    assert (10, 0) in known["is_blackwell"].caps and (12, 0) in known["is_blackwell"].caps
    assert (12, 0) in known[".is_blackwell"].caps


def test_cls_method_means_the_class_definition_not_the_module_function() -> None:
    source = (PLATFORM + CUDA.format(test="is_blackwell")).encode()
    [gate] = find(source, meanings=_meanings(source))
    assert "unknown" not in gate.detail
    assert gate.detail["class"] == "CudaPlatformBase"
    assert {a.name for a in gate.admits.admitted} == {"sm_100", "sm_103"}  # major == 10, as the method says


def test_cls_method_gate_is_widened_with_the_class_sibling() -> None:
    source = (PLATFORM + CUDA.format(test="is_sm100")).encode()
    meanings = _meanings(source)
    [gate] = find(source, meanings=meanings)
    after = apply_edits(source, widen(source, gate, parse_archs("sm_120,sm_121"), meanings=meanings))
    assert after == source.replace(b"if not cls.is_sm100():", b"if not cls.is_sm100() and not cls.is_sm120():")
    [again] = find(after, meanings=_meanings(after))
    assert widen(after, again, parse_archs("sm_120,sm_121"), meanings=_meanings(after)) == []


def test_base_class_in_another_file_is_unknown_and_refused() -> None:
    # the real shape: `Platform` is imported from interface.py, which codemod does not read
    source = ("from .interface import Platform\n\n\n" + CUDA.format(test="is_blackwell")).encode()
    meanings = _meanings(source)
    [gate] = find(source, meanings=meanings)
    assert gate.detail["unknown"] and "cls.is_blackwell" in gate.detail["unknown"][0]
    assert not gate.admits.admitted
    with pytest.raises(CannotWiden, match="unknown"):
        widen(source, gate, parse_archs("sm_120"), meanings=meanings)


def test_method_on_another_object_is_unknown_not_the_platform_table() -> None:
    source = dedent(
        """\
        def prepare(platform):
            if not platform.is_blackwell():
                return True
        """
    ).encode()
    [gate] = find(source, meanings=_meanings(source))
    assert gate.detail["unknown"] and not gate.admits.admitted


def test_subclass_overriding_the_method_makes_it_unknown() -> None:
    source = (
        PLATFORM
        + CUDA.format(test="is_blackwell")
        + dedent(
            """\


            class Sm12xPlatform(CudaPlatformBase):
                @classmethod
                def is_blackwell(cls):
                    return torch.cuda.get_device_capability()[0] in (10, 12)
            """
        )
    ).encode()
    [gate] = find(source, meanings=_meanings(source))
    assert "overrides" in gate.detail["unknown"][0]


def test_method_reading_cls_predicate_inside_the_class() -> None:
    # a method that calls another of its class's predicates reads that method, not the module's
    source = (PLATFORM + "class P2(Platform):\n    @classmethod\n    def is_sm_blackwell_only(cls):\n        return cls.is_blackwell()\n").encode()
    meanings = _meanings(source)
    assert meanings["P2.is_blackwell"].caps == meanings["Platform.is_blackwell"].caps
    assert (12, 0) not in meanings["Platform.is_blackwell"].caps


def test_base_class_read_from_another_file_widens_with_its_numbered_sibling() -> None:
    # what plan.widen.meanings_for gives when interface.py is read: its class's methods, keyed by the import
    base = read(PLATFORM.encode(), "interface.py", read(COMMON, "common.py"))
    source = ("from .interface import Platform\n\n\n" + CUDA.format(test="is_blackwell")).encode()
    known = {**read(COMMON, "common.py"), **inherited(".interface", "Platform", base)}
    meanings = {**known, **read(source, "cuda.py", known)}
    [gate] = find(source, meanings=meanings)
    assert "unknown" not in gate.detail
    assert {a.name for a in gate.admits.admitted} == {"sm_100", "sm_103"}
    after = apply_edits(source, widen(source, gate, parse_archs("sm_120,sm_121"), meanings=meanings))
    # `is_blackwell` names no arch number: the new predicate is the class's method that admits the targets
    assert after == source.replace(b"if not cls.is_blackwell():", b"if not cls.is_blackwell() and not cls.is_sm120():")


def test_named_predicate_refuses_a_sibling_admitting_more_than_asked() -> None:
    source = (PLATFORM + CUDA.format(test="is_blackwell")).encode()
    meanings = _meanings(source)
    [gate] = find(source, meanings=meanings)
    # `cls.is_sm120()` tests the major alone: it admits sm_121 too, which `sm_120` alone does not ask
    with pytest.raises(CannotWiden, match=r"`is_sm120` would also admit sm_121"):
        widen(source, gate, parse_archs("sm_120"), meanings=meanings)


def test_base_class_of_an_unimported_name_is_not_borrowed() -> None:
    # `Platform` here is this file's own name, not the imported module's: nothing is inherited from the table
    base = read(PLATFORM.encode(), "interface.py", {})
    source = ("from .other import Platform\n\n\n" + CUDA.format(test="is_blackwell")).encode()
    known = inherited(".interface", "Platform", base)
    [gate] = find(source, meanings={**known, **read(source, "cuda.py", known)})
    assert gate.detail["unknown"]
