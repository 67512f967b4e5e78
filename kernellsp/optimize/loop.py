"""The verified rewrite loop: propose, verify, keep the fastest correct candidate, prove it again.

Branch and select: each round asks the proposer (the LLM when one is configured, the built-in tuner
otherwise, or both) for K candidates built on the current champion; each is verified against the
champion (scope, compile, correctness, sanitizer, timing); the fastest accepted one becomes the new
champion. The loop stops at the round budget, after ``patience`` rounds without gain, when the
champion is near the DRAM roofline, or when the proposers have nothing new. The final champion is
then verified from scratch against the ORIGINAL file (fresh seeds, every shape, sanitizer, A/B
timing): only that verdict decides, so tolerance drift across rounds cannot creep in.

Memory (``.kernellsp/memory.json``) records every candidate's idea, verdict and predicted vs
measured gain, so rejected ideas are not proposed again. Every run leaves an evidence bundle in
``.kernellsp/runs/``; :func:`replay` re-runs its final verdict. Applying writes the file only when it
is unchanged since the run began, after a backup in ``.kernellsp/backups/``; :func:`revert` restores it.
"""

from __future__ import annotations

import json
import secrets
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from kernellsp.findings import Finding
from kernellsp.optimize.evidence import Memory, _fresh_dir, _hash, _read_json, _rel, _write_bundle, state_dir
from kernellsp.optimize.propose.base import Candidate, ProposalContext, Proposer, ProposerError
from kernellsp.optimize.result import CandidateRecord, OptimizeError, OptimizeOptions, OptimizeResult
from kernellsp.optimize.verify.gate import Verdict, VerifyError, VerifyOptions, unified_diff, verify
from kernellsp.rules import engine as rulesmod
from kernellsp.run.runner import Runner
from kernellsp.source import spec as specmod
from kernellsp.source.model import parse_source

Progress = Callable[[str, float | None], None]
Event = Callable[[dict[str, Any]], None]


# --------------------------------------------------------------------------------------------------
# The loop


def default_proposers(settings: Any, ruleset: rulesmod.RuleSet | None, which: str = "auto") -> list[Proposer]:
    """``auto``: recipes first, then the LLM when an endpoint is configured, then the tuner; or exactly one
    (``recipes``, ``llm`` or ``tuner``)."""
    from kernellsp.optimize.propose.tuner import Tuner

    out: list[Proposer] = []
    if which in ("auto", "recipes"):
        from kernellsp.optimize.propose.recipes.proposer import RecipeProposer

        out.append(RecipeProposer())
    if which in ("auto", "llm") and settings is not None and settings.llm.configured:
        from kernellsp.optimize.propose.llm import LlmProposer

        out.append(LlmProposer(settings.llm, ruleset))
    elif which == "llm":
        raise OptimizeError(
            "--proposer llm needs llm.base_url and llm.model (kernellsp.toml [settings] or "
            "KERNELLSP_LLM_BASE_URL / KERNELLSP_LLM_MODEL)"
        )
    if which in ("auto", "tuner"):
        out.append(Tuner())
    return out


@dataclass
class _Run:
    """What every step of one run shares: the file, the runner and where the run's records go."""

    path: Path
    text: str
    entry: str
    runner: Runner
    env: dict[str, Any]
    cancel: threading.Event
    say: Progress
    emit: Event
    memory: Memory
    rel: str
    stamp: str
    bundle: Path


