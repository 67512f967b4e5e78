"""Benchmark: what the pool itself costs and how its throughput scales, on any host (no GPU needed).

Run from the repository root (``pip install 'kernellsp[cluster]'`` first)::

    python tests/bench/bench_pool_overhead.py --write

A real Dask scheduler and worker processes on this host, each with a stand-in GPU (tests/helpers/pool_support.py:
``fake_probe``), running the stand-in verification of tests/helpers/pool_support.py (``verify_until_gpu``: the scope
gate and harness planning for real, then the GPU steps replaced by a wait of a given length). Three parts:

1. **Added latency per candidate**: one worker, stand-in GPU steps of 0 s, no build: everything the client
   waits for beyond the verification itself (submit → start, the worker's scratch copy, end → verdict back).
2. **Throughput against GPUs**: a batch of candidates whose stand-in GPU steps take 1 s each, verified by 1, 2
   and 4 workers (as the loop's round submits them: all at once): GPU-bound work scales with the GPU count.
3. **Build CPU**: the same batch with real nvcc builds of distinct candidates (each a new harness entry unit to
   compile, the runtime object cached), by 1 and 2 workers: the builds share this host's CPU cores.

Writes tests/bench/results/pool-overhead-<host cores>cpu.md and .json.
"""

from __future__ import annotations

import argparse
import functools
import json
import logging
import os
import platform
import statistics
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]

RESULTS = ROOT / "tests" / "bench" / "results"


def _cluster(n: int) -> Any:
    import distributed

    env = {"KERNELLSP_CACHE_DIR": os.environ["KERNELLSP_CACHE_DIR"]}
    workers = {f"a{i}": {"cls": distributed.Nanny, "options": {"nthreads": 1, "env": env}} for i in range(n)}
    return distributed.SpecCluster(
        workers=workers,
        silence_logs=logging.ERROR,
        scheduler={"cls": distributed.Scheduler, "options": {"dashboard": False, "dashboard_address": ":0"}},
    )


def _candidates(base: str, n: int) -> list[str]:
    """``n`` distinct correct edits of vector_add (a different constant folded into the index: a new binary each)."""
    line = "int i = blockIdx.x * blockDim.x + threadIdx.x;"
    assert line in base
    return [
        base.replace(line, f"int i = blockIdx.x * blockDim.x + threadIdx.x + {k} - {k};")
        for k in range(1, n + 1)
    ]


def _batch(pool: Any, path: Path, base: str, cands: list[str]) -> tuple[float, list[Any]]:
    from kernellsp.optimize.verify.gate import VerifyOptions, verify

    runner = pool.runner("Test GPU A")
    t0 = time.monotonic()
    with ThreadPoolExecutor(max_workers=len(cands)) as ex:
        verdicts = list(ex.map(lambda c: verify(path, base, c, "vector_add", runner, VerifyOptions()), cands))
    return time.monotonic() - t0, verdicts


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--write", action="store_true")
    ap.add_argument("--latency-runs", type=int, default=20)
    ap.add_argument("--batch", type=int, default=8)
    args = ap.parse_args()
    os.environ.setdefault("KERNELLSP_CACHE_DIR", tempfile.mkdtemp(prefix="kernellsp-bench-pool-"))
    from helpers import pool_support

    from kernellsp.optimize.verify.gate import VerifyOptions, verify
    from kernellsp.run.pool import Pool

    path = Path(tempfile.mkdtemp()) / "vector_add.cu"
    base = (ROOT / "samples" / "vector_add.cu").read_text()
    path.write_text(base)
    cands = _candidates(base, args.batch)
    doc: dict[str, Any] = {
        "host": platform.node(),
        "cpus": os.cpu_count(),
        "python": platform.python_version(),
        "load_avg_start": os.getloadavg(),
    }

    # 1. Added latency per candidate.
    t = time.monotonic()
    cluster = _cluster(1)
    start_s = time.monotonic() - t
    fn = functools.partial(pool_support.verify_until_gpu, build=False, gpu_seconds=0.0)
    pool = Pool(cluster.scheduler_address, probe=pool_support.fake_probe, verify_fn=fn)
    t = time.monotonic()
    pool.wait_for_gpus(60)
    first_look_s = time.monotonic() - t
    runner = pool.runner("Test GPU A")
    lat = []
    for k in range(args.latency_runs):
        t = time.monotonic()
        v = verify(path, base, cands[k % len(cands)], "vector_add", runner, VerifyOptions())
        wall = time.monotonic() - t
        p = v.environment["pool"]
        lat.append(
            {
                "wall_s": wall,
                "verify_s": p["verify_seconds"],
                "added_s": wall - p["verify_seconds"],
                "dispatch_s": p["started_at"] - p["submitted_at"],
                "worker_s": p["task_seconds"] - p["verify_seconds"],
                "return_s": p["returned_at"] - p["finished_at"],
            }
        )
    pool.close()
    cluster.close()
    doc["latency"] = {"cluster_start_s": start_s, "first_look_s": first_look_s, "runs": lat}
    print("latency:", {k: round(statistics.median(r[k] for r in lat), 4) for k in lat[0]}, flush=True)

    # 2. Throughput against GPUs (stand-in GPU steps of 1 s; no builds).
    scaling = []
    for n in (1, 2, 4):
        cluster = _cluster(n)
        pool = Pool(
            cluster.scheduler_address,
            probe=pool_support.fake_probe,
            verify_fn=functools.partial(pool_support.verify_until_gpu, build=False, gpu_seconds=1.0),
        )
        pool.wait_for_gpus(60)
        while len(pool.groups().get("Test GPU A", [])) < n:
            time.sleep(0.2)
        wall, verdicts = _batch(pool, path, base, cands)
        workers = {v.environment["pool"]["worker"] for v in verdicts}
        scaling.append(
            {
                "gpus": n,
                "candidates": len(cands),
                "wall_s": wall,
                "ideal_s": len(cands) / n * 1.0,
                "workers_used": len(workers),
            }
        )
        print("scaling:", scaling[-1], flush=True)
        pool.close()
        cluster.close()
    doc["scaling"] = scaling

    # 3. Build CPU: real nvcc builds of distinct candidates (the runtime object built once first).
    builds = []
    for n in (1, 2):
        cluster = _cluster(n)
        fn = functools.partial(pool_support.verify_until_gpu, build=True, gpu_seconds=0.0)
        pool = Pool(cluster.scheduler_address, probe=pool_support.fake_probe, verify_fn=fn)
        pool.wait_for_gpus(60)
        while len(pool.groups().get("Test GPU A", [])) < n:
            time.sleep(0.2)
        if n == 1:  # warm: the runtime object and the baseline's binary
            verify(
                path,
                base,
                base.replace("int i =", "int  i ="),
                "vector_add",
                pool.runner("Test GPU A"),
                VerifyOptions(),
            )
        mine = [c.replace(" - ", f" - 0*{n} - ") for c in cands[:4]]  # distinct per n: no cached binary
        wall, verdicts = _batch(pool, path, base, mine)
        per = [v.environment["pool"]["verify_seconds"] for v in verdicts]
        builds.append(
            {
                "workers": n,
                "candidates": len(mine),
                "wall_s": wall,
                "per_candidate_s": per,
                "kinds": sorted({v.kind for v in verdicts}),
            }
        )
        print("builds:", builds[-1], flush=True)
        pool.close()
        cluster.close()
    doc["builds"] = builds
    doc["load_avg_end"] = os.getloadavg()
    if args.write:
        _write(doc)
    return 0


