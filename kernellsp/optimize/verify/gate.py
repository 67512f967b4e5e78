"""The verification gate: is a candidate rewrite correct, clean and measurably faster?

Order of gates, each with a named verdict when it fails:

1. ``scope_violation``: the edit is outside the targeted kernels, their ``__device__`` helpers and
   the structured launch fields (:mod:`kernellsp.optimize.verify.scope`), checked before anything compiles;
2. ``compile_error``: the candidate's harness does not build; ``timing_dependent``: its device code
   (its PTX, so inline assembly and helpers count) reads a clock, timer or placement register
   (``%clock64``, ``%globaltimer``, ``%smid``, ...) that the baseline does not
   (:mod:`kernellsp.optimize.verify.timing_reads`); ``precision_downgrade``: under ``precision = "strict"``
   its PTX adds coarse approximate or reduced-precision math (``tanh.approx``, ``div.approx``, TF32, f32 ->
   f16) the baseline's does not (:mod:`kernellsp.optimize.verify.precision_ops`); in the loop's rounds only
   (``screen_speedup``), one A/B timing round follows, and a candidate that cannot become the round's
   champion is refused here, before its correctness runs: ``not_faster`` when it cannot clear the minimum
   gain, ``outpaced`` when it cannot beat the round's accepted lead (rounds only select; a candidate
   that passes the screen goes through every gate below, and the final verification never screens);
3. correctness, on every declared shape (small edge shapes first) and three shapes drawn from the
   verification's seed within what the spec shows of its sizes (skipped where the baseline does not
   handle them: :mod:`kernellsp.optimize.verify.drawn_shapes`), baseline and candidate in
   separate processes, one process per shape running every input set: several seeds of the spec's
   distribution, two second calls (the outputs start with an earlier call's results on other inputs,
   then with those results moved to other elements) and the structured patterns (sparse spikes, alternating signs, a ramp, a wide dynamic
   range) that expose skipped or approximated work. The seeds derive from a run seed drawn from the OS
   (recorded in the verdict; ``replay`` reuses it), so the code under test cannot recognise the inputs
   it will be checked on. Outputs and every SM's shared memory are poisoned before each launch, and
   every buffer ends at a guard page with canaries beside it. Verdicts: ``runtime_error`` (launch or
   device fault; a guard page turns an out-of-bounds access into one), ``sanitizer`` (a guard canary
   changed: an out-of-bounds write), ``input_mutated``, ``unwritten_output``, ``mismatch`` (seed,
   pattern, shape, index, got, want; also an error far above the baseline's own, whatever the spec's
   tolerance: :func:`kernellsp.optimize.verify.correctness.error_budget`; a float mismatch is judged again
   against the baseline's higher-precision oracle, its float accumulations in double, when there is one:
   :mod:`kernellsp.optimize.verify.oracle`, so a rewrite more accurate than a poor baseline passes); the candidate runs a second
   time with a different poison so reads of unwritten memory show; a degenerate (constant or all-zero)
   or NaN reference refuses the check (``degenerate_reference``);
4. ``sanitizer``: compute-sanitizer memcheck (racecheck where shared memory is used, synccheck where
   barriers or warp primitives are, initcheck for host launchers) on every distinct shape, with exact
   cudaMalloc sizes (``--alloc plain``); the loop's rounds may limit this to the smallest shape;
5. timing: baseline and candidate alternate A B A B in separate processes, L2 flushed between
   repetitions, fresh inputs per repetition; every timed repetition must write all outputs
   (``unwritten_output``); the outputs of timed launches picked at random after they ran are compared
   with the baseline's on the same inputs (``mismatch``: work skipped on launches it guessed were not
   checked); the bootstrap interval of the paired speedup must clear the minimum gain (``not_faster``);
   a time below the spec's bytes at this GPU's measured copy bandwidth (with a margin) is refused as
   ``suspect_speedup``.

Every verdict records the GPU, driver, clocks and tool versions. The code under test never judges
itself: kernellsp reads the raw output buffers and event timings the harness writes.
"""

from __future__ import annotations

import dataclasses
import difflib
import json
import secrets
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from kernellsp.build.nvcc import Cancelled
from kernellsp.optimize.verify import drawn_shapes, precision_ops, timing_reads
from kernellsp.optimize.verify.correctness_gate import check_correctness, oracle_runs
from kernellsp.optimize.verify.sanitizer_gate import sanitize
from kernellsp.optimize.verify.scope import check_scope
from kernellsp.optimize.verify.session import Session, first_line
from kernellsp.optimize.verify.timing_gate import screen_candidate, time_candidate
from kernellsp.optimize.verify.verdict import VERDICTS, Progress, Verdict, VerifyError, VerifyOptions, reject
from kernellsp.run import harness
from kernellsp.run.runner import Runner, RunnerError
from kernellsp.source import spec
from kernellsp.source.model import SourceModel, parse_source