def optimize(
    path: Path,
    text: str,
    entry: str,
    runner: Runner,
    proposers: list[Proposer],
    options: OptimizeOptions | None = None,
    findings: list[Finding] | None = None,
    profile: dict[str, Any] | None = None,
    environment: dict[str, Any] | None = None,
    cancel: threading.Event | None = None,
    progress: Progress | None = None,
    on_event: Event | None = None,
    bundle_root: Path | None = None,
) -> OptimizeResult:
    """Run the loop on ``entry`` of ``path`` (whose current text is ``text``)."""
    from kernellsp.profile.environment import runner_environment

    # Always an event: an interrupt in the caller's thread must reach the candidates verifying in the pool.
    cancel = cancel if cancel is not None else threading.Event()
    opts = options or OptimizeOptions()
    _settle_verify_options(opts)
    round_opts = _round_verify_options(opts)
    say = progress or (lambda _m, _p: None)
    emit = on_event or (lambda _e: None)
    t0 = time.monotonic()
    model = parse_source(text, str(path))
    bound = specmod.entry_spec(model, entry)
    if bound is None:
        raise OptimizeError(
            f"{entry} has no launch spec: add one above it (the 'Add launch spec' code action drafts it)"
        )
    if not proposers:
        raise OptimizeError("no proposer is available")
    env = environment or runner_environment(runner)
    # The bundle records what confined the code under test; when nothing did, the user hears it now.
    box = runner.sandbox_status()
    if not box.confined:
        say(box.describe(), None)
    env = {**env, "sandbox": box.to_dict()}
    sdir = state_dir(path)
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
    bundle = _fresh_dir((bundle_root or sdir / "runs") / f"{stamp}-{path.stem}-{entry}")
    (bundle / f"original{path.suffix}").write_text(text)
    run = _Run(
        path,
        text,
        entry,
        runner,
        env,
        cancel,
        say,
        emit,
        Memory(sdir / "memory.json"),
        _rel(path),
        stamp,
        bundle,
    )
    champion = text
    champion_speedup = 1.0
    champions: list[str] = []  # each round's new champion, in order
    records: list[CandidateRecord] = []
    winners: list[str] = []
    stop = "round budget"
    no_gain = 0
    rounds_run = 0
    # Wall seconds per step of the run (propose, verify each round, the final verification): where it went.
    phases: dict[str, float] = {"prepare": time.monotonic() - t0}
    for rnd in range(1, opts.rounds + 1):
        if cancel is not None and cancel.is_set():
            stop = "cancelled"
            break
        if time.monotonic() - t0 > opts.time_budget_s:
            stop = "time budget"
            break
        rounds_run = rnd
        t_step = time.monotonic()
        ctx = _proposal_context(run, champion, records, findings, profile, rnd)
        cands = _gather_candidates(proposers, ctx, opts.candidates, rnd, say, emit)
        phases[f"round{rnd}_propose"] = time.monotonic() - t_step
        if not cands:
            stop = "no new candidates"
            break
        t_step = time.monotonic()
        outcomes = _verify_candidates(
            run, cands, champion, rnd, round_opts, opts.parallel, opts.near_roofline_pct
        )
        phases[f"round{rnd}_verify"] = time.monotonic() - t_step
        best = _record_verdicts(run, cands, outcomes, champion, champion_speedup, rnd, records)
        if best is None:
            no_gain += 1
            if no_gain >= opts.patience:
                stop = f"{opts.patience} rounds without gain"
                break
            continue
        no_gain = 0
        winners.append(best[1].description)
        champion = best[1].text
        champions.append(champion)
        champion_speedup *= best[0]
        emit(
            {
                "event": "champion",
                "round": rnd,
                "description": best[1].description,
                "speedup": champion_speedup,
            }
        )
        roofline_pct = best[2].details.get("candidate_pct_of_roofline")
        if roofline_pct is not None and roofline_pct >= opts.near_roofline_pct:
            stop = "near the roofline"  # little left to gain; the final verification still runs
            break
    final: Verdict | None = None
    if champion != text and not (cancel is not None and cancel.is_set()):
        t_step = time.monotonic()
        final = _final_verdict(run, champion, opts.verify)
        phases["final_verify"] = time.monotonic() - t_step
        if not final.accepted and len(champions) > 1 and not cancel.is_set():
            # The rounds select with fewer inputs than the final check: when it refuses the last round's
            # winner, the champion before it (already built on, so likely sound) gets its own final check.
            say(f"the final check refused {winners[-1]}: verifying the previous champion instead", None)
            t_step = time.monotonic()
            previous = _final_verdict(run, champions[-2], opts.verify)
            phases["final_verify_previous"] = time.monotonic() - t_step
            if previous.accepted:
                champion, final, winners = champions[-2], previous, winners[:-1]
    elif cancel is not None and cancel.is_set():
        stop = "cancelled"
    result = OptimizeResult(
        path=str(path),
        entry=entry,
        original_text=text,
        champion_text=champion if final and final.accepted else text,
        accepted=bool(final and final.accepted),
        final=final,
        candidates=records,
        rounds_run=rounds_run,
        stop_reason=stop,
        bundle=str(bundle),
        wall_s=time.monotonic() - t0,
        environment=env,
        winners=winners if final is not None and final.accepted else [],
        verify_options=asdict(opts.verify),
        phases={k: round(v, 3) for k, v in phases.items()},
    )
    _write_bundle(bundle, path, result)
    return result


