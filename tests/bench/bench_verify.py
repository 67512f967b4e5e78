"""Benchmark: what one verification of a correct rewrite costs, gate by gate.

Run on a GPU host from the repository root::

    python tests/bench/bench_verify.py --write [PAIR ...]

A pair is ``SAMPLE:CANDIDATE`` (a sample of samples/ and a correct, faster rewrite of it from
tests/adversarial/, e.g. ``saxpy_strided.cu:saxpy_coalesced.cu``). Each pair is verified twice, as the
optimize loop does: with the options of a round (one seed, no sanitizer: selection only) and with
the options of the final verification (every seed, every shape, compute-sanitizer, every gate). The
harness runtime object is built first (once per machine); the builds of the pair itself are cold.
Per verification the table shows the verdict, the speedup with its interval, the timing rounds run
(sequential testing stops early when the interval is clear) and the seconds of each gate (build,
correctness, sanitizer, timing and the rest: scope, planning, the environment). Writes
tests/bench/results/verify-<gpu>.md and .json.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import platform
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]

from helpers.gpuinfo import gpu_slug  # noqa: E402  (tests/helpers/gpuinfo.py)

RESULTS = ROOT / "tests" / "bench" / "results"
DEFAULT_PAIRS = [
    "saxpy_strided.cu:saxpy_coalesced.cu",
    "transpose_naive.cu:transpose_tiled.cu",
    "softmax_row.cu:softmax_warp_per_row.cu",
]
#: Gate phases in the table, in the order the gate runs them (details.phase_seconds of the verdict).
GATES = ("build", "correctness", "sanitizer", "timing")


def _round_options(final: Any) -> Any:
    """The options of a round of the optimize loop: one seed, no sanitizer (see optimize.loop.optimize)."""
    changes: dict[str, Any] = {"seeds": 1, "sanitize": False}
    if "sanitize_all_shapes" in {f.name for f in dataclasses.fields(final)}:
        changes["sanitize_all_shapes"] = False
    return dataclasses.replace(final, **changes)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("pairs", nargs="*", default=DEFAULT_PAIRS)
    ap.add_argument("--write", action="store_true")
    args = ap.parse_args()
    os.environ.setdefault("KERNELLSP_CACHE_DIR", tempfile.mkdtemp(prefix="kernellsp-bench-verify-"))
    from kernellsp.optimize.verify.gate import VerifyOptions, verify
    from kernellsp.profile.environment import runner_environment
    from kernellsp.run import harness_build as hb
    from kernellsp.run.runner import LocalRunner
    from kernellsp.source import spec
    from kernellsp.source.model import parse_source

    runner = LocalRunner()
    env = runner_environment(runner)
    final_opts = VerifyOptions()
    t = time.monotonic()
    _key, fut = hb.ensure_runtime(
        runner, final_opts.arch, runner.require("nvcc"), env.get("nvcc_version"), 600
    )
    rc = fut.result().returncode
    runtime = {"seconds": time.monotonic() - t, "returncode": rc}
    rows: list[dict[str, Any]] = []
    for pair in args.pairs:
        sample, cand = pair.split(":")
        path = ROOT / "samples" / sample
        baseline = path.read_text()
        candidate = (ROOT / "tests" / "adversarial" / cand).read_text()
        bound = spec.specs_from_source(parse_source(baseline, str(path)))[0][0]
        for label, opts in (("round", _round_options(final_opts)), ("final", final_opts)):
            marks: list[tuple[float, str]] = []
            t0 = time.monotonic()
            v = verify(path, baseline, candidate, bound.entry, runner, opts, env, progress=_recorder(marks))
            wall = time.monotonic() - t0
            phases = _phases_from_progress(marks, t0 + wall)
            # The gate's own accounting, where it keeps one, is more precise than the progress messages.
            phases.update(
                {k: float(x) for k, x in (v.details.get("phase_seconds") or {}).items() if k in GATES}
            )
            row = {
                "pair": pair,
                "entry": bound.entry,
                "kind": label,
                "verdict": v.kind,
                "message": v.message,
                "wall_s": wall,
                "phases": phases,
                "stats": v.stats,
                "options": {
                    "seeds": opts.seeds,
                    "sanitize": opts.sanitize,
                    "rounds": opts.rounds,
                    "min_rounds": getattr(opts, "min_rounds", None),
                    "reps": opts.reps,
                },
            }
            rows.append(row)
            print(f"{pair} {label}: {v.kind} in {wall:.1f} s {phases} {v.message[:160]}", flush=True)
    gpu = env.get("gpu", "?")
    text = render(rows, gpu, env, runtime)
    print(text)
    if args.write:
        slug = gpu_slug(gpu)
        (RESULTS / f"verify-{slug}.md").write_text(text)
        (RESULTS / f"verify-{slug}.json").write_text(
            json.dumps({"runtime_object": runtime, "rows": rows}, indent=1, default=str) + "\n"
        )
    return 0 if all(r["verdict"] == "accepted" for r in rows) else 1


def _recorder(marks: list[tuple[float, str]]) -> Any:
    """A progress callback that keeps (time, message)."""

    def say(message: str, _pct: float | None) -> None:
        marks.append((time.monotonic(), message))

    return say


def _gate_of(message: str) -> str | None:
    m = message.lower()
    if m.startswith("building"):
        return "build"
    if m.startswith("correctness") or m.startswith("error budget"):
        return "correctness"
    if "sanitizer" in m:
        return "sanitizer"
    if m.startswith("timing") or m.startswith("checking the outputs"):
        return "timing"
    return None


def _phases_from_progress(marks: list[tuple[float, str]], end: float) -> dict[str, float]:
    """Seconds per gate from the verification's progress messages (each gate runs until the next one starts)."""
    out: dict[str, float] = {}
    spans = [(t, g) for t, m in marks if (g := _gate_of(m)) is not None]
    for i, (t, g) in enumerate(spans):
        nxt = spans[i + 1][0] if i + 1 < len(spans) else end
        out[g] = out.get(g, 0.0) + (nxt - t)
    return out


