"""The verification gate: is a candidate rewrite correct, clean and measurably faster?

Order of gates, each with a named verdict when it fails:

1. ``scope_violation``: the edit is outside the targeted kernels, their ``__device__`` helpers and
   the structured launch fields (:mod:`kernellsp.optimize.verify.scope`), checked before anything compiles;
2. ``compile_error``: the candidate's harness does not build;
3. correctness, for several seeds (fresh inputs each) and every declared shape, baseline and
   candidate in separate processes with outputs poisoned before each launch:
   ``runtime_error`` (launch or device fault), ``input_mutated`` (an ``in`` buffer changed),
   ``unwritten_output`` (poison left in an output), ``mismatch`` (seed, shape, index, got, want);
   the candidate runs a second time with a different poison so reads of unwritten memory show;
   a degenerate (constant or all-zero) or NaN reference refuses the check (``degenerate_reference``);
4. ``sanitizer``: compute-sanitizer memcheck and racecheck on the smallest shape;
5. timing: baseline and candidate alternate A B A B in separate processes, L2 flushed between
   repetitions, fresh inputs per repetition; every timed repetition must write all outputs
   (``unwritten_output``); the bootstrap interval of the paired speedup must clear the minimum gain
   (``not_faster``); a result faster than the DRAM roofline of the spec's footprint is refused as
   ``suspect_speedup``.

Every verdict records the GPU, driver, clocks and tool versions. The code under test never judges
itself: kernellsp reads the raw output buffers and event timings the harness writes.
"""

from __future__ import annotations

import difflib
import json
import statistics
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from kernellsp.build.nvcc import Cancelled
from kernellsp.optimize.verify import correctness as compare
from kernellsp.optimize.verify import timing
from kernellsp.optimize.verify.scope import check_scope
from kernellsp.run import harness
from kernellsp.run.runner import LocalRunner, Runner, RunnerError
from kernellsp.source import spec
from kernellsp.source.model import SourceModel, parse_source

Progress = Callable[[str, float | None], None]

VERDICTS = ("accepted", "scope_violation", "compile_error", "runtime_error", "timeout", "input_mutated",
            "unwritten_output", "mismatch", "degenerate_reference", "sanitizer", "sanitizer_unavailable",
            "not_faster", "suspect_speedup", "timing_anomaly", "sandbox_violation")  # fmt: skip


class VerifyError(RuntimeError):
    """The verification could not run (baseline broken, no spec, runner problem): not a verdict."""


@dataclass
class VerifyOptions:
    """How hard to check and time."""

    arch: str = "sm_90"
    seeds: int = 3
    min_gain_pct: float = 2.0
    rounds: int = 5
    reps: int = 15
    warmup: int = 3
    timeout_s: float = 120.0
    build_timeout_s: float = 240.0
    sanitize: bool = True
    sanitizer_tools: tuple[str, ...] = ("memcheck", "racecheck")
    #: Sequential timing: the interval is looked at after each round from this one on (never before it),
    #: and timing stops once it clears the minimum gain or lies below it (:func:`timing.decision`).
    min_rounds: int = 3
    time_candidate: bool = True
    #: Skip correctness and sanitizer (A/A timing studies only; never used for acceptance).
    timing_only: bool = False


@dataclass
class Verdict:
    """The outcome of one verification."""

    kind: str
    accepted: bool
    message: str
    entry: str
    details: dict[str, Any] = field(default_factory=dict)
    stats: dict[str, Any] | None = None
    environment: dict[str, Any] = field(default_factory=dict)
    timings: dict[str, Any] = field(default_factory=dict)
    seconds: float = 0.0

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @property
    def speedup(self) -> float | None:
        return self.stats["speedup"] if self.stats else None


def _reject(kind: str, entry: str, message: str, **details: Any) -> Verdict:
    return Verdict(kind=kind, accepted=False, message=message, entry=entry, details=details)


@dataclass
class _Built:
    exe: str
    plan: harness.HarnessPlan


