"""`assigns` for value assignments, in every Python kind (issue 38 item 1): a predicate, an `or` of them, a
capability comparison or an arch-number call stored in a name (`flag = is_sm120a_supported(dev)`,
`self.use_x = (is_sm100() or is_sm120()) and other`), annotated (`x: bool = ...`) and augmented (`ok &= ...`),
or inside a larger expression (`pick(is_sm100a_supported(dev), other)`), selected by the target it is assigned
to and widened in the file's style, black's split when the line grows too long.

Each case goes through the kind's registered hooks (what `codemod run` calls), then a second pass changes nothing.
"""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from textwrap import dedent

import pytest

from codemods.core.arch import DEFAULT_ARCHS, parse_archs
from codemods.gates import apply_edits
from codemods.gates.base import Where
from codemods.gates.python.predicates.reading import read, table
from codemods.gates.registry import KINDS

# What the projects' predicates admit, as their sources say (FlashInfer: exact minor; SGLang: the major).
FLASHINFER = table(
    {"is_sm100a_supported": ["sm_10x"], "is_sm120a_supported": ["sm_120"], "is_sm121a_supported": ["sm_121"]},
    "flashinfer.toml",
)
SGLANG = table(
    {"is_sm90_supported": ["sm_9x"], "is_sm100_supported": ["sm_10x"], "is_sm120_supported": ["sm_12x"]}, "sglang.toml"
)
SM12X = "sm_120,sm_121"

FI_HEAD = "from flashinfer.utils import is_sm100a_supported, is_sm120a_supported\n\n\ndef plan_fp4(device, other):\n"
FI_ONE = "from flashinfer.utils import is_sm120a_supported\n\n\ndef plan_fp4(device, other):\n"
SG_HEAD = (
    "from sglang.srt.utils import is_sm90_supported, is_sm100_supported, is_sm120_supported\n\n\n"
    "class ServerArgs:\n    def __post_init__(self):\n"
)
SG_DEF = "from sglang.srt.utils import is_sm90_supported, is_sm100_supported, is_sm120_supported\n\n\ndef f(y):\n"


def _where(source: bytes, known: dict | None) -> Where:
    meanings = {**known, **read(source, "x.py", known)} if known is not None else None
    return Where("x.py", meanings)


def _widen(kind: str, source: bytes, archs: str, known: dict | None, selector: dict) -> bytes:
    hooks = KINDS[kind]
    assert hooks.find is not None and hooks.widen is not None
    where = _where(source, known)
    edits = []
    for gate in hooks.find(source, DEFAULT_ARCHS, where, selector):
        edits += hooks.widen(source, gate, parse_archs(archs), DEFAULT_ARCHS, where)
    return apply_edits(source, edits)


