"""What an arch gets where a gate excludes it, and what the user does about it.

A gate that excludes an arch is a problem only when the arch then gets
nothing there. `scan` gives every gate record a `classification`:

- `blocker`: the arch gets nothing (no branch of the `#if`/`#elif`/`#else`
  group with code, an `#error`, a stub; a JIT module not built, an API that
  refuses it) and codemod has no edit for this gate: change it by hand.
- `widenable`: the arch gets nothing, the guarded code uses nothing the arch
  lacks, and codemod's edit for the gate kind widens it (`codemod run`).
- `needs-human`: the arch takes another branch with code (a slower or
  older fallback: widening would change which implementation it runs), or
  the guarded code uses instructions the arch lacks (a port, not a widening),
  or a JIT module's list keeps it from the arch while only code written for
  other archs uses the module, or its kernels need hardware codemod cannot
  check (multicast for `multimem`).
- `other-arch`: the gate admits only archs of another kind than the arch
  (cpp.instructions.kin: sm_90; sm_100/103/110; sm_120/121; pre-Hopper) and
  selects code written for them (`if is_sm100_supported(): backend =
  "trtllm"`, an SM90 kernel's availability check): review, not widen; a
  Python gate's statement says so (audit.python_advice).
- `tuning`: the gate only picks block sizes, warps or other heuristics by
  capability (audit.python_advice): review the values the arch gets.
- `definition`: an arch predicate's own test (`def is_hopper(): return
  cap == (9, 0)`): its callers are the gates; it is not widened.
- `unknown`: codemod cannot tell (a condition over other macros, a run-time
  dispatch it does not follow).
- `covered`: the gate excludes the arch, and that is fine: it takes the real
  implementation (`#if __CUDA_ARCH__ < 800` bf16 fallbacks), a default for a
  tuning macro, or the gate only splits the host pass from the device pass,
  or an enclosing branch the arch does not take decides, or the guard sits
  in a device function that no call in the files of the JIT modules
  compiling it reaches (no kernel of any arch runs that code: see
  jit_classify.uncalled_guards).
- `admits`: the gate admits the arch.

`guard_path` reads what the arch takes in a conditional group (one
`structure.Structure`, the one scan builds); Python gates describe their own
path (`python_path`; the polarity readers replace it). `classify` turns a
path, the instructions the arch lacks in the guarded code and whether the
kind has an edit into one classification and a reason. No I/O.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from codemods.core.arch import Arch
from codemods.cpp.hazards import FEATURE_SWITCH_RE
from codemods.cpp.structure import Branch, Structure
from codemods.gates import Gate
from codemods.gates.registry import KINDS
from codemods.plan import dispatch

BLOCKER = "blocker"
WIDENABLE = "widenable"
NEEDS_HUMAN = "needs-human"
UNKNOWN = "unknown"
COVERED = "covered"
ADMITS = "admits"
TUNING = "tuning"  # a branch that only picks block sizes or heuristics by capability: review the values
DEFINITION = "definition"  # an arch predicate's own test: its callers are the gates
OTHER_ARCH = "other-arch"  # a gate selecting code written for another kind of arch: review, not widen
# The groups of the audit, in the order the user acts on them.
GROUPS = (BLOCKER, WIDENABLE, NEEDS_HUMAN, OTHER_ARCH, TUNING, UNKNOWN)
CLASSIFICATIONS = (*GROUPS, COVERED, DEFINITION, ADMITS)

# What the arch gets where the gate excludes it.
NOTHING, ERROR, STUB = "nothing", "error", "stub"  # the arch gets nothing
FALLBACK = "fallback"  # another branch with code, written for other archs
# widening alone gives the arch nothing that works: a JIT module only code for other archs uses, or
# one whose kernels need hardware codemod cannot check (multicast for multimem)
PORT = "port"
IMPLEMENTATION, DEFAULT, HOST, OUTER = "implementation", "default", "host", "outer"  # fine
UNCALLED = "uncalled"  # fine: the guard sits in a device function nothing the JIT modules compile calls
UNDECIDED = "unknown"
# Read from the statement holding a Python gate (audit.python_advice): a predicate's definition, a tuning branch,
# a stated requirement (an assert or raise whose message names an arch: needs a human, never widenable).
DEFINED, TUNES, REQUIRED = "definition", "tuning", "requirement"
OTHER = "other-arch"  # the guarded code is written for archs of another kind (cpp.instructions.kin)
_GETS_NOTHING = (NOTHING, ERROR, STUB)
_FINE = (IMPLEMENTATION, DEFAULT, HOST, OUTER, UNCALLED)


def editable(gate: Gate, arch: Arch | None = None) -> bool:
    """Whether `codemod run` has an edit for `gate` (for `arch`): its kind's answer (GateKind.editable)."""
    kind = KINDS.get(gate.kind)
    return kind is not None and kind.editable(gate, arch)