class _Session:
    """One verification on one runner: a scratch dir holding both sources and both harnesses."""

    def __init__(self, runner: Runner, opts: VerifyOptions, cancel: threading.Event | None) -> None:
        self.runner = runner
        self.opts = opts
        self.cancel = cancel
        self.wd = runner.new_workdir()
        # Local results are read in place; remote ones are fetched first.
        self.local = Path(self.wd) if isinstance(runner, LocalRunner) else None
        self.fetch_root: Path | None = None
        self.n = 0
        self.env: dict[str, Any] = {}
        #: Where the built harnesses are, relative to ``wd`` (each side builds in a directory of its own).
        self.exe_paths: dict[str, str] = {}

    def close(self) -> None:
        self.runner.cleanup(self.wd)

    def run(self, argv: list[str], gpu: bool = True, timeout: float | None = None) -> Any:
        return self.runner.run(argv, self.wd, timeout or self.opts.timeout_s, self.cancel, gpu_lock=gpu)

    def result(self, out: str) -> harness.HarnessResult:
        if self.local is not None:
            return harness.read_result(self.local / out)
        import tempfile

        if self.fetch_root is None:
            self.fetch_root = Path(tempfile.mkdtemp(prefix="kernellsp-verify-"))
        self.runner.get(self.wd, [out], self.fetch_root)
        return harness.read_result(self.fetch_root / out)

    def harness_run(self, exe: str, mode: str, shape: int, seed: int, poison: str = "nan",
                    reps: int | None = None, warmup: int | None = None, fresh: bool = False,
                    wrapper: list[str] | None = None, dump_last: bool = False,
                    ) -> tuple[Any, harness.HarnessResult | None, str]:  # fmt: skip
        self.n += 1
        out = f"r{self.n:04d}"
        argv = harness.harness_argv(f"./{self.exe_paths.get(exe, exe)}", mode, out, shape=shape, seed=seed, reps=reps, warmup=warmup,  # type: ignore[arg-type]
                                    poison=poison, fresh_inputs=fresh, dump_last=dump_last)  # type: ignore[arg-type]  # fmt: skip
        res = self.run([*(wrapper or []), *argv])
        try:
            return res, self.result(out), out
        except harness.HarnessError:
            return res, None, out


def _bytes(r: harness.HarnessResult, name: str) -> bytes:
    return r.read_bytes(name)


def _entry_spec(model: SourceModel, entry: str) -> spec.BoundSpec:
    issues = spec.specs_from_source(model)[1]
    b = spec.entry_spec(model, entry)
    if b is None:
        raise VerifyError(f"{entry} has no launch spec in the file; add one (kernellsp check shows KL004)")
    problems = [i for i in spec.validate_against(b, model.function(entry), model) + issues if i.severity == "error"]
    if problems:
        raise VerifyError(f"the launch spec of {entry} is invalid: {problems[0].message}")
    return b


def _first_line(text: str, n: int = 8) -> str:
    lines = [ln for ln in text.strip().splitlines() if ln.strip()]
    keep = [ln for ln in lines if "error" in ln.lower()] or lines
    return " | ".join(keep[:n])


def unified_diff(baseline: str, candidate: str, name: str) -> str:
    return "".join(difflib.unified_diff(baseline.splitlines(keepends=True), candidate.splitlines(keepends=True),
                                        fromfile=f"a/{name}", tofile=f"b/{name}"))  # fmt: skip


