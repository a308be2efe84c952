"""structure: the #if structure of a file, per-arch verdicts over it, and the blocker token table."""

from __future__ import annotations

import dataclasses
from textwrap import dedent

import pytest

from codemods.core.arch import Arch
from codemods.cpp.instructions import TOKEN_FAMILIES, jit_target, lacking
from codemods.cpp.lexer import includes
from codemods.cpp.structure import structure

SM90A, SM100A, SM120, SM120F, SM121A = (Arch.parse(n) for n in ("sm_90a", "sm_100a", "sm_120", "sm_120f", "sm_121a"))


def _shape(text: str):
    return structure(dedent(text).encode())


def test_groups_nesting_and_lines():
    shape = _shape(
        """\
        #if __CUDA_ARCH__ >= 900
          a();
        #  if defined(FOO)
          b();
        #  endif
        #elif __CUDA_ARCH__ >= 800
          c();
        #else
        #endif
        """
    )
    summary = [(b.line, b.directive, b.condition, b.position, b.parent, b.own_code) for b in shape.branches]
    assert summary == [
        (1, "#if", "__CUDA_ARCH__ >= 900", 0, None, True),
        (3, "#if", "defined(FOO)", 0, 0, True),
        (6, "#elif", "__CUDA_ARCH__ >= 800", 1, None, True),
        (8, "#else", "", 2, None, False),
    ]


def test_continuations_comments_and_crlf():
    source = (
        b"/* #if __CUDA_ARCH__ >= 900\r\n#endif */\r\n"
        b"#if defined(__CUDA_ARCH__) && \\\r\n    (__CUDA_ARCH__ >= 900) // why\r\n"
        b"#define X \\\r\n#if not a directive\r\n"
        b"  x();\r\n#endif\r\n"
    )
    [branch] = structure(source).branches
    assert (branch.line, branch.condition) == (3, "defined(__CUDA_ARCH__) && (__CUDA_ARCH__ >= 900)")
    assert branch.own_code


def test_unbalanced_directives_do_not_raise():
    shape = _shape("#endif\n#else\n#if __CUDA_ARCH__ >= 900\n  x();\n")
    [branch] = shape.branches
    assert branch.body_end == len(b"#endif\n#else\n#if __CUDA_ARCH__ >= 900\n  x();\n")


@pytest.mark.parametrize(
    "arch, taken",
    [
        pytest.param(SM90A, [True, False, False], id="sm90a-takes-the-if"),
        pytest.param(SM100A, [False, True, False], id="sm100a-takes-the-elif"),
        pytest.param(SM120, [False, False, True], id="sm120-takes-the-else"),
    ],
)
def test_taken_follows_the_group(arch, taken):
    shape = _shape(
        """\
        #if defined(__CUDA_ARCH_FEAT_SM90_ALL)
        #elif __CUDA_ARCH__ >= 1000 && __CUDA_ARCH__ < 1200
        #else
        #endif
        """
    )
    assert [shape.taken(b, arch) for b in shape.branches] == taken


def test_unknown_macros_make_later_branches_unknown():
    shape = _shape("#if defined(FOO)\n#elif __CUDA_ARCH__ >= 900\n#else\n#endif\n")
    assert [shape.taken(b, SM120) for b in shape.branches] == [None, None, False]
    assert [shape.reachable(b, SM120) for b in shape.branches] == [True, True, False]


def test_family_specific_macro_and_fi_targets():
    shape = _shape("#if defined(__CUDA_ARCH_FEAT_SM120_ALL)\n  x();\n#endif\n")
    [branch] = shape.branches
    # FlashInfer >= 0.6.4 builds 12.0 as 120f, where FEAT_SM120_ALL is not defined (ARCH_FACTS §3C).
    assert shape.own(branch, jit_target(SM120)) is False
    assert shape.own(branch, jit_target(SM120, all_specific=True)) is True
    assert jit_target(Arch.parse("sm_121")) == SM121A
    assert jit_target(Arch.parse("sm_90")) == SM90A
    assert jit_target(Arch.parse("sm_86")) == Arch.parse("sm_86")
    assert jit_target(SM120) == SM120F


def test_tokens_belong_to_the_innermost_branch_and_skip_comments_and_directives():
    shape = _shape(
        """\
        #if __CUDA_ARCH__ >= 1000
          asm volatile("tcgen05.alloc.cta_group::1 [%0];");   // tcgen05.dealloc in a comment
        #if defined(USE_TMEM)
          uint32_t tmem_base = 0;
        #endif
        #endif
        """
    )
    outer, inner = shape.branches
    assert [(h.token, h.line, h.wrapper) for h in outer.hits] == [
        ("tcgen05.alloc", 2, False),
        (".cta_group::1", 2, False),
    ]
    assert [(h.token, h.wrapper) for h in inner.hits] == [("tmem_base", True)]
    assert [h.token for h in shape.region_hits(outer, SM120, lacking(SM120))] == [
        "tcgen05.alloc",
        ".cta_group::1",
        "tmem_base",
    ]


def test_lacking_is_the_table_read_by_major():
    assert [f.name for f in lacking(SM120)] == ["wgmma", "tcgen05", "cta_group"]
    assert [f.name for f in lacking(SM100A)] == ["wgmma", "block-scaled mma.sync"]
    assert [f.name for f in lacking(SM90A)] == ["tcgen05", "cta_group", "block-scaled mma.sync"]
    assert all(family.reason.endswith(")") and "ARCH_FACTS" in family.reason for family in TOKEN_FAMILIES)


def test_includes_skips_commented_ones():
    source = b'#include "a.cuh"\n// #include "b.cuh"\n  #  include <flashinfer/c.cuh>\n/* #include "d.h" */\n'
    assert includes(source) == [("a.cuh", True), ("flashinfer/c.cuh", False)]


def test_the_cached_structure_cannot_be_changed_by_a_caller():
    source = b"#if __CUDA_ARCH__ >= 900\n  asm(\"wgmma.fence.sync.aligned;\");\n#endif\n"
    shape = structure(source)
    branch = shape.branches[0]
    with pytest.raises(dataclasses.FrozenInstanceError):
        branch.body_end = 0  # type: ignore[misc]
    assert isinstance(shape.branches, tuple) and isinstance(shape.chains[0], tuple) and isinstance(shape.top, tuple)
    assert isinstance(branch.hits, tuple) and isinstance(branch.children, tuple)
    assert [hit.token for hit in branch.hits] == ["wgmma.fence"]
    assert structure(source) is shape and shape.branches[0] == branch
