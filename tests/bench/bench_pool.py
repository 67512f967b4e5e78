"""Benchmark: the pool runner on one GPU against the local runner (issue 16).

Run on a GPU host from the repository root (``pip install 'kernellsp[cluster]'`` first)::

    python tests/bench/bench_pool.py --write [--out DIR] [PAIR ...]

A pair is ``SAMPLE:CANDIDATE`` (a sample of samples/ and a rewrite from tests/adversarial/), or
``SAMPLE:const`` (the sample with ``const`` added to its index variable: the same machine code, so the
verdict must be ``not_faster``). Each pair is verified twice with the same run seed (so the same inputs):
by the local runner, and through a one-GPU local pool (``pool.scheduler = "local"``: dask-cuda's
``LocalCUDACluster`` when it is installed, otherwise distributed's own cluster with one pinned worker), both
with the options of a round of the optimize loop (one seed, no sanitizer). The sides alternate which goes
first (the second finds the binaries the first built in the host's cache: compare the pool's added latency,
not the two walls). The verdicts must be the same.

The pool's added latency per candidate is the client's wall time minus the verification's own seconds on the
worker, split into dispatch (submit → the task starts), the worker's own overhead (scratch copy of the
sources, cancel watcher) and return (the task ends → the verdict is back). Also measured: the local
cluster's start-up and the first look at its workers. Writes tests/bench/results/pool-<gpu>.md and .json
(and copies them to ``--out``).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import platform
import shutil
import statistics
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
    "vector_add.cu:vector_add_skip_tail.cu",
    "vector_add.cu:const",
]
EXPECT = {
    "saxpy_coalesced.cu": "accepted",
    "vector_add_skip_tail.cu": "unwritten_output",
    "const": "not_faster",
}


def _candidate(sample_text: str, cand: str) -> str:
    if cand == "const":
        out = sample_text.replace(
            "int i = blockIdx.x * blockDim.x + threadIdx.x;",
            "const int i = blockIdx.x * blockDim.x + threadIdx.x;",
            1,
        )
        assert out != sample_text, "the sample has no `int i = blockIdx.x * blockDim.x + threadIdx.x;` line"
        return out
    return (ROOT / "tests" / "adversarial" / cand).read_text()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("pairs", nargs="*", default=DEFAULT_PAIRS)
    ap.add_argument("--write", action="store_true")
    ap.add_argument("--out", type=Path, default=None, help="also copy the results here")
    args = ap.parse_args()
    # One cache for both sides, set before the cluster starts: its workers inherit it.
    os.environ.setdefault("KERNELLSP_CACHE_DIR", tempfile.mkdtemp(prefix="kernellsp-bench-pool-"))
    from kernellsp.optimize.verify.gate import VerifyError, VerifyOptions, verify
    from kernellsp.profile.environment import runner_environment
    from kernellsp.run import harness_build as hb
    from kernellsp.run.pool import Pool
    from kernellsp.run.runner import LocalRunner

    local = LocalRunner()
    env = runner_environment(local)
    opts = dataclasses.replace(VerifyOptions(), seeds=1, sanitize=False, sanitize_all_shapes=False)
    t = time.monotonic()
    _key, fut = hb.ensure_runtime(local, opts.arch, local.require("nvcc"), env.get("nvcc_version"), 600)
    runtime = {"seconds": round(time.monotonic() - t, 2), "returncode": fut.result().returncode}

    t = time.monotonic()
    pool = Pool("local", connect_timeout_s=120)
    pool.client()
    start_s = time.monotonic() - t
    t = time.monotonic()
    groups = pool.wait_for_gpus(120)
    first_look_s = time.monotonic() - t
    runner = pool.runner()
    pool_env = runner.environment()
    setup = {
        "cluster": pool.cluster_kind,
        "start_s": round(start_s, 2),
        "first_look_s": round(first_look_s, 2),
        "workers": [w.describe() for ws in groups.values() for w in ws],
    }
    print(f"pool: {setup}", flush=True)
    rows: list[dict[str, Any]] = []
    for k, pair in enumerate(args.pairs):
        sample, cand = pair.split(":")
        path = ROOT / "samples" / sample
        baseline = path.read_text()
        candidate = _candidate(baseline, cand)
        from kernellsp.source import spec
        from kernellsp.source.model import parse_source

        entry = spec.specs_from_source(parse_source(baseline, str(path)))[0][0].entry
        run_opts = dataclasses.replace(opts, run_seed=1_000_003 * (k + 1))
        row: dict[str, Any] = {
            "pair": pair,
            "entry": entry,
            "expected": EXPECT.get(cand),
            "first": "local" if k % 2 == 0 else "pool",
        }
        for side in ("local", "pool") if k % 2 == 0 else ("pool", "local"):
            t = time.monotonic()
            try:
                v = verify(path, baseline, candidate, entry, local if side == "local" else runner, run_opts)
            except (
                VerifyError
            ) as exc:  # recorded (and compared) like a verdict: one failure must not end the run
                row[side] = {
                    "verdict": "error",
                    "message": str(exc)[:200],
                    "wall_s": round(time.monotonic() - t, 3),
                }
                print(f"{pair} {side}: {row[side]}", flush=True)
                continue
            wall = time.monotonic() - t
            row[side] = {
                "verdict": v.kind,
                "message": v.message[:200],
                "speedup": v.speedup,
                "wall_s": round(wall, 3),
                "verify_s": round(v.seconds, 3),
                "phases": v.details.get("phase_seconds"),
                "run_seed": v.details.get("run_seed"),
            }
            if side == "pool":
                p = v.environment["pool"]
                row[side].update(
                    {
                        "worker": p["worker"],
                        "gpu": v.environment.get("gpu"),
                        "arch": v.environment.get("arch"),
                        "worker_verify_s": round(p["verify_seconds"], 3),
                        "added_s": round(wall - p["verify_seconds"], 3),
                        "dispatch_s": round(p["started_at"] - p["submitted_at"], 3),
                        "worker_overhead_s": round(p["task_seconds"] - p["verify_seconds"], 3),
                        "return_s": round(p["returned_at"] - p["finished_at"], 3),
                    }
                )
            print(f"{pair} {side}: {row[side]}", flush=True)
        row["same_verdict"] = row["local"]["verdict"] == row["pool"]["verdict"]
        rows.append(row)
        if args.write:
            _write(rows, env, pool_env, setup, runtime, args.out)
    pool.close()
    same = all(r["same_verdict"] for r in rows)
    print("same verdicts:", same)
    return 0 if same else 1


def _write(
    rows: list[dict[str, Any]],
    env: dict[str, Any],
    pool_env: dict[str, Any],
    setup: dict[str, Any],
    runtime: dict[str, Any],
    out: Path | None,
) -> None:
    slug = gpu_slug(env.get("gpu") or "gpu")
    added = [r["pool"]["added_s"] for r in rows if "added_s" in r["pool"]]
    doc = {
        "environment": env,
        "pool_environment": pool_env,
        "setup": setup,
        "runtime_object": runtime,
        "host": platform.node(),
        "python": platform.python_version(),
        "rows": rows,
    }
    lines = [
        f"# Pool runner on one {env.get('gpu')}: verdicts and added latency",
        "",
        "`python tests/bench/bench_pool.py --write` (issue 16): each candidate verified by the local runner and",
        'through a one-GPU local pool (`runner = "pool"`, `pool.scheduler = "local"`) with the same run seed and',
        "the options of an optimize round (one seed, no sanitizer). *Added* is the pool's own latency: the client's",
        "wall time minus the verification's seconds on the worker (dispatch: submit → task start; worker: scratch",
        "copy and cancel watcher; return: task end → verdict back). The sides alternate which runs first, and the",
        "second finds the first's binaries in the host's build cache, so compare *added*, not the two walls.",
        "",
        f"GPU {env.get('gpu')}, driver {env.get('driver')}, nvcc {env.get('nvcc_version')}; pool: {setup['cluster']}; "
        f"workers: {'; '.join(setup['workers'])}.",
        f"Cluster start-up {setup['start_s']:.2f} s; first look at its workers (plugin set-up: nvidia-smi, tool "
        f"versions) {setup['first_look_s']:.2f} s; harness runtime object {runtime['seconds']:.1f} s (once per host).",
        "",
        "| pair | expected | local verdict | pool verdict | same | local wall s | pool wall s | pool verify s (worker) "
        "| added s | dispatch / worker / return s | first |",
        "|---|---|---|---|---|---:|---:|---:|---:|---|---|",
    ]
    for r in rows:
        lo, po = r["local"], r["pool"]
        split = (
            f"{po['dispatch_s']:.3f} / {po['worker_overhead_s']:.3f} / {po['return_s']:.3f}"
            if "added_s" in po
            else "-"
        )
        lines.append(
            f"| {r['pair']} | {r['expected']} | {lo['verdict']} | {po['verdict']} | "
            f"{'yes' if r['same_verdict'] else 'NO'} | {lo['wall_s']:.2f} | {po['wall_s']:.2f} | "
            f"{po.get('worker_verify_s', float('nan')):.2f} | {po.get('added_s', float('nan')):.3f} | "
            f"{split} | {r['first']} |"
        )
    if added:
        lines += [
            "",
            f"Added latency per candidate: median {statistics.median(added):.3f} s, max {max(added):.3f} s "
            f"({len(added)} candidates).",
        ]
    lines += ["", "Verdict messages (local | pool):", ""]
    for r in rows:
        lines.append(f"- {r['pair']}: {r['local']['message']} | {r['pool']['message']}")
    md = "\n".join(lines) + "\n"
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / f"pool-{slug}.md").write_text(md)
    (RESULTS / f"pool-{slug}.json").write_text(json.dumps(doc, indent=1, default=str) + "\n")
    if out is not None:
        out.mkdir(parents=True, exist_ok=True)
        for suffix in ("md", "json"):
            shutil.copy2(RESULTS / f"pool-{slug}.{suffix}", out / f"pool-{slug}.{suffix}")


if __name__ == "__main__":
    raise SystemExit(main())
