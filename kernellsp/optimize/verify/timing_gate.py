"""The timing gate (step 5 of :mod:`kernellsp.optimize.verify.gate`): A/B rounds, the roofline floor, and the
outputs of randomly picked timed launches against the baseline's."""

from __future__ import annotations

import statistics
import time
from dataclasses import dataclass, field
from typing import Any

from kernellsp.optimize.verify import correctness as compare
from kernellsp.optimize.verify import timing
from kernellsp.optimize.verify.correctness_gate import Suspect, check_error_budget, oracle_rescue
from kernellsp.optimize.verify.session import Session, derive_seed, first_line
from kernellsp.optimize.verify.verdict import Progress, Verdict, VerifyError, VerifyOptions, reject
from kernellsp.run import harness
from kernellsp.source import spec


@dataclass
class _Rounds:
    """What the A/B rounds measured, per side (``base``, ``cand``)."""

    rounds: dict[str, list[list[float]]] = field(default_factory=lambda: {"base": [], "cand": []})
    raw: dict[str, list[dict[str, Any]]] = field(default_factory=lambda: {"base": [], "cand": []})
    device: dict[str, Any] | None = None
    # The candidate's runs keep the outputs of a few timed launches, picked at random after they ran
    # (the harness decides with OS entropy, so no launch can know it will be compared).
    checked: list[harness.HarnessResult] = field(default_factory=list)
    bandwidths: list[float] = field(default_factory=list)
    base_partial: set[str] = field(default_factory=set)


def _ab_rounds(
    s: Session,
    entry: str,
    kernel_entry: bool,
    opts: VerifyOptions,
    say: Progress,
    min_rounds: int,
    confidence: float,
    prior: _Rounds | None = None,
    last: int | None = None,
) -> _Rounds | Verdict:
    """Baseline and candidate alternately, one process per side and round, until the interval decides
    (or through round ``last``). ``prior``: rounds already run (the screen's), continued from."""
    m = prior or _Rounds()
    rounds, raw = m.rounds, m.raw
    # Buffers the baseline itself leaves partly unwritten (kernels that write a sub-range) are not held
    # against the candidate.
    base_partial = m.base_partial
    reps, warmup = opts.reps, opts.warmup
    if rounds["base"]:
        reps, warmup = timing.scaled_reps(statistics.median(rounds["base"][0]), opts.reps, opts.warmup)
    for r in range(len(rounds["base"]), min(opts.rounds, last or opts.rounds)):
        for who in ("base", "cand"):
            say(
                f"timing round {r + 1}/{opts.rounds}: {'baseline' if who == 'base' else 'candidate'}",
                75 + 24 * (r + (who == "cand") / 2) / opts.rounds,
            )
            keep = opts.check_launches if who == "cand" and not opts.timing_only else 0
            res, out, _ = s.harness_run(
                f"h_{who}",
                "time",
                0,
                derive_seed(s.run_seed, 1000 + r),
                reps=reps,
                warmup=warmup,
                fresh=True,
                check_launches=keep,
            )
            if out is None or not out.ok:
                msg = out.error if out is not None else first_line(res.output, 3)
                if who == "base":
                    raise VerifyError(f"timing the baseline failed: {msg}")
                return reject("runtime_error", entry, f"the candidate failed while being timed: {msg}")
            m.device = m.device or out.device
            if keep:
                m.checked.append(out)
            if out.copy_bandwidth:
                m.bandwidths.append(out.copy_bandwidth)
            ts = out.timings_ms if kernel_entry else out.timings_sync_ms
            raw[who].append({"timings_ms": out.timings_ms, "timings_sync_ms": out.timings_sync_ms})
            rounds[who].append(ts)
            v = _unwritten_while_timed(entry, who, out, base_partial)
            if v is not None:
                return v
        if r == 0 and rounds["base"][0]:
            reps, warmup = timing.scaled_reps(statistics.median(rounds["base"][0]), opts.reps, opts.warmup)
        if min_rounds <= r + 1 < opts.rounds:
            look = timing.paired_speedup(rounds["base"], rounds["cand"], confidence=confidence)
            if timing.decision(look, opts.min_gain_pct) != "continue":
                break
    return m