CASES = [
    pytest.param(
        "python_arch_test", FI_ONE + "    flag = is_sm120a_supported(device)\n    return flag\n",
        FI_ONE.replace("is_sm120a_supported", "is_sm120a_supported, is_sm121a_supported")
        + "    flag = is_sm120a_supported(device) or is_sm121a_supported(device)\n    return flag\n",
        "sm_121", FLASHINFER, {"assigns": "flag"}, id="arch-test-plain-assignment-flashinfer",
    ),
    pytest.param(
        "python_arch_test", FI_HEAD + "    fp4: bool = is_sm100a_supported(device) and other\n",
        FI_HEAD + "    fp4: bool = (is_sm100a_supported(device) or is_sm120a_supported(device)) and other\n",
        "sm_120", FLASHINFER, {"assigns": "fp4"}, id="arch-test-annotated-operand-of-and-gets-parentheses",
    ),
    pytest.param(
        "python_arch_test", SG_HEAD + "        ok = True\n        ok &= is_sm90_supported()\n",
        SG_HEAD + "        ok = True\n        ok &= is_sm90_supported() or is_sm120_supported()\n",
        SM12X, SGLANG, {"assigns": "ok"}, id="arch-test-augmented-assignment",
    ),
    pytest.param(
        "python_arch_test", FI_HEAD + "    backend = pick(is_sm100a_supported(device), other)\n",
        FI_HEAD + "    backend = pick(is_sm100a_supported(device) or is_sm120a_supported(device), other)\n",
        "sm_120", FLASHINFER, {"assigns": "backend"}, id="arch-test-inside-a-larger-expression-no-extra-parentheses",
    ),
    pytest.param(
        "python_arch_test", SG_HEAD + "        self.use_x = (is_sm90_supported() or is_sm100_supported()) and self.y\n",
        SG_HEAD + "        self.use_x = (\n            is_sm90_supported() or is_sm100_supported() or is_sm120_supported()\n"
        "        ) and self.y\n",
        SM12X, SGLANG, {"assigns": "self.use_x"}, id="arch-test-or-chain-in-an-attribute-split-as-black",
    ),
    pytest.param(
        "python_arch_or", SG_DEF + "    use_x = (is_sm90_supported() or is_sm100_supported()) and y\n",
        SG_DEF + "    use_x = (is_sm90_supported() or is_sm100_supported() or is_sm120_supported()) and y\n",
        SM12X, SGLANG, {"assigns": "use_x"}, id="arch-or-chain-in-a-value-sglang",
    ),
    pytest.param(
        "python_arch_or",
        SG_HEAD + "        self.enable_flashinfer_allreduce_fusion = (is_sm90_supported() or is_sm100_supported()) and tp > 1\n",
        SG_HEAD + "        self.enable_flashinfer_allreduce_fusion = (\n"
        "            is_sm90_supported() or is_sm100_supported() or is_sm120_supported()\n        ) and tp > 1\n",
        SM12X, SGLANG, {"assigns": "self.enable_flashinfer_allreduce_fusion"}, id="arch-or-long-line-split-as-black",
    ),
    pytest.param(
        "python_arch_or", SG_DEF + "    on: bool = is_sm90_supported() or is_sm100_supported()\n",
        SG_DEF + "    on: bool = is_sm90_supported() or is_sm100_supported() or is_sm120_supported()\n",
        SM12X, SGLANG, {"assigns": "on"}, id="arch-or-annotated",
    ),
    pytest.param(
        "python_capability",
        "import torch\n\n\ndef f():\n    major, minor = torch.cuda.get_device_capability()\n"
        "    is_blackwell = major == 10\n    ok: bool = major == 9\n",
        "import torch\n\n\ndef f():\n    major, minor = torch.cuda.get_device_capability()\n"
        "    is_blackwell = major in (10, 12)\n    ok: bool = major == 9\n",
        "sm_120", None, {"assigns": "is_blackwell"}, id="capability-plain-assignment-picked-among-two",
    ),
    pytest.param(
        "python_capability",
        "import torch\n\n\ndef f(ok):\n    major, minor = torch.cuda.get_device_capability()\n"
        "    ok |= major == 10 and minor == 0\n",
        "import torch\n\n\ndef f(ok):\n    major, minor = torch.cuda.get_device_capability()\n"
        "    ok |= major in (10, 12) and minor == 0\n",
        "sm_120", None, {"assigns": "ok"}, id="capability-augmented-assignment",
    ),
    pytest.param(
        "python_arch_call",
        "def generate(has_arch):\n    operations = []\n    operations += generate_sm120_operations(has_arch(120))\n"
        "    rest = generate_sm100_operations(has_arch(100))\n",
        "def generate(has_arch):\n    operations = []\n"
        "    operations += generate_sm120_operations(has_arch(120) or has_arch(121))\n"
        "    rest = generate_sm100_operations(has_arch(100))\n",
        "sm_121", None, {"assigns": "operations"}, id="arch-call-augmented-assignment-flashinfer-cutlass-generator",
    ),
]  # fmt: skip


@pytest.mark.parametrize(("kind", "before", "after", "archs", "known", "selector"), CASES)
def test_widen(kind: str, before: str, after: str, archs: str, known: dict | None, selector: dict) -> None:
    source = before.encode()
    assert KINDS[kind].find(source, DEFAULT_ARCHS, _where(source, known), selector), "the case must have a gate"  # type: ignore[misc]
    widened = _widen(kind, source, archs, known, selector)
    assert widened.decode() == after
    assert _widen(kind, widened, archs, known, selector) == widened, "a second pass changes nothing"