def _entry_spec(model: SourceModel, entry: str) -> spec.BoundSpec:
    issues = spec.specs_from_source(model)[1]
    b = spec.entry_spec(model, entry)
    if b is None:
        raise VerifyError(f"{entry} has no launch spec in the file; add one (kernellsp check shows KL004)")
    problems = [
        i for i in spec.validate_against(b, model.function(entry), model) + issues if i.severity == "error"
    ]
    if problems:
        raise VerifyError(f"the launch spec of {entry} is invalid: {problems[0].message}")
    return b


def _effective_options(opts: VerifyOptions) -> VerifyOptions:
    """``precision = "fast"`` widens the error budget to what the setting documents."""
    if opts.precision not in precision_ops.PRECISIONS:
        raise VerifyError(
            f"precision must be one of {', '.join(precision_ops.PRECISIONS)}, not {opts.precision!r}"
        )
    if opts.precision == "fast":
        return dataclasses.replace(opts, error_budget=max(opts.error_budget, precision_ops.FAST_ERROR_BUDGET))
    return opts


def _drawn_shapes(
    bmodel: SourceModel,
    bspec: spec.KernelSpec,
    cmodel: SourceModel,
    cspec: spec.KernelSpec,
    entry: str,
    opts: VerifyOptions,
    run_seed: int,
) -> list[dict[str, int]]:
    """The shapes nobody declared that this verification checks too: those both sides' specs can plan."""
    if opts.drawn_shapes <= 0:
        return []

    def plans(shape: dict[str, int]) -> bool:
        try:
            harness.plan_harness(bmodel, bspec.model_copy(update={"shapes": [shape]}), entry)
            harness.plan_harness(cmodel, cspec.model_copy(update={"shapes": [shape]}), entry)
        except harness.HarnessError:
            return False
        return True

    seed = opts.shape_seed if opts.shape_seed is not None else run_seed
    return drawn_shapes.draw_shapes(bspec, seed, opts.drawn_shapes, plans)


def unified_diff(baseline: str, candidate: str, name: str) -> str:
    return "".join(
        difflib.unified_diff(
            baseline.splitlines(keepends=True),
            candidate.splitlines(keepends=True),
            fromfile=f"a/{name}",
            tofile=f"b/{name}",
        )
    )


