"""Throughput of a run: a metric's values per rank in bounded memory, and their steady-state percentiles.

Throughput's steady state drops warm-up: the samples logged before the first
ready line (the server's own warm-up request), then the first 10% (rounded up)
of each rank's remaining samples. When that leaves nothing, all samples count.

At most SAMPLE_CAP values are kept per rank (past that, a systematic sample:
every 2nd, 4th ... value; counts stay exact).
"""

from __future__ import annotations

import math
from array import array
from dataclasses import dataclass

SAMPLE_CAP = 1 << 18  # values kept per rank: beyond it every other one is dropped (a systematic sample)
WARMUP_FRACTION = 0.10


@dataclass
class Throughput:
    median: float
    p10: float
    p90: float
    samples: int
    warmup_dropped: int
    sources: list[str]
    not_finite: int = 0  # values that overflowed to inf (or were nan): left out, or one would make the median nan


class Samples:
    """One rank's values of one metric, in bounded memory.

    Every value while fewer than SAMPLE_CAP; past that, every other kept value
    is dropped and the stride doubles, so what is kept is always every
    stride-th value of the series: a systematic sample, in order.
    """

    __slots__ = ("values", "stride", "count")

    def __init__(self) -> None:
        self.values = array("d")
        self.stride = 1
        self.count = 0  # every value seen

    def add(self, value: float) -> None:
        if self.count % self.stride == 0:
            self.values.append(value)
            if len(self.values) >= SAMPLE_CAP:
                self.values = self.values[::2]
                self.stride *= 2
        self.count += 1

    def since(self, n: int, stride: int) -> array:
        """The kept values from the n-th value on, thinned to a coarser stride (a multiple of this one)."""
        return self.values[-(-n // self.stride)::stride // self.stride]


def steady_state(per_source: dict[str, Samples], at_ready: dict[str, int]) -> Throughput | None:
    """Median, p10 and p90 after warm-up (see the module docstring for the rule)."""
    total = sum(s.count for s in per_source.values())
    if total == 0:
        return None
    skips = {}
    for source, samples in per_source.items():
        skip = at_ready.get(source, 0)
        skips[source] = min(samples.count, skip + math.ceil((samples.count - skip) * WARMUP_FRACTION))
    if sum(skips.values()) >= total:
        skips = dict.fromkeys(per_source, 0)
    stride = max(s.stride for s in per_source.values())  # pool the ranks with equal weight per value
    values = sorted(v for source, s in per_source.items() for v in s.since(skips[source], stride))
    dropped = sum(skips.values())
    return Throughput(
        median=_quantile(values, 0.5), p10=_quantile(values, 0.1), p90=_quantile(values, 0.9),
        samples=total - dropped, warmup_dropped=dropped, sources=sorted(per_source),
    )


def _quantile(values: list[float], q: float) -> float:
    pos = (len(values) - 1) * q
    lo = math.floor(pos)
    hi = min(lo + 1, len(values) - 1)
    return round(values[lo] + (values[hi] - values[lo]) * (pos - lo), 3)
