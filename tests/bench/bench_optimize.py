"""Benchmark: the built-in proposers (recipes, then the tuner; no LLM) through the full verification gate.

Run on a GPU host from the repository root::

    python tests/bench/bench_optimize.py --write [--suite tests/bench/optimize_suite.toml]
        [--proposer auto|recipes|tuner] [--rounds 2 --candidates 4] [FILE.cu ...]

Per file it records the baseline time, the best verified time, the speedup (final verdict of the
champion against the original, with its confidence interval), the reference timed in the same run
(a device-to-device copy of the bytes the kernel must move, a read-only streaming reduction, or cuBLAS
fp32 through torch with TF32 off: see optimize_suite.toml) and the champion's share of it, the suite's
target for the row, the rounds run and the wall time, and writes
tests/bench/results/optimize-<gpu>.md (and .json with every candidate's verdict).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import shutil
import statistics
import sys
import tempfile
import time
import tomllib
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]

from helpers.gpuinfo import gpu_slug  # noqa: E402  (tests/helpers/gpuinfo.py)

from kernellsp.check import CheckOptions, check_text  # noqa: E402
from kernellsp.optimize.loop import default_proposers, optimize  # noqa: E402
from kernellsp.optimize.result import OptimizeOptions  # noqa: E402
from kernellsp.optimize.verify.gate import VerifyOptions  # noqa: E402
from kernellsp.profile.environment import runner_environment  # noqa: E402
from kernellsp.profile.findings import footprint_bytes  # noqa: E402
from kernellsp.rules.engine import load_rules  # noqa: E402
from kernellsp.run.runner import LocalRunner  # noqa: E402
from kernellsp.source.model import parse_source  # noqa: E402
from kernellsp.source.spec import entry_spec, patch_spec_block, specs_from_source  # noqa: E402

RESULTS = ROOT / "tests" / "bench" / "results"


def code_digest() -> str:
    """12 hex digits of sha256 over kernellsp's files: which code a row ran with (the GPU machine gets a copy of
    the working tree without git, so a commit cannot be read there)."""
    h = hashlib.sha256()
    for f in sorted((ROOT / "kernellsp").rglob("*")):
        if f.is_file() and f.suffix in (".py", ".h", ".sh", ".cu"):
            h.update(f.relative_to(ROOT).as_posix().encode() + b"\0" + f.read_bytes())
    return h.hexdigest()[:12]


def _cases(args: argparse.Namespace) -> list[dict[str, Any]]:
    if args.files:
        return [{"file": f if "/" in f else f"samples/{f}"} for f in args.files]
    if args.suite:
        cases = list(tomllib.loads(Path(args.suite).read_text())["case"])
        if args.only:
            wanted = {w.strip() for w in args.only.split(",") if w.strip()}
            cases = [c for c in cases if Path(c["file"]).name in wanted or c["file"] in wanted]
            named = {Path(c["file"]).name for c in cases} | {c["file"] for c in cases}
            unknown = sorted(wanted - named)
            if unknown:
                raise SystemExit(f"--only: not in {args.suite}: {', '.join(unknown)}")
        return cases
    return [{"file": f"samples/{p.name}"} for p in sorted((ROOT / "samples").glob("*.cu"))]


def _with_sizes(text: str, path: Path, sizes: dict[str, int]) -> str:
    """``text`` with the entry's main sizes overridden (the spec's sizes line only; shapes stay)."""
    bound = specs_from_source(parse_source(text, str(path)))[0][0]
    assert bound.block is not None, f"{path.name}: the bench overrides sizes of comment-block specs only"
    return patch_spec_block(text, bound.block, {"sizes": {**bound.spec.sizes, **sizes}})


def _time_reference(
    kind: str, text: str, path: Path, entry: str, mnk: tuple[int, int, int] | None = None
) -> dict[str, Any]:
    """Median ms of the row's reference on this GPU, with the bytes or FLOPs it stands for (``mnk``: a
    product's sizes when the spec does not name them M, N and K)."""
    try:
        import torch
    except ImportError:
        return {"kind": kind, "ms": None, "note": "torch is not installed"}
    model = parse_source(text, str(path))
    bound = entry_spec(model, entry)
    assert bound is not None
    flush = torch.empty(2 * 50 * 2**20, dtype=torch.uint8, device="cuda")  # twice the H100/H200 L2
    sizes = bound.spec.resolved_sizes(bound.spec.all_shapes()[0])
    if kind == "cublas":
        torch.backends.cuda.matmul.allow_tf32 = False
        # 16-bit inputs: cuBLAS in that type with fp32 accumulation (no reduced-precision reductions), as the
        # kernel computes; fp32 inputs: fp32 without TF32.
        torch.backends.cuda.matmul.allow_fp16_reduced_precision_reduction = False
        torch.backends.cuda.matmul.allow_bf16_reduced_precision_reduction = False
        dtypes = [a.dtype for a in bound.spec.args.values() if a.dir == "in" and a.dtype in ("f16", "bf16")]
        dtype = dtypes[0] if dtypes else "f32"
        tdt = {"f16": torch.float16, "bf16": torch.bfloat16, "f32": torch.float32}[dtype]
        m, n, k = mnk if mnk is not None else (int(sizes[x]) for x in ("M", "N", "K"))
        # A batched product (a size named BATCH, BATCHES or BATCH_SIZE): torch.matmul over the batch (bmm).
        batch = next(
            (int(v) for key, v in sizes.items() if key.upper() in ("BATCH", "BATCHES", "BATCH_SIZE")), 0
        )
        lead = (batch,) if batch else ()
        a = torch.randn(*lead, m, k, device="cuda").to(tdt)
        b = torch.randn(*lead, k, n, device="cuda").to(tdt)
        run = lambda: torch.matmul(a, b)  # noqa: E731
        amount = {
            "flops": 2 * m * n * k * max(batch, 1),
            "dtype": dtype,
            **({"batch": batch} if batch else {}),
        }
    else:
        nbytes = footprint_bytes(bound) or 0
        if kind == "read":
            inputs = sum(
                int(eval_count(a.count, sizes))
                * {"f32": 4, "f16": 2, "bf16": 2, "i32": 4, "u8": 1}.get(a.dtype or "", 4)
                for a in bound.spec.args.values()
                if a.count is not None and a.dir in ("in", "inout")
            )
            x = torch.rand(max(1, inputs // 4), device="cuda")
            run = lambda: x.sum()  # noqa: E731
            amount = {"bytes": inputs}
        else:
            half = max(1, nbytes // 2 // 4)
            src = torch.rand(half, device="cuda")
            dst = torch.empty_like(src)
            run = lambda: dst.copy_(src)  # noqa: E731
            amount = {"bytes": nbytes}
    times = []
    for i in range(25):
        flush.zero_()
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        run()
        end.record()
        torch.cuda.synchronize()
        if i >= 5:
            times.append(start.elapsed_time(end))
    return {"kind": kind, "ms": statistics.median(times), **amount}


def eval_count(expr: str, sizes: dict[str, Any]) -> int:
    from kernellsp.source import exprs

    return exprs.evaluate_int(expr, sizes)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--write", action="store_true")
    ap.add_argument("--suite", help="a TOML list of cases (file, sizes, reference, target)")
    ap.add_argument("--proposer", default="auto", choices=["auto", "recipes", "tuner"])
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--candidates", type=int, default=4)
    ap.add_argument("--seeds", type=int, default=3)
    ap.add_argument(
        "--only",
        help="comma-separated file names: run these cases of the suite and keep the other "
        "rows of the previous table (a suite split over several GPU sessions)",
    )
    ap.add_argument(
        "--name",
        default="optimize",
        help="results file stem: tests/bench/results/NAME-<gpu>.md and .json (default: optimize)",
    )
    ap.add_argument("files", nargs="*")
    args = ap.parse_args()
    cases = _cases(args)  # a bad --only is named before any GPU work
    runner = LocalRunner()
    env = runner_environment(runner)
    rules = load_rules(None)
    work = Path(tempfile.mkdtemp(prefix="kernellsp-bench-opt-"))
    (work / "kernellsp.toml").write_text("")
    rows = []
    proposers = default_proposers(None, rules, args.proposer)
    for case in cases:
        row = run_case(case, runner, env, rules, proposers, args, work)
        rows.append(row)
    gpu = env.get("gpu", "?")
    slug = gpu_slug(gpu)
    previous = RESULTS / f"{args.name}-{slug}.json"
    if args.write and (args.files or args.only) and previous.is_file():
        # A run over some samples updates their rows and keeps the others (the suite can be split).
        done = {r["sample"] for r in rows}
        old = [r for r in json.loads(previous.read_text())["rows"] if r["sample"] not in done]
        rows = sorted(old + rows, key=lambda r: r["sample"])
    table = render(rows, env, args)
    print(table)
    if args.write:
        RESULTS.mkdir(parents=True, exist_ok=True)
        (RESULTS / f"{args.name}-{slug}.md").write_text(table)
        (RESULTS / f"{args.name}-{slug}.json").write_text(
            json.dumps({"environment": env, "rows": rows}, indent=1, default=str) + "\n"
        )
    shutil.rmtree(work, ignore_errors=True)
    return 0


def run_case(
    case: dict[str, Any],
    runner: Any,
    env: dict[str, Any],
    rules: Any,
    proposers: Any,
    args: argparse.Namespace,
    work: Path,
) -> dict[str, Any]:
    """One suite row: the reference, then ``optimize`` with the built-in proposers, as one table row."""
    src = ROOT / case["file"]
    path = work / src.name
    text = src.read_text()
    if case.get("sizes"):
        text = _with_sizes(text, path, case["sizes"])
    path.write_text(text)
    entry = specs_from_source(parse_source(text, str(path)))[0][0].entry
    mnk = tuple(case["mnk"]) if case.get("mnk") else None
    reference = (
        _time_reference(case["reference"], text, path, entry, mnk)  # type: ignore[arg-type]
        if case.get("reference")
        else None
    )
    findings = check_text(path, text, CheckOptions(), rules).findings
    t0 = time.monotonic()
    try:
        res = optimize(
            path,
            text,
            entry,
            runner,
            proposers,
            OptimizeOptions(
                rounds=args.rounds,
                candidates=args.candidates,
                verify=VerifyOptions(seeds=args.seeds, rounds=4, reps=10),
            ),
            findings=findings,
            environment=env,
            # Stamped progress on stdout: a run cut by a time limit still shows where its seconds went.
            progress=lambda m, _p, t0=t0: print(f"  [{time.monotonic() - t0:6.1f} s] {m}", flush=True),
        )
    except Exception as exc:  # a benchmark row, not a crash of the whole table
        row = {
            "sample": src.name,
            "entry": entry,
            "error": f"{type(exc).__name__}: {exc}",
            "wall_s": time.monotonic() - t0,
            "reference": reference,
            "target": case.get("target"),
        }
        print(f"{src.name}: ERROR {exc}", flush=True)
        return row
    final = res.final
    stats = final.stats if final is not None and final.stats else None
    row = {
        "sample": src.name,
        "entry": entry,
        "accepted": res.accepted,
        "final_verdict": final.kind if final else None,
        "final_message": final.message if final else res.stop_reason,
        "baseline_ms": stats["baseline_median_ms"]
        if stats
        else next((c.baseline_ms for c in res.candidates if c.round == 1 and c.baseline_ms), None),
        "best_ms": stats["candidate_median_ms"] if stats and res.accepted else None,
        "speedup": stats["speedup"] if stats and res.accepted else None,  # nothing verified: no number
        "ci": [stats["ci_low"], stats["ci_high"]] if stats else None,
        "roofline_pct": (
            final.details.get("candidate_pct_of_roofline")
            if res.accepted
            else final.details.get("baseline_pct_of_roofline")
        )
        if final
        else None,
        "rounds": res.rounds_run,
        "stop": res.stop_reason,
        "wall_s": res.wall_s,
        "sizes": case.get("sizes"),
        "reference": reference,
        "target": case.get("target"),
        # Where the wall time went: the run's steps, then the final verification's gates and processes.
        "phases": res.phases,
        "final_phases": final.details.get("phase_seconds") if final else None,
        "final_harness_runs": final.details.get("harness_runs") if final else None,
        # Sets where the baseline's own float error was the difference (kernellsp.optimize.verify.oracle).
        "oracle": final.details.get("oracle") if final else None,
        "winner": " + ".join(res.winners) if res.accepted else None,
        # Provenance: rows of one table may come from several --only runs (the suite is split per call).
        "ran_at": datetime.now(UTC).isoformat(timespec="minutes"),
        "code": code_digest(),
        "candidates": [
            {
                "round": c.round,
                "description": c.description,
                "verdict": c.verdict,
                "speedup": c.speedup_vs_champion,
                "message": c.message[:200],
                "seconds": round(c.seconds, 3),
                "phase_seconds": c.phase_seconds,
            }
            for c in res.candidates
        ],
    }
    sp = f"{row['speedup']:.3f}" if row["speedup"] is not None else "n/a"
    print(
        f"{src.name}: {row['final_verdict']} speedup {sp} ({row['stop']}, {row['wall_s']:.0f} s)",
        flush=True,
    )
    return row


def _pct_of_reference(r: dict[str, Any]) -> float | None:
    ref = r.get("reference") or {}
    best = r.get("best_ms") or (r.get("baseline_ms") if not r.get("accepted") else None)
    if not ref.get("ms") or not best:
        return None
    return 100.0 * ref["ms"] / best


def _target_met(r: dict[str, Any]) -> str:
    target = r.get("target")
    if not target:
        return ""
    if target.startswith("pct>="):
        pct = _pct_of_reference(r) if r.get("accepted") else None
        return "yes" if pct is not None and pct >= float(target[5:]) else "no"
    if target.startswith("wall<="):  # issue 13: optimize's wall time per sample
        return "yes" if r.get("wall_s") is not None and r["wall_s"] <= float(target[6:]) else "no"
    if target.startswith("speedup>="):
        return "yes" if r.get("speedup") and r["speedup"] >= float(target[9:]) else "no"
    if target.startswith("speedup>"):
        return "yes" if r.get("speedup") and r["speedup"] > float(target[8:]) else "no"
    return "?"


def render(rows: list[dict], env: dict, args: argparse.Namespace) -> str:
    who = {"auto": "recipes, then the tuner", "recipes": "recipes only", "tuner": "tuner only"}[args.proposer]
    lines = [
        f"# `kernellsp optimize` with the built-in proposers ({env.get('gpu', '?')})",
        "",
        f"GPU {env.get('gpu')}, driver {env.get('driver')}, nvcc {env.get('nvcc_version')}, ncu {env.get('ncu_version')}. "
        f"Built-in proposers ({who}; no LLM), up to {args.rounds} round(s) × {args.candidates} candidates per round, "
        f"then the champion is re-verified against the original ({args.seeds} seeds, every shape, the full gate); "
        "that final verdict decides. Times are CUDA-event medians of kernellsp's harness (L2 flushed, fresh inputs), "
        "not ncu durations. The reference of each row was timed in the same run on the same GPU (torch): `copy` = a "
        "device-to-device copy of the bytes the kernel must move (inputs read once, outputs written once), `read` = "
        "a read-only streaming reduction over its input bytes, `cublas` = torch.matmul fp32 with TF32 off (f16/bf16 inputs: torch.matmul in that type, fp32 accumulation). "
        "% of reference = reference time / best verified time (the baseline's when nothing was verified).",
        "",
        "| file | entry | sizes | baseline (ms) | best verified (ms) | speedup [95% CI] | reference (ms) | % of reference "
        "| target | met | winner | rounds | wall (s) |",
        "|---|---|---|---:|---:|---|---:|---:|---|---|---|---:|---:|",
    ]
    for r in rows:
        ref = r.get("reference") or {}
        ref_ms = f"{ref['kind']} {ref['ms']:.4f}" if ref.get("ms") else "n/a"
        sizes = ", ".join(f"{k}={v}" for k, v in (r.get("sizes") or {}).items()) or "spec"
        if "error" in r:
            lines.append(
                f"| {r['sample']} | {r['entry']} | {sizes} | | | error: {r['error'][:100]} | {ref_ms} | | "
                f"{r.get('target') or ''} | no | | | {r['wall_s']:.0f} |"
            )
            continue
        ci = f" [{r['ci'][0]:.3f}, {r['ci'][1]:.3f}]" if r["ci"] and r["accepted"] else ""
        pct = _pct_of_reference(r)
        pct_s = f"{pct:.0f}" if pct is not None else "n/a"
        base = f"{r['baseline_ms']:.4f}" if r["baseline_ms"] else "n/a"
        best = f"{r['best_ms']:.4f}" if r["best_ms"] else "n/a"
        speed = format(r["speedup"], ".3f") if r["speedup"] is not None else "n/a"
        winner = r["winner"] or "(none: " + str(r["final_verdict"] or r["stop"]) + ")"
        lines.append(
            f"| {r['sample']} | {r['entry']} | {sizes} | {base} | {best} | {speed}{ci} | {ref_ms} | {pct_s} | "
            f"{r.get('target') or ''} | {_target_met(r)} | {winner} | {r['rounds']} | {r['wall_s']:.0f} |"
        )
    lines += _phase_table(rows)
    lines += _provenance(rows)
    lines += [
        "",
        "Every candidate's verdict, gate seconds and the final verification's harness processes are in the .json "
        "next to this file.",
        "",
    ]
    return "\n".join(lines) + "\n"


def _provenance(rows: list[dict]) -> list[str]:
    """Which rows ran together: grouped by the code they ran with (``code``, a digest of kernellsp's files)."""
    groups: dict[str, list[dict]] = {}
    for r in rows:
        key = f"code {r['code']}, {r.get('commit') or 'working tree'}" if r.get("code") else ""
        groups.setdefault(key, []).append(r)
    out = ["", "## Provenance", "", "| code the rows ran with | run (UTC) | rows |", "|---|---|---|"]
    for key, rs in sorted(groups.items(), key=lambda kv: min(r.get("ran_at") or "" for r in kv[1])):
        when = sorted({(r.get("ran_at") or "")[:10] for r in rs} - {""})
        out.append(
            f"| {key or 'not recorded (rows from before rows were stamped)'} | {', '.join(when) or 'not recorded'} | "
            + ", ".join(r["sample"] for r in rs)
            + " |"
        )
    return out


def _phase_table(rows: list[dict]) -> list[str]:
    """Where each row's wall time went: the run's steps (s), and the final verification's gates (s)."""
    have = [r for r in rows if r.get("phases")]
    if not have:
        return []
    out = [
        "",
        "## Phase breakdown (seconds)",
        "",
        "Run steps: `prepare` (parse, plan), `rN propose` / `rN verify` (round N: proposing, then verifying its "
        "candidates in parallel, GPU steps taking turns), `final` (the champion against the original). Final "
        "gates: build, correctness (every shape and input set, both sides), oracle / error budget (when asked), "
        "sanitizer (compute-sanitizer tools on every shape), timing (A/B rounds), launch checks (outputs of "
        "timed launches).",
        "",
        "| file | wall | run steps | final verification gates | harness processes in the final (count, s) |",
        "|---|---:|---|---|---|",
    ]
    for r in have:
        steps = ", ".join(
            f"{k.replace('round', 'r').replace('_', ' ')} {v:.1f}" for k, v in r["phases"].items()
        )
        gates = ", ".join(f"{k} {v:.1f}" for k, v in (r.get("final_phases") or {}).items()) or "n/a"
        runs = r.get("final_harness_runs") or []
        by_kind: dict[str, list[float]] = {}
        for run in runs:
            kind = f"{run.get('tool') or run.get('mode')}/{run.get('exe', '').removeprefix('h_')}"
            by_kind.setdefault(kind, []).append(float(run.get("wall_s") or 0.0))
        procs = ", ".join(f"{k} {len(v)}× {sum(v):.1f}" for k, v in by_kind.items()) or "n/a"
        out.append(f"| {r['sample']} | {r['wall_s']:.0f} | {steps} | {gates} | {procs} |")
    return out


if __name__ == "__main__":
    raise SystemExit(main())
