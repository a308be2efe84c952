"""cmake_arch_list: find, read and widen the arch lists of CMake files by the variable they set."""

from __future__ import annotations

import shutil
import textwrap
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from codemods.core.arch import DEFAULT_ARCHS, Arch
from codemods.gates import CannotWiden, SourceError, apply_edits
from codemods.gates.cmake.cmake_arch_list import KIND, admits, find, widen

SM12X = (Arch.parse("sm_120"), Arch.parse("sm_121"))
SM121 = (Arch.parse("sm_121"),)
DATA = Path(__file__).parent / "data"


def source_of(text: str) -> bytes:
    return textwrap.dedent(text).lstrip("\n").encode()


def widen_all(source: bytes, targets=SM12X, **selector) -> list:
    return [edit for gate in find(source, DEFAULT_ARCHS, **selector) for edit in widen(source, gate, targets)]


def edits_or_refusals(source: bytes, targets=SM12X) -> list:
    """The edits of every gate; a gate widen refuses (unknown) counts as none."""
    edits = []
    for gate in find(source):
        try:
            edits += widen(source, gate, targets)
        except CannotWiden:
            pass
    return edits


@pytest.mark.parametrize(
    ("before", "after", "targets"),
    [
        pytest.param(
            'cuda_archs_loose_intersection(SCALED_MM_ARCHS "10.0a;10.1a;12.0a" "${CUDA_ARCHS}")\n',
            'cuda_archs_loose_intersection(SCALED_MM_ARCHS "10.0a;10.1a;12.0a;12.1a" "${CUDA_ARCHS}")\n',
            SM121,
            id="vllm-loose-intersection-a-list-gains-12.1a",
        ),
        pytest.param(
            'set(FP4_ARCHS "10.0a")\n',
            'set(FP4_ARCHS "10.0a;12.0a;12.1a")\n',
            SM12X,
            id="one-entry-set-joins-with-semicolons-inside-its-quotes",
        ),
        pytest.param(
            "set(TORCH_ARCHS 9.0;10.0)\n",
            "set(TORCH_ARCHS 9.0;10.0;12.0;12.1)\n",
            SM12X,
            id="unquoted-semicolon-list",
        ),
        pytest.param(
            """
            set(KERNEL_ARCHS
              "9.0a"
              "10.0a"
            )
            """,
            """
            set(KERNEL_ARCHS
              "9.0a"
              "10.0a"
              "12.0a"
              "12.1a"
            )
            """,
            SM12X,
            id="one-argument-per-entry-gets-new-arguments-on-their-own-lines",
        ),
        pytest.param(
            'set(CMAKE_CUDA_ARCHITECTURES "90a;100a")\n',
            'set(CMAKE_CUDA_ARCHITECTURES "90a;100a;120a;121a")\n',
            SM12X,
            id="cmake-architectures-numbers-without-a-dot",
        ),
        pytest.param(
            'set(FLASHINFER_CUDA_ARCHS "sm_90a;sm_100a")\n',
            'set(FLASHINFER_CUDA_ARCHS "sm_90a;sm_100a;sm_120a;sm_121a")\n',
            SM12X,
            id="sm-prefix-kept",
        ),
        pytest.param(
            """
            list(APPEND SGL_KERNEL_CUDA_FLAGS
                "-gencode=arch=compute_90a,code=sm_90a"
                "-gencode=arch=compute_100a,code=sm_100a"
                "--expt-relaxed-constexpr"
            )
            """,
            """
            list(APPEND SGL_KERNEL_CUDA_FLAGS
                "-gencode=arch=compute_90a,code=sm_90a"
                "-gencode=arch=compute_100a,code=sm_100a"
                "-gencode=arch=compute_120a,code=sm_120a"
                "-gencode=arch=compute_121a,code=sm_121a"
                "--expt-relaxed-constexpr"
            )
            """,
            SM12X,
            id="sgl-kernel-gencode-flags-beside-other-flags",
        ),
        pytest.param(
            """
            set(FLAGS
              -gencode=arch=compute_90a,code=sm_90a # hopper
              -gencode=arch=compute_120a,code=sm_120a)
            """,
            """
            set(FLAGS
              -gencode=arch=compute_90a,code=sm_90a # hopper
              -gencode=arch=compute_120a,code=sm_120a
              -gencode=arch=compute_121a,code=sm_121a)
            """,
            SM121,
            id="unquoted-gencode-after-a-comment-takes-the-indentation-not-the-comment",
        ),
        pytest.param(
            'set(MY_ARCHS "8.0;10.0")\n',
            'set(MY_ARCHS "8.0;9.0;10.0")\n',
            (Arch.parse("sm_90"),),
            id="inserted-where-it-sorts",
        ),
        pytest.param(
            'set(MY_ARCHS "12.0a")\n',
            'set(MY_ARCHS "9.0a;12.0a")\n',
            (Arch.parse("sm_90"),),
            id="below-every-entry-goes-first-spelled-like-the-first",
        ),
        pytest.param(
            'cuda_archs_loose_intersection(SCALED_MM_ARCHS "9.0a;" "${CUDA_ARCHS}")\n',
            'cuda_archs_loose_intersection(SCALED_MM_ARCHS "9.0a;12.0a;12.1a;" "${CUDA_ARCHS}")\n',
            SM12X,
            id="vllm-trailing-semicolon-kept",
        ),
        pytest.param(
            'set(PTX_ARCHS "9.0+PTX")\n',
            'set(PTX_ARCHS "9.0+PTX;12.0;12.1")\n',
            SM12X,
            id="ptx-tail-not-copied-to-a-new-entry",
        ),
        pytest.param(
            'set(GPU_ARCHS "9.0;10.0" CACHE STRING "archs to build")\n',
            'set(GPU_ARCHS "9.0;10.0;12.0;12.1" CACHE STRING "archs to build")\n',
            SM12X,
            id="cache-arguments-are-not-entries",
        ),
        pytest.param(
            'set(KERNEL_ARCHS\r\n  "9.0a"\r\n  "10.0a")\r\n',
            'set(KERNEL_ARCHS\r\n  "9.0a"\r\n  "10.0a"\r\n  "12.0a")\r\n',
            (Arch.parse("sm_120"),),
            id="crlf-line-endings-kept",
        ),
        pytest.param(
            'set(MLA_ARCHS "10.0a;10.3a")\n',
            'set(MLA_ARCHS "10.0a;10.3a;12.0a;12.1a")\n',
            SM12X,
            id="a-targets-admit-only-their-own-capability",
        ),
    ],
)
def test_widen(before, after, targets):
    source = before.encode() if "\r" in before else source_of(before)
    edits = widen_all(source, targets)
    out = apply_edits(source, edits)
    assert out.decode() == (after if "\r" in after else source_of(after).decode())
    assert widen_all(out, targets) == []  # a second pass changes nothing