@dataclass(frozen=True)
class Path:
    """What the arch gets where a gate excludes it: `gets` (see above), and why, in one sentence."""

    gets: str
    reason: str
    line: int | None = None  # the branch it takes instead, when there is one


def classify(excludes: bool | None, path: Path | None, lacking: list[str], editable: bool) -> tuple[str, str]:
    """(classification, reason) of one gate.

    `excludes`: whether the gate excludes the arch (None: unknown); `path`:
    what the arch gets there; `lacking`: instructions the arch lacks in the
    code the gate guards (one line each); `editable`: whether codemod has an
    edit for the gate.
    """
    if excludes is False:
        return ADMITS, ""
    if excludes is None:
        return UNKNOWN, "whether the gate admits the arch depends on macros or values codemod cannot evaluate"
    if path is None or path.gets == UNDECIDED:
        return UNKNOWN, path.reason if path is not None else "codemod cannot decide the gate for this arch"
    if path.gets in _FINE:
        return COVERED, path.reason
    if path.gets == DEFINED:
        return DEFINITION, path.reason
    if path.gets == TUNES:
        return TUNING, path.reason
    if path.gets == OTHER:
        return OTHER_ARCH, path.reason
    if lacking:
        shown = "; ".join(lacking[:2]) + (f" (and {len(lacking) - 2} more)" if len(lacking) > 2 else "")
        return NEEDS_HUMAN, f"the guarded code uses instructions the arch lacks: {shown}"
    if path.gets in (FALLBACK, PORT, REQUIRED):
        return NEEDS_HUMAN, path.reason
    if editable:
        return WIDENABLE, path.reason
    return BLOCKER, path.reason + "; codemod has no edit for this gate"


# ---------------------------------------------------------------- C, C++ and CUDA guards

_DEFINE_RE = re.compile(rb"^[ \t]*#[ \t]*define[ \t]+([A-Za-z_]\w*)", re.MULTILINE)
_INCLUDE_RE = re.compile(rb"^[ \t]*#[ \t]*include\b", re.MULTILINE)
_RETURN_RE = re.compile(rb"\breturn\b")
def _defines(text: bytes) -> set[bytes]:
    return set(_DEFINE_RE.findall(text))


def guard_path(
    shape: Structure, branch: Branch, arch: Arch, source: bytes, admitted: tuple[Arch, ...], universe: tuple[Arch, ...]
) -> Path:
    """What `arch` gets where the guard `branch` (whose condition excludes it) is not taken.

    `source` is the file's bytes, `admitted` the archs of `universe` the
    guard admits. The arch gets nothing when no branch of the group it takes
    holds code, or the branch it takes is an `#error` or a stub. It is fine
    when it takes an earlier branch of its own, when the guard only sets a
    macro that has a default (or is a library's feature switch), or keeps code
    for older GPUs only (`< 800` fallbacks: widening would put the arch on
    them). It takes a fallback when another branch with code serves it
    while the guard is for other (newer or sibling) archs.
    """
    name = arch.name
    outer = branch.parent
    while outer is not None:
        enclosing = shape.branches[outer]
        if shape.taken(enclosing, arch) is False:
            return Path(OUTER, f"inside {dispatch.described(enclosing)} (line {enclosing.line}), which {name} does not take",
                        enclosing.line)
        outer = enclosing.parent
    if not branch.names_arch:
        return Path(HOST, "the condition tells the host pass from the device pass, not one arch from another")
    masked = dispatch.masked(source)
    group = shape.group(branch)
    chosen, undecided = dispatch.taken_branch(shape, branch, arch)
    if undecided is not None:
        return Path(UNDECIDED, f"which branch {name} takes depends on {dispatch.described(undecided)} "
                               f"(line {undecided.line})")
    own = dispatch.own_text(shape, branch, masked)
    code = shape.has_code(branch)
    defined = _defines(own)
    if chosen is not None and chosen.position < branch.position:
        return Path(IMPLEMENTATION, f"{name} takes its own branch of the group, {dispatch.described(chosen)} (line {chosen.line})",
                    chosen.line)
    if not code and not _INCLUDE_RE.search(own):
        if not defined:
            return Path(DEFAULT, "the guarded branch holds no code")
        names = ", ".join(sorted(n.decode() for n in defined))
        elsewhere = _defines(masked[: branch.body_start] + masked[branch.body_end :])
        if defined <= elsewhere:
            return Path(DEFAULT, f"the guard only sets {names}, which has a default elsewhere in the file")
        if all(FEATURE_SWITCH_RE.fullmatch(n.decode()) for n in defined):
            return Path(DEFAULT, f"the guard sets the library's own per-arch feature switch {names}")
        return Path(FALLBACK, f"the guard only sets {names}: on {name} it stays undefined, and code that tests it "
                              "takes its other path")
    if _legacy(admitted, arch, universe):
        where = f"; {name} takes the implementation at line {chosen.line}" if chosen is not None else ""
        return Path(IMPLEMENTATION, f"the guard is a fallback for older archs ({', '.join(a.name for a in admitted)}){where}",
                    chosen.line if chosen is not None else None)
    if chosen is None:
        if _RETURN_RE.search(own) and _code_follows(masked, group[-1].body_end):
            return Path(FALLBACK, f"an early-return fast path: {name} runs the code after the #if group instead")
        return Path(NOTHING, f"no branch of this #if group gives {name} code")
    work = dispatch.branch_work(shape, chosen, masked)  # the branch rule run applies too (plan.dispatch)
    if work == "error":
        return Path(ERROR, f"{name} takes {dispatch.described(chosen)} (line {chosen.line}), an #error", chosen.line)
    if work == "stub":
        return Path(STUB, f"{name} takes {dispatch.described(chosen)} (line {chosen.line}), which does no work", chosen.line)
    return Path(
        FALLBACK,
        f"{name} takes {dispatch.described(chosen)} (line {chosen.line}) instead; widening would change which "
        "implementation it runs",
        chosen.line,
    )


