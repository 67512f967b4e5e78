"""The sanitizer gate (step 4 of :mod:`kernellsp.optimize.verify.gate`): compute-sanitizer on the candidate."""

from __future__ import annotations

import json
import re
import time
from collections.abc import Collection
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from kernellsp.optimize.verify.session import Session, derive_seed, first_line
from kernellsp.optimize.verify.verdict import Progress, Verdict, VerifyOptions, reject
from kernellsp.run import harness
from kernellsp.run.runner import RunnerError

_SANITIZER_PADDING: dict[str, bool] = {}
_SYNC_TOKENS = re.compile(r"sync|barrier")
#: Tools whose cost grows with every shared-memory access (bounded on heavy shapes: hazard_check_budget_s).
_HAZARD_TOOLS = frozenset({"racecheck", "synccheck"})
#: How many times slower a launch runs under racecheck/synccheck than natively, at least, on shared-memory
#: kernels (H100: a 32x32-tiled transpose at 8192^2 ran 8,700x slower, a 128x128-tiled SGEMM at 4096^3
#: more than 26,000x; twice that is assumed). A run projected past the hazard budget is not started: the
#: tools report a kernel's hazards when it ends, so a run stopped by the budget would have found nothing.
HAZARD_SLOWDOWN = 6.0e4


def native_launch_s(s: Session, shape: int) -> float | None:
    """The candidate's fastest launch on ``shape`` (launch to sync) over every input set of its correctness
    runs, if known. The fastest, not the mean: a candidate that is slow on some launches (its first one in a
    process, say) must not talk its way out of the hazard check on this shape."""
    times = [
        float(r["fastest_launch_s"])
        for r in s.runs
        if r["exe"] == "h_cand"
        and r["mode"] == "check"
        and r["tool"] is None
        and r["shape"] == shape
        and r.get("fastest_launch_s") is not None
    ]
    return min(times) if times else None


def _sanitizer_plan(
    plan: harness.HarnessPlan,
    opts: VerifyOptions,
    candidate: str,
    static_smem: int,
    skip: Collection[int] = (),
) -> list[tuple[int, list[str]]]:
    """(shape, tools) to run: every distinct shape (or the smallest), each tool where it can find something.

    memcheck always; racecheck (shared-memory hazards) when the kernel has shared memory or is a host
    launcher (whose kernels we cannot see); synccheck when the candidate names a barrier or a ``*_sync``
    warp primitive; initcheck for host launchers (scratch they allocate is the only global memory the
    harness does not initialise: inputs are filled and outputs poisoned before every launch).
    """
    seen: dict[str, int] = {}
    for sp in plan.shapes:
        if sp.index in skip:  # the drawn shapes: compared with the baseline, not sanitized
            continue
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


def sanitize(
    s: Session,
    entry: str,
    plan: harness.HarnessPlan,
    opts: VerifyOptions,
    say: Progress,
    candidate: str,
    details: dict[str, Any],
) -> Verdict | None:
    tool = s.runner.which("compute-sanitizer")
    if tool is None:
        return reject(
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
    runs = _sanitizer_plan(plan, opts, candidate, s.cand_static_smem, skip=s.drawn_shapes)
    details["sanitizer"] = []
    jobs = [(shape, t) for shape, tools in runs for t in tools]
    total = len(jobs)
    # The tools run side by side (each process holds the GPU in shared mode: what a tool finds does not depend
    # on the GPU being quiet), in two waves: the smallest shape first, then every larger one, so that a
    # hazard tool on a larger shape knows whether it already passed on a smaller one (then it is bounded by
    # hazard_check_budget_s). Verdicts are read in plan order, so the first failing run is the one reported.
    first = [j for j in jobs if runs and j[0] == runs[0][0]]
    waves = [first, [j for j in jobs if j not in first]]
    passed: set[str] = set()  # hazard tools that already passed on a smaller shape
    done = 0
    for wave in waves:
        if not wave:
            continue
        prior = frozenset(passed)

        def one(job: tuple[int, str], prior: frozenset[str] = prior) -> tuple[dict[str, Any], Verdict | None]:
            return _run_tool(
                s, tool, job[1], job[0], job[1] in _HAZARD_TOOLS and job[1] in prior, entry, opts, say
            )

        say(
            f"compute-sanitizer: {', '.join(f'{t} on shape {sh}' for sh, t in wave)}",
            66 + 8 * done / max(total, 1),
        )
        with ThreadPoolExecutor(max_workers=max(1, min(opts.sanitizer_parallel, len(wave)))) as pool:
            futures = [pool.submit(one, job) for job in wave]
            outcomes = [f.result() for f in futures]
        done += len(wave)
        for (_, t), (record, verdict) in zip(wave, outcomes, strict=True):
            details["sanitizer"].append(record)
            if verdict is not None:
                return verdict
            if "bounded" not in record:
                passed.add(t)
    return None


def _run_tool(
    s: Session,
    tool: str,
    t: str,
    shape: int,
    bounded: bool,
    entry: str,
    opts: VerifyOptions,
    say: Progress,
) -> tuple[dict[str, Any], Verdict | None]:
    """compute-sanitizer ``t`` on the candidate on ``shape``: its record for the verdict's details, and a
    rejection when it found something (or the candidate failed under it)."""
    limit = min(opts.hazard_check_budget_s, opts.sanitizer_timeout_s) if bounded else opts.sanitizer_timeout_s
    native = native_launch_s(s, shape) if bounded else None
    if native is not None and native * HAZARD_SLOWDOWN > limit:
        # Passed on a smaller shape; here it could not finish within the budget.
        say(f"compute-sanitizer {t} on shape {shape}: skipped (projected past the budget)", None)
        return {
            "tool": t,
            "shape": shape,
            "seconds": 0.0,
            "bounded": f"not started: one launch takes {1e3 * native:.2f} ms natively, so about "
            f"{native * HAZARD_SLOWDOWN:.0f} s under {t}, past the {limit:g} s hazard_check_budget_s",
        }, None
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
            sets=[harness.input_set(derive_seed(s.run_seed, 200 + shape))],
            timeout=limit,
            gpu="shared",
        )
    except RunnerError as exc:
        if exc.kind == "timeout" and bounded:
            # The hazard passed on a smaller shape; on this one only its first `limit` seconds ran.
            say(
                f"compute-sanitizer {t} on shape {shape}: stopped after {limit:g} s (passed on a smaller shape)",
                None,
            )
            return {
                "tool": t,
                "shape": shape,
                "seconds": round(time.monotonic() - t0, 3),
                "bounded": f"stopped after {limit:g} s (hazard_check_budget_s)",
            }, None
        if exc.kind == "timeout":
            return {"tool": t, "shape": shape, "seconds": round(time.monotonic() - t0, 3)}, reject(
                "timeout",
                entry,
                f"compute-sanitizer {t} did not finish on shape {shape} within "
                f"{opts.sanitizer_timeout_s:g} s; the candidate cannot be accepted unchecked",
                tool=t,
                shape=shape,
            )
        raise
    record = {"tool": t, "shape": shape, "seconds": round(time.monotonic() - t0, 3)}
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
            first_line(text, 2),
        )
        return record, reject(
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
            out.error if out else f"it ended without a result (exit {res.returncode}): {first_line(text, 3)}"
        )
        return record, reject(
            "runtime_error",
            entry,
            f"the candidate failed under compute-sanitizer {t} on shape {shape}: {why}",
            tool=t,
            shape=shape,
            report=text[-4000:],
        )
    return record, None