def _unwritten_while_timed(
    entry: str, who: str, out: harness.HarnessResult, base_partial: set[str]
) -> Verdict | None:
    """Output elements a timed repetition left unwritten: recorded for the baseline, refused for the candidate."""
    for b in out.buffers:
        if b.dir == "in" or not b.rep_unwritten or not any(u > 0 for u in b.rep_unwritten):
            continue
        if who == "base":
            base_partial.add(b.name)
        elif b.name not in base_partial:
            return reject(
                "unwritten_output",
                entry,
                f"during timing the candidate left elements of "
                f"{b.name} unwritten in {sum(1 for u in b.rep_unwritten if u)} of "
                f"{len(b.rep_unwritten)} repetitions (work skipped or cached across calls)",
                buffer=b.name,
            )
    return None


def _look_confidence(opts: VerifyOptions) -> tuple[int, float]:
    min_rounds = max(1, min(opts.min_rounds, opts.rounds))
    return min_rounds, timing.look_confidence(0.95, opts.rounds - min_rounds + 1)


def screen_candidate(
    s: Session,
    entry: str,
    plan: harness.HarnessPlan,
    opts: VerifyOptions,
    say: Progress,
    details: dict[str, Any],
) -> Verdict | _Rounds:
    """The loop's rounds only (``opts.screen_speedup``): one A/B timing round before any correctness run.

    A round selects a champion; a candidate whose interval after this round lies wholly below the speedup
    it would need to become champion (the minimum gain over the round's baseline, or the speedup of a
    candidate already accepted in the round) is refused as not faster without its correctness runs. Its
    outputs are never trusted here: a candidate that passes the screen goes through every gate, and this
    round is the first of its timing rounds. The final verification never screens.
    """
    assert opts.screen_speedup is not None
    t0 = time.monotonic()
    min_rounds, confidence = _look_confidence(opts)
    ab = _ab_rounds(s, entry, plan.kind == "global", opts, say, min_rounds, confidence, last=1)
    s.phase_s["screen"] = time.monotonic() - t0
    if isinstance(ab, Verdict):
        return ab
    stats = timing.paired_speedup(ab.rounds["base"], ab.rounds["cand"], confidence=confidence)
    gain = 1.0 + opts.min_gain_pct / 100.0
    bar = max(opts.screen_speedup, gain)
    if stats.ci_high >= bar:
        return ab
    interval = f"{100 * stats.confidence:.0f}% CI {stats.ci_low:.3f}–{stats.ci_high:.3f}"
    if stats.ci_high < gain:
        kind = "not_faster"
        message = (
            f"not faster: speedup {stats.speedup:.3f}x after one timing round, {interval} lies below "
            f"the {opts.min_gain_pct:g}% minimum gain (its correctness was not checked)"
        )
    else:
        # It may well be faster than the baseline: the round's lead is faster still. Kept apart from
        # not_faster so that the memory does not count it against its recipe.
        kind = "outpaced"
        message = (
            f"outpaced: speedup {stats.speedup:.3f}x after one timing round, {interval} lies below "
            f"the {bar:.3f}x of the round's lead, so it cannot become champion (its correctness was not checked)"
        )
    return Verdict(
        kind,
        False,
        message,
        entry,
        details=details,
        stats=stats.to_dict(),
        timings={"rounds": ab.raw, "kernel_entry": plan.kind == "global", "screen": True},
    )