def verify(
    path: Path, baseline: str, candidate: str, entry: str, runner: Runner, options: VerifyOptions | None = None,
    environment: dict[str, Any] | None = None, cancel: threading.Event | None = None,
    progress: Progress | None = None,
) -> Verdict:
    """Run every gate on ``candidate`` (a full file text) against ``baseline`` for ``entry``."""
    opts = options or VerifyOptions()
    say = progress or (lambda _m, _p: None)
    t0 = time.monotonic()
    from kernellsp.optimize.verify.scope import edit_targets

    targets = edit_targets(parse_source(baseline, str(path)), entry)
    if not targets:
        raise VerifyError(f"{entry} launches no kernel defined in {path.name}: there is nothing a rewrite may change")
    scope = check_scope(baseline, candidate, targets, str(path), entry)
    if not scope.ok:
        v = _reject("scope_violation", entry, scope.reason, line=scope.line)
        v.seconds = time.monotonic() - t0
        return v
    bmodel = parse_source(baseline, str(path))
    cmodel = parse_source(candidate, str(path))
    bspec = _entry_spec(bmodel, entry)
    cbound = spec.entry_spec(cmodel, entry)
    cspec = cbound.spec if cbound is not None else bspec.spec
    if cspec.launch is not None and bspec.spec.launch is not None:
        problems = [i for i in spec.validate_against(spec.BoundSpec(cspec, entry, "comment", cbound.block if cbound else None),
                                                     cmodel.function(entry), cmodel) if i.severity == "error"]  # fmt: skip
        if problems:
            return _reject("scope_violation", entry, f"the candidate's launch is invalid: {problems[0].message}")
    try:
        bplan = harness.plan_harness(bmodel, bspec.spec, entry)
    except harness.HarnessError as exc:
        raise VerifyError(f"cannot build a harness for {entry}: {exc}") from None
    try:
        cplan = harness.plan_harness(cmodel, cspec, entry)
    except harness.HarnessError as exc:
        return _reject("scope_violation", entry, f"the candidate's launch cannot be planned: {exc}")
    from kernellsp.profile.ncu import runner_environment

    env = environment if environment is not None else runner_environment(runner)
    # What confines the code under test goes into the evidence; when nothing does, the user hears it now.
    box = runner.sandbox_status()
    if not box.confined:
        say(box.describe(), None)
    env = {**env, "sandbox": box.to_dict()}
    session = _Session(runner, opts, cancel)
    session.env = env
    try:
        v = _verify_in(session, path, baseline, candidate, entry, bspec, bplan, cplan, opts, say)
    except RunnerError as exc:
        if exc.kind == "timeout":
            v = _reject("timeout", entry, str(exc))
        elif exc.kind == "sandbox_violation" and any("h_cand" in a or "harness_cand" in a for a in exc.argv):
            v = _reject("sandbox_violation", entry, f"the candidate broke the sandbox on {runner.name} (running "
                        f"{Path(exc.argv[0]).name}): {'; '.join(exc.violations)}", violations=exc.violations)  # fmt: skip
        elif exc.kind == "sandbox_violation":
            raise VerifyError(f"the baseline itself broke the sandbox on {runner.name}, so nothing can be verified "
                              f"against it: {'; '.join(exc.violations)}") from None  # fmt: skip
        else:
            raise VerifyError(str(exc)) from None
    finally:
        session.close()
    v.environment = env
    v.seconds = time.monotonic() - t0
    return v


