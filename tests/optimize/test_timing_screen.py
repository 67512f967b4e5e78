"""The rounds' timing screen: one A/B round before correctness refuses a candidate that cannot become champion."""

from __future__ import annotations

from dataclasses import replace
from types import SimpleNamespace
from typing import Any

import numpy as np

from kernellsp.optimize.result import OptimizeOptions
from kernellsp.optimize.verify import timing_gate
from kernellsp.optimize.verify.session import derive_seed
from kernellsp.optimize.verify.verdict import VERDICTS, Verdict, VerifyOptions


def _session(ms: dict[str, float], calls: list[tuple[str, str, int, int]]) -> Any:
    """A verification session whose time-mode harness runs report ``ms[exe side]`` with 1% noise."""
    rng = np.random.default_rng(5)

    def harness_run(exe: str, mode: str, shape: int, seed: int, reps: int | None = None, **_: object) -> Any:
        calls.append((exe, mode, seed, reps or 0))
        n = reps or 10
        t = list(ms[exe[2:]] * (1 + 0.01 * rng.standard_normal(n)))
        out = SimpleNamespace(
            ok=True,
            error=None,
            device={"name": "test"},
            copy_bandwidth=None,
            timings_ms=t,
            timings_sync_ms=t,
            buffers=[],
        )
        return SimpleNamespace(returncode=0, output=""), out, ""

    return SimpleNamespace(harness_run=harness_run, run_seed=11, phase_s={})


PLAN: Any = SimpleNamespace(kind="global")


def _screen(
    base_ms: float, cand_ms: float, bar: float
) -> tuple[Verdict | Any, list[tuple[str, str, int, int]]]:
    calls: list[tuple[str, str, int, int]] = []
    s = _session({"base": base_ms, "cand": cand_ms}, calls)
    opts = VerifyOptions(rounds=4, reps=10, screen_speedup=bar)
    got = timing_gate.screen_candidate(s, "k", PLAN, opts, lambda *_: None, {})
    return got, calls


def test_a_candidate_no_faster_than_its_baseline_is_refused_after_one_round_without_a_check() -> None:
    got, calls = _screen(1.0, 1.0, 1.02)
    assert isinstance(got, Verdict)
    assert got.kind == "not_faster" and not got.accepted
    assert "correctness was not checked" in got.message
    # One process per side, both timing: no correctness (check mode) run was spent on it.
    assert [(exe, mode) for exe, mode, *_ in calls] == [("h_base", "time"), ("h_cand", "time")]
    assert got.stats is not None and got.stats["rounds"] == 1


def test_a_clearly_faster_candidate_passes_and_its_screen_round_is_the_first_timing_round() -> None:
    got, calls = _screen(1.0, 0.5, 1.02)
    assert not isinstance(got, Verdict)
    assert len(got.rounds["base"]) == len(got.rounds["cand"]) == 1
    # Timing continues from the screen's round: the next processes use round 2's seed, not round 1's again.
    s = _session({"base": 1.0, "cand": 0.5}, calls)
    opts = VerifyOptions(rounds=4, reps=10, min_rounds=3)
    more = timing_gate._ab_rounds(s, "k", True, opts, lambda *_: None, 3, 0.95, prior=got)
    assert not isinstance(more, Verdict)
    assert len(more.rounds["cand"]) == 3
    seeds = [seed for exe, _, seed, _ in calls if exe == "h_cand"]
    assert seeds == [derive_seed(11, 1000 + r) for r in range(3)]
    # Repetitions after the first round are scaled to the baseline's duration, as without a screen.
    assert calls[2][3] == calls[3][3]


def test_a_candidate_slower_than_the_rounds_lead_is_refused_even_when_faster_than_the_baseline() -> None:
    """In round 1 the lead candidate is verified first; the others become champion only by beating it."""
    got, _ = _screen(1.0, 1.0 / 1.5, 1.8)
    # Faster than the baseline, slower than the lead: "outpaced", which the memory does not hold against
    # the recipe (a plain not_faster would count as a failure of it).
    assert isinstance(got, Verdict) and got.kind == "outpaced" and not got.accepted
    assert "1.800x" in got.message and got.kind in VERDICTS
    passed, _ = _screen(1.0, 1.0 / 2.0, 1.8)
    assert not isinstance(passed, Verdict)


def test_the_bar_is_never_below_the_minimum_gain() -> None:
    got, _ = _screen(1.0, 1.01, 0.5)  # 1% slower: below 1.02 whatever the bar asked
    assert isinstance(got, Verdict) and got.kind == "not_faster"


def test_rounds_screen_and_the_final_verification_never_does() -> None:
    from kernellsp.optimize.loop import _round_verify_options

    opts = OptimizeOptions(min_gain_pct=3.0)
    assert _round_verify_options(opts).screen_speedup == 1.03
    assert opts.verify.screen_speedup is None
    assert _round_verify_options(replace(opts, round_screen=False)).screen_speedup is None


def test_an_outpaced_candidate_counts_neither_for_nor_against_its_recipe() -> None:
    from kernellsp.optimize.propose.recipes.proposer import recipe_scores

    recs = [
        {"transform": "recipe:reduce-block(block=256)", "verdict": "accepted", "measured_speedup": 9.0},
        {"transform": "recipe:reduce-block(block=512)", "verdict": "outpaced", "measured_speedup": 7.0},
        {"transform": "recipe:reduce-block(block=128)", "verdict": "not_faster", "measured_speedup": 1.0},
    ]
    assert recipe_scores(recs)["reduce-block"] == (9.0, 1, 1)
