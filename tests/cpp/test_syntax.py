"""`cpp.syntax.Definitions`: which function definition nodes hold an offset, for cpp.calls (names: cpp.functions)."""

from __future__ import annotations

from textwrap import dedent

import pytest

from codemods.cpp import syntax

SOURCE = dedent(
    """\
    int level = 0;
    __device__ int helper(int x
    #if __CUDA_ARCH__ >= 900
        , int y
    #endif
    ) {
      struct Local {
        __device__ int inner() {
    #if __CUDA_ARCH__ >= 1000
          return 2;
    #endif
          return 1;
        }
      };
    #if __CUDA_ARCH__ >= 800
      return x;
    #endif
    }
    namespace ns {
    void Runner::run() {
    #ifdef __CUDA_ARCH__
    #endif
    }
    }
    """
)


def _name(node) -> str:
    """The declarator as written (test only: functions are named by cpp.functions)."""
    declarator = node.child_by_field_name("declarator")
    while declarator.type != "function_declarator":
        declarator = declarator.child_by_field_name("declarator")
    return declarator.child_by_field_name("declarator").text.decode()


def _at(mark: str, nth: int = 0) -> int:
    offset = -1
    for _ in range(nth + 1):
        offset = SOURCE.index(mark, offset + 1)
    return offset


@pytest.mark.parametrize(
    "offset, holding, in_body",
    [
        pytest.param(_at("int level"), [], "", id="file-scope"),
        pytest.param(_at("#if __CUDA_ARCH__ >= 900"), ["helper"], "", id="parameter-list-is-not-the-body"),
        pytest.param(_at("#if __CUDA_ARCH__ >= 1000"), ["inner", "helper"], "inner", id="local-class-method"),
        pytest.param(_at("#if __CUDA_ARCH__ >= 800"), ["helper"], "helper", id="after-a-nested-definition"),
        pytest.param(_at("#ifdef"), ["Runner::run"], "Runner::run", id="qualified-name-as-written"),
        pytest.param(_at("namespace ns"), [], "", id="between-definitions"),
    ],
)
def test_definitions_holding_an_offset(offset, holding, in_body):
    tree = syntax.parse_code(SOURCE.encode(), "cuda")
    definitions = syntax.Definitions(tree, "cuda")
    assert [_name(node) for node in definitions.holding(offset)] == holding
    innermost = definitions.innermost(offset)
    assert (_name(innermost) if innermost is not None else "") == (holding[0] if holding else "")
    body = definitions.innermost(offset, body=True)
    assert (_name(body) if body is not None else "") == in_body
