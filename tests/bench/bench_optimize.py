"""Benchmark: the built-in tuner alone on every sample, through the full verification gate.

Run on a GPU host from the repository root::

    python tests/bench/bench_optimize.py --write [--rounds 2 --candidates 3] [SAMPLE.cu ...]

Per sample it records the baseline time, the best verified time, the speedup (final verdict of the
champion against the original, with its confidence interval), the share of the DRAM roofline the
champion reaches, the rounds run and the wall time, and writes tests/bench/results/optimize-<gpu>.md
(and .json with every candidate's verdict).
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]

from gpuinfo import gpu_slug  # noqa: E402  (tests/gpuinfo.py)

from kernellsp.check import CheckOptions, check_text  # noqa: E402
from kernellsp.optimize.loop import OptimizeOptions, optimize  # noqa: E402
from kernellsp.optimize.propose.tuner import Tuner  # noqa: E402
from kernellsp.optimize.verify.gate import VerifyOptions  # noqa: E402
from kernellsp.profile.ncu import runner_environment  # noqa: E402
from kernellsp.rules.engine import load_rules  # noqa: E402
from kernellsp.run.runner import LocalRunner  # noqa: E402
from kernellsp.source.model import parse_source  # noqa: E402
from kernellsp.source.spec import specs_from_source  # noqa: E402

RESULTS = ROOT / "tests" / "bench" / "results"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--write", action="store_true")
    ap.add_argument("--rounds", type=int, default=1)
    ap.add_argument("--candidates", type=int, default=3)
    ap.add_argument("--seeds", type=int, default=3)
    ap.add_argument("samples", nargs="*")
    args = ap.parse_args()
    files = [ROOT / "samples" / s for s in args.samples] if args.samples else sorted((ROOT / "samples").glob("*.cu"))
    runner = LocalRunner()
    env = runner_environment(runner)
    rules = load_rules(None)
    work = Path(tempfile.mkdtemp(prefix="kernellsp-bench-opt-"))
    (work / "kernellsp.toml").write_text("")
    rows = []
    for src in files:
        path = work / src.name
        text = src.read_text()
        path.write_text(text)
        entry = specs_from_source(parse_source(text, str(path)))[0][0].entry
        findings = check_text(path, text, CheckOptions(), rules).findings
        t0 = time.monotonic()
        try:
            res = optimize(path, text, entry, runner, [Tuner()],
                           OptimizeOptions(rounds=args.rounds, candidates=args.candidates,
                                           verify=VerifyOptions(seeds=args.seeds, rounds=4, reps=10)),
                           findings=findings, environment=env)  # fmt: skip
        except Exception as exc:  # a benchmark row, not a crash of the whole table
            rows.append({"sample": src.name, "entry": entry, "error": f"{type(exc).__name__}: {exc}",
                         "wall_s": time.monotonic() - t0})  # fmt: skip
            print(f"{src.name}: ERROR {exc}", flush=True)
            continue
        final = res.final
        stats = final.stats if final is not None and final.stats else None
        row = {
            "sample": src.name, "entry": entry, "accepted": res.accepted,
            "final_verdict": final.kind if final else None, "final_message": final.message if final else res.stop_reason,
            "baseline_ms": stats["baseline_median_ms"] if stats else next(
                (c.baseline_ms for c in res.candidates if c.round == 1 and c.baseline_ms), None),
            "best_ms": stats["candidate_median_ms"] if stats and res.accepted else None,
            "speedup": stats["speedup"] if stats and res.accepted else None,  # nothing verified: no number
            "ci": [stats["ci_low"], stats["ci_high"]] if stats else None,
            "roofline_pct": (final.details.get("candidate_pct_of_roofline") if res.accepted else
                             final.details.get("baseline_pct_of_roofline")) if final else None,
            "rounds": res.rounds_run, "stop": res.stop_reason, "wall_s": res.wall_s,
            "winner": " + ".join(res.winners) if res.accepted else None,
            "candidates": [{"round": c.round, "description": c.description, "verdict": c.verdict,
                            "speedup": c.speedup_vs_champion, "message": c.message[:200]} for c in res.candidates],
        }  # fmt: skip
        rows.append(row)
        sp = f"{row['speedup']:.3f}" if row["speedup"] is not None else "n/a"
        print(f"{src.name}: {row['final_verdict']} speedup {sp} ({row['stop']}, {row['wall_s']:.0f} s)",
              flush=True)  # fmt: skip
    gpu = env.get("gpu", "?")
    slug = gpu_slug(gpu)
    previous = RESULTS / f"optimize-{slug}.json"
    if args.write and args.samples and previous.is_file():
        # A run over some samples updates their rows and keeps the others (the suite can be split).
        done = {r["sample"] for r in rows}
        old = [r for r in json.loads(previous.read_text())["rows"] if r["sample"] not in done]
        rows = sorted(old + rows, key=lambda r: r["sample"])
    table = render(rows, env, args)
    print(table)
    if args.write:
        RESULTS.mkdir(parents=True, exist_ok=True)
        (RESULTS / f"optimize-{slug}.md").write_text(table)
        (RESULTS / f"optimize-{slug}.json").write_text(json.dumps({"environment": env, "rows": rows}, indent=1,
                                                                  default=str) + "\n")  # fmt: skip
    shutil.rmtree(work, ignore_errors=True)
    return 0


def render(rows: list[dict], env: dict, args: argparse.Namespace) -> str:
    lines = [
        f"# `kernellsp optimize` with the built-in tuner only ({env.get('gpu', '?')})",
        "",
        f"GPU {env.get('gpu')}, driver {env.get('driver')}, nvcc {env.get('nvcc_version')}, ncu {env.get('ncu_version')}. "
        f"Tuner only (no LLM), {args.rounds} round(s) × {args.candidates} candidates (1 seed, every shape, A/B timing per "
        f"candidate), then the champion is re-verified against the original ({args.seeds} seeds, every shape, "
        "compute-sanitizer memcheck + racecheck, 4 A/B timing rounds × 10 reps); that final verdict decides. "
        "Times are CUDA-event medians of the harness (L2 flushed, fresh inputs per repetition), not ncu durations.",
        "",
        "| sample | entry | baseline (ms) | best verified (ms) | speedup [95% CI] | % of DRAM roofline | winner | rounds | wall (s) |",
        "|---|---|---:|---:|---|---:|---|---:|---:|",
    ]
    for r in rows:
        if "error" in r:
            lines.append(f"| {r['sample']} | {r['entry']} | | | error: {r['error'][:100]} | | | | {r['wall_s']:.0f} |")
            continue
        if r["accepted"] and r["rounds"] == 1:
            # One round: the champion is the fastest accepted candidate (rows written before `winners` existed).
            acc = [c for c in r["candidates"] if c["verdict"] == "accepted" and c["speedup"]]
            if acc:
                r["winner"] = max(acc, key=lambda c: c["speedup"])["description"]
        ci = f" [{r['ci'][0]:.3f}, {r['ci'][1]:.3f}]" if r["ci"] and r["accepted"] else ""
        roof = f"{r['roofline_pct']:.0f}" if r["roofline_pct"] is not None else "n/a"
        base = f"{r['baseline_ms']:.4f}" if r["baseline_ms"] else "n/a"
        best = f"{r['best_ms']:.4f}" if r["best_ms"] else "n/a"
        lines.append(f"| {r['sample']} | {r['entry']} | {base} | {best} | {(format(r['speedup'], '.3f') if r['speedup'] is not None else 'n/a')}{ci} | {roof} | "
                     f"{r['winner'] or '(none: ' + str(r['final_verdict'] or r['stop']) + ')'} | {r['rounds']} | {r['wall_s']:.0f} |")  # fmt: skip
    lines += ["", "Every candidate's verdict is in the .json next to this file.", ""]
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    raise SystemExit(main())