def _code_follows(masked: bytes, endif: int) -> bool:
    """Whether code follows the group's `#endif` (at `endif`) in the same block, rather than its closing `}`."""
    after = masked.find(b"\n", endif)
    rest = dispatch.DIRECTIVE_RE.sub(b"", masked[after + 1 : after + 4096] if after >= 0 else b"").lstrip()
    return bool(rest) and not rest.startswith(b"}")


def _legacy(admitted: tuple[Arch, ...], arch: Arch, universe: tuple[Arch, ...]) -> bool:
    """Whether a guard keeps code for older GPUs only: every arch it admits is of an older major, and it is an
    upper bound reaching the oldest arch (`< 800`, `<= 900`) or admits nothing from Hopper on (`== 800`).
    A range such as `>= 900 && < 1200` is a feature path, not a fallback."""
    if not admitted or any(a.major >= arch.major for a in admitted):
        return False
    oldest = min(universe, key=lambda a: (a.major, a.minor)) if universe else None
    return (oldest is not None and oldest in admitted) or max(a.major for a in admitted) < 9


# ---------------------------------------------------------------- Python and run-time gates


def python_path(kind: str, detail: str, arch: Arch) -> Path:
    """What `arch` gets where a Python gate excludes it: the module or API the gate guards does not run.

    `detail` names what the gate guards (a JIT module, a decorated API, a
    branch). The polarity readers (issue 18 item 1) pass a path of their own; a comparison that guards no
    path gets `value_path`.
    """
    return Path(NOTHING, f"{detail or 'the guarded code'} does not run on {arch.name}")


def value_path(choice: str | None, decides: str, arch: Arch, assigns: str = "") -> Path:
    """What `arch` gets where a capability comparison or an arch predicate that guards no code path excludes it
    (gates/python/polarity.use): with `choice`, the other value of `x if test else y` (another branch with code: a
    fallback at most); otherwise the comparison is a value stored, passed or returned, and `decides` says what
    decides instead. `assigns`: the target it is assigned to, which a change names to select it."""
    select = f'; a change selects it with assigns = "{assigns}"' if assigns else ""
    if choice is not None:
        return Path(FALLBACK, f"{arch.name} gets `{choice}` instead: the condition picks between two values, "
                              f"not a path it lacks; widening would change which one it gets{select}")
    return Path(UNDECIDED, f"a value, not a guard: {decides}{select}")


def call_path(passed_to: str, arch: Arch) -> Path:
    """What `arch` gets where `has_arch(100) or has_arch(103)` (python_arch_call) excludes it: False, for a build
    that targets it, where the test is passed (`generate_sm100_operations(...)`: those kernels are not generated)."""
    where = f"`{passed_to}(...)` is given False" if passed_to else "the test is False"
    return Path(NOTHING, f"{where} in a build for {arch.name}")


def early_return_path(value: str, arch: Arch) -> Path:
    """What `arch` gets where a negated predicate test returns a value early (`if not P(): return True`,
    gates/python/polarity.early_value): that value, not nothing; the code after is the path written for P's archs."""
    return Path(FALLBACK, f"{arch.name} returns `{value}` early instead (no refusal): the code after is written for "
                          "the archs its test names; widening would change which path it takes")