def render(rows: list[dict[str, Any]], gpu: str, env: dict[str, Any], runtime: dict[str, Any]) -> str:
    lines = [
        f"# `verify` of a correct rewrite, gate by gate ({gpu})",
        "",
        f"GPU {gpu}, driver {env.get('driver', '?')}, nvcc {env.get('nvcc_version', '?')}, host {platform.node()}. "
        "Each pair (a sample and a correct, faster rewrite of it from tests/adversarial/) is verified as a round of "
        "the optimize loop verifies a candidate (one seed, no sanitizer) and as the final verification does (every "
        "seed and shape, compute-sanitizer, every gate). Seconds per gate: build = both sides' harnesses (the "
        "entry units; the runtime object was built before, once); correctness = the reference and candidate runs "
        "on every input set; sanitizer = compute-sanitizer; timing = the A/B rounds (sequential: they stop once the "
        "interval clears the minimum gain); other = scope, planning, environment. "
        f"Runtime object: {runtime.get('seconds') or 0:.1f} s, once.",
        "",
        "| pair | verification | verdict | speedup [CI] | A/B rounds | "
        + " | ".join(GATES)
        + " | other | wall (s) |",
        "|---|---|---|---|---:|" + "---:|" * (len(GATES) + 2),
    ]
    for r in rows:
        st = r.get("stats") or {}
        sp = f"{st['speedup']:.2f} [{st['ci_low']:.2f}, {st['ci_high']:.2f}]" if st else ""
        ph = r["phases"]
        known = sum(float(ph.get(g, 0.0)) for g in GATES)
        other = r["wall_s"] - known
        lines.append(
            f"| {r['pair']} | {r['kind']} | {r['verdict']} | {sp} | {st.get('rounds', '')} | "
            + " | ".join(f"{float(ph.get(g, 0.0)):.1f}" for g in GATES)
            + f" | {other:.1f} | {r['wall_s']:.1f} |"
        )
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    raise SystemExit(main())
