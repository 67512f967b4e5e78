"""The correctness gate (step 3 of :mod:`kernellsp.optimize.verify.gate`): every shape and input set against
the baseline, the baseline's higher-precision oracle for float mismatches, and the error budget of near misses."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kernellsp.optimize.verify import correctness as compare
from kernellsp.optimize.verify import oracle
from kernellsp.optimize.verify.session import Session, derive_seed, first_line
from kernellsp.optimize.verify.verdict import Progress, Verdict, VerifyError, VerifyOptions, reject
from kernellsp.run import harness
from kernellsp.run.runner import RunnerError
from kernellsp.source import spec


def oracle_runs(
    s: Session,
    path: Path,
    baseline: str,
    entry: str,
    bplan: harness.HarnessPlan,
    bspec: spec.BoundSpec,
    files: dict[str, bytes],
    nvcc: str,
) -> oracle.OracleRuns | None:
    """The baseline with its float accumulations in double (:mod:`kernellsp.optimize.verify.oracle`), compiled in
    ``oracle/`` beside the two sides in the background from the start and run only when a float mismatch asks
    for it; None when nothing can be promoted."""
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

    def compile_oracle() -> str | None:
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
        return None if b.returncode == 0 else f"the oracle does not build: {first_line(b.output, 3)}"

    # Compiled in the background from the start (beside the candidate's checks; the binary cache keeps it
    # for every later verification of this baseline), so the first float mismatch waits only for what is
    # left of the build: 2 s of a 16.5 s round candidate (reduce_atomic, H100) went to compiling it then.
    pending = s.background(compile_oracle)

    def build() -> str | None:
        return pending.result()

    def run(shape: int, sets: list[str]) -> tuple[harness.HarnessResult | None, str | None]:
        try:
            res, out, _ = s.harness_run("h_oracle", "check", shape, 0, sets=sets, gpu="shared")
        except RunnerError as exc:  # the oracle's own failure is never the candidate's verdict
            return None, f"the oracle failed on shape {shape}: {exc}"
        if out is None or not out.ok:
            return (
                None,
                f"the oracle failed on shape {shape}: {out.error if out else first_line(res.output, 3)}",
            )
        return out, None

    return oracle.OracleRuns(src, build, run)


def oracle_rescue(
    s: Session,
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


def _patterns_apply(plan: harness.HarnessPlan, pattern: str = "spikes") -> bool:
    """Whether ``pattern`` changes any input buffer (the range patterns: uniform, normal, randint, default;
    "tail": normal only; "offset": f32/f64 normal only); a pattern that changes nothing would only repeat a spec set."""
    sp = plan.shapes[0]
    for a in plan.inputs:
        d = sp.dists.get(a.name)
        if d is not None and a.dtype is not None and harness.pattern_applies(d, a.dtype, pattern):
            return True
    return False


@dataclass
class Suspect:
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
    st, _, prefill = st.partition("~")
    after = {
        "previous": ", outputs holding an earlier call's results",
        "garbage": ", outputs holding finite garbage",
    }.get(prefill, "")
    return _describe_inputs(st) + after


def _describe_inputs(st: str) -> str:
    seed, _, rest = st.partition(":")
    if "@" in seed:
        seed, _, launch = seed.partition("@")
        return f"the inputs of timed launch {launch.removesuffix('+abs')} (seed {seed})"
    pattern = rest.split("@")[0].removesuffix("+abs")
    return f"seed {seed}" + (f", {pattern} pattern" if pattern else "")


def check_correctness(
    s: Session,
    entry: str,
    bspec: spec.BoundSpec,
    plan: harness.HarnessPlan,
    opts: VerifyOptions,
    say: Progress,
    details: dict[str, Any],
) -> Verdict | None:
    """Every shape (small edge shapes first: most wrong rewrites fail there, cheaply), all input sets in one
    process per side; then the alternate poison on the main shape; then the error budget of near misses."""
    spec_sets = [harness.input_set(derive_seed(s.run_seed, k)) for k in range(opts.seeds)]
    patterns = [p for p in opts.patterns if p != "spec"]
    if patterns and not _patterns_apply(plan):
        details["patterns_skipped"] = (
            "no input buffer draws from a range (uniform, normal, randint or the default)"
        )
        patterns = []
    patterns = [p for p in patterns if _patterns_apply(plan, p)]
    details["patterns"] = patterns
    pattern_sets = [harness.input_set(derive_seed(s.run_seed, 100 + i), p) for i, p in enumerate(patterns)]
    # The second call of an application: the outputs hold an earlier call's results on other inputs (the last
    # spec set's: of the spec's distribution, not a pattern's extreme values), then the same moved to other
    # elements. Every shape, right after the spec's seeds.
    second_calls = [
        harness.input_set(derive_seed(s.run_seed, 300), prefill="previous"),
        harness.input_set(derive_seed(s.run_seed, 301), prefill="garbage"),
    ]
    details["second_calls"] = second_calls
    order = sorted(range(len(plan.shapes)), key=lambda i: (i == 0, sum(plan.shapes[i].counts.values()), i))
    suspects: list[Suspect] = []
    main: harness.HarnessResult | None = None
    if s.drawn_shapes:
        details["drawn_shapes"] = [{"shape": i, "sizes": d} for i, d in s.drawn_shapes.items()]
    for k, shape in enumerate(order):
        drawn = shape in s.drawn_shapes
        # The patterns on the edge shapes (and on the main one in the final verification); the spec's seeds
        # on drawn shapes; the second calls everywhere.
        patterned = not drawn and (shape != 0 or opts.main_shape_patterns)
        mine = spec_sets + second_calls + (pattern_sets if patterned else [])
        say(f"correctness: shape {shape} ({len(mine)} input sets)", 10 + 50 * (k + 1) / len(order))
        v, bout = _check_shape(
            s, entry, plan.outputs, bspec, shape, mine, len(spec_sets), details, opts, suspects, drawn=drawn
        )
        if v is not None:
            return v
        if shape == 0:
            main = bout
    # A second poison pattern (outputs and shared memory): a candidate that reads memory it never wrote
    # shows different outputs. Part of the main shape's full check (the final verification), like the patterns.
    if not opts.main_shape_patterns:
        return check_error_budget(s, entry, suspects, opts, details, say)
    say("correctness: alternate poison", 62)
    v, _ = _check_shape(
        s, entry, plan.outputs, bspec, 0, spec_sets[:1], 1, details, opts, suspects, base=main, poison="alt"
    )
    if v is not None:
        return v
    return check_error_budget(s, entry, suspects, opts, details, say)


def _check_shape(
    s: Session,
    entry: str,
    outputs: list[Any],
    bspec: spec.BoundSpec,
    shape: int,
    sets: list[str],
    n_spec: int,
    details: dict[str, Any],
    opts: VerifyOptions,
    suspects: list[Suspect],
    base: harness.HarnessResult | None = None,
    poison: str = "nan",
    drawn: bool = False,
) -> tuple[Verdict | None, harness.HarnessResult | None]:
    """The candidate against the baseline on every input set of one shape; ``base`` reuses a baseline run.
    A ``drawn`` shape (not declared) is skipped, with the reason in the evidence, where the baseline does
    not handle it cleanly: such a size is outside what the kernel supports."""
    coverage = drawn and any(a.dir == "inout" for a in outputs)
    bout = base if base is not None else _baseline_run(s, shape, sets, drawn, details, coverage)
    if bout is None:
        return None, None
    cres, cout, _ = s.harness_run(
        "h_cand", "check", shape, 0, sets=sets, poison=poison, gpu=True if opts.exclusive_checks else "shared"
    )
    where0 = {"shape": shape, "sizes": bout.sizes, "poison": poison}
    if cout is None or not cout.ok:
        return _candidate_run_failure(entry, shape, cres, cout, where0), bout
    if shape == 0 and cout.kernel_attrs:
        s.cand_static_smem = int(cout.kernel_attrs.get("shared_static_bytes") or 0)
    damage = cout.guard_damage()
    if damage:
        return _guard_damage_verdict(entry, shape, damage, where0), bout
    for i, st in enumerate(sets):
        bset, cset = bout.sets[i], cout.sets[i]
        where = {**where0, "seed": bset.seed, "pattern": bset.pattern, "inputs": st}
        what = _describe_set(st)
        mutated = [n for n, b in cset.buffers.items() if b.mutated and not bset.buffers[n].mutated]
        if mutated:
            return reject(
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
        if problem is not None and (i >= n_spec or drawn):
            details.setdefault("skipped", []).append({**where, "why": problem})
            continue
        if problem is not None and poison == "nan":
            return reject("degenerate_reference", entry, f"{problem} (shape {shape}, {what})", **where), bout
        v = _unwritten_output(entry, outputs, bset, cset, f"shape {shape}, {what}, poison {poison}", where)
        if v is not None:
            return v, bout
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


def _baseline_run(
    s: Session, shape: int, sets: list[str], drawn: bool, details: dict[str, Any], coverage: bool = False
) -> harness.HarnessResult | None:
    """The baseline's outputs on one shape: the reference (trusted, so its runs share the GPU). None for a
    drawn shape it does not handle (recorded); a declared shape it fails on stops the verification.
    ``coverage``: one more set, after those compared, poisons the inout buffers as well, so that a drawn shape
    whose inout outputs the baseline does not write in full shows as not handled (an inout element it skips
    keeps its input, which no poison would reveal)."""
    extra = [harness.input_set(derive_seed(s.run_seed, 500 + shape), prefill="coverage")] if coverage else []
    bres, bout, _ = s.harness_run("h_base", "check", shape, 0, sets=sets + extra, gpu="shared")
    unsupported = _unsupported_by_baseline(bout, first_line(bres.output)) if drawn else None
    if unsupported is not None:
        details.setdefault("drawn_skipped", []).append({"shape": shape, "why": unsupported})
        return None
    if bout is None or not bout.ok:
        msg = bout.error if bout is not None else first_line(bres.output)
        raise VerifyError(f"the baseline fails on shape {shape}: {msg}")
    return bout


def _unsupported_by_baseline(bout: harness.HarnessResult | None, output: str) -> str | None:
    """Why the baseline does not handle a drawn shape (it fails, leaves outputs unwritten or writes past a
    buffer), or None when it does."""
    if bout is None or not bout.ok:
        return f"the baseline fails there: {bout.error if bout is not None else output}"
    if bout.guard_damage():
        return "the baseline writes outside its buffers there"
    for st in bout.sets:
        if st.prefill not in ("poison", "coverage"):
            continue
        left = {n: b.unwritten for n, b in st.buffers.items() if b.unwritten}
        if left:
            return f"the baseline leaves outputs unwritten there ({_sizes(left)})"
    return None


def _unwritten_output(
    entry: str,
    outputs: list[Any],
    bset: harness.SetInfo,
    cset: harness.SetInfo,
    at: str,
    where: dict[str, Any],
) -> Verdict | None:
    """An output the candidate left with more elements unwritten than the baseline did (``at``: where)."""
    for a in outputs:
        cu, bu = cset.buffers[a.name].unwritten or 0, bset.buffers[a.name].unwritten or 0
        if cu > bu:
            return reject(
                "unwritten_output",
                entry,
                f"the candidate left {cu} element(s) of {a.name} unwritten ({at})",
                buffer=a.name,
                unwritten=cu,
                **where,
            )
    return None


def _candidate_run_failure(
    entry: str, shape: int, cres: Any, cout: harness.HarnessResult | None, where0: dict[str, Any]
) -> Verdict:
    """The candidate's check run crashed (no result) or reported a failure."""
    if cout is None:
        return reject(
            "runtime_error",
            entry,
            f"the candidate crashed (exit {cres.returncode}) on shape {shape}: {first_line(cres.output, 3)}",
            **where0,
        )
    hint = ""
    if "IllegalAddress" in (cout.error or "") and cout.alloc.get("kind") == "guard":
        hint = (
            " (every buffer ends at a guard page, so this is most likely an access out of bounds; "
            "compute-sanitizer memcheck names the line)"
        )
    return reject(
        "runtime_error", entry, f"the candidate failed on shape {shape}: {cout.error}{hint}", **where0
    )


