"""Which nvcc flags read from an inspected tree's JIT code the build proof may pass to nvcc.

The flags of `verify --build` come from evaluating the tree's own Python
(codemods.jit.flags), so the tree chooses them: `-ccbin script.sh` would make
nvcc run that script as its host compiler. Only the flags FlashInfer's JIT
really uses (0.6.3 to 0.6.16) pass: macros, include folders inside the tree
or one of the machine's known include roots, optimisation, language standard,
`--expt-*`, the `-gencode` of an arch, debug info, `--threads`, and host
compiler or ptxas options from a short list of harmless values. Everything
else (`-ccbin`, `--compiler-bindir`, `-Xcompiler=-fplugin=...`, `-Xlinker`,
`@file`, `--options-file`, an `-include` from outside the tree, ...) is
refused, naming the flag and the line of the tree's code that wrote it.
Sources must be files inside the tree too: a "source" starting with `-`
would be one more flag.
"""

from __future__ import annotations

import ast
import posixpath
import re
from collections.abc import Iterable, Mapping

from codemods.core import errors

_WORD = r"[A-Za-z_][A-Za-z0-9_]*"
_MACRO_VALUE = r"[A-Za-z0-9_.+\-:,]*"  # no spaces, quotes or shell characters
_ARCH = r"(?:compute|sm|lto)_\d{2,3}[af]?"

_ALONE = re.compile(
    "|".join((
        rf"-D{_WORD}(?:={_MACRO_VALUE})?",
        rf"-U{_WORD}",
        r"-O[0-3]",
        r"--?std=c\+\+\d\d",
        r"--expt-relaxed-constexpr|--expt-extended-lambda|--extended-lambda",
        rf"-gencode=arch={_ARCH},code=(?:{_ARCH}|\[{_ARCH}(?:,{_ARCH})*\])",
        rf"-arch=(?:{_ARCH}|native|all|all-major)",
        r"--?use_fast_math",
        r"-lineinfo|--generate-line-info|-g|-G|--device-debug",
        r"--threads=\d+",
        r"-static-global-template-stub=(?:true|false)",
        r"-rdc=(?:true|false)|--relocatable-device-code=(?:true|false)",
        r"-Xfatbin=-compress-all",
        r"-w|-Wno-[a-z0-9-]+|--diag-suppress=[\d,]+",
        r"-maxrregcount=\d+|--maxrregcount=\d+",
        r"-ftz=(?:true|false)|-prec-div=(?:true|false)|-prec-sqrt=(?:true|false)|-fmad=(?:true|false)",
    ))
)
_HOST_OPTION = re.compile(r"-fPIC|-fpic|-w|-Wall|-Wextra|-Wno-[a-z0-9-]+|-O[0-3]|-g")
_PTXAS_OPTION = re.compile(r"-v|--verbose|-O[0-3]|--warn-on-spills")
_WITH_VALUE = {  # options whose value is the next argument or follows `=`
    "-Xcompiler": _HOST_OPTION, "--compiler-options": _HOST_OPTION,
    "-Xptxas": _PTXAS_OPTION, "--ptxas-options": _PTXAS_OPTION,
}
_FOLDERS = ("-I", "-isystem", "--include-path")
_FILES = ("-include", "--pre-include")
_SEPARATE = {"-gencode", "-std", "--threads", "-t", "-arch"}  # `-gencode arch=...`: checked as `-gencode=arch=...`


def refusal(
    flags: Iterable[str], sources: Iterable[str], tree: str, roots: Iterable[str], code: Mapping[str, str], rel, where: str
) -> errors.FlagRefused | None:
    """The error for the first flag or source nvcc may not be given, or None when all of them may.

    `tree` is the folder of the inspected tree (an include folder or an
    `-include` file must lie in it, or a folder in `roots`); `code` maps the
    tree's Python files that were evaluated to their text, where the flag's
    line is looked up; `rel(path)` shortens a path for the message.
    """
    bad = first_refused(list(flags), tree, tuple(roots))
    if bad is None:
        bad = next((s for s in sources if s.startswith("-") or not _inside(s, tree, ())), None)
        if bad is None:
            return None
        what = "source"
    else:
        what = "nvcc flag"
    return errors.FlagRefused(
        f"{what} `{bad}` is not one codemod passes to nvcc (from {origin(bad, code, rel)}); it could run a program the tree chose",
        where=where,
    )


def first_refused(flags: list[str], tree: str, roots: tuple[str, ...]) -> str | None:
    """The first flag that is not on the allow-list (for a pair, the option that takes the bad value)."""
    position = 0
    while position < len(flags):
        flag = flags[position]
        value: str | None = None
        name = flag
        if flag in _WITH_VALUE or flag in _FOLDERS or flag in _FILES or flag in _SEPARATE:
            if position + 1 >= len(flags):
                return flag
            value = flags[position + 1]
            position += 2
            if not _allowed(name, value, tree, roots):
                return f"{flag} {value}"
            continue
        else:
            position += 1
            for option in (*_WITH_VALUE, *_FOLDERS, *_FILES):
                if flag.startswith(option + "=") or (option in _FOLDERS + ("-include",) and flag.startswith(option) and flag != option):
                    name, value = option, flag[len(option):].removeprefix("=")
                    break
        if not _allowed(name, value, tree, roots):
            following = flags[position] if position < len(flags) and name == flag else ""
            return f"{flag} {following}" if following and not following.startswith("-") else flag  # its value, if it takes one
    return None


def _allowed(name: str, value: str | None, tree: str, roots: tuple[str, ...]) -> bool:
    if value is None:
        return bool(_ALONE.fullmatch(name))
    if name in _WITH_VALUE:
        return all(_WITH_VALUE[name].fullmatch(part) for part in value.split(","))
    if name in _FOLDERS:
        return _inside(value, tree, roots)
    if name in _FILES:
        return _inside(value, tree, ())
    if name == "-t":
        return value.isdigit()
    return bool(_ALONE.fullmatch(f"{name}={value}"))


def _inside(path: str, tree: str, roots: tuple[str, ...]) -> bool:
    """Whether the absolute `path` lies in `tree` or one of `roots` (read as written: `..` counts)."""
    if not path.startswith("/"):
        return False
    path = posixpath.normpath(path)
    return any(path == folder or path.startswith(folder.rstrip("/") + "/") for folder in (tree, *roots) if folder)


def origin(flag: str, code: Mapping[str, str], rel) -> str:
    """`file:line` of the string literal in the evaluated code that most likely wrote `flag`."""
    best: tuple[int, str, int] | None = None
    for path, text in code.items():
        try:
            tree = ast.parse(text)
        except (SyntaxError, ValueError):
            continue
        for node in ast.walk(tree):
            if not (isinstance(node, ast.Constant) and isinstance(node.value, str)):
                continue
            literal = node.value.strip()
            if literal and (literal == flag or (len(literal) > 1 and literal.startswith("-") and flag.startswith(literal))
                            or (len(literal) > 3 and literal in flag)):
                score = len(literal) + (1000 if literal == flag else 0)
                if best is None or score > best[0]:
                    best = (score, path, node.lineno)
    if best is None:
        return "the tree's JIT code"
    return f"{rel(best[1])}:{best[2]}"
