"""Benchmark the matrix-product recipes end to end (issue 12), within one bounded GPU session.

Run on a GPU host from the repository root::

    python3 tests/bench/bench_matmul.py [--suite tests/bench/matmul_suite.toml] [--full 1] [--deadline 240]
        [--out DIR] [--only NAME ...]

The first ``--full`` rows run ``optimize --proposer recipes`` (one round of four candidates, then the
champion's full re-verification against the original); the others verify the recipe proposer's first
candidate with the same gate (one ``verify`` per row). Each row's reference is timed in the same process
on the same GPU (``tests/bench/bench_optimize.py``'s ``_time_reference``: cuBLAS fp32 through
torch.matmul with TF32 off, or a device-to-device copy of the bytes moved); the naive baseline is the
original kernel timed by the gate beside the candidate. No new row starts after ``--deadline`` seconds,
and the table is rewritten after every row, so a session cut short still leaves its numbers.

compute-sanitizer runs on the smallest declared shape (``VerifyOptions.sanitize_all_shapes=False``):
racecheck over a 4096^3 tiled product (every shared-memory access of 1024 blocks instrumented) does
not finish in a bench's time; the odd shapes exercise the same edge paths.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
import tomllib
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
sys.path[:0] = [str(ROOT), str(ROOT / "tests"), str(ROOT / "tests" / "bench")]

from bench_optimize import _time_reference, _with_sizes  # noqa: E402
from helpers.gpuinfo import gpu_slug  # noqa: E402

from kernellsp.optimize.loop import optimize  # noqa: E402
from kernellsp.optimize.propose.base import ProposalContext  # noqa: E402
from kernellsp.optimize.propose.recipes.proposer import RecipeProposer  # noqa: E402
from kernellsp.optimize.result import OptimizeOptions  # noqa: E402
from kernellsp.optimize.verify.gate import VerifyOptions, verify  # noqa: E402
from kernellsp.profile.environment import runner_environment  # noqa: E402
from kernellsp.run.runner import LocalRunner  # noqa: E402
from kernellsp.source import spec as specmod  # noqa: E402
from kernellsp.source.model import parse_source  # noqa: E402


def _verify_opts(seeds: int) -> VerifyOptions:
    return VerifyOptions(seeds=seeds, rounds=4, reps=10, sanitize_all_shapes=False)


def _row(
    case: dict[str, Any],
    path: Path,
    text: str,
    entry: str,
    full: bool,
    runner: LocalRunner,
    env: dict[str, Any],
    seeds: int,
) -> dict[str, Any]:
    ref = _time_reference(case["reference"], text, path, entry) if case.get("reference") else {}
    t0 = time.monotonic()

    def say(msg: str, _p: float | None, n: str = path.name) -> None:
        print(f"  {n} {time.monotonic() - t0:6.1f} s: {msg}", flush=True)

    row: dict[str, Any] = {
        "file": case["file"],
        "entry": entry,
        "sizes": case.get("sizes"),
        "reference": ref,
        "target": case.get("target"),
        "mode": "optimize" if full else "verify",
    }
    if full:
        res = optimize(
            path,
            text,
            entry,
            runner,
            [RecipeProposer()],
            OptimizeOptions(rounds=1, candidates=4, verify=_verify_opts(seeds)),
            environment=env,
            progress=say,
        )
        final = res.final
        st = (final.stats or {}) if final is not None else {}
        row.update(
            verdict=final.kind if final else res.stop_reason,
            accepted=res.accepted,
            message=(final.message if final else res.stop_reason)[:300],
            winner=" + ".join(res.winners) if res.accepted else None,
            candidates=[
                {
                    "description": c.description,
                    "verdict": c.verdict,
                    "speedup": c.speedup_vs_champion,
                    "ms": c.candidate_ms,
                }
                for c in res.candidates
            ],
        )
    else:
        model = parse_source(text, str(path))
        bound = specmod.entry_spec(model, entry)
        assert bound is not None
        cands = RecipeProposer().propose(ProposalContext(str(path), text, text, entry, model, bound), 1)
        if not cands:
            row.update(verdict="no candidate", accepted=False, message="no recipe matched", wall_s=0.0)
            return row
        v = verify(path, text, cands[0].text, entry, runner, _verify_opts(seeds), env, progress=say)
        st = v.stats or {}
        row.update(verdict=v.kind, accepted=v.accepted, message=v.message[:300], winner=cands[0].description)
    row.update(
        baseline_ms=st.get("baseline_median_ms"),
        best_ms=st.get("candidate_median_ms") if row["accepted"] else None,
        speedup=st.get("speedup") if row["accepted"] else None,
        ci=[st.get("ci_low"), st.get("ci_high")],
        wall_s=time.monotonic() - t0,
    )
    return row


def _pct(r: dict[str, Any]) -> float | None:
    ref = (r.get("reference") or {}).get("ms")
    return 100.0 * ref / r["best_ms"] if ref and r.get("best_ms") else None


def _met(r: dict[str, Any]) -> str:
    t = r.get("target") or ""
    if t.startswith("pct>="):
        p = _pct(r)
        return "yes" if p is not None and p >= float(t[5:]) else "no"
    if t.startswith("speedup>="):
        return "yes" if r.get("speedup") and r["speedup"] >= float(t[9:]) else "no"
    return ""


def render(rows: list[dict[str, Any]], env: dict[str, Any]) -> str:
    lines = [
        f"# Matrix-product recipes end to end ({env.get('gpu', '?')})",
        "",
        f"GPU {env.get('gpu')}, driver {env.get('driver')}, nvcc {env.get('nvcc_version')}. `optimize` rows: one "
        "round of four recipe candidates, then the champion's full re-verification against the original; `verify` "
        "rows: the recipe proposer's first candidate through the same gate. Baseline = the naive kernel, timed by "
        "the gate beside the candidate (CUDA events, L2 flushed); reference timed in the same process: `cublas` = "
        "torch.matmul fp32 with TF32 off on the same M, N, K, `copy` = a device-to-device copy of the bytes moved. "
        "compute-sanitizer ran on the smallest declared shape.",
        "",
        "| file | mode | sizes | baseline (ms) | best (ms) | speedup [95% CI] | reference (ms) | % of reference | "
        "target | met | verdict | winner | wall (s) |",
        "|---|---|---|---:|---:|---|---:|---:|---|---|---|---|---:|",
    ]
    for r in rows:
        ref = r.get("reference") or {}
        ref_s = f"{ref['kind']} {ref['ms']:.3f}" if ref.get("ms") else "n/a"
        sizes = ", ".join(f"{k}={v}" for k, v in (r.get("sizes") or {}).items()) or "spec"
        ci = r.get("ci") or [None, None]
        sp = (
            f"{r['speedup']:.2f} [{ci[0]:.2f}, {ci[1]:.2f}]"
            if r.get("speedup") and ci[0] is not None
            else "n/a"
        )
        pct = _pct(r)
        base = f"{r['baseline_ms']:.3f}" if r.get("baseline_ms") else "n/a"
        best = f"{r['best_ms']:.3f}" if r.get("best_ms") else "n/a"
        verdict = r.get("verdict") or ""
        if not r.get("accepted"):
            verdict += f": {r.get('message', '')[:120]}"
        lines.append(
            f"| {Path(r['file']).name} | {r['mode']} | {sizes} | {base} | {best} | {sp} | {ref_s} | "
            f"{f'{pct:.0f}' if pct is not None else 'n/a'} | {r.get('target') or ''} | {_met(r)} | "
            f"{verdict} | {r.get('winner') or ''} | {r.get('wall_s', 0):.0f} |"
        )
    return "\n".join(lines) + "\n"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--suite", default=str(ROOT / "tests" / "bench" / "matmul_suite.toml"))
    ap.add_argument("--only", nargs="*")
    ap.add_argument("--full", type=int, default=1, help="leading rows that run the whole optimize loop")
    ap.add_argument("--seeds", type=int, default=2)
    ap.add_argument("--deadline", type=float, default=1e9, help="start no row after this many seconds")
    ap.add_argument("--out", default=str(ROOT / "tests" / "bench" / "results"))
    args = ap.parse_args()
    t_start = time.monotonic()
    cases = tomllib.loads(Path(args.suite).read_text())["case"]
    if args.only:
        cases = [c for c in cases if any(o in c["file"] for o in args.only)]
    runner = LocalRunner()
    env = runner_environment(runner)
    work = Path(tempfile.mkdtemp(prefix="kernellsp-bench-matmul-"))
    (work / "kernellsp.toml").write_text("")
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    slug = gpu_slug(env.get("gpu", ""))
    rows: list[dict[str, Any]] = []
    for i, case in enumerate(cases):
        if time.monotonic() - t_start > args.deadline:
            print(f"deadline: {case['file']} and later rows not run", flush=True)
            break
        src = ROOT / case["file"]
        path = work / src.name
        text = src.read_text()
        if case.get("sizes"):
            text = _with_sizes(text, path, case["sizes"])
        path.write_text(text)
        entry = specmod.specs_from_source(parse_source(text, str(path)))[0][0].entry
        print(f"{src.name}: {'optimize' if i < args.full else 'verify'}", flush=True)
        try:
            row = _row(case, path, text, entry, i < args.full, runner, env, args.seeds)
        except Exception as exc:  # one broken row must not take the table down
            row = {
                "file": case["file"],
                "entry": entry,
                "mode": "error",
                "verdict": "error",
                "accepted": False,
                "message": f"{type(exc).__name__}: {exc}",
                "sizes": case.get("sizes"),
            }
        rows.append(row)
        print(f"{src.name}: {row['verdict']} {row.get('message', '')[:200]}", flush=True)
        table = render(rows, env)
        (out / f"matmul-{slug}.md").write_text(table)
        (out / f"matmul-{slug}.json").write_text(
            json.dumps({"environment": env, "rows": rows}, indent=1, default=str) + "\n"
        )
    print(render(rows, env))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
