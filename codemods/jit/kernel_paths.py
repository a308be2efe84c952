"""The kernels a Python arch gate selects, and the instructions they make an arch compile.

A Python gate decides which JIT module a GPU builds: FlashInfer's
`get_fmha_module` returns `gen_fmha_cutlass_sm100a_module(...)` when
`is_sm100a_supported(device) or is_sm110a_supported(device)`, and a spec's
`supported_major_versions=[10, 11]` says which majors it is compiled for.
Widening such a gate to an arch makes that arch compile the module, so it
gets the check a CUDA guard gets (hazards.blockers_for): upstream widened
get_fmha_module to SM12x (FlashInfer 9f4fd04ac) and reverted it because the
SM100 FMHA kernels need tcgen05/UMMA/TMEM (74e99e8bb).

`check` follows the gate to the JIT specs it selects:

- an or-chain or capability test: the `gen_*_module`/`get_*_module`
  functions called in the body it guards (else in its enclosing function),
  found through the file's imports (`from .jit import ...`, re-exports in
  `__init__.py`, `import *`), and on through functions that call others
  until one makes a `gen_jit_spec` call (jit_specs);
- a `supported_major_versions` list: the specs of its own function.

Then through each spec's sources and everything they include (closures.Closures:
FlashInfer's headers, and CUTLASS/CuTe when the tree has them) to the tokens
of the instructions the arch lacks (instructions.TOKEN_FAMILIES) in the code its
JIT target compiles (hazards.compiled: `#if` guards evaluated for the
target; CUTLASS's own wrapper definitions and feature-switched regions do
not count). What it cannot follow (an include found nowhere, a spec whose
sources are computed, a function it cannot find) is named in `unread`.

Pure: files come through the `read`/`exists` callables of a `Tree`.
"""

from __future__ import annotations

import ast
import posixpath
import re
from collections.abc import Callable
from dataclasses import dataclass, field

from codemods.core import errors
from codemods.core.pytrees import ParsedFiles
from codemods.cpp import hazards
from codemods.cpp import structure
from codemods.cpp import instructions
from codemods.cpp.closures import Closure, Closures
from codemods.cpp.instructions import Hit, family_reason, jit_target, lacking
from codemods.cpp.structure import Branch, Structure, file_structure
from codemods.jit import specs as jit_specs
from codemods.core.arch import Arch
from codemods.gates import SourceError
from codemods.gates.python import polarity, tree_index
from codemods.gates.python.ast_text import called

SELECTING_KINDS = ("python_arch_or", "python_arch_list", "python_capability", "python_arch_test")
# The functions a gate's body calls that build or fetch a JIT module (FlashInfer's naming).
_MODULE_CALL_RE = re.compile(r"^(?:gen|get)_\w+_module$")
_SELECTING = (ast.FunctionDef, ast.AsyncFunctionDef, ast.If, ast.While, ast.IfExp)  # what _selected_calls looks at
# FlashInfer up to 0.6.x builds every major >= 9 as an `a` target (compilation_context.py).
ALL_SPECIFIC_RE = re.compile(rb"""str\(minor\)\s*\+\s*["']a["']""")
_MAX_DEPTH = 6  # calls and re-exports followed from the gate