@pytest.mark.parametrize(
    "source",
    [
        pytest.param('set(FP4_ARCHS "10.0a;12.0a;12.1a")\n', id="already-admits-both"),
        pytest.param(
            'cuda_archs_loose_intersection(SCALED_MM_ARCHS "10.0f;11.0f;12.0f" "${CUDA_ARCHS}")\n',
            id="family-target-12.0f-admits-sm121",
        ),
        pytest.param(
            'cuda_archs_loose_intersection(MARLIN_FP8_ARCHS "8.9;12.0" "${CUDA_ARCHS}")\n',
            id="loose-intersection-plain-12.0-admits-later-minors",
        ),
        pytest.param(
            'cuda_archs_loose_intersection(MARLIN_ARCHS "8.0+PTX" "${CUDA_ARCHS}")\n',
            id="loose-intersection-ptx-admits-every-later-arch",
        ),
        pytest.param('set(HIP_SUPPORTED_ARCHS "gfx906;gfx90a;gfx942")\n', id="hip-archs-are-no-cuda-list"),
        pytest.param('# set(FP4_ARCHS "10.0a")\n', id="commented-out-line"),
        pytest.param('#[[\nset(FP4_ARCHS "10.0a")\n]]\n', id="bracket-comment"),
        pytest.param('message(STATUS "FP4_ARCHS 10.0a;12.0a")\n', id="string-that-mentions-archs"),
        pytest.param("set(TIMEOUT 120)\n", id="a-number-in-a-variable-that-says-no-arch"),
        pytest.param("set(CMAKE_ARCHIVE_OUTPUT_DIRECTORY ${OUT_DIR})\n", id="archive-is-no-arch-word"),
        pytest.param("set(SCALED_MM_3X_ARCHS)\n", id="set-with-no-value-clears-the-variable"),
        pytest.param('list(JOIN CUDA_ARCHS "," CUDA_ARCHS_STR)\n', id="list-join-makes-no-list"),
        pytest.param('set(HASH_AND_ARCH "${HASH}(ARCH:${ARCHS_STR})")\n', id="text-around-a-variable-is-no-list"),
        pytest.param('set(SCALED_MM_ARCHS "${CUDA_ARCHS}")\n', id="list-from-a-variable-only-is-unknown"),
        pytest.param('list(APPEND SCALED_MM_3X_ARCHS "${SCALED_MM_ARCHS}")\n', id="appended-variable-is-unknown"),
    ],
)
def test_noop(source):
    data = source.encode()
    assert edits_or_refusals(data) == []