def _settle_verify_options(opts: OptimizeOptions) -> None:
    """The gate's options for the whole run: the loop's minimum gain, and one seed for the drawn shapes, so
    every round and the final verification build the same harnesses (the binary cache); the summary records
    it for replay."""
    opts.verify.min_gain_pct = opts.min_gain_pct
    if opts.verify.shape_seed is None:
        opts.verify.shape_seed = secrets.randbits(63)


def _round_verify_options(opts: OptimizeOptions) -> VerifyOptions:
    # Rounds only select a champion: one seed, no sanitizer, and correctness runs beside the other candidates'
    # (shared GPU; timing still holds it alone) keep them quick. The final verification of the champion
    # against the original runs every gate in full.
    return VerifyOptions(
        **{
            **asdict(opts.verify),
            "seeds": min(opts.round_seeds, opts.verify.seeds),
            "sanitize": opts.round_sanitize and opts.verify.sanitize,
            "sanitize_all_shapes": False,
            "main_shape_patterns": False,
            "exclusive_checks": False,
            # One timed launch per timing process compared with the baseline (the final compares two): every
            # timing round still samples a launch the candidate cannot predict, at half the read-back.
            "check_launches": min(1, opts.verify.check_launches),
            # A candidate must beat the round's baseline by the minimum gain to become champion: one timing
            # round first refuses the ones that cannot, before their correctness runs.
            "screen_speedup": 1.0 + opts.min_gain_pct / 100.0 if opts.round_screen else None,
        }
    )


def _proposal_context(
    run: _Run,
    champion: str,
    records: list[CandidateRecord],
    findings: list[Finding] | None,
    profile: dict[str, Any] | None,
    rnd: int,
) -> ProposalContext:
    """What the proposers see in round ``rnd``: the champion, the original, and every idea tried so far."""
    cmodel = parse_source(champion, str(run.path))
    cbound = specmod.entry_spec(cmodel, run.entry)
    assert cbound is not None  # the scope gate refuses a candidate without the entry's spec
    tried = run.memory.tried(run.rel, run.entry) + [
        {
            "key": r.key,
            "transform": r.description,
            "verdict": r.verdict,
            "description": r.description,
            "speedup": r.speedup_vs_champion,
        }
        for r in records
    ]
    return ProposalContext(
        str(run.path),
        champion,
        run.text,
        run.entry,
        cmodel,
        cbound,
        list(findings or []),
        profile,
        tried,
        rnd,
    )


def _gather_candidates(
    proposers: list[Proposer], ctx: ProposalContext, limit: int, rnd: int, say: Progress, emit: Event
) -> list[Candidate]:
    """Up to ``limit`` candidates of distinct keys, asking each proposer in turn until there are enough."""
    cands: list[Candidate] = []
    for p in proposers:
        if len(cands) >= limit:
            break
        say(f"round {rnd}: asking the {p.name} for candidates", None)
        try:
            got = p.propose(ctx, limit - len(cands))
        except ProposerError as exc:
            emit({"event": "proposer_error", "proposer": p.name, "message": str(exc)})
            continue
        keys = {c.key for c in cands}
        cands.extend(c for c in got if c.key not in keys)
    return cands