@dataclass
class Tree:
    """A FlashInfer tree as the check reads it: where its package is, its closures, and its files."""

    python: str  # the flashinfer package folder, relative to the tree ("flashinfer", or "." for the package itself)
    closures: Closures
    read: Callable[[str], bytes]  # OSError when the file cannot be read
    all_specific: bool = False  # the JIT builds every major >= 9 as an `a` target
    parsed: ParsedFiles = field(default_factory=ParsedFiles)  # shared with the scan's other readers when it passes one
    _specs: dict[str, list[jit_specs.JitSpec]] = field(default_factory=dict)
    _closures: dict[tuple, Closure] = field(default_factory=dict)
    _structures: dict[str, Structure | None] = field(default_factory=dict)
    _compiled: dict[tuple, tuple[list, list]] = field(default_factory=dict)
    _tags: dict[tuple, Hit | None] = field(default_factory=dict)

    def source(self, rel: str) -> bytes | None:
        try:
            return self.read(rel)
        except OSError:
            return None

    def module(self, rel: str, data: bytes | None = None) -> ast.Module | None:
        """File `rel` parsed; `data` stands for its bytes when given (a file a plan already changed)."""
        if data is None:
            return self.parsed.file(rel, lambda: self.source(rel))
        return self.parsed.tree(rel, data)

    def structure(self, rel: str, data: bytes) -> structure.Structure | None:
        """The file's #if structure with every token (cpp.structure.file_structure); None when it is not UTF-8."""
        if rel not in self._structures:
            try:
                self._structures[rel] = file_structure(data)
            except SourceError:
                self._structures[rel] = None
        return self._structures[rel]

    def specs_named(self, names: list[str]) -> list[tuple[str, jit_specs.JitSpec]]:
        """(file, spec) of the specs named `names` among the files read so far."""
        wanted = set(names)
        return [(rel, spec) for rel, specs in self._specs.items() for spec in specs if spec.module in wanted]

    def know_specs(self, rel: str, specs: list[jit_specs.JitSpec]) -> None:
        """The JIT specs made in file `rel`, as a caller already read them (scan's workers)."""
        self._specs[rel] = list(specs)

    def specs(self, rel: str) -> list[jit_specs.JitSpec]:
        """The JIT specs made in file `rel`."""
        if rel not in self._specs:
            data = self.source(rel)
            self._specs[rel] = [] if data is None else _file_specs(data)
        return self._specs[rel]

    def closure(self, spec: jit_specs.JitSpec) -> Closure:
        key = (spec.sources, spec.include_dirs)
        if key not in self._closures:
            self._closures[key] = self.closures.closure(spec)
        return self._closures[key]

    def compiled(self, rel: str, target: Arch, library: bool):
        key = (rel, target, library)
        if key not in self._compiled:
            data = self.source(rel)
            families = lacking(target)
            shape = None
            if data is not None and instructions.may_hold(data, families, instructions=library):
                shape = self.structure(rel, data)
            self._compiled[key] = (
                ([], []) if shape is None else hazards.compiled(shape, target, families, definitions=library)
            )
        return self._compiled[key]

    def arch_tag(self, rel: str, arch: Arch) -> Hit | None:
        """The CUTLASS ArchTag of another major than `arch`'s in file `rel` (instructions.arch_tag)."""
        key = (rel, arch.major)
        if key not in self._tags:
            data = self.source(rel)
            self._tags[key] = None if data is None else instructions.arch_tag(data, arch)
        return self._tags[key]


def tree(
    read: Callable[[str], bytes], python: str, csrc: str, include: str, libraries: tuple[str, ...] = ()
) -> Tree:
    """A Tree over a planner's `read(rel)`: each file is read once; what cannot be read does not exist."""
    cache: dict[str, bytes | None] = {}

    def cached(rel: str) -> bytes:
        if rel not in cache:
            try:
                cache[rel] = read(rel)
            except (OSError, errors.CodemodError):  # absent, a folder, or a symlink out of the tree
                cache[rel] = None
        data = cache[rel]
        if data is None:
            raise FileNotFoundError(rel)
        return data

    def exists(rel: str) -> bool:
        if posixpath.isabs(rel) or rel == ".." or rel.startswith("../"):
            return False
        try:
            cached(rel)
        except OSError:
            return False
        return True

    closures = Closures(csrc, include, exists, cached, tuple(libraries))
    return Tree(python, closures, cached, all_specific(cached, python))


def all_specific(read: Callable[[str], bytes], python: str) -> bool:
    """Whether the FlashInfer at `python` builds every major >= 9 as an `a` target (up to 0.6.x)."""
    try:
        return bool(ALL_SPECIFIC_RE.search(read(posixpath.normpath(posixpath.join(python, "compilation_context.py")))))
    except OSError:
        return False