def _write(doc: dict[str, Any]) -> None:
    lat = doc["latency"]["runs"]

    def med(k: str) -> float:
        return statistics.median(r[k] for r in lat)

    def p90(k: str) -> float:
        xs = sorted(r[k] for r in lat)
        return xs[min(len(xs) - 1, int(0.9 * len(xs)))]

    lines = [
        f"# Pool overhead and scaling on a {doc['cpus']}-CPU host without a GPU",
        "",
        "`python tests/bench/bench_pool_overhead.py --write` (issue 16): a real Dask scheduler and worker processes "
        "on this host, each with a stand-in GPU, running the stand-in verification of tests/helpers/pool_support.py (scope "
        "gate and planning real; GPU steps replaced by a wait; builds real in part 3). What it measures is the "
        "pool's own cost and how throughput follows the worker count, not GPU work.",
        "",
        f"Load average at start {doc['load_avg_start'][0]:.1f}, at end {doc['load_avg_end'][0]:.1f} "
        "(the host is shared: other jobs ran beside this one).",
        "",
        "## 1. Added latency per candidate (one worker, GPU steps of 0 s, no build)",
        "",
        f"Cluster start-up {doc['latency']['cluster_start_s']:.2f} s; first look at the workers (plugin set-up) "
        f"{doc['latency']['first_look_s']:.2f} s; {len(lat)} verifications.",
        "",
        "| | median s | p90 s |",
        "|---|---:|---:|",
    ]
    for k, label in (
        ("added_s", "added (wall − verification on the worker)"),
        ("dispatch_s", "dispatch (submit → start)"),
        ("worker_s", "worker (scratch copy, cancel watcher)"),
        ("return_s", "return (end → verdict back)"),
        ("verify_s", "the verification itself (scope, planning)"),
    ):
        lines.append(f"| {label} | {med(k):.4f} | {p90(k):.4f} |")
    lines += [
        "",
        "## 2. Throughput against GPUs (stand-in GPU steps of 1 s per candidate, submitted at once)",
        "",
        "| GPUs (workers) | candidates | wall s | ideal s | workers used |",
        "|---:|---:|---:|---:|---:|",
    ]
    for s in doc["scaling"]:
        lines.append(
            f"| {s['gpus']} | {s['candidates']} | {s['wall_s']:.2f} | {s['ideal_s']:.2f} | {s['workers_used']} |"
        )
    lines += [
        "",
        "## 3. Build CPU (real nvcc: each candidate's harness entry unit compiled and linked)",
        "",
        "| workers | candidates | wall s | per candidate on its worker s | verdicts |",
        "|---:|---:|---:|---|---|",
    ]
    for b in doc["builds"]:
        per = ", ".join(f"{x:.1f}" for x in b["per_candidate_s"])
        lines.append(
            f"| {b['workers']} | {b['candidates']} | {b['wall_s']:.2f} | {per} | {', '.join(b['kinds'])} |"
        )
    name = f"pool-overhead-{doc['cpus']}cpu"
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / f"{name}.md").write_text("\n".join(lines) + "\n")
    (RESULTS / f"{name}.json").write_text(json.dumps(doc, indent=1, default=str) + "\n")
    print(f"wrote {RESULTS / name}.md")


if __name__ == "__main__":
    threading.current_thread().name = "bench"
    raise SystemExit(main())