def time_candidate(
    s: Session,
    entry: str,
    bspec: spec.BoundSpec,
    plan: harness.HarnessPlan,
    opts: VerifyOptions,
    say: Progress,
    details: dict[str, Any],
    prior: _Rounds | None = None,
) -> Verdict:
    kernel_entry = plan.kind == "global"
    t_timing = time.monotonic()
    # Sequential testing: from round min_rounds on, the interval is looked at after every round, each look
    # at a level that keeps the overall error at 5% (timing.look_confidence); timing stops once it clears
    # the minimum gain or lies wholly below it. Rounds after the first scale their repetitions to the
    # baseline's duration (timing.scaled_reps): a long kernel needs fewer launches per process.
    min_rounds, confidence = _look_confidence(opts)
    ab = _ab_rounds(s, entry, kernel_entry, opts, say, min_rounds, confidence, prior=prior)
    if isinstance(ab, Verdict):
        return ab
    rounds, raw, device, checked, bandwidths = ab.rounds, ab.raw, ab.device, ab.checked, ab.bandwidths
    s.phase_s["timing"] = time.monotonic() - t_timing
    stats = timing.paired_speedup(rounds["base"], rounds["cand"], confidence=confidence)
    v = Verdict(
        "not_faster",
        False,
        "",
        entry,
        details=details,
        stats=stats.to_dict(),
        timings={"rounds": raw, "kernel_entry": kernel_entry},
    )
    from kernellsp.profile.findings import footprint_bytes

    # The floor: the bytes the spec says the entry must move (inputs read once, outputs written once) at
    # this GPU's measured copy bandwidth (never above its theoretical peak).
    peak = timing.peak_dram_bandwidth(device)
    measured = float(sorted(bandwidths)[len(bandwidths) // 2]) if bandwidths else None
    bw = min(x for x in (measured, peak) if x) if (measured or peak) else None
    floor = timing.roofline_floor_ms(footprint_bytes(bspec), bw)
    if floor is not None:
        v.details["roofline_floor_ms"] = floor
        v.details["copy_bandwidth_bytes_per_s"] = measured
        v.details["peak_dram_bandwidth_bytes_per_s"] = peak
        v.details["candidate_pct_of_roofline"] = 100.0 * floor / stats.candidate_median_ms
        v.details["baseline_pct_of_roofline"] = 100.0 * floor / stats.baseline_median_ms
    limit = floor / opts.bandwidth_margin if floor is not None else 0.0
    suspect = stats.candidate_median_ms < limit
    if suspect and stats.baseline_median_ms < limit:
        # The baseline itself moves less than the spec says (a sub-range, early exits): the floor does not hold.
        v.details["roofline_floor_unreliable"] = (
            "the baseline is faster than the floor: it moves fewer bytes than the spec declares"
        )
        suspect = False
    if checked and (suspect or timing.accepts(stats, opts.min_gain_pct)):
        # Only a winner needs it: the outputs of the randomly picked timed launches against the baseline's
        # on the same inputs. A candidate that skips work on launches it guesses are not checked fails here.
        t0 = time.monotonic()
        say("checking the outputs of randomly picked timed launches", 99)
        mv = _check_timed_launches(s, entry, bspec, plan, checked, opts, details)
        s.phase_s["launch_checks"] = time.monotonic() - t0
        if mv is not None:
            return mv
    gap_base = _median_gap(raw["base"])
    gap_cand = _median_gap(raw["cand"])
    if kernel_entry and gap_cand > max(0.05, 3 * gap_base + 0.02):
        v.kind = "timing_anomaly"
        v.message = (
            f"the candidate's device work continues {gap_cand:.3f} ms past its launch (baseline {gap_base:.3f} ms): "
            "work outside the timed window is not allowed"
        )
        return v
    if suspect:
        assert floor is not None and bw is not None
        v.kind = "suspect_speedup"
        v.message = (
            f"the candidate ({stats.candidate_median_ms:.4f} ms) is {floor / stats.candidate_median_ms:.2f}x "
            f"faster than moving the spec's {footprint_bytes(bspec) or 0:,} bytes at this GPU's copy bandwidth "
            f"({bw / 1e9:.0f} GB/s: {floor:.4f} ms): it cannot have read its inputs and written its outputs; "
            "refused"
        )
        return v
    if timing.accepts(stats, opts.min_gain_pct):
        v.kind, v.accepted = "accepted", True
        v.message = (
            f"{stats.speedup:.3f}x faster ({stats.baseline_median_ms:.4f} → {stats.candidate_median_ms:.4f} ms; "
            f"{100 * stats.confidence:.0f}% CI {stats.ci_low:.3f}–{stats.ci_high:.3f}, {stats.rounds} A/B rounds)"
        )
    else:
        v.message = (
            f"not measurably faster: speedup {stats.speedup:.3f}x, {100 * stats.confidence:.0f}% CI "
            f"{stats.ci_low:.3f}–{stats.ci_high:.3f} does not clear the {opts.min_gain_pct:g}% minimum gain"
        )
    return v


def _check_timed_launches(
    s: Session,
    entry: str,
    bspec: spec.BoundSpec,
    plan: harness.HarnessPlan,
    runs: list[harness.HarnessResult],
    opts: VerifyOptions,
    details: dict[str, Any],
) -> Verdict | None:
    """Compare the snapshots of the candidate's timed launches with the baseline on the same inputs.

    Time mode draws the inputs of launch K of a run with ``--seed S`` on the device from
    ``launch_seed(S, K)``; the baseline reproduces them with the input set ``S@K`` (one process for all).
    """
    snaps = [(run, sn) for run in runs for sn in run.snapshots]
    if not snaps:
        return None
    sets = [harness.input_set(run.seed, launch=sn.launch) for run, sn in snaps]
    bres, bout, _ = s.harness_run("h_base", "check", 0, 0, sets=sets, gpu="shared")
    if bout is None or not bout.ok:
        msg = bout.error if bout is not None else first_line(bres.output)
        raise VerifyError(f"the baseline fails on the inputs of the timed launches: {msg}")
    details["launches_checked"] = [{"seed": run.seed, "launch": sn.launch} for run, sn in snaps]
    suspects: list[Suspect] = []
    for i, (run, sn) in enumerate(snaps):
        where = {"shape": 0, "seed": run.seed, "launch": sn.launch, "inputs": sets[i], "phase": "timing"}
        for a in plan.outputs:
            assert a.dtype is not None
            got = run.read_snapshot_bytes(sn.index, a.name)
            want = bout.read_set_bytes(i, a.name)
            cu, bu = sn.buffers[a.name].unwritten or 0, bout.sets[i].buffers[a.name].unwritten or 0
            if cu > bu:
                return reject(
                    "unwritten_output",
                    entry,
                    f"timed launch {sn.launch} (picked at random after it ran) left "
                    f"{cu} element(s) of {a.name} unwritten: work skipped on "
                    "launches it guessed were not checked",
                    buffer=a.name,
                    unwritten=cu,
                    **where,
                )
            tol = compare.resolve_tolerance(a.dtype, bspec.spec.tolerance)
            mm, err = compare.compare_error(a.name, a.dtype, got, want, tol)
            rescued, note = (
                oracle_rescue(s, 0, sets, i, a.name, a.dtype, got, want, tol, details) if mm else (False, "")
            )
            if rescued:
                continue
            if mm is not None:
                return reject(
                    "mismatch",
                    entry,
                    f"timed launch {sn.launch} (picked at random after it ran) computed a "
                    f"wrong result: {mm.describe()}{note}; every timed launch must do the work",
                    buffer=a.name,
                    index=mm.index,
                    got=mm.got,
                    want=mm.want,
                    **where,
                )
            if not compare.within_quick_budget(a.dtype, err, opts.error_budget):
                # The snapshot is the candidate's side; the reference is the baseline's set i of this run.
                suspects.append(Suspect(0, sets[i], a.name, a.dtype, err, bout, i, where))
    return check_error_budget(s, entry, suspects, opts, details, lambda _m, _p: None)


def _median_gap(rounds: list[dict[str, Any]]) -> float:
    import numpy as np

    gaps = [s - p for r in rounds for p, s in zip(r["timings_ms"], r["timings_sync_ms"], strict=False)]
    return float(np.median(gaps)) if gaps else 0.0
