"""Read PTX text: its kernels (`.entry`), their instructions, and whether a body is empty.

Pure functions over the text nvcc -ptx writes; nothing here runs a compiler or reads a file.

- `entries(text)`: every `.entry` in order, with its instruction count, the count of each
  opcode (`griddepcontrol.wait`, `ld.param.u64` ...), and whether the body is empty: `ret;`
  and nothing else, which is what a kernel compiles to when the guards of the arch drop all
  of its code (FlashInfer PR #3903: the lamport allreduce kernels on SM12x).
- `normalised(text)`: the text with comments, blank lines and the per-compile hashes nvcc
  puts in internal-linkage names removed, so that two compiles of the same translation
  unit from different folders compare equal.

Directives (`.reg`, `.local`, `.pragma` ...), labels and braces are not instructions; a
predicate (`@%p1 bra ...`) is not part of the opcode.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass, field

_COMMENT_RE = re.compile(r"/\*.*?\*/|//[^\n]*", re.S)
_ENTRY_RE = re.compile(r"^[ \t]*(?:\.(?:visible|weak|extern)[ \t]+)*\.entry[ \t]+([A-Za-z_$%][\w$%.]*)", re.M)
_LABEL_RE = re.compile(r"^[A-Za-z_$%][\w$%.]*:")
_PREDICATE_RE = re.compile(r"^@!?%?[\w$]+\s+")
# nvcc names internal-linkage symbols _INTERNAL_<hash>_<n>_<file>_<hash>: the hashes change with the
# folder the file is compiled from, the code does not
_INTERNAL_RE = re.compile(r"_INTERNAL_[0-9a-f]{8}_(\d+_\w+?_)[0-9a-f]{8}")

# the PTX instructions PDL (programmatic dependent launch) compiles to
PDL_INSTRUCTIONS = ("griddepcontrol.wait", "griddepcontrol.launch_dependents")


@dataclass(frozen=True)
class Entry:
    """One kernel of a PTX module."""

    name: str  # the (mangled) symbol
    instructions: int
    opcodes: Counter = field(compare=False, hash=False)
    body: str = field(default="", repr=False, compare=False, hash=False)  # normalised body text

    @property
    def empty(self) -> bool:
        """The body is `ret;` alone (or nothing at all)."""
        return self.instructions == 0 or (self.instructions == 1 and self.opcodes.get("ret", 0) == 1)

    def count(self, opcode: str) -> int:
        """How many instructions have this opcode, or start with it followed by a dot (`ld` counts `ld.param.u64`)."""
        return sum(n for op, n in self.opcodes.items() if op == opcode or op.startswith(opcode + "."))


def strip_comments(text: str) -> str:
    return _COMMENT_RE.sub("", text)


def normalised(text: str) -> str:
    """Comment-free, blank-line-free text with nvcc's per-compile internal-name hashes replaced."""
    text = _INTERNAL_RE.sub(r"_INTERNAL_00000000_\1" + "00000000", strip_comments(text))
    return "\n".join(line.rstrip() for line in text.splitlines() if line.strip()) + "\n"


def entries(text: str) -> list[Entry]:
    """Every `.entry` of the PTX text, in order."""
    text = normalised(text)
    found: list[Entry] = []
    for match in _ENTRY_RE.finditer(text):
        body = _body(text, match.end())
        if body is None:
            continue
        opcodes = Counter(_opcodes(body))
        found.append(Entry(match.group(1), sum(opcodes.values()), opcodes, body))
    return found


def _body(text: str, start: int) -> str | None:
    """The text between the entry's outermost braces (after its parameter list), or None if unbalanced."""
    depth = 0
    i = start
    while i < len(text):  # skip the parameter list
        c = text[i]
        if c == "(":
            depth += 1
        elif c == ")":
            depth -= 1
        elif c == "{" and depth == 0:
            break
        elif c == ";" and depth == 0:
            return None  # a declaration (.extern .entry ...;) has no body
        i += 1
    else:
        return None
    open_at = i
    depth = 0
    for j in range(open_at, len(text)):
        if text[j] == "{":
            depth += 1
        elif text[j] == "}":
            depth -= 1
            if depth == 0:
                return text[open_at + 1 : j]
    return None


def _opcodes(body: str) -> list[str]:
    ops = []
    for statement in body.replace("{", ";").replace("}", ";").split(";"):
        statement = statement.strip()
        while True:  # labels may share a line with the instruction that follows
            label = _LABEL_RE.match(statement)
            if not label:
                break
            statement = statement[label.end():].strip()
        if not statement or statement.startswith("."):
            continue
        statement = _PREDICATE_RE.sub("", statement)
        ops.append(statement.split(None, 1)[0].rstrip(","))
    return ops


def differing(base: str, work: str) -> tuple[list[str], bool]:
    """Kernels whose bodies differ between two PTX texts (or exist in one only), and whether anything else differs.

    Both texts are compared normalised; (``[]``, False) means the two are the same PTX.
    """
    a, b = normalised(base), normalised(work)
    if a == b:
        return [], False
    ea = {e.name: e.body for e in entries(a)}
    eb = {e.name: e.body for e in entries(b)}
    names = [n for n in dict.fromkeys([*ea, *eb]) if ea.get(n) != eb.get(n)]
    rest_a = _ENTRY_BLOCK_RE.sub("", a)
    rest_b = _ENTRY_BLOCK_RE.sub("", b)
    return names, (not names) or rest_a != rest_b


# an entry from its header to the closing brace at the start of a line (nvcc's layout)
_ENTRY_BLOCK_RE = re.compile(r"^[ \t]*(?:\.(?:visible|weak)[ \t]+)*\.entry[ \t].*?^\}[ \t]*$", re.M | re.S)
