"""Sequential testing in the timing gate: early stops, the error over repeated looks, reps scaled to duration."""

from __future__ import annotations

import time

import numpy as np
import pytest

from kernellsp.optimize.verify import timing


def _round(
    rng: np.random.Generator, base: float, cand: float, noise: float, drift: float, reps: int = 15
) -> tuple[list[float], list[float]]:
    d = 1.0 + drift * rng.standard_normal()
    return (
        list(base * d * (1 + noise * rng.standard_normal(reps))),
        list(cand * d * (1 + noise * rng.standard_normal(reps))),
    )


def _sequential(
    rng: np.random.Generator,
    base: float,
    cand: float,
    *,
    noise: float = 0.01,
    drift: float = 0.02,
    min_rounds: int = 3,
    max_rounds: int = 5,
    gain: float = 2.0,
) -> tuple[str, int]:
    """What the gate does: a look per round from ``min_rounds`` on, Bonferroni-adjusted; (verdict, rounds run)."""
    conf = timing.look_confidence(0.95, max_rounds - min_rounds + 1)
    a: list[list[float]] = []
    b: list[list[float]] = []
    for r in range(1, max_rounds + 1):
        x, y = _round(rng, base, cand, noise, drift)
        a.append(x)
        b.append(y)
        if r >= min_rounds:
            d = timing.decision(timing.paired_speedup(a, b, n_boot=1000, confidence=conf, seed=r), gain)
            if d != "continue" or r == max_rounds:
                return d, r
    raise AssertionError("unreachable")


def test_look_confidence_splits_the_error_over_the_looks() -> None:
    assert timing.look_confidence(0.95, 1) == pytest.approx(0.95)
    assert timing.look_confidence(0.95, 3) == pytest.approx(1 - 0.05 / 3)
    assert timing.look_confidence(0.95, 0) == pytest.approx(0.95)


def test_a_clear_gain_stops_at_the_first_look_and_a_clear_loss_too() -> None:
    rng = np.random.default_rng(7)
    assert _sequential(rng, 1.0, 1.0 / 1.3) == ("accept", 3)
    assert _sequential(rng, 1.0, 1.2) == ("reject", 3)


def test_a_gain_near_the_minimum_needs_more_rounds_than_a_clear_one() -> None:
    rounds = [
        _sequential(np.random.default_rng(s), 1.0, 1.0 / 1.035, noise=0.02, drift=0.02)[1] for s in range(10)
    ]
    assert max(rounds) > 3


def test_repeated_looks_at_aa_comparisons_accept_nothing() -> None:
    """An A/A comparison looked at up to three times per run, 100 runs with drift and noise: never accepted."""
    verdicts = [_sequential(np.random.default_rng(2000 + s), 1.0, 1.0)[0] for s in range(100)]
    assert verdicts.count("accept") == 0
    # Most A/A runs are recognised early as unable to reach the 2% minimum gain.
    assert verdicts.count("reject") >= 50


def test_an_aa_comparison_with_a_zero_minimum_gain_rarely_wins() -> None:
    """With no margin the error rate itself shows: at most about 5% of A/A runs may be accepted."""
    verdicts = [_sequential(np.random.default_rng(3000 + s), 1.0, 1.0, gain=0.0)[0] for s in range(100)]
    assert verdicts.count("accept") <= 8


def test_the_vectorised_bootstrap_is_fast() -> None:
    rng = np.random.default_rng(1)
    a = [list(rng.normal(1.0, 0.01, 50)) for _ in range(8)]
    b = [list(rng.normal(0.9, 0.01, 50)) for _ in range(8)]
    t = time.perf_counter()
    s = timing.paired_speedup(a, b)
    assert time.perf_counter() - t < 1.0  # the loop version took about 2 s for 4000 x 8 rounds
    assert s.ci_low < s.speedup < s.ci_high and s.speedup == pytest.approx(1 / 0.9, rel=0.01)


@pytest.mark.parametrize(
    ("median_ms", "want"),
    [
        (0.05, (15, 3)),  # short: the configured count (the process start dominates)
        (10.0, (15, 1)),  # 15 x 10 ms fits the budget; one warm-up is enough at 10 ms
        (40.0, (7, 1)),  # about 250 ms of launches
        (2000.0, (5, 1)),  # never fewer than 5
        (float("nan"), (15, 3)),
        (0.0, (15, 3)),
    ],
)
def test_scaled_reps(median_ms: float, want: tuple[int, int]) -> None:
    assert timing.scaled_reps(median_ms, 15, 3) == want


def test_scaled_reps_never_exceed_a_small_configured_count() -> None:
    assert timing.scaled_reps(100.0, 3, 1) == (3, 1)