def _guard_damage_verdict(entry: str, shape: int, damage: dict[str, int], where0: dict[str, Any]) -> Verdict:
    """A canary beside a guard page changed: the candidate wrote just outside a buffer."""
    name, count = next(iter(damage.items()))
    return reject(
        "sanitizer",
        entry,
        f"the candidate wrote {count} byte(s) just outside buffer {name} on shape "
        f"{shape} (the canary beside its guard page changed): an out-of-bounds write",
        tool="guard",
        buffer=name,
        bytes=count,
        **where0,
    )


def _compare_set(
    s: Session,
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
    suspects: list[Suspect],
) -> Verdict | None:
    """Every output of input set ``at = (shape, sets, i)`` against the baseline's (``ref``); a float mismatch
    is judged again against the baseline's higher-precision oracle, when there is one (:func:`oracle_rescue`)."""
    shape, sets, i = at
    st, what = sets[i], _describe_set(sets[i])
    cset, bset = cout.sets[i], bout.sets[i]
    for a in outputs:
        if poison == "nan" and cset.buffers[a.name].digest == bset.buffers[a.name].digest:
            continue  # bit for bit the baseline's output
        got = cout.read_set_bytes(i, a.name)
        tol = compare.resolve_tolerance(a.dtype, bspec.spec.tolerance)
        want = ref(a.name, a.dtype)
        mm, err = compare.compare_error(a.name, a.dtype, got, want, tol)
        rescued, note = (
            oracle_rescue(s, shape, sets, i, a.name, a.dtype, got, want, tol, details) if mm else (False, "")
        )
        if mm is not None and not rescued:
            return reject(
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
        if not compare.within_quick_budget(a.dtype, err, opts.error_budget):
            suspects.append(Suspect(shape, st, a.name, a.dtype, err, bout, i, where))
    return None


def check_error_budget(
    s: Session,
    entry: str,
    suspects: list[Suspect],
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
            # Precision, not the second call: the suspect's inputs with poisoned outputs.
            uniq = list(dict.fromkeys(harness.set_inputs(x.set) for x in mine))
            sets = [t for u in uniq for t in (u, u, u, u + "+abs")]
            bres, bout, _ = s.harness_run("h_base", "check", shape, 0, sets=sets, gpu="shared")
            if bout is None or not bout.ok:
                msg = bout.error if bout is not None else first_line(bres.output)
                raise VerifyError(f"the baseline fails on shape {shape} (error budget): {msg}")
            for x in mine:
                k = 4 * uniq.index(harness.set_inputs(x.set))
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
                    return reject(
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
