"""`cpp.calls`: which definition a call reaches, by C++ name lookup, on shapes written like TensorRT-LLM's headers."""

from __future__ import annotations

from textwrap import dedent

import pytest

from codemods.cpp import calls
from fixtures.device_helpers import COMMON_H, KERNELS_H, NAME, kernel_header


def _caller(body: str, *, around: tuple[str, ...] = ("tllm", "kernels"), prologue: str = "") -> str:
    return kernel_header(dedent(body), around=around, prologue=dedent(prologue))


def _verdicts(caller: str) -> list[bool | None]:
    files = {"common.h": COMMON_H, "kernels.h": KERNELS_H, "quantize.cuh": caller}
    names = [calls.read(text.encode(), NAME, rel) for rel, text in files.items()]
    known = calls.Known.of(names)
    guarded = next(f for f in known.functions if f.scope == ("tllm", "common"))
    return [calls.reaches(call, guarded, known) for n in names for call in n.calls]


def _enclosing(source: bytes, offset: int, file: str = "") -> calls.Function | None:
    """The function whose body holds `offset`, as the empty-kernel hazard asks it."""
    definition = calls.definitions(source).innermost(offset, body=True)
    return None if definition is None else calls.function(definition, source, file)


REACHES = [
    pytest.param(_caller("  if (common::elect_one_sync()) out[0] = 1;\n"), [True], id="qualified-from-a-sibling-namespace"),
    pytest.param(_caller("  if (tllm::common::elect_one_sync()) out[0] = 1;\n"), [True], id="fully-qualified"),
    pytest.param(_caller("  if (::tllm::common::elect_one_sync()) out[0] = 1;\n"), [True], id="absolute"),
    pytest.param(
        _caller("  if (elect_one_sync()) out[0] = 1;\n", around=("tllm",)), [True],
        id="unqualified-in-tllm-finds-common-through-the-using-directive",
    ),
    pytest.param(
        _caller("  if (elect_one_sync()) out[0] = 1;\n", around=()), [True],
        id="unqualified-at-file-level-through-the-using-directive",
    ),
    pytest.param(
        _caller("  if (tc::elect_one_sync()) out[0] = 1;\n", prologue="namespace tc = tllm::common;\n"), [True],
        id="through-a-namespace-alias",
    ),
]


@pytest.mark.parametrize("caller, expected", REACHES)
def test_reaches(caller, expected):
    assert _verdicts(caller) == expected


MISSES = [
    pytest.param(
        _caller("  if (elect_one_sync()) out[0] = 1;\n"), [False],
        id="unqualified-in-kernels-finds-kernels-first",  # quantization.cuh:398 of FlashInfer 0.6.10
    ),
    pytest.param(_caller("  if (kernels::elect_one_sync()) out[0] = 1;\n"), [False], id="qualified-other-namespace"),
    pytest.param(
        _caller(
            "  if (elect_one_sync()) out[0] = 1;\n", around=("tllm",),
            prologue="namespace tllm { using namespace kernels; }\n",
        ),
        [False],
        id="the-nearer-using-directive-wins",  # kernels' names count in tllm, common's only at file level
    ),
    pytest.param(_caller("  if (cute::elect_one_sync()) out[0] = 1;\n"), [False], id="qualified-library-namespace-not-read"),
    pytest.param(_caller("  if (warp.elect_one_sync()) out[0] = 1;\n"), [False], id="member-call-cannot-reach-a-free-function"),
    pytest.param(_caller("  if (common::elect_one_sync(1)) out[0] = 1;\n"), [False], id="argument-count-it-cannot-take"),
]


@pytest.mark.parametrize("caller, expected", MISSES)
def test_misses(caller, expected):
    assert _verdicts(caller) == expected