@pytest.mark.parametrize(
    ("kind", "source", "known", "selector"),
    [
        pytest.param("python_arch_test", FI_HEAD + "    flag = is_sm120a_supported(device)\n", FLASHINFER, {},
                     id="arch-test-a-value-is-no-gate-without-assigns"),
        pytest.param("python_arch_test", FI_HEAD + "    flag = is_sm120a_supported(device)\n", FLASHINFER,
                     {"assigns": "other"}, id="arch-test-another-target"),
        pytest.param("python_arch_test", FI_HEAD + "    no_fp4 = not is_sm120a_supported(device)\n", FLASHINFER,
                     {"assigns": "no_fp4"}, id="arch-test-a-negation-stored-is-no-gate"),
        pytest.param("python_arch_or", SG_HEAD + "        a = is_sm90_supported() or is_sm100_supported()\n", SGLANG,
                     {"assigns": "b"}, id="arch-or-another-target"),
        pytest.param("python_capability", "import torch\n\n\ndef f():\n    big = torch.cuda.get_device_capability()[0] == 10\n",
                     None, {"assigns": "small"}, id="capability-another-target"),
        pytest.param("python_arch_call", "def g(has_arch):\n    ops = gen(has_arch(100))\n", None, {"assigns": "other"},
                     id="arch-call-another-target"),
    ],
)  # fmt: skip
def test_not_selected(kind: str, source: str, known: dict | None, selector: dict) -> None:
    data = source.encode()
    assert KINDS[kind].find(data, DEFAULT_ARCHS, _where(data, known), selector) == []  # type: ignore[misc]


@pytest.mark.parametrize(
    ("kind", "source", "known", "selector"),
    [
        pytest.param("python_arch_test", FI_HEAD + "    flag = is_sm120a_supported(device) or is_sm121a_supported(device)\n",
                     FLASHINFER, {"assigns": "flag"}, id="arch-test-already-admits"),
        pytest.param("python_capability", "import torch\n\n\ndef f():\n    major, minor = torch.cuda.get_device_capability()\n"
                     "    big = major >= 10\n", None, {"assigns": "big"}, id="capability-already-admits"),
    ],
)  # fmt: skip
def test_noop(kind: str, source: str, known: dict | None, selector: dict) -> None:
    data = source.encode()
    assert KINDS[kind].find(data, DEFAULT_ARCHS, _where(data, known), selector), "the case must have a gate"  # type: ignore[misc]
    assert _widen(kind, data, SM12X, known, selector) == data


def test_assigns_is_a_selector_of_every_python_kind_that_widens() -> None:
    widening = [k for k in KINDS.values() if k.name.startswith("python_") and k.widens and not k.edit_kind]
    missing = [k.name for k in widening if "assigns" not in k.selector_names and k.name != "python_min_capability"]
    assert missing == []  # python_min_capability's gate is a `return 89`: no assignment to name


@pytest.mark.parametrize("tail", ["and self.y", "and self.tp_size > 1", "and not use_fallback"])
@pytest.mark.parametrize("depth", [1, 2])
def test_a_widened_value_is_split_as_ruff_format_writes(tail: str, depth: int) -> None:
    if importlib.util.find_spec("ruff") is None:
        pytest.skip("ruff (the test extra) is not installed")
    pad = "    " * depth
    head = "from sglang.srt.utils import is_sm90_supported, is_sm100_supported, is_sm120_supported\n\n\n"
    body = f"self.enable_flashinfer_allreduce_fusion = (is_sm90_supported() or is_sm100_supported()) {tail}\n"
    source = head + "class A:\n    def f(self):\n" + "".join(f"{'    ' * (i + 2)}if x:\n" for i in range(depth - 1))
    source += pad + "    " + body
    widened = _widen("python_arch_or", source.encode(), SM12X, SGLANG, {"assigns": "self.enable_flashinfer_allreduce_fusion"})
    formatted = subprocess.run(
        [sys.executable, "-m", "ruff", "format", "--isolated", "-"], input=widened, capture_output=True, check=True
    ).stdout
    assert widened != source.encode() and widened == formatted, dedent(widened.decode())
