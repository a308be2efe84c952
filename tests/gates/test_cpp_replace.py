"""cpp_replace: replace expressions inside one C++/CUDA function, structurally, touching only the bytes that differ."""

from __future__ import annotations

import textwrap

import pytest

from codemods.gates import NotFound, SourceError, apply_edits
from codemods.gates.cpp.cpp_replace import EDIT_KIND, KIND, check_selector, rewrite

LAMPORT = dict(
    function="trtllm_custom_all_reduce",
    within="lamport_peer_comm_buffer_ptrs",
    replace=[
        {"from": "i + tp_size", "to": "i + MAX_RANKS_PER_NODE"},
        {"from": "i + tp_size * 2", "to": "i + MAX_RANKS_PER_NODE * 2"},
    ],
)
STRIDE = dict(function="pack", replace=[{"from": "i + tp_size", "to": "i + MAX_RANKS_PER_NODE"}])


def source_of(text: str) -> bytes:
    return textwrap.dedent(text).lstrip("\n").encode()


def run(source: bytes, selector: dict, language: str = "cuda") -> bytes:
    return apply_edits(source, rewrite(source, language, **selector))


WRAPPER_BEFORE = """
    #define DISPATCH(dtype, c_type, ...)                     \\
      [&] {                                                  \\
        switch (dtype) {                                     \\
          /* Requires nv_half to be defined somewhere */     \\
          case 1: {                                          \\
            return __VA_ARGS__();                            \\
          }                                                  \\
        }                                                    \\
      }()

    void trtllm_custom_all_reduce(TensorView in, int64_t tp_size,
                                  Optional<TensorView> lamport_peer_comm_buffer_ptrs_0) {
      if (lamport_peer_comm_buffer_ptrs_0.has_value()) {
        TVM_FFI_ICHECK(lamport_peer_comm_buffer_ptrs_1.has_value())
            << "lamport_peer_comm_buffer_ptrs_1 is required";
        for (int i = 0; i < tp_size; ++i) {
          params.fusion_params.lamport_peer_comm_buffer_ptrs[i] = reinterpret_cast<void*>(
              static_cast<int64_t*>(lamport_peer_comm_buffer_ptrs_0.value().data_ptr())[i]);
          params.fusion_params.lamport_peer_comm_buffer_ptrs[i + tp_size] = reinterpret_cast<void*>(
              static_cast<int64_t*>(lamport_peer_comm_buffer_ptrs_1.value().data_ptr())[i]);
          params.fusion_params.lamport_peer_comm_buffer_ptrs[i + tp_size * 2] =
              reinterpret_cast<void*>(
                  static_cast<int64_t*>(lamport_peer_comm_buffer_ptrs_2.value().data_ptr())[i]);
        }
      }
    }
    """