def _verify_candidates(
    run: _Run,
    cands: list[Candidate],
    champion: str,
    rnd: int,
    round_opts: VerifyOptions,
    parallel: int,
    near_roofline_pct: float | None = None,
) -> list[tuple[Verdict, float]]:
    """Each candidate's verdict against the champion, with the seconds it took (``skipped`` for the others
    when the recipes' first candidate is already at ``near_roofline_pct`` of the roofline)."""

    def check(
        i: int,
        cand: Candidate,
        vopts: VerifyOptions,
        base: str = champion,
        rnd: int = rnd,
        n: int = len(cands),
    ) -> tuple[Verdict, float]:
        run.emit(
            {
                "event": "candidate",
                "round": rnd,
                "index": i,
                "of": n,
                "description": cand.description,
                "proposer": cand.proposer,
            }
        )
        c0 = time.monotonic()
        label = f"round {rnd}, candidate {i + 1}/{n} ({cand.description})"
        try:
            v = verify(
                run.path,
                base,
                cand.text,
                run.entry,
                run.runner,
                vopts,
                run.env,
                run.cancel,
                lambda msg, pct: run.say(f"{label}: {msg}", pct),
            )
        except VerifyError as exc:
            v = Verdict("error", False, str(exc), run.entry)
        return v, time.monotonic() - c0

    first: list[tuple[Verdict, float]] = []
    if len(cands) > 1 and cands[0].proposer == "recipes" and near_roofline_pct is not None:
        # The recipes' best-ranked candidate alone first: when it already runs near the roofline the round
        # can gain at most the rest of the way there, and the others' GPU time (which serialises on one GPU:
        # three more candidates cost the round 2-3x its time) is not spent.
        first = [check(0, cands[0], round_opts)]
        v0 = first[0][0]
        pct = v0.details.get("candidate_pct_of_roofline") if v0.accepted else None
        if pct is not None and pct >= near_roofline_pct:
            skip = Verdict(
                "skipped",
                False,
                f"not verified: {cands[0].description}, verified first in this round, already runs at "
                f"{pct:.0f}% of the roofline",
                run.entry,
            )
            return first + [(skip, 0.0)] * (len(cands) - 1)
    rest = list(enumerate(cands))[len(first) :]
    lead = first[0][0] if first else None
    if lead is not None and lead.accepted and lead.speedup and round_opts.screen_speedup is not None:
        # The others become champion only by beating the lead: their screen's bar is its speedup.
        round_opts = replace(round_opts, screen_speedup=max(round_opts.screen_speedup, lead.speedup))
    # Candidates build in parallel; their GPU steps serialise on the runner's GPU lock.
    with ThreadPoolExecutor(max_workers=max(1, min(len(rest), parallel))) as pool:
        futures = [pool.submit(check, i, cand, round_opts) for i, cand in rest]
        try:
            return first + [f.result() for f in futures]
        except BaseException:
            # Ctrl-C (or any error) here: stop the running verifications now, not after they finish
            # (leaving the with-block waits for every worker).
            run.cancel.set()
            raise