def test_scan_reads_variables_named_for_archs_only():
    source = source_of('''
        set(CMAKE_ARCHIVE_OUTPUT_DIRECTORY ${OUT_DIR})
        set(RESEARCH_DIR ${ROOT})
        set(TORCH_CUDA_ARCH_LIST ${ARCHS_FROM_ENV})
        set(CMAKE_CUDA_ARCHITECTURES ${DETECTED})
        set(VLLM_GPU_ARCHES ${HIP_ARCHS})
    ''')
    assert [g.context for g in find(source)] == ["TORCH_CUDA_ARCH_LIST", "CMAKE_CUDA_ARCHITECTURES", "VLLM_GPU_ARCHES"]


def test_a_list_from_variables_is_unknown_reported_and_left_byte_for_byte():
    source = source_of('''
        cuda_archs_loose_intersection(CUDA_ARCHS
          "${CUDA_SUPPORTED_ARCHS}" "${CUDA_ARCHS}")
        set(EXTRA_ARCHS "9.0a;${MORE_ARCHS}")
    ''')
    first, second = find(source)
    assert (first.context, first.line, first.text, first.detail["unread"]) == (
        "CUDA_ARCHS", 2, '"${CUDA_SUPPORTED_ARCHS}"', ["${CUDA_SUPPORTED_ARCHS}"]
    )
    assert first.admits.names() == [] and first.admits.unknown_names() == [a.name for a in DEFAULT_ARCHS]
    assert second.admits.names() == ["sm_90"] and "sm_121" in second.admits.unknown_names()
    for gate in (first, second):
        with pytest.raises(CannotWiden, match=r"line \d: \w+ holds \$\{\w+\}.*widen it by hand"):
            widen(source, gate, SM12X)
    # what it spells is read: widening for an arch it lists needs no edit
    assert widen(source, second, (Arch.parse("sm_90"),)) == []


def test_a_gencode_flag_of_another_shape_makes_the_flags_list_unknown():
    source = source_of('''
        set(KERNEL_FLAGS
          "-O3"
          "-gencode=arch=compute_90a,code=sm_90a"
          "-gencode=arch=compute_100a,code=[sm_100a,compute_100a]")
    ''')
    [gate] = find(source)
    assert gate.admits.names() == ["sm_90"] and "sm_120" in gate.admits.unknown_names()
    assert gate.detail["unread"] == ["-gencode=arch=compute_100a,code=[sm_100a,compute_100a]"]
    with pytest.raises(CannotWiden, match="widen it by hand"):
        widen(source, gate, SM12X)


def test_a_file_cmake_cannot_read_is_refused_with_the_line():
    source = source_of('''
        set(OK_ARCHS "9.0a")
        set(BROKEN_ARCHS "10.0a
    ''')
    with pytest.raises(SourceError, match="not valid CMake: line 2"):
        find(source)


