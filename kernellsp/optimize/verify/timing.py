"""Timing statistics for the timing gate: paired A/B rounds and a bootstrap confidence interval.

The verifier runs baseline (A) and candidate (B) alternately, A B A B ..., each round in its own
process with its own warm-up and repetitions (L2 flushed before each). A round pairs the median
of A's repetitions with the median of B's run right after it, so slow drifts of clock and
temperature cancel. The speedup is the median over rounds of A/B; its confidence interval comes
from a two-level bootstrap (resample rounds, then repetitions inside each round), which stays
honest when repetitions within one process are correlated. A candidate is accepted only when the
interval's lower bound clears ``1 + min_gain``; an A/A comparison therefore does not win.

The gate tests sequentially (:func:`decision`): after ``min_rounds`` rounds it looks at the interval
once per round and stops as soon as the lower bound clears the minimum gain (accept) or the upper
bound falls below it (the candidate cannot reach it: not faster). Looking several times would let
noise win more often than once in twenty, so every look uses a Bonferroni-adjusted level
(:func:`look_confidence`: 95% over three looks is 98.3% at each), which keeps the chance that an A/A
comparison is ever accepted at or below the single-look 5%. Repetitions per round scale with the
kernel's duration (:func:`scaled_reps`): long kernels get fewer, since each process's start-up, not
the launches, dominates the cost of short ones.
"""

from __future__ import annotations

import math
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
    baseline_rounds: list[list[float]],
    candidate_rounds: list[list[float]],
    n_boot: int = 4000,
    confidence: float = 0.95,
    seed: int = 0,
) -> SpeedupStats:
    """Speedup of candidate over baseline (>1 = faster) with a bootstrap confidence interval.

    Two levels, vectorised: each bootstrap replicate resamples the repetitions of every round (its
    median ratio), then resamples the rounds and takes the median of their ratios. A round drawn twice
    in one replicate reuses that replicate's resample of it.
    """
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
    # per_round[i, k]: round i's ratio of resampled medians in replicate k.
    per_round = np.empty((n, n_boot))
    for i, (xa, xb) in enumerate(zip(a, b, strict=True)):
        ma = np.median(xa[rng.integers(0, xa.size, (n_boot, xa.size))], axis=1)
        mb = np.median(xb[rng.integers(0, xb.size, (n_boot, xb.size))], axis=1)
        per_round[i] = ma / mb
    picks = rng.integers(0, n, (n_boot, n))
    boots = np.median(per_round[picks, np.arange(n_boot)[:, None]], axis=1)
    alpha = (1 - confidence) / 2
    lo, hi = (float(q) for q in np.quantile(boots, [alpha, 1 - alpha]))
    all_a, all_b = np.concatenate(a), np.concatenate(b)
    spread = lambda x: 100.0 * float(np.subtract(*np.quantile(x, [0.75, 0.25]))) / _median(x)  # noqa: E731
    return SpeedupStats(
        speedup=point,
        ci_low=lo,
        ci_high=hi,
        confidence=confidence,
        baseline_median_ms=_median(all_a),
        candidate_median_ms=_median(all_b),
        rounds=n,
        reps_per_round=int(np.median([x.size for x in a])),
        baseline_spread_pct=spread(all_a),
        candidate_spread_pct=spread(all_b),
    )


def accepts(stats: SpeedupStats, min_gain_pct: float) -> bool:
    """The gate: the lower confidence bound must clear ``1 + min_gain``."""
    return stats.ci_low > 1.0 + min_gain_pct / 100.0


def look_confidence(confidence: float, looks: int) -> float:
    """The level of each of ``looks`` interim intervals that keeps the overall error at ``1 - confidence``."""
    return 1.0 - (1.0 - confidence) / max(1, looks)


def decision(stats: SpeedupStats, min_gain_pct: float) -> str:
    """``accept`` (the interval clears the minimum gain), ``reject`` (it lies wholly below it: more rounds cannot
    make the candidate pass) or ``continue``."""
    if accepts(stats, min_gain_pct):
        return "accept"
    if stats.ci_high < 1.0 + min_gain_pct / 100.0:
        return "reject"
    return "continue"


def scaled_reps(
    median_ms: float, reps: int, warmup: int, min_reps: int = 5, budget_ms: float = 250.0
) -> tuple[int, int]:
    """Repetitions and warm-ups for the next rounds of a kernel that takes ``median_ms``.

    At most ``reps`` (the configured count, which short kernels keep: their cost is the process start),
    at least ``min_reps``, and about ``budget_ms`` of timed launches per process otherwise; one warm-up
    suffices for a kernel of 10 ms or more (clocks and caches settle within the first launch).
    """
    if not math.isfinite(median_ms) or median_ms <= 0:
        return reps, warmup
    n = max(min(min_reps, reps), min(reps, math.ceil(budget_ms / median_ms)))
    return n, (min(warmup, 1) if median_ms >= 10.0 else warmup)


def roofline_floor_ms(
    footprint_bytes: int | None,
    peak_bytes_per_s: float | None,
    flops: float | None = None,
    peak_flops: float | None = None,
) -> float | None:
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
