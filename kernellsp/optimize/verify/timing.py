"""Timing statistics for the timing gate: paired A/B rounds and a bootstrap confidence interval.

The verifier runs baseline (A) and candidate (B) alternately, A B A B ..., each round in its own
process with its own warm-up and repetitions (L2 flushed before each). A round pairs the median
of A's repetitions with the median of B's run right after it, so slow drifts of clock and
temperature cancel. The speedup is the median over rounds of A/B; its confidence interval comes
from a two-level bootstrap (resample rounds, then repetitions inside each round), which stays
honest when repetitions within one process are correlated. A candidate is accepted only when the
interval's lower bound clears ``1 + min_gain``; an A/A comparison therefore does not win.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

import numpy as np


@dataclass
class SpeedupStats:
    """The timing gate's numbers."""

    speedup: float
    ci_low: float
    ci_high: float
    confidence: float
    baseline_median_ms: float
    candidate_median_ms: float
    rounds: int
    reps_per_round: int
    baseline_spread_pct: float
    candidate_spread_pct: float

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def _median(x: np.ndarray[Any, Any]) -> float:
    return float(np.median(x))


def paired_speedup(
    baseline_rounds: list[list[float]], candidate_rounds: list[list[float]],
    n_boot: int = 4000, confidence: float = 0.95, seed: int = 0,
) -> SpeedupStats:
    """Speedup of candidate over baseline (>1 = faster) with a bootstrap confidence interval."""
    if len(baseline_rounds) != len(candidate_rounds) or not baseline_rounds:
        raise ValueError("need the same, non-zero number of baseline and candidate rounds")
    a = [np.asarray([t for t in r if np.isfinite(t) and t > 0], dtype=np.float64) for r in baseline_rounds]
    b = [np.asarray([t for t in r if np.isfinite(t) and t > 0], dtype=np.float64) for r in candidate_rounds]
    if any(x.size == 0 for x in a + b):
        raise ValueError("a round has no valid timings")
    ratios = np.array([_median(x) / _median(y) for x, y in zip(a, b, strict=True)])
    point = float(np.median(ratios))
    rng = np.random.default_rng(seed)
    n = len(a)
    boots = np.empty(n_boot)
    for k in range(n_boot):
        idx = rng.integers(0, n, n)
        r = np.empty(n)
        for j, i in enumerate(idx):
            xa = a[i][rng.integers(0, a[i].size, a[i].size)]
            xb = b[i][rng.integers(0, b[i].size, b[i].size)]
            r[j] = _median(xa) / _median(xb)
        boots[k] = np.median(r)
    alpha = (1 - confidence) / 2
    lo, hi = (float(q) for q in np.quantile(boots, [alpha, 1 - alpha]))
    all_a, all_b = np.concatenate(a), np.concatenate(b)
    spread = lambda x: 100.0 * float(np.subtract(*np.quantile(x, [0.75, 0.25]))) / _median(x)  # noqa: E731
    return SpeedupStats(
        speedup=point, ci_low=lo, ci_high=hi, confidence=confidence,
        baseline_median_ms=_median(all_a), candidate_median_ms=_median(all_b), rounds=n,
        reps_per_round=int(np.median([x.size for x in a])),
        baseline_spread_pct=spread(all_a), candidate_spread_pct=spread(all_b),
    )  # fmt: skip


def accepts(stats: SpeedupStats, min_gain_pct: float) -> bool:
    """The gate: the lower confidence bound must clear ``1 + min_gain``."""
    return stats.ci_low > 1.0 + min_gain_pct / 100.0


def roofline_floor_ms(footprint_bytes: int | None, peak_bytes_per_s: float | None,
                      flops: float | None = None, peak_flops: float | None = None) -> float | None:  # fmt: skip
    """The fastest a kernel can be: max(bytes / bandwidth, FLOPs / peak rate), in milliseconds."""
    times = []
    if footprint_bytes and peak_bytes_per_s:
        times.append(footprint_bytes / peak_bytes_per_s)
    if flops and peak_flops:
        times.append(flops / peak_flops)
    return 1e3 * max(times) if times else None


def peak_dram_bandwidth(device: dict[str, Any] | None) -> float | None:
    """Theoretical DRAM bandwidth from the harness's device record (bytes/s), when it has the fields."""
    if not device:
        return None
    clock_khz = device.get("mem_clock_khz") or device.get("memory_clock_khz")
    bus = device.get("mem_bus_width") or device.get("mem_bus_width_bits")
    if clock_khz and bus:
        return 2.0 * float(clock_khz) * 1e3 * float(bus) / 8.0
    return None