def verify(
    path: Path,
    baseline: str,
    candidate: str,
    entry: str,
    runner: Runner,
    options: VerifyOptions | None = None,
    environment: dict[str, Any] | None = None,
    cancel: threading.Event | None = None,
    progress: Progress | None = None,
) -> Verdict:
    """Run every gate on ``candidate`` (a full file text) against ``baseline`` for ``entry``."""
    opts = _effective_options(options or VerifyOptions())
    say = progress or (lambda _m, _p: None)
    t0 = time.monotonic()
    from kernellsp.optimize.verify.scope import edit_targets

    targets = edit_targets(parse_source(baseline, str(path)), entry)
    if not targets:
        raise VerifyError(
            f"{entry} launches no kernel defined in {path.name}: there is nothing a rewrite may change"
        )
    scope = check_scope(baseline, candidate, targets, str(path), entry)
    if not scope.ok:
        # 1-based, as every line kernellsp prints (the scope gate counts from 0 like the parse tree).
        line = scope.line + 1 if scope.line is not None else None
        v = reject("scope_violation", entry, scope.reason, line=line)
        v.seconds = time.monotonic() - t0
        return v
    remote = getattr(runner, "verify_remotely", None)
    if remote is not None:  # a pool (kernellsp.run.pool): a GPU worker runs this whole function and answers
        return remote(path, baseline, candidate, entry, opts, environment, cancel, progress)
    bmodel = parse_source(baseline, str(path))
    cmodel = parse_source(candidate, str(path))
    bspec = _entry_spec(bmodel, entry)
    cbound = spec.entry_spec(cmodel, entry)
    cspec = cbound.spec if cbound is not None else bspec.spec
    if cspec.launch is not None and bspec.spec.launch is not None:
        problems = [
            i
            for i in spec.validate_against(
                spec.BoundSpec(cspec, entry, "comment", cbound.block if cbound else None),
                cmodel.function(entry),
                cmodel,
            )
            if i.severity == "error"
        ]
        if problems:
            return reject(
                "scope_violation", entry, f"the candidate's launch is invalid: {problems[0].message}"
            )
    try:
        bplan = harness.plan_harness(bmodel, bspec.spec, entry)
    except harness.HarnessError as exc:
        raise VerifyError(f"cannot build a harness for {entry}: {exc}") from None
    try:
        cplan = harness.plan_harness(cmodel, cspec, entry)
    except harness.HarnessError as exc:
        return reject("scope_violation", entry, f"the candidate's launch cannot be planned: {exc}")
    # Every input seed of this verification derives from the run seed: drawn from the OS unless given
    # (replay), recorded in the verdict, never visible to the code under test before it runs.
    run_seed = opts.run_seed if opts.run_seed is not None else secrets.randbits(63)
    drawn = _drawn_shapes(bmodel, bspec.spec, cmodel, cspec, entry, opts, run_seed)
    if drawn:
        bspec = dataclasses.replace(
            bspec, spec=bspec.spec.model_copy(update={"shapes": [*bspec.spec.shapes, *drawn]})
        )
        bplan = harness.plan_harness(bmodel, bspec.spec, entry)
        cplan = harness.plan_harness(
            cmodel, cspec.model_copy(update={"shapes": [*cspec.shapes, *drawn]}), entry
        )
    from kernellsp.profile.environment import runner_environment

    env = environment if environment is not None else runner_environment(runner)
    # What confines the code under test goes into the evidence; when nothing does, the user hears it now.
    box = runner.sandbox_status()
    if not box.confined:
        say(box.describe(), None)
    env = {**env, "sandbox": box.to_dict()}
    session = Session(runner, opts, cancel)
    session.env = env
    session.run_seed = run_seed
    first = len(bplan.shapes) - len(drawn)
    session.drawn_shapes = {first + k: d for k, d in enumerate(drawn)}
    try:
        v = _verify_in(session, path, baseline, candidate, entry, bspec, bplan, cplan, opts, say)
    except RunnerError as exc:
        if exc.kind == "timeout":
            v = reject("timeout", entry, str(exc))
        elif exc.kind == "sandbox_violation" and any("h_cand" in a or "harness_cand" in a for a in exc.argv):
            v = reject(
                "sandbox_violation",
                entry,
                f"the candidate broke the sandbox on {runner.name} (running "
                f"{Path(exc.argv[0]).name}): {'; '.join(exc.violations)}",
                violations=exc.violations,
            )
        elif exc.kind == "sandbox_violation":
            raise VerifyError(
                f"the baseline itself broke the sandbox on {runner.name}, so nothing can be verified "
                f"against it: {'; '.join(exc.violations)}"
            ) from None
        else:
            raise VerifyError(str(exc)) from None
    finally:
        session.close()
    v.details.setdefault("run_seed", session.run_seed)
    v.details.setdefault("phase_seconds", session.phase_s)
    v.details.setdefault("harness_runs", session.runs)
    v.environment = env
    v.seconds = time.monotonic() - t0
    return v


