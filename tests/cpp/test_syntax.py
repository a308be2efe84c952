"""`cpp.syntax.Definitions`: which function definitions hold an offset, the one reader gates, audit and calls share."""

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
    assert [syntax.function_name(node) for node in definitions.holding(offset)] == holding
    innermost = definitions.innermost(offset)
    assert (syntax.function_name(innermost) if innermost is not None else "") == (holding[0] if holding else "")
    body = definitions.innermost(offset, body=True)
    assert (syntax.function_name(body) if body is not None else "") == in_body


def test_enclosing_functions_names_each_node():
    tree = syntax.parse_code(SOURCE.encode(), "cuda")
    keywords = [tree.root_node.descendant_for_byte_range(o, o) for o in (_at("#if __CUDA_ARCH__ >= 1000"), 0, _at("#ifdef"))]
    assert syntax.enclosing_functions(tree, keywords, "cuda") == ["inner", "", "Runner::run"]
