"""One file of a scan analysed: Python, CMake and C-family files each by their reader, never raising."""

from __future__ import annotations

from codemods.audit.c_files import analyse_c
from codemods.audit.listing import PYTHON_SUFFIXES
from codemods.audit.python_files import analyse_python
from codemods.audit.records import Context, FileScan, gate_record
from codemods.gates import SourceError
from codemods.gates.cmake import cmake_arch_list


def analyse(rel: str, data: bytes, context: Context, in_jit: bool, runtime: bool) -> FileScan:
    """Parse one file; never raises (a file that cannot be decoded or parsed comes back skipped).

    `runtime`: the finder (audit.finder) found a capability comparison in this C file.
    """
    try:
        if rel.endswith(PYTHON_SUFFIXES):
            return analyse_python(rel, data, context, in_jit)
        if cmake_arch_list.is_cmake(rel):
            gates = cmake_arch_list.find(data, context.universe)
            return FileScan(rel, gates=[gate_record(rel, gate, context.arch) for gate in gates], parsed=True)
        return analyse_c(rel, data, context, runtime)
    except SourceError as exc:
        return FileScan(rel, skipped=str(exc), parsed=True)
    except RecursionError:
        return FileScan(rel, skipped="cannot parse: nested too deeply", parsed=True)
    except Exception as exc:  # one file never stops the scan; the reason says what to report
        return FileScan(
            rel, skipped=f"cannot parse ({type(exc).__name__}: {exc}); please report this file", parsed=True
        )