def _verify_in(
    s: _Session, path: Path, baseline: str, candidate: str, entry: str, bspec: spec.BoundSpec,
    bplan: harness.HarnessPlan, cplan: harness.HarnessPlan, opts: VerifyOptions, say: Progress,
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
        return build_harness(s.runner, f"{s.wd}/{who}", "harness.cu", f"h_{who}", opts.arch, flags[who], nvcc=nvcc,
                             nvcc_version=s.env.get("nvcc_version"), sources_key=key, timeout_s=opts.build_timeout_s,
                             cancel=s.cancel)  # fmt: skip

    with ThreadPoolExecutor(max_workers=2) as pool:
        futs = {k: pool.submit(build, k) for k in ("base", "cand")}
        built = {k: f.result() for k, f in futs.items()}
    s.exe_paths = {"h_base": "base/h_base", "h_cand": "cand/h_cand"}
    if built["base"].returncode != 0:
        raise VerifyError(f"the baseline's harness does not build: {_first_line(built['base'].output)}")
    if built["cand"].returncode != 0:
        return _reject("compile_error", entry, f"the candidate does not compile: {_first_line(built['cand'].output)}",
                       compiler_output=built["cand"].output[-4000:])  # fmt: skip
    outputs = bplan.outputs
    n_shapes = len(bplan.shapes)
    details: dict[str, Any] = {"checked": []}
    if not opts.timing_only:
        total = opts.seeds * n_shapes
        k = 0
        for seed in range(opts.seeds):
            for shape in range(n_shapes):
                k += 1
                say(f"correctness: seed {seed}, shape {shape}", 10 + 50 * k / total)
                v = _check_one(s, entry, outputs, bspec, seed, shape, details)
                if v is not None:
                    return v
        # A second poison pattern: a candidate that reads memory it never wrote shows different outputs.
        say("correctness: alternate poison", 62)
        v = _check_one(s, entry, outputs, bspec, 0, 0, details, poison="alt")
        if v is not None:
            return v
        if opts.sanitize:
            v = _sanitize(s, entry, bplan, opts, say)
            if v is not None:
                return v
    if not opts.time_candidate:
        return Verdict("accepted", True, "correct (timing skipped)", entry, details=details)
    return _time(s, entry, bspec, bplan, opts, say, details)


def _check_one(s: _Session, entry: str, outputs: list[Any], bspec: spec.BoundSpec, seed: int, shape: int,
               details: dict[str, Any], poison: str = "nan") -> Verdict | None:  # fmt: skip
    bres, bout, _ = s.harness_run("h_base", "check", shape, seed)
    if bout is None or not bout.ok:
        msg = bout.error if bout is not None else _first_line(bres.output)
        raise VerifyError(f"the baseline fails on shape {shape}, seed {seed}: {msg}")
    cres, cout, _ = s.harness_run("h_cand", "check", shape, seed, poison=poison)
    where = {"seed": seed, "shape": shape, "sizes": bout.sizes, "poison": poison}
    if cout is None:
        return _reject("runtime_error", entry, f"the candidate crashed (exit {cres.returncode}) on shape {shape}, "
                                               f"seed {seed}: {_first_line(cres.output, 3)}", **where)  # fmt: skip
    if not cout.ok:
        return _reject("runtime_error", entry, f"the candidate failed on shape {shape}, seed {seed}: {cout.error}",
                       **where)  # fmt: skip
    mutated = cout.mutated_inputs()
    if mutated:
        return _reject("input_mutated", entry, f"the candidate wrote to input buffer(s) {', '.join(mutated)} "
                                               f"(shape {shape}, seed {seed}); inputs must stay unchanged", buffers=mutated, **where)  # fmt: skip
    refs = {a.name: (a.dtype, _bytes(bout, a.name)) for a in outputs}
    # Degenerate references are judged on the main shape: tiny edge shapes (one column, one row) can
    # legitimately give constant outputs, and they are still compared element by element.
    problem = compare.reference_problem(refs) if shape == 0 else None
    if problem is not None:
        return _reject("degenerate_reference", entry, f"{problem} (shape {shape}, seed {seed})", **where)
    unwritten = cout.unwritten_outputs()
    base_unwritten = bout.unwritten_outputs()
    extra = {k: v for k, v in unwritten.items() if v > base_unwritten.get(k, 0)}
    if extra:
        name, count = next(iter(extra.items()))
        return _reject("unwritten_output", entry, f"the candidate left {count} element(s) of {name} unwritten "
                                                  f"(shape {shape}, seed {seed}, poison {poison})", buffer=name,
                       unwritten=count, **where)  # fmt: skip
    for a in outputs:
        bb = bout.buffer(a.name)
        cb = cout.buffer(a.name)
        if bb.digest is not None and bb.digest == cb.digest and poison == "nan":
            continue
        tol = compare.resolve_tolerance(a.dtype, bspec.spec.tolerance)
        mm = compare.compare(a.name, a.dtype, _bytes(cout, a.name), refs[a.name][1], tol)
        if mm is not None:
            return _reject("mismatch", entry, f"wrong result on shape {shape} ({_sizes(bout.sizes)}), seed {seed}: "
                                              f"{mm.describe()}", buffer=a.name, index=mm.index, got=mm.got,
                           want=mm.want, bad_elements=mm.bad_elements, norm_rel_err=mm.norm_rel_err, **where)  # fmt: skip
    details["checked"].append(where)
    return None


def _sizes(sizes: dict[str, Any] | None) -> str:
    return ", ".join(f"{k}={v}" for k, v in (sizes or {}).items())


def _sanitize(s: _Session, entry: str, plan: harness.HarnessPlan, opts: VerifyOptions, say: Progress) -> Verdict | None:
    tool = s.runner.which("compute-sanitizer")
    if tool is None:
        return _reject("sanitizer_unavailable", entry, "compute-sanitizer is not installed on the runner, so the "
                       "candidate cannot be accepted (it ships with the CUDA toolkit; put it on PATH)")  # fmt: skip
    # The smallest declared shape keeps the sanitizers fast; edge shapes are where bugs hide anyway.
    shape = min(range(len(plan.shapes)), key=lambda i: sum(plan.shapes[i].counts.values()))
    for t in opts.sanitizer_tools:
        say(f"compute-sanitizer {t}", 70)
        wrapper = [tool, "--tool", t, "--error-exitcode", "86", "--print-limit", "5"]
        if t == "memcheck":
            wrapper += ["--leak-check", "no"]
        res, out, _ = s.harness_run("h_cand", "check", shape, 1, wrapper=wrapper)
        text = res.output
        if res.returncode == 86 or ("ERROR SUMMARY: 0 errors" not in text and "ERROR SUMMARY" in text):
            first = next((ln.strip() for ln in text.splitlines() if ln.startswith("========= ") and
                          ("Invalid" in ln or "hazard" in ln.lower() or "Error" in ln)), _first_line(text, 2))  # fmt: skip
            return _reject("sanitizer", entry, f"compute-sanitizer {t} found errors on shape {shape}: {first}",
                           tool=t, shape=shape, report=text[-4000:])  # fmt: skip
        if out is None or not out.ok:
            return _reject("runtime_error", entry, f"the candidate failed under compute-sanitizer {t}: "
                           f"{out.error if out else _first_line(text, 3)}", tool=t)  # fmt: skip
    return None


def _time(s: _Session, entry: str, bspec: spec.BoundSpec, plan: harness.HarnessPlan, opts: VerifyOptions,
          say: Progress, details: dict[str, Any]) -> Verdict:  # fmt: skip
    kernel_entry = plan.kind == "global"
    rounds: dict[str, list[list[float]]] = {"base": [], "cand": []}
    raw: dict[str, list[dict[str, Any]]] = {"base": [], "cand": []}
    device: dict[str, Any] | None = None
    # Buffers the baseline itself leaves partly unwritten (kernels that write a sub-range) are not held
    # against the candidate.
    base_partial: set[str] = set()
    last: dict[str, harness.HarnessResult] = {}
    # Sequential testing: from round min_rounds on, the interval is looked at after every round, each look
    # at a level that keeps the overall error at 5% (timing.look_confidence); timing stops once it clears
    # the minimum gain or lies wholly below it. Rounds after the first scale their repetitions to the
    # baseline's duration (timing.scaled_reps): a long kernel needs fewer launches per process.
    min_rounds = max(1, min(opts.min_rounds, opts.rounds))
    confidence = timing.look_confidence(0.95, opts.rounds - min_rounds + 1)
    reps, warmup = opts.reps, opts.warmup
    for r in range(opts.rounds):
        for who in ("base", "cand"):
            say(f"timing round {r + 1}/{opts.rounds}: {'baseline' if who == 'base' else 'candidate'}",
                75 + 24 * (r + (who == "cand") / 2) / opts.rounds)  # fmt: skip
            # The first round keeps the outputs of its last launch (every round is a fresh process with the
            # same launches, and the first is the one every verification runs, however early it stops).
            last_round = r == 0
            res, out, _ = s.harness_run(f"h_{who}", "time", 0, 100 + r, reps=reps, warmup=warmup, fresh=True,
                                        dump_last=last_round and not opts.timing_only)  # fmt: skip
            if out is None or not out.ok:
                msg = out.error if out is not None else _first_line(res.output, 3)
                if who == "base":
                    raise VerifyError(f"timing the baseline failed: {msg}")
                return _reject("runtime_error", entry, f"the candidate failed while being timed: {msg}")
            device = device or out.device
            if last_round and not opts.timing_only:
                last[who] = out
            ts = out.timings_ms if kernel_entry else out.timings_sync_ms
            raw[who].append({"timings_ms": out.timings_ms, "timings_sync_ms": out.timings_sync_ms})
            rounds[who].append(ts)
            for b in out.buffers:
                if b.dir == "in" or not b.rep_unwritten or not any(u > 0 for u in b.rep_unwritten):
                    continue
                if who == "base":
                    base_partial.add(b.name)
                elif b.name not in base_partial:
                    return _reject("unwritten_output", entry, f"during timing the candidate left elements of "
                                           f"{b.name} unwritten in {sum(1 for u in b.rep_unwritten if u)} of "
                                           f"{len(b.rep_unwritten)} repetitions (work skipped or cached across calls)",
                                           buffer=b.name)  # fmt: skip
        if r == 0 and rounds["base"][0]:
            reps, warmup = timing.scaled_reps(statistics.median(rounds["base"][0]), opts.reps, opts.warmup)
        if min_rounds <= r + 1 < opts.rounds:
            look = timing.paired_speedup(rounds["base"], rounds["cand"], confidence=confidence)
            if timing.decision(look, opts.min_gain_pct) != "continue":
                break
    # The last timed launch must still compute the answer: a candidate that does the work once and
    # skips it on later launches (state kept in shared memory, the heap or an inout buffer) fails here.
    if "base" in last and "cand" in last:
        for a in plan.outputs:
            tol = compare.resolve_tolerance(a.dtype or "f32", bspec.spec.tolerance)
            mm = compare.compare(a.name, a.dtype or "f32", last["cand"].read_bytes(a.name), last["base"].read_bytes(a.name), tol)
            if mm is not None:
                return _reject("mismatch", entry, "after repeated launches during timing the candidate's output is wrong "
                               f"(work skipped or state kept between launches): {mm.describe()}", buffer=a.name,
                               index=mm.index, got=mm.got, want=mm.want, phase="timing")  # fmt: skip
    stats = timing.paired_speedup(rounds["base"], rounds["cand"], confidence=confidence)
    v = Verdict("not_faster", False, "", entry, details=details, stats=stats.to_dict(),
                timings={"rounds": raw, "kernel_entry": kernel_entry})  # fmt: skip
    from kernellsp.profile.ncu import footprint_bytes

    floor = timing.roofline_floor_ms(footprint_bytes(bspec), timing.peak_dram_bandwidth(device))
    if floor is not None:
        v.details["roofline_floor_ms"] = floor
        v.details["candidate_pct_of_roofline"] = 100.0 * floor / stats.candidate_median_ms
        v.details["baseline_pct_of_roofline"] = 100.0 * floor / stats.baseline_median_ms
    gap_base = _median_gap(raw["base"])
    gap_cand = _median_gap(raw["cand"])
    if kernel_entry and gap_cand > max(0.05, 3 * gap_base + 0.02):
        v.kind = "timing_anomaly"
        v.message = (f"the candidate's device work continues {gap_cand:.3f} ms past its launch (baseline {gap_base:.3f} ms): "
                     "work outside the timed window is not allowed")  # fmt: skip
        return v
    if floor is not None and stats.candidate_median_ms < 0.9 * floor:
        v.kind = "suspect_speedup"
        v.message = (f"the candidate ({stats.candidate_median_ms:.4f} ms) beats the DRAM roofline floor of "
                     f"{floor:.4f} ms for the spec's footprint: physically implausible, refused")  # fmt: skip
        return v
    if timing.accepts(stats, opts.min_gain_pct):
        v.kind, v.accepted = "accepted", True
        v.message = (f"{stats.speedup:.3f}x faster ({stats.baseline_median_ms:.4f} → {stats.candidate_median_ms:.4f} ms; "
                     f"{100 * stats.confidence:.0f}% CI {stats.ci_low:.3f}–{stats.ci_high:.3f}, {stats.rounds} A/B rounds)")  # fmt: skip
    else:
        v.message = (f"not measurably faster: speedup {stats.speedup:.3f}x, {100 * stats.confidence:.0f}% CI "
                     f"{stats.ci_low:.3f}–{stats.ci_high:.3f} does not clear the {opts.min_gain_pct:g}% minimum gain")  # fmt: skip
    return v


def _median_gap(rounds: list[dict[str, Any]]) -> float:
    import numpy as np

    gaps = [s - p for r in rounds for p, s in zip(r["timings_ms"], r["timings_sync_ms"], strict=False)]
    return float(np.median(gaps)) if gaps else 0.0


def write_evidence(bundle: Path, path: Path, baseline: str, candidate: str, verdict: Verdict) -> None:
    """Save sources, diff and the verdict (with raw timings and environment) under ``bundle``."""
    bundle.mkdir(parents=True, exist_ok=True)
    (bundle / f"baseline{path.suffix}").write_text(baseline)
    (bundle / f"candidate{path.suffix}").write_text(candidate)
    (bundle / "diff.patch").write_text(unified_diff(baseline, candidate, path.name))
    (bundle / "verdict.json").write_text(json.dumps(verdict.to_dict(), indent=2, default=str) + "\n")


__all__ = ["VERDICTS", "Cancelled", "Verdict", "VerifyError", "VerifyOptions", "unified_diff", "verify", "write_evidence"]