def test_the_variable_selector_picks_the_lists_that_set_it():
    source = source_of('''
        if(CUDA_13)
          cuda_archs_loose_intersection(SCALED_MM_ARCHS "10.0f;12.0f" "${CUDA_ARCHS}")
        else()
          cuda_archs_loose_intersection(SCALED_MM_ARCHS "10.0a;12.0a" "${CUDA_ARCHS}")
        endif()
        set(FP4_ARCHS "10.0a")
        set(NOT_NAMED_SO 9.0)
    ''')
    assert [g.line for g in find(source, variable="SCALED_MM_ARCHS")] == [2, 4]
    assert [g.text for g in find(source, variable="NOT_NAMED_SO")] == ["9.0"]  # named, any variable is read
    assert [g.context for g in find(source)] == ["SCALED_MM_ARCHS", "SCALED_MM_ARCHS", "FP4_ARCHS"]
    out = apply_edits(source, widen_all(source, SM121, variable="SCALED_MM_ARCHS"))
    assert out == source.replace(b'"10.0a;12.0a"', b'"10.0a;12.0a;12.1a"')  # 12.0f already admits sm_121


def test_admits_reads_a_list_text_as_its_command_does():
    loose = {"command": "cuda_archs_loose_intersection"}
    assert admits('"8.0;9.0a"', DEFAULT_ARCHS, loose).names() == ["sm_80", "sm_86", "sm_89", "sm_90"]
    assert admits('"8.0;9.0a"', DEFAULT_ARCHS, {"command": "set"}).names() == ["sm_80", "sm_90"]
    assert admits('"10.0f"', DEFAULT_ARCHS).names() == ["sm_100", "sm_103"]  # not sm_110: another family
    assert admits('"${X}"', DEFAULT_ARCHS).unknown_names() == [a.name for a in DEFAULT_ARCHS]


@pytest.mark.parametrize(
    "source",
    [
        pytest.param('list(APPEND FLAGS\n  "-gencode=arch=compute_90a,code=sm_90a"\n)\n', id="list-append"),
        pytest.param('list(PREPEND MY_ARCHS "9.0")\n', id="list-prepend"),
        pytest.param('cuda_archs_loose_intersection(MY_ARCHS "9.0a" "${CUDA_ARCHS}")\n', id="loose-intersection"),
        pytest.param('set(MY_ARCHS "9.0" PARENT_SCOPE)\n', id="set-parent-scope"),
    ],
)
def test_the_widened_text_admits_the_target_as_the_planner_reads_it(source):
    """The planner checks a widened gate by `admits` over its new text and the gate's detail."""
    data = source.encode()
    [gate] = find(data)
    out = apply_edits(data, widen(data, gate, SM12X))
    [after] = find(out)
    assert admits(after.text, DEFAULT_ARCHS, gate.detail) == after.admits
    assert {"sm_120", "sm_121"} <= set(after.admits.names())


CAPABILITIES = [(8, 0), (8, 6), (8, 9), (9, 0), (10, 0), (10, 3), (11, 0), (12, 0), (12, 1)]


@settings(max_examples=60, deadline=None)
@given(
    listed=st.lists(st.sampled_from(CAPABILITIES), min_size=1, unique=True),
    asked=st.lists(st.sampled_from(DEFAULT_ARCHS), min_size=1, unique=True),
    dotted=st.booleans(),
    suffix=st.sampled_from(["", "a"]),
)
def test_widening_admits_exactly_the_old_archs_and_the_targets(listed, asked, dotted, suffix):
    entries = [f"{major}.{minor}" if dotted else f"{major}{minor}" for major, minor in sorted(listed)]
    source = f'set(GEN_ARCHS "{";".join(e + suffix for e in entries)}")\n'.encode()
    [gate] = find(source)
    out = apply_edits(source, widen(source, gate, tuple(asked)))
    [after] = find(out)
    assert set(after.admits.admitted) == set(gate.admits.admitted) | set(asked)
    assert widen(out, after, tuple(asked)) == []


def _lists(source: bytes) -> list[tuple[int, str, str, list[str]]]:
    return [(g.line, g.context, g.text, g.admits.names()) for g in find(source)]