@dataclass(frozen=True)
class Finding:
    """A token of an instruction the arch lacks, in a file a selected module compiles for it."""

    module: str
    file: str
    hit: Hit
    arch: Arch
    target: Arch
    guard: str = ""  # the innermost arch guard around it (for an undecided finding: the one codemod cannot decide)
    source: bool = False  # the file is one of the spec's sources, not a header they include

    @property
    def certain(self) -> bool:
        """An instruction the target surely emits: in a source the spec compiles, or under an arch guard
        that admits the target. A header's unguarded inline function may never be called."""
        return not self.hit.wrapper and (self.source or bool(self.guard))

    @property
    def where(self) -> str:
        return f"{self.file}:{self.hit.line}"


@dataclass
class PathCheck:
    """What widening one Python gate makes the archs compile."""

    modules: list[str] = field(default_factory=list)  # the JIT modules the gate selects
    found: list[Finding] = field(default_factory=list)  # tokens the arch's JIT target compiles
    undecided: list[Finding] = field(default_factory=list)  # tokens under a guard codemod cannot decide
    carried: list[Finding] = field(default_factory=list)  # tokens every arch the gate admits compiles and lacks too
    admitted: tuple[Arch, ...] = ()  # the archs the gate admits, which `carried` was judged against
    unread: list[str] = field(default_factory=list)  # what could not be followed, in words

    def blockers(self) -> list[str]:
        """One line per token family found: its first token (an instruction before a wrapper name) and the others."""
        families: dict[str, list[Finding]] = {}
        for finding in _distinct(self.found):
            families.setdefault(finding.hit.family, []).append(finding)
        out = []
        for family, findings in families.items():
            first = findings[0]
            archs = dict.fromkeys(f.arch.name for f in self.found if f.hit.family == family)
            others = [f.hit.token for f in findings[1:]]
            more = ""
            if others:
                listed = ", ".join(others[:4]) + (", ..." if len(others) > 4 else "")
                more = f" and {len(others)} more ({listed})"
            out.append(
                f"{first.hit.token} ({first.where}, compiled by {first.module} as {first.target.name}){more}: "
                f"{family_reason(family)}; not on {', '.join(archs)}"
            )
        return out

    def warnings(self) -> list[str]:
        """The potential findings: tokens under undecided guards, and what could not be followed."""
        out = [
            f"potential: {finding.hit.token} ({finding.where}, compiled by {finding.module}) is under "
            f"`{finding.guard}`, which codemod cannot decide for {finding.target.name}"
            for finding in _distinct(self.undecided)
        ]
        out += [f"potential: {text}" for text in self.unread]
        carried = _distinct(self.carried)
        if carried:
            first, others = carried[0], [f.hit.token for f in carried[1:]]
            listed = ", ".join(others[:4]) + (", ..." if len(others) > 4 else "")
            more = f" and {len(others)} more ({listed})" if others else ""
            out.append(
                f"not counted: {first.hit.token} ({first.where}, compiled by {first.module}){more}: compiled as well "
                f"for {', '.join(a.name for a in self.admitted)}, which the gate admits and which lack "
                f"{'them' if others else 'it'} too, so those builds never emit {'them' if others else 'it'}"
            )
        return out


def _distinct(findings: list[Finding]) -> list[Finding]:
    seen: dict[str, Finding] = {}
    for finding in sorted(findings, key=lambda f: (f.hit.family == instructions.ARCH_TAG, f.hit.wrapper)):
        seen.setdefault(finding.hit.token, finding)
    return list(seen.values())


