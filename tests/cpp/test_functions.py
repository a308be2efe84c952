"""`cpp.functions`: the function around an offset, named by the lexer, in the shapes FlashInfer, CUTLASS and SGLang write.

Each case marks the offset with `@` (removed before naming) and gives the
name expected, None at file or class level. Cases where tree-sitter's naming
differed on the corpus (bench/naming_agreement.py) say which is right.
"""

from __future__ import annotations

from textwrap import dedent

import pytest

from codemods.cpp import functions


def _named(text: str) -> str | None:
    source = dedent(text).encode()
    offset = source.index(b"@")
    return functions.enclosing_functions(source.replace(b"@", b" ", 1), [offset])[0]


CASES = [
    pytest.param("int x = 0;\n@#if __CUDA_ARCH__ >= 900\n#endif\n", None, id="file-scope"),
    pytest.param(
        """\
        __global__ void kernel(float* out) {
        @#if __CUDA_ARCH__ >= 900
        #endif
        }
        """, "kernel", id="plain-kernel"),
    pytest.param(
        """\
        template <typename T, int kBlock = (4 * 32)>
        __global__ void __launch_bounds__(kBlock, 1) Gemm<T>(T* out) {
        @#if __CUDA_ARCH__ >= 900
        #endif
        }
        """, "Gemm<T>", id="launch-bounds-before-a-template-id"),
    pytest.param(
        """\
        template <typename T>
        __device__ __forceinline__ T warp_sum(T x) noexcept {
          if (x) { x += 1; }
        @#if __CUDA_ARCH__ >= 800
        #endif
          return x;
        }
        """, "warp_sum", id="noexcept-after-nested-block"),
    pytest.param(
        """\
        namespace flashinfer { namespace detail {
        struct Runner {
          CUTLASS_DEVICE auto run(int i) const -> decltype(i) {
        @#if defined(__CUDA_ARCH__)
        #endif
            return i;
          }
        };
        }}
        """, "run", id="method-in-namespaced-class-trailing-return"),
    pytest.param(
        """\
        template <class Element>
        CUTE_HOST_DEVICE void Tile<Element>::operator()(Element* p) const {
        @#if __CUDA_ARCH__ >= 1000
        #endif
        }
        """, "Tile<Element>::operator()", id="qualified-call-operator"),
    pytest.param(
        """\
        struct bfloat16_t {
          CUTLASS_HOST_DEVICE explicit operator float() const {
        @#if defined(__CUDA_ARCH__) && (__CUDA_ARCH__ >= 800)
        #endif
            return 0.f;
          }
        };
        """, "operator float", id="conversion-operator-tree-sitter-says-float"),
    pytest.param(
        """\
        CUTE_HOST_DEVICE ElectOneLaneIdReturnType
        elect_one_leader_sync() {
        @#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
        #endif
        }
        """, "elect_one_leader_sync", id="return-type-macro-tree-sitter-glues-on"),
    pytest.param(
        """\
        struct Barrier {
          CUTLASS_DEVICE Barrier(int* p, int n) : ptr_(p), count_{n} {
        @#if __CUDA_ARCH__ >= 900
        #endif
          }
          int* ptr_; int count_;
        };
        """, "Barrier", id="constructor-brace-initializer-list"),
    pytest.param(
        """\
        __device__ int helper(int x
        @#if __CUDA_ARCH__ >= 900
            , int y
        #endif
        ) {
          return x;
        }
        """, "helper", id="guard-in-parameter-list"),
    pytest.param(
        """\
        void done() {
        }
        @#if __CUDA_ARCH__ >= 900
        __device__ void next() {
        }
        #endif
        """, None, id="guard-around-a-whole-definition"),
    pytest.param(
        """\
        void launch(int dtype) {
          DISPATCH_DTYPE(dtype, c_type, [&] {
            auto body = [&](int i) {
        @#if __CUDA_ARCH__ >= 900
        #endif
            };
            return true;
          });
        }
        """, "launch", id="dispatch-macro-and-lambda-are-the-function"),
    pytest.param(
        """\
        extern "C" {
        __global__ void generated_kernel_0(float* p) {
          const char* s = "}{";
          // a } in a comment
        @#if __CUDA_ARCH__ >= 1200
        #endif
        }
        }
        """, "generated_kernel_0", id="extern-C-generated-kernel-braces-in-strings-and-comments"),
    pytest.param(
        """\
        #define DECLARE(name) void name() {
        void real() {
        @#if __CUDA_ARCH__ >= 900
        #endif
        }
        """, "real", id="macro-body-braces-skipped"),
    pytest.param(
        """\
        __global__ void pick(float* p) {
        #if __CUDA_ARCH__ >= 900
          if (p) {
        #else
          {
        #endif
        @#if __CUDA_ARCH__ >= 1000
        #endif
          }
        }
        int after;
        """, "pick", id="branches-opening-braces-read-as-the-first"),
    pytest.param(
        """\
        __device__ __forceinline__ void ctaArrive() {
          int tid{0};
        }
        __device__ struct __attribute__((aligned(32))) LamportFlags {
          __device__ void wait() {
        @#if (defined(__CUDA_ARCH__) && (__CUDA_ARCH__ >= 900))
        #endif
          }
        };
        """, "wait", id="attribute-struct-head"),
    pytest.param(
        """\
        void outer() {
          struct Local {
            __device__ int inner() {
        @#if __CUDA_ARCH__ >= 1000
        #endif
              return 2;
            }
          };
        }
        """, "inner", id="local-class-method"),
    pytest.param(
        """\
        enum class Mode : int { kA = 1, kB = 2 };
        constexpr int table[] = {1, 2};
        @#if __CUDA_ARCH__ >= 900
        #endif
        """, None, id="enum-and-initializer-are-not-functions"),
    pytest.param(
        """\
        TORCH_LIBRARY_FRAGMENT(TORCH_EXTENSION_NAME, m) {
        @#if defined(__CUDA_ARCH__)
        #endif
        }
        """, "TORCH_LIBRARY_FRAGMENT", id="registration-macro-as-tree-sitter-reads-it"),
    pytest.param(
        """\
        template <typename T>
        struct Converter<T, 2> {
          static CUTLASS_DEVICE result_type convert(source_type const& s) {
            result_type out;
          }
        @#if __CUDA_ARCH__ >= 900
        #endif
        };
        """, None, id="class-level-after-a-method"),
]