def test_vllm_shaped_cuda_12_8_release():
    source = (DATA / "vllm_shaped_cuda128.cmake").read_bytes()
    assert _lists(source) == [
        (11, "CUDA_SUPPORTED_ARCHS", '"8.0;8.6;8.9;9.0;10.0;10.1;12.0"', ["sm_80", "sm_86", "sm_89", "sm_90", "sm_100", "sm_120"]),
        (13, "CUDA_SUPPORTED_ARCHS", '"8.0;8.6;8.9;9.0"', ["sm_80", "sm_86", "sm_89", "sm_90"]),
        (17, "CUDA_ARCHS", '"${CUDA_SUPPORTED_ARCHS}"', []),
        (20, "MARLIN_ARCHS", '"8.0;9.0"', ["sm_80", "sm_86", "sm_89", "sm_90"]),
        (23, "SCALED_MM_ARCHS", '"9.0a;"', ["sm_90"]),
        (25, "SCALED_MM_3X_ARCHS", '"${SCALED_MM_ARCHS}"', []),
        (29, "SCALED_MM_ARCHS", '"10.0a;10.1a;12.0a"', ["sm_100", "sm_120"]),
        (32, "FP4_ARCHS", '"10.0a;12.0a"', ["sm_100", "sm_120"]),
    ]
    out = apply_edits(source, edits_or_refusals(source, SM121))
    changed = [(a, b) for a, b in zip(source.decode().splitlines(), out.decode().splitlines()) if a != b]
    assert changed == [
        ('  set(CUDA_SUPPORTED_ARCHS "8.0;8.6;8.9;9.0;10.0;10.1;12.0")', '  set(CUDA_SUPPORTED_ARCHS "8.0;8.6;8.9;9.0;10.0;10.1;12.0;12.1")'),
        ('  set(CUDA_SUPPORTED_ARCHS "8.0;8.6;8.9;9.0")', '  set(CUDA_SUPPORTED_ARCHS "8.0;8.6;8.9;9.0;12.1")'),
        ('cuda_archs_loose_intersection(MARLIN_ARCHS "8.0;9.0" "${CUDA_ARCHS}")', 'cuda_archs_loose_intersection(MARLIN_ARCHS "8.0;9.0;12.1" "${CUDA_ARCHS}")'),
        ('cuda_archs_loose_intersection(SCALED_MM_ARCHS "9.0a;" "${CUDA_ARCHS}")', 'cuda_archs_loose_intersection(SCALED_MM_ARCHS "9.0a;12.1a;" "${CUDA_ARCHS}")'),
        ('cuda_archs_loose_intersection(SCALED_MM_ARCHS "10.0a;10.1a;12.0a" "${CUDA_ARCHS}")', 'cuda_archs_loose_intersection(SCALED_MM_ARCHS "10.0a;10.1a;12.0a;12.1a" "${CUDA_ARCHS}")'),
        ('cuda_archs_loose_intersection(FP4_ARCHS "10.0a;12.0a" "${CUDA_ARCHS}")', 'cuda_archs_loose_intersection(FP4_ARCHS "10.0a;12.0a;12.1a" "${CUDA_ARCHS}")'),
    ]
    assert edits_or_refusals(out, SM121) == []


def test_vllm_shaped_cuda_13_release_with_family_targets():
    source = (DATA / "vllm_shaped_cuda13.cmake").read_bytes()
    assert [(line, name, admitted) for line, name, _, admitted in _lists(source)] == [
        (8, "CUDA_SUPPORTED_ARCHS", ["sm_80", "sm_86", "sm_89", "sm_90", "sm_100", "sm_110", "sm_120"]),
        (10, "CUDA_SUPPORTED_ARCHS", ["sm_80", "sm_86", "sm_89", "sm_90", "sm_100", "sm_103", "sm_120", "sm_121"]),
        (14, "SCALED_MM_ARCHS", ["sm_100", "sm_103", "sm_110", "sm_120", "sm_121"]),
        (16, "SCALED_MM_ARCHS", ["sm_100", "sm_103"]),
        (22, "MARLIN_FP8_ARCHS", ["sm_89", "sm_120", "sm_121"]),
        (23, "MLA_ARCHS", ["sm_100", "sm_103"]),
    ]  # the list inside #[[ ]] is a comment
    out = apply_edits(source, edits_or_refusals(source, SM12X))
    assert out == (
        source.replace(b'"8.0;8.6;8.9;9.0;10.0;11.0;12.0"', b'"8.0;8.6;8.9;9.0;10.0;11.0;12.0;12.1"')
        .replace(b'"10.0a;10.3a" "${CUDA_ARCHS}")\nendif', b'"10.0a;10.3a;12.0a;12.1a" "${CUDA_ARCHS}")\nendif')
        .replace(b'MLA_ARCHS "10.0a;10.3a"', b'MLA_ARCHS "10.0a;10.3a;12.0a;12.1a"')
    )
    assert edits_or_refusals(out, SM12X) == []