def check(
    tree: Tree, file: str, source: bytes, kind: str, line: int, context: str, archs: tuple[Arch, ...],
    admitted: tuple[Arch, ...] = (),
) -> PathCheck:
    """What widening the `kind` gate at `file:line` (in function `context`) to `archs` makes them compile;
    `admitted` are the archs it admits already (check_specs)."""
    if kind not in SELECTING_KINDS:
        return PathCheck()
    unread: list[str] = []
    specs = _specs_selected(tree, file, source, kind, line, context, unread)
    result = check_specs(tree, specs, archs, admitted)
    result.unread = list(dict.fromkeys(unread + result.unread))
    return result


def check_specs(
    tree: Tree, specs: list[tuple[str, jit_specs.JitSpec]], archs: tuple[Arch, ...], admitted: tuple[Arch, ...] = ()
) -> PathCheck:
    """What building `specs` (each with the file that makes it) for `archs` compiles.

    Besides instruction tokens, a CUTLASS ArchTag of another major in the
    project's own files (instructions.arch_tag) is a finding. A finding that
    every one of `admitted` (the archs the gate admits today, built from the
    same sources) has too, at the same place, is no hazard of `archs`:
    ptxas would reject it in those builds as well, so it is never emitted
    (an uncalled inline member). It is kept in `carried`.
    """
    result = PathCheck(admitted=admitted)
    before: list[set[tuple[str, int, str]]] = []
    for arch in admitted:
        seen = check_specs(tree, specs, (arch,))
        before.append({(f.file, f.hit.line, f.hit.token) for f in seen.found + seen.undecided})
    for spec_file, spec in specs:
        result.modules.append(spec.module)
        if not spec.sources:
            result.unread.append(
                f"the sources of {spec.module} ({spec_file}:{spec.line}) are computed; codemod cannot read them"
            )
            continue
        closure = tree.closure(spec)
        for missing in closure.missing:
            result.unread.append(f"{spec.module} compiles {missing}, which is not in the tree")
        if closure.unresolved:
            result.unread.append(_unresolved_text(spec.module, closure.unresolved, tree.closures))
        sources = {tree.closures.place(*source) for source in spec.sources}
        for arch in archs:
            target = jit_target(arch, all_specific=tree.all_specific)
            for rel in closure.files:
                sure, unsure = tree.compiled(rel, target, rel in closure.library)
                result.found += [
                    Finding(spec.module, rel, hit, arch, target, _guard_text(branch), rel in sources)
                    for hit, branch in sure
                ]
                result.undecided += [
                    Finding(spec.module, rel, hit, arch, target, _guard_text(branch), rel in sources)
                    for hit, branch in unsure
                ]
                tag = None if rel in closure.library else tree.arch_tag(rel, arch)
                if tag is not None:
                    result.found.append(Finding(spec.module, rel, tag, arch, target, "", rel in sources))
    if before:
        def carried(finding: Finding) -> bool:
            return all((finding.file, finding.hit.line, finding.hit.token) in old for old in before)

        result.carried = [f for f in result.found + result.undecided if carried(f)]
        result.found = [f for f in result.found if not carried(f)]
        result.undecided = [f for f in result.undecided if not carried(f)]
    result.modules = list(dict.fromkeys(result.modules))
    result.unread = list(dict.fromkeys(result.unread))
    return result


def _guard_text(branch: Branch | None) -> str:
    if branch is None:
        return ""
    return "#else" if branch.directive == "#else" else f"{branch.directive} {branch.condition}"


def _unresolved_text(module: str, unresolved: list[tuple[str, str]], closures: Closures) -> str:
    shown = ", ".join(f"{path} (from {where})" for where, path in unresolved[:3])
    more = f" and {len(unresolved) - 3} more" if len(unresolved) > 3 else ""
    dirs = ", ".join([closures.include, closures.csrc, *closures.libraries])
    text = f"{module}: could not read {shown}{more}: not found in {dirs}"
    if any(path.split("/", 1)[0] in ("cutlass", "cute") for _, path in unresolved):
        text += " (CUTLASS is not in the tree: initialise the 3rdparty/cutlass submodule to check it)"
    return text


# ---------------------------------------------------------------- from the gate to its specs


