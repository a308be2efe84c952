"""The wheel's build hook: compiles codemod's C lexer (codemods/cpp/_lex.c) with gcc into codemods/cpp/_lex.so.

The shared library is a required part of the package (codemods.cpp.native
loads it with ctypes; there is no Python copy of what it does). It is
written next to its source, so a checkout whose package was installed with
`pip install .` or `pip install -e .` runs its tests against it too, and a
wheel carries it (tagged for this platform). `CC` names another compiler.
"""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
from pathlib import Path

from hatchling.builders.hooks.plugin.interface import BuildHookInterface

SOURCE = Path("codemods") / "cpp" / "_lex.c"
LIBRARY = Path("codemods") / "cpp" / "_lex.so"


def compile_library(root: Path) -> Path:
    """Compile SOURCE under `root` into LIBRARY; the library's path. Raises RuntimeError saying what failed."""
    compiler = shlex.split(os.environ.get("CC", "gcc"))
    if not compiler or shutil.which(compiler[0]) is None:
        raise RuntimeError(f"codemod's build needs a C compiler: `{compiler[0] if compiler else 'gcc'}` was not found (set CC)")
    source, library = root / SOURCE, root / LIBRARY
    partial = library.with_name(f".{library.name}.{os.getpid()}.tmp")
    command = [*compiler, "-O2", "-std=c99", "-Wall", "-shared", "-fPIC", "-o", str(partial), str(source)]
    done = subprocess.run(command, capture_output=True, text=True)
    if done.returncode != 0:
        partial.unlink(missing_ok=True)
        raise RuntimeError(f"compiling {SOURCE} failed ({shlex.join(command)}):\n{done.stderr}")
    os.replace(partial, library)  # an import racing the build sees the old library or the new one, whole
    return library


class CustomBuildHook(BuildHookInterface):
    def initialize(self, version: str, build_data: dict) -> None:
        library = compile_library(Path(self.root))
        if version != "editable":  # an editable install imports the checkout, where the library now is
            build_data["force_include"][str(library)] = LIBRARY.as_posix()
            build_data["pure_python"] = False
            build_data["infer_tag"] = True