def predicate_path(name: str, target: bool | None, admits: list[str], arch: Arch) -> Path:
    """What `arch` gets where the definition of the predicate `name` excludes it: every caller takes its False
    path. `target`: whether the build target the name stands for runs on `arch` (python_predicate.covers)."""
    if target is False:
        return Path(IMPLEMENTATION, f"`{name}` stands for a target {arch.name} does not run on; excluding it is right")
    if target or any(Arch.parse(a).major == arch.major for a in admits):
        return Path(NOTHING, f"`{name}` is False on {arch.name} (it admits {', '.join(admits)}): every caller "
                             f"takes its other path")
    written = ", ".join(admits) or "no arch"
    if name_covers(name, arch):
        return Path(FALLBACK, f"`{name}` is False on {arch.name} although its name covers it (its test admits "
                              f"{written}): decide whether it should")
    return Path(DEFINED, f"the definition of the arch predicate `{name}` (it admits {written}): its callers are the "
                         "gates; a predicate's own test is not widened")


# The families a predicate's name may stand for, by major.
_FAMILIES = {"ampere": (8,), "ada": (8,), "hopper": (9,), "blackwell": (10, 11, 12)}


def name_covers(name: str, arch: Arch) -> bool:
    """Whether a predicate's name stands for the arch: `is_blackwell` for sm_120, `is_sm120` for sm_121."""
    lowered = name.lower()
    for family, majors in _FAMILIES.items():
        if family in lowered:
            return arch.major in majors
    match = re.search(r"sm_?(\d{2,3})", lowered)
    return match is not None and int(match.group(1)) // 10 == arch.major


def lookup_path(name: str, line: int, arch: Arch) -> Path:
    """What `arch` gets where an arch-keyed map lacks it: the lookup at `line` fails."""
    return Path(ERROR, f"`{name}` has no key for {arch.name}: the lookup at line {line} fails")


def capability_table_path(name: str, arch: Arch) -> Path:
    """What `arch` gets where a capability table (vLLM's `FI_ALLREDUCE_FUSION_MAX_SIZE_MB`, integer keys, read with
    `.get(capability, {})`) has no row for it: no error, the feature it sizes is off; its rows are tuning data."""
    return Path(TUNES, f"`{name}` is tuning data keyed by capability with no row for {arch.name}: what it sizes is "
                       "off there (no error); a recipe can copy a measured arch's row (`value_from`), then measure")


def call_arch_path(gate_numbered: bool, passed_to: str, arch: Arch) -> Path:
    """`call_path`, or for vLLM's platform predicates (a run-time test, no build) what the test is at run time."""
    if gate_numbered:
        return Path(NOTHING, f"the platform test is False on {arch.name} at run time")
    return call_path(passed_to, arch)


def table_path(function: str, line: int, arch: Arch) -> Path:
    """What `arch` gets where a map bound to no name (`{"90a": True}[get_device_arch()]`) lacks it: the lookup
    fails if reached, and whether it is reached is decided by the callers of `function`, which are not followed
    (a named map's are, audit.map_callers; FlashInfer 0.6.10's DeepGEMM tables sit behind APIs that
    `supported_compute_capability([100, 103])` already refuses sm_121)."""
    return Path(UNDECIDED, f"the table looked up at line {line} in `{function}` has no key for {arch.name}: it fails "
                           "if reached; whether it is reached is not followed")


def runtime_path(holder: str, arch: Arch, exit: str = "") -> Path:
    """What `arch` gets where a cpp_runtime_check excludes it: a failed check macro, or an `if` whose body ends
    the path (`exit`: `throw`, `return false`, gates/cpp/checks/polarity), is an error; another `if`/`while`/`?:` is a
    dispatch whose other arms codemod does not follow."""
    if holder == "if" and exit:
        return Path(ERROR, f"the function stops there on {arch.name} (`{exit}`)")
    if holder in ("if", "while", "?:"):
        return Path(UNDECIDED, f"a run-time dispatch (`{holder}`): which arm {arch.name} takes is not followed")
    if "CHECK" not in holder.upper():
        return Path(UNDECIDED, f"`{holder}` fails on {arch.name} if reached; whether it is reached is not followed")
    return Path(ERROR, f"{holder} fails on {arch.name}")


def sibling(arch: Arch, universe: tuple[Arch, ...]) -> Arch | None:
    """The arch whose gates an arch-specific finding admits: sm_120 for sm_121 (the family's first member)."""
    if arch.minor == 0:
        return None
    first = Arch(arch.major, 0)
    return first if first in universe or first.plain in {a.plain for a in universe} else None


def differs(gate: dict, sibling: str) -> bool:
    """Whether a gate record admits the sibling arch `sibling` (e.g. sm_120) while it excludes the scanned one:
    an arch-specific finding (`--arch sm_121`: gates that admit sm_120 but not sm_121)."""
    return sibling in gate.get("admits", ())