def _specs_selected(
    tree: Tree, file: str, source: bytes, kind: str, line: int, context: str, unread: list[str]
) -> list[tuple[str, jit_specs.JitSpec]]:
    """The JIT specs the gate selects, with the file each is made in."""
    if kind == "python_arch_list":
        specs = _file_specs(source) if source != tree.source(file) else tree.specs(file)
        return [
            (file, spec) for spec in specs
            if spec.function == context or (spec.gate is not None and spec.gate.function == context)
        ]
    module = tree.module(file, source)
    if module is None:
        return []
    names = _selected_calls(module, line)
    found: list[tuple[str, jit_specs.JitSpec]] = []
    for name in names:
        found += _specs_of(tree, file, name, unread, 0, set())
    return list({(f, s.function, s.sources): (f, s) for f, s in found}.values())


def _file_specs(source: bytes) -> list[jit_specs.JitSpec]:
    try:
        return jit_specs.find(source)
    except Exception:  # a file jit_specs cannot parse holds no spec it can read
        return []


def _selected_calls(module: ast.Module, line: int) -> list[str]:
    """The module-building functions the gate at `line` selects: called in the body it guards; for a refusal
    (`if test: raise`, gates/python/polarity.exits) in the code after it, which is what it guards (none there: none,
    not the function's other branches); else in its function."""
    function: ast.FunctionDef | ast.AsyncFunctionDef | None = None
    guard: list[ast.stmt] | list[ast.expr] | None = None
    guard_node: ast.AST | None = None
    guard_at = (0, 0)
    around = [stmt for stmt in module.body if stmt.lineno <= line <= (stmt.end_lineno or stmt.lineno)]
    # the statement's functions and guards in ast.walk's order, from its one shared walk: the gates of one
    # function or class follow each other (FlashInfer 0.7.4: 361 gates walked their statements 361 times)
    for node in (inner for stmt in around for inner in tree_index.index(stmt).of_type(*_SELECTING)):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            if node.lineno <= line <= (node.end_lineno or node.lineno) and (function is None or node.lineno > function.lineno):
                function = node
            continue
        body: list[ast.stmt] | list[ast.expr]
        if isinstance(node, (ast.If, ast.While)):
            test, body = node.test, node.body
        elif isinstance(node, ast.IfExp):
            test, body = node.test, [node.body]
        else:
            continue
        at = (node.lineno, node.col_offset)
        if min(node.lineno, test.lineno) <= line <= (test.end_lineno or test.lineno) and at > guard_at:
            guard, guard_at, guard_node = body, at, node
    if guard is not None and function is not None and guard_at[0] < function.lineno:
        guard = None  # the innermost function holding the gate is inside that guard's body
    if guard is not None and function is not None and isinstance(guard_node, ast.If) and polarity.exits(guard_node.body):
        return _calls(_code_after(function, guard_node))
    names = _calls(guard or [])
    if not names and function is not None:
        names = [name for name in _calls(function.body) if name != function.name]
    return names


def _code_after(function: ast.FunctionDef | ast.AsyncFunctionDef, statement: ast.stmt) -> list[ast.stmt]:
    """The statements that run after `statement` in `function`: the rest of its block, then of each enclosing
    block, until one ends the path (a `return` or `raise`); an enclosing `if`'s other branch does not run."""
    after: list[ast.stmt] = []
    target: ast.AST = statement
    while target is not function:
        block, holder = _block_of(function, target)
        if block is None or holder is None:
            break
        rest = block[block.index(target) + 1 :]  # type: ignore[arg-type]
        after += rest
        if any(isinstance(s, (ast.Return, ast.Raise)) for s in rest) or isinstance(holder, (ast.For, ast.While)):
            break
        target = holder
    return after


