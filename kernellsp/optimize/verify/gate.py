"""The verification gate: is a candidate rewrite correct, clean and measurably faster?

Order of gates, each with a named verdict when it fails:

1. ``scope_violation``: the edit is outside the targeted kernels, their ``__device__`` helpers and
   the structured launch fields (:mod:`kernellsp.optimize.verify.scope`), checked before anything compiles;
2. ``compile_error``: the candidate's harness does not build;
3. correctness, on every declared shape (small edge shapes first), baseline and candidate in
   separate processes, one process per shape running every input set: several seeds of the spec's
   distribution and the structured patterns (sparse spikes, alternating signs, a ramp, a wide dynamic
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

import difflib
import json
import re
import secrets
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
from kernellsp.optimize.verify import oracle, timing
from kernellsp.optimize.verify.scope import check_scope
from kernellsp.run import harness
from kernellsp.run.runner import LocalRunner, Runner, RunnerError
from kernellsp.source import spec
from kernellsp.source.model import SourceModel, parse_source

Progress = Callable[[str, float | None], None]

VERDICTS = (
    "accepted",
    "scope_violation",
    "compile_error",
    "runtime_error",
    "timeout",
    "input_mutated",
    "unwritten_output",
    "mismatch",
    "degenerate_reference",
    "sanitizer",
    "sanitizer_unavailable",
    "not_faster",
    "suspect_speedup",
    "timing_anomaly",
    "sandbox_violation",
)


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
    #: compute-sanitizer tools, each run where it applies (racecheck: shared memory; synccheck: barriers
    #: or warp primitives; initcheck: host launchers, whose scratch allocations nobody else initialises).
    sanitizer_tools: tuple[str, ...] = ("memcheck", "racecheck", "synccheck", "initcheck")
    #: Sanitize every distinct shape (the final verification); False: the smallest only (cheap rounds).
    sanitize_all_shapes: bool = True
    sanitizer_timeout_s: float = 300.0
    #: racecheck and synccheck instrument every shared-memory access, so on a heavy main shape (a 4096^3
    #: GEMM) they run for many minutes. Past this many seconds on a shape larger than one where the same
    #: tool already passed, the run is stopped and recorded as bounded (memcheck and the guard pages
    #: still cover that shape); on the smallest such shape, or for memcheck/initcheck, the limit is
    #: ``sanitizer_timeout_s`` and running out of it refuses the candidate.
    hazard_check_budget_s: float = 90.0
    #: Sequential timing: the interval is looked at after each round from this one on (never before it),
    #: and timing stops once it clears the minimum gain or lies below it (:func:`timing.decision`).
    min_rounds: int = 3
    time_candidate: bool = True
    #: Skip correctness and sanitizer (A/A timing studies only; never used for acceptance).
    timing_only: bool = False
    #: Structured input patterns checked beside the spec's distribution (one input set each, every shape).
    patterns: tuple[str, ...] = ("spikes", "alternating", "ramp", "wide", "tail")
    #: Error budget factor (:func:`kernellsp.optimize.verify.correctness.error_budget`); 0 turns it off.
    error_budget: float = 10.0
    #: Timed launches per candidate timing round whose outputs are compared with the baseline's.
    check_launches: int = 2
    #: A time this much below the spec's bytes at the measured copy bandwidth is ``suspect_speedup``.
    bandwidth_margin: float = 1.25
    #: The run seed all input seeds derive from; None draws one from the OS (the verdict records it).
    run_seed: int | None = None


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
        self.run_seed = 0
        #: Seconds per phase (correctness, error budget, sanitizer, timing, launch checks): the gate's cost.
        self.phase_s: dict[str, float] = {}
        #: The candidate's static shared memory (from its first check run): decides whether racecheck applies.
        self.cand_static_smem = 0
        #: Where the built harnesses are, relative to ``wd`` (each side builds in a directory of its own).
        self.exe_paths: dict[str, str] = {}
        #: The baseline's higher-precision oracle (built on the first float mismatch); None: nothing to promote.
        self.oracle: oracle.OracleRuns | None = None

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

    def harness_run(
        self,
        exe: str,
        mode: str,
        shape: int,
        seed: int,
        poison: str = "nan",
        reps: int | None = None,
        warmup: int | None = None,
        fresh: bool = False,
        wrapper: list[str] | None = None,
        dump_last: bool = False,
        sets: list[str] | None = None,
        check_launches: int = 0,
        alloc: str = "guard",
        timeout: float | None = None,
    ) -> tuple[Any, harness.HarnessResult | None, str]:
        self.n += 1
        out = f"r{self.n:04d}"
        argv = harness.harness_argv(
            f"./{self.exe_paths.get(exe, exe)}",
            mode,  # type: ignore[arg-type]
            out,
            shape=shape,
            seed=seed,
            reps=reps,
            warmup=warmup,
            poison=poison,  # type: ignore[arg-type]
            fresh_inputs=fresh,
            dump_last=dump_last,
            sets=sets,
            check_launches=check_launches,
            alloc=alloc,  # type: ignore[arg-type]
        )
        res = self.run([*(wrapper or []), *argv], timeout=timeout)
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
    problems = [
        i for i in spec.validate_against(b, model.function(entry), model) + issues if i.severity == "error"
    ]
    if problems:
        raise VerifyError(f"the launch spec of {entry} is invalid: {problems[0].message}")
    return b


def _first_line(text: str, n: int = 8) -> str:
    lines = [ln for ln in text.strip().splitlines() if ln.strip()]
    keep = [ln for ln in lines if "error" in ln.lower()] or lines
    return " | ".join(keep[:n])


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
    opts = options or VerifyOptions()
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
        v = _reject("scope_violation", entry, scope.reason, line=scope.line)
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
            return _reject(
                "scope_violation", entry, f"the candidate's launch is invalid: {problems[0].message}"
            )
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
    # Every input seed of this verification derives from the run seed: drawn from the OS unless given
    # (replay), recorded in the verdict, never visible to the code under test before it runs.
    session.run_seed = opts.run_seed if opts.run_seed is not None else secrets.randbits(63)
    try:
        v = _verify_in(session, path, baseline, candidate, entry, bspec, bplan, cplan, opts, say)
    except RunnerError as exc:
        if exc.kind == "timeout":
            v = _reject("timeout", entry, str(exc))
        elif exc.kind == "sandbox_violation" and any("h_cand" in a or "harness_cand" in a for a in exc.argv):
            v = _reject(
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
    v.environment = env
    v.seconds = time.monotonic() - t0
    return v


def _verify_in(
    s: _Session,
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
    with ThreadPoolExecutor(max_workers=2) as pool:
        futs = {k: pool.submit(build, k) for k in ("base", "cand")}
        built = {k: f.result() for k, f in futs.items()}
    s.phase_s["build"] = time.monotonic() - t_build
    s.exe_paths = {"h_base": "base/h_base", "h_cand": "cand/h_cand"}
    if built["base"].returncode != 0:
        raise VerifyError(f"the baseline's harness does not build: {_first_line(built['base'].output)}")
    if built["cand"].returncode != 0:
        return _reject(
            "compile_error",
            entry,
            f"the candidate does not compile: {_first_line(built['cand'].output)}",
            compiler_output=built["cand"].output[-4000:],
        )
    details: dict[str, Any] = {"checked": [], "run_seed": s.run_seed, "phase_seconds": s.phase_s}
    s.oracle = _oracle_runs(s, path, baseline, entry, bplan, bspec, files, nvcc)
    if not opts.timing_only:
        t0 = time.monotonic()
        v = _correctness(s, entry, bspec, bplan, opts, say, details)
        s.phase_s["correctness"] = time.monotonic() - t0 - s.phase_s.get("error_budget", 0.0)
        if v is not None:
            return v
        if opts.sanitize:
            t0 = time.monotonic()
            v = _sanitize(s, entry, cplan, opts, say, candidate, details)
            s.phase_s["sanitizer"] = time.monotonic() - t0
            if v is not None:
                return v
    if not opts.time_candidate:
        return Verdict("accepted", True, "correct (timing skipped)", entry, details=details)
    return _time(s, entry, bspec, bplan, opts, say, details)


def _oracle_runs(
    s: _Session,
    path: Path,
    baseline: str,
    entry: str,
    bplan: harness.HarnessPlan,
    bspec: spec.BoundSpec,
    files: dict[str, bytes],
    nvcc: str,
) -> oracle.OracleRuns | None:
    """The baseline with its float accumulations in double (:mod:`kernellsp.optimize.verify.oracle`), built in
    ``oracle/`` beside the two sides only when a float mismatch asks for it; None when nothing can be promoted."""
    from kernellsp import cache
    from kernellsp.run.harness_build import build_harness

    try:
        src = oracle.oracle_source(baseline, str(path), entry, bplan)
    except (ValueError, RecursionError):
        return None
    if src is None:
        return None
    own = {
        f"src/{path.name}": src.text.encode(),
        "harness.cu": harness.generate_harness(bplan, f"src/{path.name}", split=True).encode(),
    }
    own |= {
        k[len("base/") :]: v
        for k, v in files.items()
        if k.startswith("base/src/") and k[len("base/") :] not in own
    }

    def build() -> str | None:
        try:
            s.runner.put({f"oracle/{k}": v for k, v in own.items()}, s.wd)
            key = cache.digest(*(f"{k}\0{v.decode('utf-8', 'replace')}" for k, v in sorted(own.items())))
            b = build_harness(
                s.runner,
                f"{s.wd}/oracle",
                "harness.cu",
                "h_oracle",
                s.opts.arch,
                list(bspec.spec.flags),
                nvcc=nvcc,
                nvcc_version=s.env.get("nvcc_version"),
                sources_key=key,
                timeout_s=s.opts.build_timeout_s,
                cancel=s.cancel,
            )
        except RunnerError as exc:
            return f"the oracle could not be built: {exc}"
        s.exe_paths["h_oracle"] = "oracle/h_oracle"
        return None if b.returncode == 0 else f"the oracle does not build: {_first_line(b.output, 3)}"

    def run(shape: int, sets: list[str]) -> tuple[harness.HarnessResult | None, str | None]:
        try:
            res, out, _ = s.harness_run("h_oracle", "check", shape, 0, sets=sets)
        except RunnerError as exc:  # the oracle's own failure is never the candidate's verdict
            return None, f"the oracle failed on shape {shape}: {exc}"
        if out is None or not out.ok:
            return (
                None,
                f"the oracle failed on shape {shape}: {out.error if out else _first_line(res.output, 3)}",
            )
        return out, None

    return oracle.OracleRuns(src, build, run)


def _oracle_rescue(
    s: _Session,
    shape: int,
    sets: list[str],
    i: int,
    buffer: str,
    dtype: str,
    got: bytes,
    want: bytes,
    tol: compare.Tolerance,
    details: dict[str, Any],
) -> tuple[bool, str]:
    """A float mismatch against the baseline, judged again against the oracle run on the same shape and inputs
    (:func:`kernellsp.optimize.verify.oracle.judge`): (rescued, what to add to the refusal's message)."""
    if s.oracle is None or dtype not in spec.FLOAT_DTYPES:
        return False, ""
    t0 = time.monotonic()
    out = s.oracle.outputs(shape, sets)
    s.phase_s["oracle"] = s.phase_s.get("oracle", 0.0) + time.monotonic() - t0
    if out is None:
        return False, f" (the baseline's higher-precision oracle was not available: {s.oracle.problem})"
    verdict = oracle.judge(dtype, got, want, out.read_set_bytes(i, buffer), tol)
    details["oracle_source"] = s.oracle.source.to_dict()
    details.setdefault("oracle", []).append(
        {
            "shape": shape,
            "set": sets[i],
            "buffer": buffer,
            "rescued": verdict.rescued,
            "baseline_error": verdict.baseline_error,
            "candidate_error": verdict.candidate_error,
            "allowed_error": verdict.allowed_error,
        }
    )
    return verdict.rescued, "" if verdict.rescued else f"; {verdict.describe()}"


def _derive(run_seed: int, k: int) -> int:
    """The k-th input seed of a verification (63 bits: JSON- and command-line-friendly)."""
    return harness.mix64((run_seed + (k + 1) * 0x9E3779B97F4A7C15) & (2**64 - 1)) >> 1


def _patterns_apply(plan: harness.HarnessPlan, pattern: str = "spikes") -> bool:
    """Whether ``pattern`` changes any input buffer (the range patterns: uniform, normal, randint, default;
    "tail": normal only); a pattern that changes nothing would only repeat a spec set."""
    sp = plan.shapes[0]
    for a in plan.inputs:
        d = sp.dists.get(a.name)
        if d is not None and a.dtype is not None and harness.pattern_applies(d, a.dtype, pattern):
            return True
    return False


@dataclass
class _Suspect:
    """A comparison inside the tolerance but above the quick error budget: the baseline's own error decides."""

    shape: int
    set: str
    buffer: str
    dtype: str
    error: float
    base: harness.HarnessResult
    base_index: int
    where: dict[str, Any]


def _describe_set(st: str) -> str:
    seed, _, rest = st.partition(":")
    if "@" in seed:
        seed, _, launch = seed.partition("@")
        return f"the inputs of timed launch {launch.removesuffix('+abs')} (seed {seed})"
    pattern = rest.split("@")[0].removesuffix("+abs")
    return f"seed {seed}" + (f", {pattern} pattern" if pattern else "")


def _correctness(
    s: _Session,
    entry: str,
    bspec: spec.BoundSpec,
    plan: harness.HarnessPlan,
    opts: VerifyOptions,
    say: Progress,
    details: dict[str, Any],
) -> Verdict | None:
    """Every shape (small edge shapes first: most wrong rewrites fail there, cheaply), all input sets in one
    process per side; then the alternate poison on the main shape; then the error budget of near misses."""
    spec_sets = [harness.input_set(_derive(s.run_seed, k)) for k in range(opts.seeds)]
    patterns = [p for p in opts.patterns if p != "spec"]
    if patterns and not _patterns_apply(plan):
        details["patterns_skipped"] = (
            "no input buffer draws from a range (uniform, normal, randint or the default)"
        )
        patterns = []
    patterns = [p for p in patterns if _patterns_apply(plan, p)]
    details["patterns"] = patterns
    sets = spec_sets + [harness.input_set(_derive(s.run_seed, 100 + i), p) for i, p in enumerate(patterns)]
    order = sorted(range(len(plan.shapes)), key=lambda i: (i == 0, sum(plan.shapes[i].counts.values()), i))
    suspects: list[_Suspect] = []
    main: harness.HarnessResult | None = None
    for k, shape in enumerate(order):
        say(f"correctness: shape {shape} ({len(sets)} input sets)", 10 + 50 * (k + 1) / len(order))
        v, bout = _check_shape(
            s, entry, plan.outputs, bspec, shape, sets, len(spec_sets), details, opts, suspects
        )
        if v is not None:
            return v
        if shape == 0:
            main = bout
    # A second poison pattern (outputs and shared memory): a candidate that reads memory it never wrote
    # shows different outputs.
    say("correctness: alternate poison", 62)
    v, _ = _check_shape(
        s, entry, plan.outputs, bspec, 0, spec_sets[:1], 1, details, opts, suspects, base=main, poison="alt"
    )
    if v is not None:
        return v
    return _error_budget(s, entry, suspects, opts, details, say)


def _check_shape(
    s: _Session,
    entry: str,
    outputs: list[Any],
    bspec: spec.BoundSpec,
    shape: int,
    sets: list[str],
    n_spec: int,
    details: dict[str, Any],
    opts: VerifyOptions,
    suspects: list[_Suspect],
    base: harness.HarnessResult | None = None,
    poison: str = "nan",
) -> tuple[Verdict | None, harness.HarnessResult | None]:
    """The candidate against the baseline on every input set of one shape; ``base`` reuses a baseline run."""
    bout = base
    if bout is None:
        bres, bout, _ = s.harness_run("h_base", "check", shape, 0, sets=sets)
        if bout is None or not bout.ok:
            msg = bout.error if bout is not None else _first_line(bres.output)
            raise VerifyError(f"the baseline fails on shape {shape}: {msg}")
    cres, cout, _ = s.harness_run("h_cand", "check", shape, 0, sets=sets, poison=poison)
    where0 = {"shape": shape, "sizes": bout.sizes, "poison": poison}
    if cout is None:
        return _reject(
            "runtime_error",
            entry,
            f"the candidate crashed (exit {cres.returncode}) on shape {shape}: {_first_line(cres.output, 3)}",
            **where0,
        ), bout
    if not cout.ok:
        hint = ""
        if "IllegalAddress" in (cout.error or "") and cout.alloc.get("kind") == "guard":
            hint = (
                " (every buffer ends at a guard page, so this is most likely an access out of bounds; "
                "compute-sanitizer memcheck names the line)"
            )
        return _reject(
            "runtime_error", entry, f"the candidate failed on shape {shape}: {cout.error}{hint}", **where0
        ), bout
    if shape == 0 and cout.kernel_attrs:
        s.cand_static_smem = int(cout.kernel_attrs.get("shared_static_bytes") or 0)
    damage = cout.guard_damage()
    if damage:
        name, count = next(iter(damage.items()))
        return _reject(
            "sanitizer",
            entry,
            f"the candidate wrote {count} byte(s) just outside buffer {name} on shape "
            f"{shape} (the canary beside its guard page changed): an out-of-bounds write",
            tool="guard",
            buffer=name,
            bytes=count,
            **where0,
        ), bout
    for i, st in enumerate(sets):
        bset, cset = bout.sets[i], cout.sets[i]
        where = {**where0, "seed": bset.seed, "pattern": bset.pattern, "inputs": st}
        what = _describe_set(st)
        mutated = [n for n, b in cset.buffers.items() if b.mutated and not bset.buffers[n].mutated]
        if mutated:
            return _reject(
                "input_mutated",
                entry,
                f"the candidate wrote to input buffer(s) {', '.join(mutated)} "
                f"(shape {shape}, {what}); inputs must stay unchanged",
                buffers=mutated,
                **where,
            ), bout
        refs: dict[str, tuple[str, bytes]] = {}

        def ref(name: str, dtype: str, i: int = i, refs: dict[str, tuple[str, bytes]] = refs) -> bytes:
            if name not in refs:  # read once, only when needed (outputs can be large)
                refs[name] = (dtype, bout.read_set_bytes(i, name))
            return refs[name][1]

        # Degenerate references are judged on the main shape with the spec's distribution: tiny edge shapes
        # (one column, one row) can legitimately give constant outputs and are still compared element by
        # element; a structured pattern that makes this kernel's output constant is simply not informative.
        problem = None
        if shape == 0 or i >= n_spec:
            problem = compare.reference_problem({a.name: (a.dtype, ref(a.name, a.dtype)) for a in outputs})
        if problem is not None and i >= n_spec:
            details.setdefault("skipped", []).append({**where, "why": problem})
            continue
        if problem is not None and poison == "nan":
            return _reject("degenerate_reference", entry, f"{problem} (shape {shape}, {what})", **where), bout
        for a in outputs:
            cu, bu = cset.buffers[a.name].unwritten or 0, bset.buffers[a.name].unwritten or 0
            if cu > bu:
                return _reject(
                    "unwritten_output",
                    entry,
                    f"the candidate left {cu} element(s) of {a.name} unwritten "
                    f"(shape {shape}, {what}, poison {poison})",
                    buffer=a.name,
                    unwritten=cu,
                    **where,
                ), bout
        v = _compare_set(
            s,
            entry,
            outputs,
            bspec,
            (shape, sets, i),
            bout,
            cout,
            ref,
            poison,
            where,
            details,
            opts,
            suspects,
        )
        if v is not None:
            return v, bout
        details["checked"].append(where)
    return None, bout


def _compare_set(
    s: _Session,
    entry: str,
    outputs: list[Any],
    bspec: spec.BoundSpec,
    at: tuple[int, list[str], int],
    bout: harness.HarnessResult,
    cout: harness.HarnessResult,
    ref: Callable[[str, str], bytes],
    poison: str,
    where: dict[str, Any],
    details: dict[str, Any],
    opts: VerifyOptions,
    suspects: list[_Suspect],
) -> Verdict | None:
    """Every output of input set ``at = (shape, sets, i)`` against the baseline's (``ref``); a float mismatch
    is judged again against the baseline's higher-precision oracle, when there is one (:func:`_oracle_rescue`)."""
    shape, sets, i = at
    st, what = sets[i], _describe_set(sets[i])
    cset, bset = cout.sets[i], bout.sets[i]
    for a in outputs:
        if poison == "nan" and cset.buffers[a.name].digest == bset.buffers[a.name].digest:
            continue  # bit for bit the baseline's output
        got = cout.read_set_bytes(i, a.name)
        tol = compare.resolve_tolerance(a.dtype, bspec.spec.tolerance)
        want = ref(a.name, a.dtype)
        mm = compare.compare(a.name, a.dtype, got, want, tol)
        rescued, note = (
            _oracle_rescue(s, shape, sets, i, a.name, a.dtype, got, want, tol, details) if mm else (False, "")
        )
        if mm is not None and not rescued:
            return _reject(
                "mismatch",
                entry,
                f"wrong result on shape {shape} ({_sizes(bout.sizes)}), {what}: {mm.describe()}{note}",
                buffer=a.name,
                index=mm.index,
                got=mm.got,
                want=mm.want,
                bad_elements=mm.bad_elements,
                norm_rel_err=mm.norm_rel_err,
                **where,
            )
        if rescued:
            continue  # judged against the oracle: the baseline's error is no yardstick here
        err = compare.norm_rel_error(a.dtype, got, want)
        if not compare.within_quick_budget(a.dtype, err, opts.error_budget):
            suspects.append(_Suspect(shape, st, a.name, a.dtype, err, bout, i, where))
    return None


def _error_budget(
    s: _Session,
    entry: str,
    suspects: list[_Suspect],
    opts: VerifyOptions,
    details: dict[str, Any],
    say: Progress,
) -> Verdict | None:
    """Results within the tolerance but more than the quick budget off: measure the baseline's own error on
    those inputs (three more launches: run-to-run spread; one on |x|: conditioning) and refuse an error
    far above it (:func:`kernellsp.optimize.verify.correctness.error_budget`)."""
    if not suspects or opts.error_budget <= 0:
        return None
    t0 = time.monotonic()
    say("error budget: the baseline's own error on the closest calls", 64)
    try:
        for shape in sorted({x.shape for x in suspects}):
            mine = [x for x in suspects if x.shape == shape]
            uniq = list(dict.fromkeys(x.set for x in mine))
            sets = [t for u in uniq for t in (u, u, u, u + "+abs")]
            bres, bout, _ = s.harness_run("h_base", "check", shape, 0, sets=sets)
            if bout is None or not bout.ok:
                msg = bout.error if bout is not None else _first_line(bres.output)
                raise VerifyError(f"the baseline fails on shape {shape} (error budget): {msg}")
            for x in mine:
                k = 4 * uniq.index(x.set)
                ref = x.base.read_set_bytes(x.base_index, x.buffer)
                spread = max(
                    compare.norm_rel_error(x.dtype, bout.read_set_bytes(k + r, x.buffer), ref)
                    for r in range(3)
                )
                ref_norm = compare.norm(x.dtype, ref)
                cond = (
                    compare.norm(x.dtype, bout.read_set_bytes(k + 3, x.buffer)) / ref_norm
                    if ref_norm > 0
                    else 1.0
                )
                budget = compare.error_budget(x.dtype, cond, spread, opts.error_budget)
                row = {
                    **x.where,
                    "buffer": x.buffer,
                    "error": x.error,
                    "spread": spread,
                    "conditioning": cond,
                    "budget": budget,
                }
                details.setdefault("error_budget", []).append(row)
                if x.error > budget:
                    own = max(spread, (compare.budget_floor(x.dtype) or 0.0) * max(1.0, cond))
                    return _reject(
                        "mismatch",
                        entry,
                        f"{x.buffer} is {x.error:.3g} off the reference (norm-relative) on "
                        f"shape {x.shape}, {_describe_set(x.set)}: {x.error / own:.0f}x the baseline's own "
                        f"error ({own:.3g}; run-to-run spread {spread:.3g}, conditioning {cond:.3g}), above "
                        f"the error budget of {opts.error_budget:g}x: approximated or skipped work, even "
                        "inside the spec's tolerance",
                        reason="error_budget",
                        **row,
                    )
    finally:
        s.phase_s["error_budget"] = s.phase_s.get("error_budget", 0.0) + time.monotonic() - t0
    return None


def _sizes(sizes: dict[str, Any] | None) -> str:
    return ", ".join(f"{k}={v}" for k, v in (sizes or {}).items())


#: Whether a compute-sanitizer binary knows --padding (asked once per path: ``--help``).
_SANITIZER_PADDING: dict[str, bool] = {}
_SYNC_TOKENS = re.compile(r"sync|barrier")
#: Tools whose cost grows with every shared-memory access (bounded on heavy shapes: hazard_check_budget_s).
_HAZARD_TOOLS = frozenset({"racecheck", "synccheck"})


def _sanitizer_plan(
    plan: harness.HarnessPlan, opts: VerifyOptions, candidate: str, static_smem: int
) -> list[tuple[int, list[str]]]:
    """(shape, tools) to run: every distinct shape (or the smallest), each tool where it can find something.

    memcheck always; racecheck (shared-memory hazards) when the kernel has shared memory or is a host
    launcher (whose kernels we cannot see); synccheck when the candidate names a barrier or a ``*_sync``
    warp primitive; initcheck for host launchers (scratch they allocate is the only global memory the
    harness does not initialise: inputs are filled and outputs poisoned before every launch).
    """
    seen: dict[str, int] = {}
    for sp in plan.shapes:
        seen.setdefault(json.dumps(sp.sizes, sort_keys=True), sp.index)
    shapes = sorted(seen.values(), key=lambda i: (sum(plan.shapes[i].counts.values()), i))
    if not opts.sanitize_all_shapes:
        shapes = shapes[:1]
    host = plan.kind == "host"
    out = []
    for i in shapes:
        tools = []
        for t in opts.sanitizer_tools:
            if t == "racecheck" and not (host or static_smem > 0 or (plan.shapes[i].smem or 0) > 0):
                continue
            if t == "synccheck" and not _SYNC_TOKENS.search(candidate):
                continue
            if t == "initcheck" and not host:
                continue
            tools.append(t)
        out.append((i, tools))
    return out


def _sanitize(
    s: _Session,
    entry: str,
    plan: harness.HarnessPlan,
    opts: VerifyOptions,
    say: Progress,
    candidate: str,
    details: dict[str, Any],
) -> Verdict | None:
    tool = s.runner.which("compute-sanitizer")
    if tool is None:
        return _reject(
            "sanitizer_unavailable",
            entry,
            "compute-sanitizer is not installed on the runner, so the "
            "candidate cannot be accepted (it ships with the CUDA toolkit; put it on PATH)",
        )
    if tool not in _SANITIZER_PADDING:
        try:
            _SANITIZER_PADDING[tool] = "--padding" in s.run([tool, "--help"], gpu=False, timeout=60).output
        except RunnerError:
            _SANITIZER_PADDING[tool] = False
    runs = _sanitizer_plan(plan, opts, candidate, s.cand_static_smem)
    details["sanitizer"] = []
    total = sum(len(tools) for _, tools in runs)
    passed: set[str] = set()  # hazard tools that already passed on a smaller shape
    k = 0
    for shape, tools in runs:
        for t in tools:
            k += 1
            bounded = t in _HAZARD_TOOLS and t in passed
            limit = (
                min(opts.hazard_check_budget_s, opts.sanitizer_timeout_s)
                if bounded
                else opts.sanitizer_timeout_s
            )
            say(f"compute-sanitizer {t}, shape {shape}", 66 + 8 * k / max(total, 1))
            wrapper = [tool, "--tool", t, "--error-exitcode", "86", "--print-limit", "5"]
            if t == "memcheck":
                wrapper += ["--leak-check", "no"]
                if _SANITIZER_PADDING[tool]:
                    # Allocations side by side would hide an overflow into the next one: memcheck pads them.
                    wrapper += ["--padding", "4096"]
            t0 = time.monotonic()
            # --alloc plain: exact cudaMalloc sizes, so memcheck sees an access even one byte past the end.
            try:
                res, out, _ = s.harness_run(
                    "h_cand",
                    "check",
                    shape,
                    0,
                    wrapper=wrapper,
                    alloc="plain",
                    sets=[harness.input_set(_derive(s.run_seed, 200 + shape))],
                    timeout=limit,
                )
            except RunnerError as exc:
                if exc.kind == "timeout" and bounded:
                    # The hazard passed on a smaller shape; on this one only its first `limit` seconds ran.
                    details["sanitizer"].append(
                        {
                            "tool": t,
                            "shape": shape,
                            "seconds": round(time.monotonic() - t0, 3),
                            "bounded": f"stopped after {limit:g} s (hazard_check_budget_s)",
                        }
                    )
                    say(
                        f"compute-sanitizer {t} on shape {shape}: stopped after {limit:g} s (passed on a smaller shape)",
                        None,
                    )
                    continue
                if exc.kind == "timeout":
                    return _reject(
                        "timeout",
                        entry,
                        f"compute-sanitizer {t} did not finish on shape {shape} within "
                        f"{opts.sanitizer_timeout_s:g} s; the candidate cannot be accepted unchecked",
                        tool=t,
                        shape=shape,
                    )
                raise
            details["sanitizer"].append(
                {"tool": t, "shape": shape, "seconds": round(time.monotonic() - t0, 3)}
            )
            text = res.output
            if res.returncode == 86 or ("ERROR SUMMARY: 0 errors" not in text and "ERROR SUMMARY" in text):
                first = next(
                    (
                        ln.strip()
                        for ln in text.splitlines()
                        if ln.startswith("========= ")
                        and (
                            "Invalid" in ln
                            or "hazard" in ln.lower()
                            or "Error" in ln
                            or "Uninitialized" in ln
                            or "Barrier" in ln
                        )
                    ),
                    _first_line(text, 2),
                )
                return _reject(
                    "sanitizer",
                    entry,
                    f"compute-sanitizer {t} found errors on shape {shape}: {first}",
                    tool=t,
                    shape=shape,
                    report=text[-4000:],
                )
            if out is None or not out.ok:
                # No result.json: the program died before writing it (a signal, a crash in the driver, a
                # resource limit); the tool's own output is the evidence.
                why = (
                    out.error
                    if out
                    else f"it ended without a result (exit {res.returncode}): {_first_line(text, 3)}"
                )
                return _reject(
                    "runtime_error",
                    entry,
                    f"the candidate failed under compute-sanitizer {t} on shape {shape}: {why}",
                    tool=t,
                    shape=shape,
                    report=text[-4000:],
                )
            passed.add(t)
    return None


def _time(
    s: _Session,
    entry: str,
    bspec: spec.BoundSpec,
    plan: harness.HarnessPlan,
    opts: VerifyOptions,
    say: Progress,
    details: dict[str, Any],
) -> Verdict:
    kernel_entry = plan.kind == "global"
    rounds: dict[str, list[list[float]]] = {"base": [], "cand": []}
    raw: dict[str, list[dict[str, Any]]] = {"base": [], "cand": []}
    device: dict[str, Any] | None = None
    # Buffers the baseline itself leaves partly unwritten (kernels that write a sub-range) are not held
    # against the candidate.
    base_partial: set[str] = set()
    t_timing = time.monotonic()
    # The candidate's runs keep the outputs of a few timed launches, picked at random after they ran
    # (the harness decides with OS entropy, so no launch can know it will be compared).
    checked: list[harness.HarnessResult] = []
    bandwidths: list[float] = []
    # Sequential testing: from round min_rounds on, the interval is looked at after every round, each look
    # at a level that keeps the overall error at 5% (timing.look_confidence); timing stops once it clears
    # the minimum gain or lies wholly below it. Rounds after the first scale their repetitions to the
    # baseline's duration (timing.scaled_reps): a long kernel needs fewer launches per process.
    min_rounds = max(1, min(opts.min_rounds, opts.rounds))
    confidence = timing.look_confidence(0.95, opts.rounds - min_rounds + 1)
    reps, warmup = opts.reps, opts.warmup
    for r in range(opts.rounds):
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
                _derive(s.run_seed, 1000 + r),
                reps=reps,
                warmup=warmup,
                fresh=True,
                check_launches=keep,
            )
            if out is None or not out.ok:
                msg = out.error if out is not None else _first_line(res.output, 3)
                if who == "base":
                    raise VerifyError(f"timing the baseline failed: {msg}")
                return _reject("runtime_error", entry, f"the candidate failed while being timed: {msg}")
            device = device or out.device
            if keep:
                checked.append(out)
            if out.copy_bandwidth:
                bandwidths.append(out.copy_bandwidth)
            ts = out.timings_ms if kernel_entry else out.timings_sync_ms
            raw[who].append({"timings_ms": out.timings_ms, "timings_sync_ms": out.timings_sync_ms})
            rounds[who].append(ts)
            for b in out.buffers:
                if b.dir == "in" or not b.rep_unwritten or not any(u > 0 for u in b.rep_unwritten):
                    continue
                if who == "base":
                    base_partial.add(b.name)
                elif b.name not in base_partial:
                    return _reject(
                        "unwritten_output",
                        entry,
                        f"during timing the candidate left elements of "
                        f"{b.name} unwritten in {sum(1 for u in b.rep_unwritten if u)} of "
                        f"{len(b.rep_unwritten)} repetitions (work skipped or cached across calls)",
                        buffer=b.name,
                    )
        if r == 0 and rounds["base"][0]:
            reps, warmup = timing.scaled_reps(statistics.median(rounds["base"][0]), opts.reps, opts.warmup)
        if min_rounds <= r + 1 < opts.rounds:
            look = timing.paired_speedup(rounds["base"], rounds["cand"], confidence=confidence)
            if timing.decision(look, opts.min_gain_pct) != "continue":
                break
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
    from kernellsp.profile.ncu import footprint_bytes

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
    s: _Session,
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
    bres, bout, _ = s.harness_run("h_base", "check", 0, 0, sets=sets)
    if bout is None or not bout.ok:
        msg = bout.error if bout is not None else _first_line(bres.output)
        raise VerifyError(f"the baseline fails on the inputs of the timed launches: {msg}")
    details["launches_checked"] = [{"seed": run.seed, "launch": sn.launch} for run, sn in snaps]
    suspects: list[_Suspect] = []
    for i, (run, sn) in enumerate(snaps):
        where = {"shape": 0, "seed": run.seed, "launch": sn.launch, "inputs": sets[i], "phase": "timing"}
        for a in plan.outputs:
            assert a.dtype is not None
            got = run.read_snapshot_bytes(sn.index, a.name)
            want = bout.read_set_bytes(i, a.name)
            cu, bu = sn.buffers[a.name].unwritten or 0, bout.sets[i].buffers[a.name].unwritten or 0
            if cu > bu:
                return _reject(
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
            mm = compare.compare(a.name, a.dtype, got, want, tol)
            rescued, note = (
                _oracle_rescue(s, 0, sets, i, a.name, a.dtype, got, want, tol, details) if mm else (False, "")
            )
            if rescued:
                continue
            if mm is not None:
                return _reject(
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
            err = compare.norm_rel_error(a.dtype, got, want)
            if not compare.within_quick_budget(a.dtype, err, opts.error_budget):
                # The snapshot is the candidate's side; the reference is the baseline's set i of this run.
                suspects.append(_Suspect(0, sets[i], a.name, a.dtype, err, bout, i, where))
    return _error_budget(s, entry, suspects, opts, details, lambda _m, _p: None)


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