@pytest.mark.parametrize(
    ("before", "after", "selector"),
    [
        pytest.param(
            WRAPPER_BEFORE,
            WRAPPER_BEFORE.replace("[i + tp_size]", "[i + MAX_RANKS_PER_NODE]").replace(
                "[i + tp_size * 2]", "[i + MAX_RANKS_PER_NODE * 2]"
            ),
            LAMPORT,
            id="flashinfer-pr-3903-lamport-stride-after-a-macro-with-comments",
        ),
        pytest.param(
            """
            void pack(int tp_size, void** out) {
              for (int i = 0; i < tp_size; ++i) {
                out[i +  /* next set */
                    tp_size] = nullptr;
              }
            }
            """,
            """
            void pack(int tp_size, void** out) {
              for (int i = 0; i < tp_size; ++i) {
                out[i +  /* next set */
                    MAX_RANKS_PER_NODE] = nullptr;
              }
            }
            """,
            STRIDE,
            id="spacing-line-break-and-comment-inside-kept",
        ),
        pytest.param(
            """
            void other(int tp_size, void** out) { out[i + tp_size] = nullptr; }
            void pack(int tp_size, void** out) { out[i + tp_size] = nullptr; }
            """,
            """
            void other(int tp_size, void** out) { out[i + tp_size] = nullptr; }
            void pack(int tp_size, void** out) { out[i + MAX_RANKS_PER_NODE] = nullptr; }
            """,
            STRIDE,
            id="only-the-named-function",
        ),
        pytest.param(
            """
            namespace comm {
            template <typename T>
            void Runner<T>::pack(int tp_size) { use((i + tp_size) * 2); }
            }  // namespace comm
            """,
            """
            namespace comm {
            template <typename T>
            void Runner<T>::pack(int tp_size) { use((i + MAX_RANKS_PER_NODE) * 2); }
            }  // namespace comm
            """,
            STRIDE,
            id="qualified-template-method-parenthesised-operand",
        ),
        pytest.param(
            "void pack(int n) {\r\n  out[i + tp_size] = nullptr;\r\n}\r\n",
            "void pack(int n) {\r\n  out[i + MAX_RANKS_PER_NODE] = nullptr;\r\n}\r\n",
            STRIDE,
            id="crlf-kept",
        ),
        pytest.param(
            "int pack(int n) { return n * 2; }\n",
            "int pack(int n) { return n * 2 + 1; }\n",
            dict(function="pack", replace=[{"from": "n * 2", "to": "n * 2 + 1"}]),
            id="tokens-appended",
        ),
        pytest.param(
            "int pack(int n) { return offset + n; }\n",
            "int pack(int n) { return n; }\n",
            dict(function="pack", replace=[{"from": "offset + n", "to": "n"}]),
            id="tokens-removed",
        ),
        pytest.param(
            """
            void trtllm_custom_all_reduce(int64_t tp_size) {
              peer_barrier_ptrs_in[i + tp_size] = nullptr;
              lamport_peer_comm_buffer_ptrs[i + tp_size] = nullptr;
              lamport_peer_comm_buffer_ptrs[i + tp_size * 2] = nullptr;
            }
            """,
            """
            void trtllm_custom_all_reduce(int64_t tp_size) {
              peer_barrier_ptrs_in[i + tp_size] = nullptr;
              lamport_peer_comm_buffer_ptrs[i + MAX_RANKS_PER_NODE] = nullptr;
              lamport_peer_comm_buffer_ptrs[i + MAX_RANKS_PER_NODE * 2] = nullptr;
            }
            """,
            LAMPORT,
            id="within-leaves-other-arrays-alone",
        ),
    ],
)
def test_rewrite(before, after, selector):
    before, after = source_of(before), source_of(after)
    edits = rewrite(before, "cuda", **selector)
    assert apply_edits(before, edits) == after
    changed = sum(e.end - e.start for e in edits)
    assert changed < sum(len(p["from"]) for p in selector["replace"]) * len(edits), "edits cover only differing tokens"
    assert rewrite(after, "cuda", **selector) == [], "a second pass changes nothing"


def test_rewrite_with_the_cpp_grammar():
    source = source_of(WRAPPER_BEFORE)
    assert run(source, LAMPORT, "cpp") == run(source, LAMPORT, "cuda")


@pytest.mark.parametrize(
    "source",
    [
        pytest.param(
            """
            void trtllm_custom_all_reduce(int64_t tp_size) {
              params.fusion_params.lamport_peer_comm_buffer_ptrs[i + MAX_RANKS_PER_NODE] = a;
              params.fusion_params.lamport_peer_comm_buffer_ptrs[i + MAX_RANKS_PER_NODE * 2] = b;
            }
            """,
            id="already-replaced-flashinfer-0.6.17",
        ),
        pytest.param(
            """
            void trtllm_custom_all_reduce(int64_t tp_size) {
              // was: lamport_peer_comm_buffer_ptrs[i + tp_size] and [i + tp_size * 2]
              lamport_peer_comm_buffer_ptrs[i + MAX_RANKS_PER_NODE] = a;
              lamport_peer_comm_buffer_ptrs[i + MAX_RANKS_PER_NODE * 2] = b;
              log("lamport_peer_comm_buffer_ptrs[i + tp_size]");
            }
            """,
            id="already-replaced-old-form-only-in-comment-and-string",
        ),
    ],
)
def test_noop(source):
    assert rewrite(source_of(source), "cuda", **LAMPORT) == []