def _verify_in(
    s: Session,
    path: Path,
    baseline: str,
    candidate: str,
    entry: str,
    bspec: spec.BoundSpec,
    bplan: harness.HarnessPlan,
    cplan: harness.HarnessPlan,
    opts: VerifyOptions,
    say: Progress,
) -> Verdict:
    name = path.name
    from kernellsp import cache
    from kernellsp.build.nvcc import local_includes
    from kernellsp.run.harness_build import build_harness

    # Each side in a directory of its own with one layout (harness.cu, src/NAME, its local includes), so
    # equal sources give one executable: the candidate that wins a round is the next round's baseline, and
    # the final verification's two sides were both built during the rounds (the binary cache ignores the
    # output names). The harness runtime is the split build's shared object: only the entry unit compiles.
    files: dict[str, bytes] = {}
    for who, text, plan in (("base", baseline, bplan), ("cand", candidate, cplan)):
        files[f"{who}/src/{name}"] = text.encode()
        files[f"{who}/harness.cu"] = harness.generate_harness(plan, f"src/{name}", split=True).encode()
    for inc in local_includes(parse_source(baseline, str(path)), path):
        try:
            rel = inc.relative_to(path.resolve().parent).as_posix()
        except ValueError:
            continue
        files[f"base/src/{rel}"] = files[f"cand/src/{rel}"] = inc.read_bytes()
    s.runner.put(files, s.wd)
    nvcc = s.runner.require("nvcc")
    say("building baseline and candidate", 5)
    flags = {"base": list(bspec.spec.flags), "cand": list(cplan.flags)}

    def build(who: str) -> Any:
        own = sorted((k[len(who) + 1 :], v) for k, v in files.items() if k.startswith(f"{who}/"))
        key = cache.digest(*(f"{k}\0{v.decode('utf-8', 'replace')}" for k, v in own))
        return build_harness(
            s.runner,
            f"{s.wd}/{who}",
            "harness.cu",
            f"h_{who}",
            opts.arch,
            flags[who],
            nvcc=nvcc,
            nvcc_version=s.env.get("nvcc_version"),
            sources_key=key,
            timeout_s=opts.build_timeout_s,
            cancel=s.cancel,
        )

    t_build = time.monotonic()
    with ThreadPoolExecutor(max_workers=4) as pool:
        # Both sides' PTX (the device-code check below) compiles beside the builds.
        ptxs = pool.map(
            lambda who: timing_reads.read_ptx(
                s.runner, f"{s.wd}/{who}", nvcc, opts.arch, flags[who], opts.build_timeout_s, s.cancel
            ),
            ("base", "cand"),
        )
        futs = {k: pool.submit(build, k) for k in ("base", "cand")}
        built = {k: f.result() for k, f in futs.items()}
        base_ptx, cand_ptx = ptxs
    s.phase_s["build"] = time.monotonic() - t_build
    s.exe_paths = {"h_base": "base/h_base", "h_cand": "cand/h_cand"}
    if built["base"].returncode != 0:
        raise VerifyError(f"the baseline's harness does not build: {first_line(built['base'].output)}")
    if built["cand"].returncode != 0:
        return reject(
            "compile_error",
            entry,
            f"the candidate does not compile: {first_line(built['cand'].output)}",
            compiler_output=built["cand"].output[-4000:],
        )
    details: dict[str, Any] = {"checked": [], "run_seed": s.run_seed, "phase_seconds": s.phase_s}
    refused = _device_code_verdict(base_ptx, cand_ptx, entry, opts, details)
    if refused is not None:
        return refused
    s.oracle = oracle_runs(s, path, baseline, entry, bplan, bspec, files, nvcc)
    prior = None
    if opts.screen_speedup is not None and opts.time_candidate and not opts.timing_only:
        screened = screen_candidate(s, entry, bplan, opts, say, details)
        if isinstance(screened, Verdict):
            return screened
        prior = screened
    if not opts.timing_only:
        t0 = time.monotonic()
        v = check_correctness(s, entry, bspec, bplan, opts, say, details)
        s.phase_s["correctness"] = time.monotonic() - t0 - s.phase_s.get("error_budget", 0.0)
        if v is not None:
            return v
        if opts.sanitize:
            t0 = time.monotonic()
            v = sanitize(s, entry, cplan, opts, say, candidate, details)
            s.phase_s["sanitizer"] = time.monotonic() - t0
            if v is not None:
                return v
    if not opts.time_candidate:
        return Verdict("accepted", True, "correct (timing skipped)", entry, details=details)
    s.settle()
    return time_candidate(s, entry, bspec, bplan, opts, say, details, prior)


def _device_code_verdict(
    base_ptx: tuple[str | None, str],
    cand_ptx: tuple[str | None, str],
    entry: str,
    opts: VerifyOptions,
    details: dict[str, Any],
) -> Verdict | None:
    """What the candidate's PTX reads (clocks, placement) and computes with (approximate math) beyond the
    baseline's; None: nothing refused (what was found is in ``details``)."""
    refused = timing_reads.verdict(base_ptx, cand_ptx, entry)
    if refused is not None:
        return refused
    details["device_code"] = "reads no clock, timer or placement register that the baseline does not (PTX)"
    details["precision"] = opts.precision
    return precision_ops.verdict(base_ptx[0] or "", cand_ptx[0] or "", entry, opts.precision, details)


def write_evidence(bundle: Path, path: Path, baseline: str, candidate: str, verdict: Verdict) -> None:
    """Save sources, diff and the verdict (with raw timings and environment) under ``bundle``."""
    bundle.mkdir(parents=True, exist_ok=True)
    (bundle / f"baseline{path.suffix}").write_text(baseline)
    (bundle / f"candidate{path.suffix}").write_text(candidate)
    (bundle / "diff.patch").write_text(unified_diff(baseline, candidate, path.name))
    (bundle / "verdict.json").write_text(json.dumps(verdict.to_dict(), indent=2, default=str) + "\n")


__all__ = [
    "VERDICTS",
    "Cancelled",
    "Verdict",
    "VerifyError",
    "VerifyOptions",
    "unified_diff",
    "verify",
    "write_evidence",
]