UNKNOWN = [
    pytest.param(
        _caller("  if (other::common::elect_one_sync()) out[0] = 1;\n"), [None],
        id="qualifier-naming-a-namespace-nowhere-read-with-the-same-last-name",
    ),
    pytest.param(
        _caller(
            "  if (elect_one_sync()) out[0] = 1;\n", around=("tllm",),
            prologue="namespace tllm { using namespace common; using namespace kernels; }\n",
        ),
        [None],
        id="two-using-directives-in-one-namespace-make-it-ambiguous",
    ),
]


@pytest.mark.parametrize("caller, expected", UNKNOWN)
def test_cannot_tell(caller, expected):
    assert _verdicts(caller) == expected


def test_a_use_in_a_macro_body_is_unread():
    source = _caller("  if (ELECT()) out[0] = 1;\n", prologue="#define ELECT() tllm::common::elect_one_sync()\n")
    names = calls.read(source.encode(), NAME, "quantize.cuh")
    assert names.calls == ()
    assert len(names.unread) == 1 and source.encode()[names.unread[0] :].startswith(NAME.encode())


def test_comments_and_declarations_are_not_uses():
    source = "// elect_one_sync() in a comment\nnamespace tllm { namespace common { __device__ uint32_t elect_one_sync(); } }\n"
    names = calls.read(source.encode(), NAME)
    assert names.unread == ()
    assert [(f.scope, f.definition) for f in names.functions] == [(("tllm", "common"), False)]


def test_enclosing_names_the_helper_and_tells_kernels():
    guard = COMMON_H.index("#if")
    helper = _enclosing(COMMON_H.encode(), guard, "common.h")
    assert helper is not None
    assert (helper.qualified, helper.kernel, helper.arity) == ("tllm::common::elect_one_sync", False, (0, 0))
    kernel_source = _caller("#if __CUDA_ARCH__ >= 900\n  out[0] = 1;\n#endif\n").encode()
    kernel = _enclosing(kernel_source, kernel_source.index(b"#if __CUDA"), "quantize.cuh")
    assert kernel is not None and kernel.kernel and kernel.qualified == "tllm::kernels::quantize_kernel"
    assert _enclosing(COMMON_H.encode(), 0, "common.h") is None  # file level


def test_member_defined_out_of_class_looks_in_its_class_first():
    source = dedent(
        """\
        namespace tllm {
        struct Warp { __device__ uint32_t elect_one_sync(); __device__ void run(); };
        __device__ uint32_t elect_one_sync() { return 0; }
        __device__ void Warp::run() { elect_one_sync(); }
        }
        """
    )
    names = calls.read(source.encode(), NAME)
    known = calls.Known.of([names])
    free = next(f for f in known.functions if f.scope == ("tllm",))
    assert [calls.reaches(call, free, known) for call in names.calls] == [False]


def test_a_member_reached_through_a_template_parameter_cannot_be_told():
    source = dedent(
        """\
        namespace tllm {
        struct Sm90 { static __device__ uint32_t elect_one_sync() { return 1; } };
        template <class Arch> __global__ void run(int* out) { out[0] = Arch::elect_one_sync(); }
        }
        """
    )
    names = calls.read(source.encode(), NAME)
    known = calls.Known.of([names])
    (member,) = known.functions
    assert member.member and member.scope == ("tllm", "Sm90")
    assert [calls.reaches(call, member, known) for call in names.calls] == [None]


@pytest.mark.parametrize(
    "source, name, named",
    [
        pytest.param("struct Op { __device__ int operator()(int x) { return x; } };", "operator()", False, id="operator"),
        pytest.param("struct Op { __device__ Op() {} };", "Op", False, id="constructor"),
        pytest.param("struct Op { __device__ int get() { return 0; } };", "get", True, id="named-member"),
    ],
)
def test_functions_called_without_their_name(source, name, named):
    offset = source.index("{", source.index(name + "(")) + 1
    function = _enclosing(source.encode(), offset)
    assert function is not None and function.name == name
    assert calls.named_calls_only(function) is named