def test_scan_lists_cmake_lists_by_variable(tmp_path):
    from codemods.audit.scan import scan

    shutil.copy(DATA / "vllm_shaped_cuda128.cmake", tmp_path / "CMakeLists.txt")
    (tmp_path / "cmake").mkdir()
    (tmp_path / "cmake" / "kernels.cmake").write_text('set(FP4_ARCHS "10.0a;12.0a")\n')
    (tmp_path / "notes.txt").write_text('set(FP4_ARCHS "10.0a")\n')  # not a CMake file
    gates = scan(tmp_path, Arch.parse("sm_121")).gates
    assert {g["kind"] for g in gates} == {KIND}
    assert [(g["file"], g["line"], g["symbol"], g["classification"]) for g in gates] == [
        ("CMakeLists.txt", 11, "CUDA_SUPPORTED_ARCHS", "widenable"),
        ("CMakeLists.txt", 13, "CUDA_SUPPORTED_ARCHS", "widenable"),
        ("CMakeLists.txt", 17, "CUDA_ARCHS", "unknown"),
        ("CMakeLists.txt", 20, "MARLIN_ARCHS", "widenable"),
        ("CMakeLists.txt", 23, "SCALED_MM_ARCHS", "widenable"),
        ("CMakeLists.txt", 25, "SCALED_MM_3X_ARCHS", "unknown"),
        ("CMakeLists.txt", 29, "SCALED_MM_ARCHS", "widenable"),
        ("CMakeLists.txt", 32, "FP4_ARCHS", "widenable"),
        ("cmake/kernels.cmake", 1, "FP4_ARCHS", "widenable"),
    ]
    fp4 = gates[-1]
    assert fp4["admits"] == ["sm_100", "sm_120"] and fp4["reason"] == (
        "the kernels built from FP4_ARCHS are not compiled for sm_121"
    )


RECIPE = '''\
id = "fp4-kernels-sm120"
summary = "Build the NVFP4 kernels for SM120"
arch = "sm_120"
admit = "exact"

[[change]]
id = "sglang.fp4-archs"
project = "sglang"
file = "CMakeLists.txt"
kind = "cmake_arch_list"
variable = "FP4_ARCHS"
title = "Build the NVFP4 kernels for SM120"

[[test]]
change = "sglang.fp4-archs"
before = \'\'\'
cuda_archs_loose_intersection(FP4_ARCHS "10.0a;10.1a" "${CUDA_ARCHS}")
cuda_archs_loose_intersection(OTHER_ARCHS "10.0a" "${CUDA_ARCHS}")
\'\'\'
after = \'\'\'
cuda_archs_loose_intersection(FP4_ARCHS "10.0a;10.1a;12.0a" "${CUDA_ARCHS}")
cuda_archs_loose_intersection(OTHER_ARCHS "10.0a" "${CUDA_ARCHS}")
\'\'\'

[[test]]
change = "sglang.fp4-archs"
before = \'\'\'
cuda_archs_loose_intersection(FP4_ARCHS "10.0f;12.0f" "${CUDA_ARCHS}")
\'\'\'
outcome = "unchanged"

[[change]]
id = "sglang.scaled-mm-archs"
project = "sglang"
file = "CMakeLists.txt"
kind = "cmake_arch_list"
variable = "SCALED_MM_ARCHS"
admits = ["sm_100"]                       # the Blackwell list, not the Hopper one
title = "Build the Blackwell scaled_mm kernels for SM120"

[[test]]
change = "sglang.scaled-mm-archs"
before = \'\'\'
cuda_archs_loose_intersection(SCALED_MM_ARCHS "9.0a;" "${CUDA_ARCHS}")
cuda_archs_loose_intersection(SCALED_MM_ARCHS "10.0a;10.1a" "${CUDA_ARCHS}")
\'\'\'
after = \'\'\'
cuda_archs_loose_intersection(SCALED_MM_ARCHS "9.0a;" "${CUDA_ARCHS}")
cuda_archs_loose_intersection(SCALED_MM_ARCHS "10.0a;10.1a;12.0a" "${CUDA_ARCHS}")
\'\'\'
'''