@pytest.mark.parametrize(
    ("source", "message"),
    [
        pytest.param(
            """
            void trtllm_lamport_initialize_all(int64_t tp_size) {
              lamport_peer_comm_buffer_ptrs[i + tp_size] = nullptr;
              lamport_peer_comm_buffer_ptrs[i + tp_size * 2] = nullptr;
            }
            """,
            "function trtllm_custom_all_reduce() not found",
            id="function-absent-expression-in-another-function",
        ),
        pytest.param(
            """
            // void trtllm_custom_all_reduce(int64_t tp_size) { ptrs[i + tp_size] = 0; }
            const char* doc = "void trtllm_custom_all_reduce() { lamport_peer_comm_buffer_ptrs[i + tp_size]; }";
            """,
            "function trtllm_custom_all_reduce() not found",
            id="function-only-in-comment-and-string",
        ),
        pytest.param(
            """
            void trtllm_custom_all_reduce(int64_t tp_size) {
              // lamport_peer_comm_buffer_ptrs[i + tp_size] = a;
              log("lamport_peer_comm_buffer_ptrs[i + tp_size * 2]");
            }
            """,
            "neither `i + tp_size` nor `i + MAX_RANKS_PER_NODE` in function trtllm_custom_all_reduce() in a subscript of lamport_peer_comm_buffer_ptrs",
            id="expressions-only-in-comment-and-string",
        ),
        pytest.param(
            """
            void trtllm_custom_all_reduce(int64_t tp_size) {
              peer_comm_buffer_ptrs[i + tp_size] = a;
              peer_comm_buffer_ptrs[i + tp_size * 2] = b;
            }
            """,
            "neither `i + tp_size * 2` nor `i + MAX_RANKS_PER_NODE * 2`",
            id="expressions-index-another-array",
        ),
        pytest.param(
            """
            void trtllm_custom_all_reduce(int64_t tp_size) {
              lamport_peer_comm_buffer_ptrs[i + tp_size * 2] = b;
            }
            """,
            "neither `i + tp_size` nor `i + MAX_RANKS_PER_NODE`",
            id="not-a-token-run-of-a-larger-expression",
        ),
    ],
)
def test_not_found_names_function_and_expression(source, message):
    with pytest.raises(NotFound) as caught:
        rewrite(source_of(source), "cuda", **LAMPORT)
    assert message in str(caught.value)


def test_not_utf8_is_a_source_error():
    with pytest.raises(SourceError, match="not UTF-8"):
        rewrite(b"void pack() { x[\xff]; }\n", "cuda", **STRIDE)


@pytest.mark.parametrize(
    ("name", "value", "problem"),
    [
        pytest.param("replace", [], "non-empty list", id="empty"),
        pytest.param("replace", "i + tp_size", "non-empty list", id="not-a-list"),
        pytest.param("replace", [{"from": "i + tp_size"}], "exactly `from` and `to`", id="no-to"),
        pytest.param("replace", [{"from": "i +", "to": "i + 1"}], "`i +` is not a C++ expression", id="unparsable"),
        pytest.param("replace", [{"from": "i+1", "to": "i + 1"}], "the same expression", id="same-tokens"),
        pytest.param("function", 3, "'function' must be a non-empty string", id="function-not-a-string"),
    ],
)
def test_check_selector(name, value, problem):
    assert problem in check_selector(name, value)


def test_declares_an_edit_kind():
    assert KIND == "cpp_replace" and EDIT_KIND is True
    assert check_selector("replace", LAMPORT["replace"]) == "" and check_selector("within", "ptrs") == ""