def _block_of(function: ast.AST, target: ast.AST) -> tuple[list[ast.stmt] | None, ast.AST | None]:
    """The statement list holding `target` and the node owning it, searched under `function`."""
    for node in ast.walk(function):
        for name in ("body", "orelse", "finalbody"):
            block = getattr(node, name, None)
            if isinstance(block, list) and any(s is target for s in block):
                return block, node
        for handler in getattr(node, "handlers", None) or []:
            if any(s is target for s in handler.body):
                return handler.body, node
    return None, None


def _calls(body: list) -> list[str]:
    names = []
    for stmt in body:
        for node in ast.walk(stmt):
            if isinstance(node, ast.Call):
                name = called(node)
                if _MODULE_CALL_RE.match(name):
                    names.append(name)
    return list(dict.fromkeys(names))


def _specs_of(
    tree: Tree, file: str, name: str, unread: list[str], depth: int, seen: set
) -> list[tuple[str, jit_specs.JitSpec]]:
    """The specs function `name` (as seen from `file`) makes, directly or through the functions it calls."""
    if (file, name) in seen or depth > _MAX_DEPTH:
        return []
    seen.add((file, name))
    where = _definition(tree, file, name, 0)
    if where is None:
        unread.append(f"cannot find where {name} (called from {file}) is defined")
        return []
    def_file, node = where
    specs = [s for s in tree.specs(def_file) if s.function == name]
    specs = specs or [s for s in tree.specs(def_file) if s.gate is not None and s.gate.function == name]
    if specs:
        return [(def_file, spec) for spec in specs]
    found = []
    for callee in _calls(node.body):
        found += _specs_of(tree, def_file, callee, unread, depth + 1, seen)
    if not found and not _calls(node.body):
        unread.append(f"{name} ({def_file}:{node.lineno}) makes no JIT spec codemod can read")
    return found


def _definition(tree: Tree, file: str, name: str, depth: int) -> tuple[str, ast.FunctionDef | ast.AsyncFunctionDef] | None:
    """Where `name` is defined, seen from `file`: a module-level def there, or one its imports lead to."""
    module = tree.module(file)
    if module is None or depth > _MAX_DEPTH:
        return None
    for node in module.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name == name:
            return file, node
    stars = []
    for walked in ast.walk(module):
        if not isinstance(walked, ast.ImportFrom):
            continue
        for alias in walked.names:
            if alias.name == "*":
                stars.append(walked)
            elif (alias.asname or alias.name) == name:
                for target in _module_files(tree, file, walked.module, walked.level):
                    found = _definition(tree, target, alias.name, depth + 1)
                    if found is not None:
                        return found
    for star in stars:
        for target in _module_files(tree, file, star.module, star.level):
            found = _definition(tree, target, name, depth + 1)
            if found is not None:
                return found
    return None


def _module_files(tree: Tree, file: str, module: str | None, level: int) -> list[str]:
    """The files `from <level dots><module> import ...` in `file` may mean, that exist."""
    parts = module.split(".") if module else []
    bases = []
    if level:
        base = posixpath.dirname(file)
        for _ in range(level - 1):
            base = posixpath.dirname(base)
        bases.append(posixpath.join(base, *parts) if parts else base)
    elif parts:
        folders = posixpath.dirname(file).split("/")
        if parts[0] in folders:  # flashinfer/prefill.py: `flashinfer.jit` is flashinfer/jit
            bases.append(posixpath.join("/".join(folders[: folders.index(parts[0])]), *parts))
        if posixpath.normpath(tree.python) == ".":  # the package folder itself: `flashinfer.jit` is jit
            if len(parts) > 1:
                bases.append(posixpath.join(*parts[1:]))
        else:
            bases.append(posixpath.join(posixpath.dirname(posixpath.normpath(tree.python)), *parts))
    out = []
    for base in bases:
        for candidate in (f"{base}.py", posixpath.join(base, "__init__.py")):
            candidate = posixpath.normpath(candidate)
            if candidate.startswith("../") or candidate.startswith("/"):
                continue
            if tree.closures.exists(candidate):
                out.append(candidate)
    return list(dict.fromkeys(out))