def test_recipe_test_runs_the_kind(tmp_path, cli):
    recipe = tmp_path / "fp4.toml"
    recipe.write_text(RECIPE)
    result = cli("recipe", "test", recipe)
    assert result.exit_code == 0, result.output
    assert "3 passed, 0 failed" in result.output


def test_recipe_test_fails_when_the_after_differs(tmp_path, cli):
    recipe = tmp_path / "fp4.toml"
    recipe.write_text(RECIPE.replace('"10.0a;10.1a;12.0a"', '"10.0a;10.1a;12.0a;12.1a"', 1))  # the first case's after
    result = cli("recipe", "test", recipe)
    assert result.exit_code != 0
    assert "2 passed, 1 failed" in result.output


def test_run_widens_sgl_kernel_flags_on_a_branch_and_revert_restores_the_bytes(tmp_path, cli):
    from tests.conftest import git, init_repo

    repo = tmp_path / "sglang"
    (repo / "python" / "sglang" / "srt").mkdir(parents=True)
    (repo / "python" / "sglang" / "version.py").write_text('__version__ = "0.5.8"\n')
    (repo / "python" / "sglang" / "srt" / "__init__.py").write_text("")
    (repo / "sgl-kernel").mkdir()
    before = source_of('''
        list(APPEND SGL_KERNEL_CUDA_FLAGS
            "-gencode=arch=compute_90a,code=sm_90a"
            "-gencode=arch=compute_100a,code=sm_100a"
        )
        cuda_archs_loose_intersection(FP4_ARCHS "10.0a" "${CUDA_ARCHS}")
    ''')
    (repo / "sgl-kernel" / "CMakeLists.txt").write_bytes(before)
    init_repo(repo)
    recipe = tmp_path / "sgl-kernel-sm120.toml"
    recipe.write_text(textwrap.dedent('''\
        id = "sgl-kernel-sm120"
        summary = "Compile sgl-kernel for SM120"
        arch = "sm_120"
        admit = "exact"

        [[change]]
        id = "sglang.kernel-gencode"
        project = "sglang"
        file = "sgl-kernel/CMakeLists.txt"
        kind = "cmake_arch_list"
        variable = "SGL_KERNEL_CUDA_FLAGS"
        title = "Compile sgl-kernel for sm_120a"
    '''))
    result = cli("run", recipe, "--repo", repo)
    assert result.exit_code == 0, result.output
    assert git(repo, "rev-parse", "--abbrev-ref", "HEAD").strip() == "codemod/sgl-kernel-sm120"
    assert (repo / "sgl-kernel" / "CMakeLists.txt").read_bytes() == before.replace(
        b'sm_100a"\n', b'sm_100a"\n    "-gencode=arch=compute_120a,code=sm_120a"\n'
    )
    result = cli("revert", "sgl-kernel-sm120", "--repo", repo)
    assert result.exit_code == 0, result.output
    assert git(repo, "rev-parse", "--abbrev-ref", "HEAD").strip() == "main"
    assert (repo / "sgl-kernel" / "CMakeLists.txt").read_bytes() == before


def test_scan_skips_a_cmake_file_it_cannot_read_with_the_reason(tmp_path):
    from codemods.audit.scan import scan

    (tmp_path / "CMakeLists.txt").write_bytes(b'set(FP4_ARCHS "10.0a;12.0a"\n')
    (tmp_path / "latin1.cmake").write_bytes(b'# caf\xe9\nset(FP4_ARCHS "10.0a")\n')
    result = scan(tmp_path, Arch.parse("sm_121"))
    assert result.gates == []
    assert sorted((s["file"], s["reason"].split(":")[0].split(" (")[0]) for s in result.skipped) == [
        ("CMakeLists.txt", "not valid CMake"),
        ("latin1.cmake", "not UTF-8"),
    ]
