"""`optimize` on a seeded random sample of the wild corpus, one process per GPU of the host.

Run on a GPU host from the repository root::

    python tests/bench/bench_wild.py --sample 52 --seed 2026 [--gpus 0,1,2,3] [--deadline 420]
        [--out-dir DIR] [--write]

The sample is drawn from ``tests/wild/*.cu`` with ``random.Random(seed)`` (the seed is in the table),
dealt round-robin to one worker process per GPU (``CUDA_VISIBLE_DEVICES`` pinned, a GPU-lock folder of
its own, so the workers run side by side and each gate's A/B timing has its GPU to itself). Each worker
runs every row exactly as ``bench_optimize.py`` does (the built-in proposers through the whole gate;
the reference timed in the same process just before: a device-to-device copy of the bytes the kernel
must move, a read-only reduction of its inputs for reductions and histograms, cuBLAS fp32 for products
whose sizes the matmul recipe binds) and appends the row to ``DIR/rows-<gpu>.jsonl`` as soon as it is
done, so a run cut short keeps every finished row. A worker starts no row after ``--deadline`` seconds.
The parent merges the rows into ``tests/bench/results/wild-<gpu>.md`` (``--write``) with the summary:
verified wins, geomean speedup over the sampled naive kernels (a kernel without a verified win counts
1.0x) and, per kind, the same.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import random
import subprocess
import sys
import tempfile
import time
import tomllib
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
WILD = ROOT / "tests" / "wild"
RESULTS = ROOT / "tests" / "bench" / "results"
sys.path[:0] = [str(ROOT), str(ROOT / "tests"), str(ROOT / "tests" / "bench")]

_READ_KINDS = {"reduction", "histogram"}
_PRODUCT_KINDS = {"matmul", "batched-matmul"}


def manifests() -> dict[str, dict[str, Any]]:
    out: dict[str, dict[str, Any]] = {}
    for m in sorted(WILD.glob("manifest-*.toml")):
        out.update(tomllib.loads(m.read_text())["files"])
    return out


def draw(n: int, seed: int) -> list[str]:
    """``n`` wild files, drawn without replacement by ``random.Random(seed)`` from the sorted list."""
    files = sorted(p.name for p in WILD.glob("*.cu"))
    return sorted(random.Random(seed).sample(files, min(n, len(files))))


def reference_kind(name: str, kind: str) -> str:
    if kind in _READ_KINDS:
        return "read"
    if kind in _PRODUCT_KINDS:
        return "cublas"
    return "copy"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--sample", type=int, default=52)
    ap.add_argument("--seed", type=int, default=2026)
    ap.add_argument("--gpus", help="comma-separated GPU indices (default: every GPU nvidia-smi lists)")
    ap.add_argument(
        "--deadline", type=float, default=420.0, help="seconds after which a worker starts no row"
    )
    ap.add_argument(
        "--hard-stop",
        type=float,
        default=0.0,
        help="seconds after which running workers are stopped (0: never)",
    )
    ap.add_argument("--out-dir", default=None, help="where the rows-<gpu>.jsonl files go (and the table)")
    ap.add_argument(
        "--scratch", default=None, help="worker logs and GPU-lock folders (default: a temp folder)"
    )
    ap.add_argument("--write", action="store_true")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--candidates", type=int, default=4)
    ap.add_argument("--seeds", type=int, default=3)
    ap.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--files", help=argparse.SUPPRESS)
    ap.add_argument("--jsonl", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.worker:
        return worker(args)
    return parent(args)


def _gpus(arg: str | None) -> list[str]:
    if arg:
        return [g.strip() for g in arg.split(",") if g.strip()]
    out = subprocess.run(
        ["nvidia-smi", "--query-gpu=index", "--format=csv,noheader"],
        capture_output=True,
        text=True,
        check=False,
    )
    return [g.strip() for g in out.stdout.splitlines() if g.strip()] or ["0"]


def parent(args: argparse.Namespace) -> int:
    files = draw(args.sample, args.seed)
    gpus = _gpus(args.gpus)
    out_dir = Path(args.out_dir or tempfile.mkdtemp(prefix="kernellsp-wild-"))
    out_dir.mkdir(parents=True, exist_ok=True)
    scratch = Path(args.scratch or tempfile.mkdtemp(prefix="kernellsp-wild-scratch-"))
    scratch.mkdir(parents=True, exist_ok=True)
    shards = [files[i :: len(gpus)] for i in range(len(gpus))]
    procs = []
    t0 = time.monotonic()
    for gpu, shard in zip(gpus, shards, strict=True):
        if not shard:
            continue
        env = dict(os.environ, CUDA_VISIBLE_DEVICES=gpu, KERNELLSP_GPU_LOCK_DIR=str(scratch / f"lock-{gpu}"))
        (scratch / f"lock-{gpu}").mkdir(exist_ok=True)
        cmd = [
            sys.executable,
            __file__,
            "--worker",
            "--files",
            ",".join(shard),
            "--jsonl",
            str(out_dir / f"rows-{gpu}.jsonl"),
            "--deadline",
            str(args.deadline),
            "--rounds",
            str(args.rounds),
            "--candidates",
            str(args.candidates),
            "--seeds",
            str(args.seeds),
        ]
        log = (scratch / f"worker-{gpu}.log").open("w")
        procs.append((gpu, subprocess.Popen(cmd, env=env, stdout=log, stderr=subprocess.STDOUT), log))
        print(f"GPU {gpu}: {len(shard)} kernels", flush=True)
    for gpu, p, log in procs:
        left = args.hard_stop - (time.monotonic() - t0) if args.hard_stop else None
        try:
            p.wait(timeout=max(left, 1.0) if left is not None else None)
        except subprocess.TimeoutExpired:
            p.kill()  # the rows it finished are in its jsonl already
            p.wait()
        log.close()
        print(f"GPU {gpu}: worker exited {p.returncode}", flush=True)
    rows = []
    for f in sorted(out_dir.glob("rows-*.jsonl")):
        rows += [json.loads(line) for line in f.read_text().splitlines() if line.strip()]
    table = render(rows, files, args, time.monotonic() - t0, len(gpus))
    print(table)
    (out_dir / "wild-table.md").write_text(table)
    if args.write:
        from helpers.gpuinfo import gpu_slug

        gpu = next((r.get("gpu") for r in rows if r.get("gpu")), "?")
        RESULTS.mkdir(parents=True, exist_ok=True)
        (RESULTS / f"wild-{gpu_slug(gpu)}.md").write_text(table)
        (RESULTS / f"wild-{gpu_slug(gpu)}.json").write_text(
            json.dumps({"rows": rows}, indent=1, default=str) + "\n"
        )
    return 0


def worker(args: argparse.Namespace) -> int:
    """One GPU: the rows of ``--files`` in order, each appended to ``--jsonl`` when done."""
    from bench_optimize import run_case

    from kernellsp.optimize.loop import default_proposers
    from kernellsp.profile.environment import runner_environment
    from kernellsp.rules.engine import load_rules
    from kernellsp.run.runner import LocalRunner

    start = time.monotonic()
    meta = manifests()
    runner = LocalRunner()
    env = runner_environment(runner)
    rules = load_rules(None)
    proposers = default_proposers(None, rules, "auto")
    work = Path(tempfile.mkdtemp(prefix="kernellsp-wild-worker-"))
    (work / "kernellsp.toml").write_text("")
    out = Path(args.jsonl)
    for name in (args.files or "").split(","):
        if not name:
            continue
        info = meta.get(name, {})
        kind = str(info.get("kind", "?"))
        if time.monotonic() - start > args.deadline:
            row: dict[str, Any] = {"sample": name, "kind": kind, "skipped": "deadline"}
        else:
            ref, mnk = _reference(name, kind)
            case = {"file": f"tests/wild/{name}", "reference": ref, "mnk": mnk}
            try:
                row = run_case(case, runner, env, rules, proposers, args, work)
            except Exception as exc:  # a row, not the end of the worker
                row = {"sample": name, "error": f"{type(exc).__name__}: {exc}"}
            row["kind"] = kind
        row["gpu"] = env.get("gpu")
        row["cuda_visible_devices"] = os.environ.get("CUDA_VISIBLE_DEVICES")
        with out.open("a") as fh:
            fh.write(json.dumps(row, default=str) + "\n")
    return 0


def _reference(name: str, kind: str) -> tuple[str, tuple[int, int, int] | None]:
    """The reference of a row; for a product, cuBLAS at the M, N, K the matmul recipes bind (evaluated with
    the kernel's arguments at the main shape), else a copy of its bytes."""
    ref = reference_kind(name, kind)
    if ref != "cublas":
        return ref, None
    mnk = product_sizes(name)
    return ("cublas", mnk) if mnk is not None else ("copy", None)


def product_sizes(name: str) -> tuple[int, int, int] | None:
    from kernellsp.optimize.propose.recipes import Match, recipe
    from kernellsp.optimize.propose.recipes.base import contexts_for
    from kernellsp.source.ir.cexpr import evaluate_text
    from kernellsp.source.model import parse_source

    text = (WILD / name).read_text()
    entry = str(manifests().get(name, {}).get("entry", ""))
    for ctx in contexts_for(parse_source(text, name), entry):
        lm = ctx.launch_model
        for rname in ("matmul-tiled", "matmul-tensorcore"):
            r = recipe(rname)
            m = r.match(ctx) if r is not None else None
            if not isinstance(m, Match) or lm is None or not lm.shapes:
                continue
            parts = m.binding.get("M x N x K", "").split(" x ")
            vals = [evaluate_text(p, dict(lm.shapes[0].params), ctx.model) for p in parts]
            if len(vals) == 3 and all(v is not None for v in vals):
                return (int(vals[0] or 0), int(vals[1] or 0), int(vals[2] or 0))
    return None


def _pct(r: dict[str, Any]) -> float | None:
    ref = r.get("reference") or {}
    ms = r.get("best_ms") if r.get("accepted") else r.get("baseline_ms")
    if not ref.get("ms") or not ms:
        return None
    return 100.0 * float(ref["ms"]) / float(ms)


def render(
    rows: list[dict[str, Any]], files: list[str], args: argparse.Namespace, wall: float, ngpus: int
) -> str:
    by = {r["sample"]: r for r in rows}
    done = [by[f] for f in files if f in by and not by[f].get("skipped") and not by[f].get("error")]
    wins = [r for r in done if r.get("accepted") and (r.get("speedup") or 0) > 1.0]
    speed = [float(r["speedup"]) if r in wins else 1.0 for r in done]
    geo = math.exp(sum(math.log(s) for s in speed) / len(speed)) if speed else float("nan")
    gpu = next((r.get("gpu") for r in rows if r.get("gpu")), "?")
    lines = [
        f"# Wild corpus on the GPU: `optimize` on a seeded sample ({gpu})",
        "",
        f"Written by `python tests/bench/bench_wild.py --sample {args.sample} --seed {args.seed} --write` on "
        f"{ngpus} GPU(s) of one host, one worker process per GPU; {wall:.0f} s wall in all. Rounds "
        f"{args.rounds}, candidates {args.candidates}, seeds {args.seeds}: `bench_optimize.py`'s settings. The "
        "reference is timed in the same process just before the row: a device-to-device copy of the bytes the "
        "kernel moves (copy), a read-only reduction of its inputs (read) or cuBLAS fp32 without TF32 (cublas).",
        "",
        f"**Sample: {len(files)} of {len(list(WILD.glob('*.cu')))} kernels (seed {args.seed}); finished "
        f"{len(done)}; verified win on {len(wins)} ({100 * len(wins) / max(len(done), 1):.0f}% of those "
        f"finished); geomean speedup {geo:.2f}x over the naive kernels (no win counts 1.0x).**",
        "",
        "| kernel | kind | baseline ms | best ms | speedup | reference | % of reference | winner | wall s |",
        "|---|---|---:|---:|---:|---|---:|---|---:|",
    ]
    for f in files:
        r = by.get(f)
        if r is None:
            lines.append(f"| `{f}` | | | | | | | not run (the call ended first) | |")
            continue
        if r.get("skipped") or r.get("error"):
            why = r.get("skipped") or r.get("error")
            lines.append(f"| `{f}` | {r.get('kind', '')} | | | | | | {str(why)[:80]} | |")
            continue
        ref = r.get("reference") or {}
        pct = _pct(r)
        sp = f"{r['speedup']:.2f}x" if r.get("accepted") and r.get("speedup") else "-"
        win = (r.get("winner") or r.get("final_verdict") or r.get("stop") or "").replace("|", "/")
        lines.append(
            f"| `{f}` | {r.get('kind', '')} | {_ms(r.get('baseline_ms'))} | {_ms(r.get('best_ms'))} | {sp} | "
            f"{ref.get('kind', '')} {_ms(ref.get('ms'))} | {f'{pct:.0f}%' if pct is not None else ''} | "
            f"{win[:90]} | {r.get('wall_s', 0):.0f} |"
        )
    return "\n".join(lines) + "\n"


def _ms(v: Any) -> str:
    return f"{float(v):.4g}" if isinstance(v, int | float) else ""


if __name__ == "__main__":
    raise SystemExit(main())
