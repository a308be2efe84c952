"""codemod doctor: read an SGLang server log (and the GPUs' topology) and say how the server is doing.

  rules       the rulebook: log rules as data, loaded and checked (needles: their fast pre-check)
  diagnosis   one log read line by line into a Report (report: the records it holds)
  throughput  a metric's samples and their steady-state percentiles
  compare     the A/B of a patched run against its baseline
  tail        following a live log (follow)
  topology    preflight: GPU peer-to-peer from `nvidia-smi topo` matrices
  logfile     reading doctor's input files safely
  checkup     one doctor run, start to end (what the command calls)

The names below are the package's API; text and JSON output is codemods.render.doctor.
"""

from codemods.doctor.checkup import Checkup, checkup, healthy
from codemods.doctor.compare import Comparison, compare
from codemods.doctor.diagnosis import Diagnosis, diagnose, diagnose_file, refuse_if_not_a_log
from codemods.doctor.logfile import MAX_LINE, log_lines
from codemods.doctor.report import Event, Fatal, Report
from codemods.doctor.rules import LogRule, load_rules, parse_rules
from codemods.doctor.tail import follow
from codemods.doctor.throughput import Samples, Throughput, steady_state
from codemods.doctor.topology import Preflight, parse_topology, preflight

__all__ = [
    "MAX_LINE", "Checkup", "Comparison", "Diagnosis", "Event", "Fatal", "LogRule", "Preflight", "Report", "Samples",
    "Throughput", "checkup", "compare", "diagnose", "diagnose_file", "follow", "healthy", "load_rules", "log_lines",
    "parse_rules", "parse_topology", "preflight", "refuse_if_not_a_log", "steady_state",
]