@pytest.mark.parametrize("text, expected", CASES)
def test_enclosing_function(text, expected):
    assert _named(text) == expected


def test_offsets_in_any_order_and_at_file_end():
    source = b"void a() {\n  x;\n}\nvoid b() {\n  y;\n}\n"
    offsets = [source.index(b"y"), source.index(b"x"), len(source) - 1]
    assert functions.enclosing_functions(source, offsets) == ["b", "a", None]
    assert functions.enclosing_functions(source, []) == []


def test_definitions_and_named():
    source = dedent(
        """\
        namespace ns {
        void Runner::run() { int a; }
        }
        void run(int x) {
          struct S { void run() {} };
        }
        void other() {}
        """
    ).encode()
    found = functions.definitions(source)
    assert [d.name for d in found] == ["Runner::run", "run", "run", "other"]
    for definition in found:
        assert source[definition.body_start : definition.body_start + 1] == b"{"
        assert source[definition.body_end - 1 : definition.body_end] == b"}"
    assert [d.name for d in functions.named(source, "run")] == ["Runner::run", "run"]  # not the local class's
    assert [d.name for d in functions.named(source, "Runner::run")] == ["Runner::run", "run"]  # by its last part too
    assert [d.name for d in functions.named(source, None)] == ["Runner::run", "run", "other"]


def test_mask_keeps_offsets():
    source = b'a /* { */ "}" \'{\' // }\nb'
    masked = functions.mask(source)
    assert len(masked) == len(source) and b"{" not in masked and b"}" not in masked
    assert masked.endswith(b"\nb") and b'" "' in masked