def _record_verdicts(
    run: _Run,
    cands: list[Candidate],
    outcomes: list[tuple[Verdict, float]],
    champion: str,
    champion_speedup: float,
    rnd: int,
    records: list[CandidateRecord],
) -> tuple[float, Candidate, Verdict] | None:
    """Record each verdict (``records``, the bundle, the memory, an event); return the fastest accepted
    candidate of the round, if any."""
    best: tuple[float, Candidate, Verdict] | None = None
    path = run.path
    for i, (cand, (v, secs)) in enumerate(zip(cands, outcomes, strict=True)):
        rec = CandidateRecord(
            rnd,
            i,
            cand.key,
            cand.description,
            cand.proposer,
            cand.rules,
            cand.predicted_gain_pct,
            v.kind,
            v.message,
            v.speedup,
            secs,
            v.stats["baseline_median_ms"] if v.stats else None,
            v.stats["candidate_median_ms"] if v.stats else None,
            {k: round(x, 3) for k, x in (v.details.get("phase_seconds") or {}).items()},
        )
        records.append(rec)
        cdir = run.bundle / "candidates" / f"r{rnd}-{i}-{cand.key}"
        cdir.mkdir(parents=True, exist_ok=True)
        (cdir / f"candidate{path.suffix}").write_text(cand.text)
        (cdir / "diff.patch").write_text(unified_diff(champion, cand.text, path.name))
        (cdir / "verdict.json").write_text(json.dumps(v.to_dict(), indent=1, default=str) + "\n")
        if v.kind == "skipped":
            continue  # never judged: nothing for the memory, no verdict event
        run.memory.add(
            {
                "file": run.rel,
                "entry": run.entry,
                "key": cand.key,
                "transform": cand.description,
                "description": cand.description,
                "proposer": cand.proposer,
                "rules": cand.rules,
                "verdict": v.kind,
                "message": v.message[:500],
                "predicted_gain_pct": cand.predicted_gain_pct,
                "measured_speedup": v.speedup,
                "baseline": _hash(champion),
                "time": run.stamp,
                "gpu": run.env.get("gpu"),
            }
        )
        run.memory.save()
        run.emit(
            {
                "event": "verdict",
                "round": rnd,
                "index": i,
                "verdict": v.kind,
                "message": v.message,
                "speedup": v.speedup,
                "best": champion_speedup,
            }
        )
        if v.accepted and v.speedup and (best is None or v.speedup > best[0]):
            best = (v.speedup, cand, v)
    return best


def _final_verdict(run: _Run, champion: str, fopts: VerifyOptions) -> Verdict:
    """The champion verified from scratch against the original, every gate in full: this verdict alone decides."""
    run.say("final verification of the champion against the original", None)
    try:
        return verify(
            run.path,
            run.text,
            champion,
            run.entry,
            run.runner,
            fopts,
            run.env,
            run.cancel,
            lambda m, p: run.say(f"final check: {m}", p),
        )
    except VerifyError as exc:
        return Verdict("error", False, str(exc), run.entry)


# --------------------------------------------------------------------------------------------------
# Replay


def replay(
    bundle: Path, runner: Runner, options: VerifyOptions | None = None, progress: Progress | None = None
) -> tuple[Verdict, dict[str, Any]]:
    """Re-run the final verdict of a bundle (original vs champion); returns the new verdict and the recorded one."""
    summary_p = bundle / "summary.json"
    if not summary_p.is_file():
        raise OptimizeError(f"{bundle} is not a kernellsp evidence bundle (no summary.json)")
    summary = _read_json(summary_p, OptimizeError)
    orig = next(bundle.glob("original.*"), None)
    champ = next(bundle.glob("champion.*"), None)
    if orig is None or champ is None:
        raise OptimizeError(f"{bundle} lacks original.* or champion.*")
    verdict_p = bundle / "final-verdict.json"
    recorded = _read_json(verdict_p, OptimizeError) if verdict_p.is_file() else {}
    if not isinstance(summary, dict) or "entry" not in summary or "path" not in summary:
        raise OptimizeError(f"{summary_p} lacks the entry or the path of the run")
    src_name = Path(summary["path"]).name
    if options is None and isinstance(summary.get("verify_options"), dict):
        # The gates as the run used them (seeds, rounds, minimum gain), so the verdicts are comparable.
        known = VerifyOptions.__dataclass_fields__
        options = VerifyOptions(**{k: v for k, v in summary["verify_options"].items() if k in known})
    options = options if options is not None else VerifyOptions()
    details = recorded.get("details") if isinstance(recorded, dict) else None
    if options.run_seed is None and isinstance(details, dict) and isinstance(details.get("run_seed"), int):
        # The same inputs as the recorded verdict: every input seed derives from the run seed.
        options = replace(options, run_seed=details["run_seed"])
    # Verify in a scratch copy named like the original file, next to nothing else.
    v = verify(
        Path(src_name),
        orig.read_text(),
        champ.read_text(),
        summary["entry"],
        runner,
        options,
        progress=progress,
    )
    return v, recorded