@pytest.mark.parametrize(
    "text, expected",
    [
        pytest.param(
            """\
            template <typename Op>
            class Dequantizer<Op, typename enable_if<Op::kMinComputeCapability >= 80>::type> {
              CUTLASS_DEVICE
              void dequantize(Fragment& frag) {
            @#if (defined(__CUDA_ARCH__) && (__CUDA_ARCH__ >= 800) && defined(ENABLE_BF16))
            #endif
              }
            };
            """, "dequantize", id="class-specialized-on-a-comparison"),
        pytest.param(
            """\
            template <typename KernelParams>
            @#if (defined(__CUDA_ARCH__) && (__CUDA_ARCH__ >= 900))
            __global__ void __cluster_dims__(NumBlocksPerCluster, 1, 1) routingKernel(KernelParams params) {
            #else
            __global__ void routingKernel(KernelParams params) {
            #endif
            }
            """, "routingKernel", id="guard-between-template-head-and-declarator-tree-sitter-finds-none"),
        pytest.param(
            """\
            struct Barrier {
             private:
              CUTLASS_DEVICE
              static void arrive_and_wait_internal(uint32_t n, uint32_t id) {
                asm volatile("bar.sync %0, %1;" : : "r"(id), "r"(n));
            @#if defined(__CUDA_ARCH__)
            #endif
              }
            };
            """, "arrive_and_wait_internal", id="inline-asm-body-tree-sitter-finds-none"),
        pytest.param(
            """\
            template <class Type>
            __global__ void
            #if defined(__CUDA_ARCH__) && (__CUDA_ARCH__ >= 1000)
            __launch_bounds__(512, 4) cvt_fp16_to_fp4_expert(
            #else
            cvt_fp16_to_fp4_expert(
            #endif
                int32_t numRows, Type const* in) {
            }
            template <class Type>
            __global__ void cvt_fp16_to_mxfp8_expert(int32_t numRows) {
            @#if defined(__CUDA_ARCH__) && (__CUDA_ARCH__ >= 1000)
            #endif
            }
            """, "cvt_fp16_to_mxfp8_expert", id="head-split-by-an-if-else-with-an-open-parenthesis"),
        pytest.param(
            """\
            #if defined(HAS_INT)
            struct A {};
            #endif  // a directive ends the last head
            template <int N>
            struct NumericArrayConverter<half_t, float_e2m1_t, N> {
              CUTLASS_HOST_DEVICE
              static result_type convert(source_type const &source) {
              @#if defined(__CUDA_ARCH__)
              #endif
              }
            };
            """, "convert", id="class-head-after-a-directive"),
    ],
)
def test_enclosing_function_where_tree_sitter_differs(text, expected):
    assert _named(text) == expected


def test_scan_names_the_guard_of_a_generated_kernel_with_a_split_head(tmp_path):
    """scan's `symbol` comes from this namer: a generated `extern "C"` kernel whose head is split by `#if`/`#else`
    (FlashInfer 0.7.4's cake kernels), where tree-sitter found no function and the symbol was empty."""
    from codemods.audit.scan import scan
    from codemods.core.arch import Arch

    (tmp_path / "k.cu").write_text(dedent(
        """\
        extern "C" {
        __global__ __launch_bounds__(512) void
        #if CAKE_FP16
        kernel_cake_decode_fp16(const __grid_constant__ CUtensorMap q, float* o)
        #else
        kernel_cake_decode_bf16(const __grid_constant__ CUtensorMap q, float* o)
        #endif
        {
        #if __CUDA_ARCH__ == 1000
            asm volatile("{ .reg .u64 p; }");
        #endif
        }
        }
        """
    ))
    result = scan(tmp_path, Arch.parse("sm_120"), jobs=1)
    [gate] = [g for g in result.gates if g["kind"] == "cuda_guard"]
    assert (gate["excludes_arch"], gate["symbol"]) == (True, "kernel_cake_decode_fp16")
