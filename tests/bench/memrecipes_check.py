"""GPU check of the memory recipes (transpose, row reductions, stencils): every candidate, no optimize loop.

Run on a GPU host from the repository root::

    python3 tests/bench/memrecipes_check.py [--only NAME ...] [--sanitize] [--workers 6] [--out DIR]

Per file of the list below (samples and corpus files, some with larger main sizes), every parameter
point of every matching memory recipe is generated and put through the real verification gate
(``kernellsp.optimize.verify.gate.verify``): the scope check, the build, correctness on every declared
shape against the original (one seed; NaN-poisoned outputs), and interleaved A/B timing; with
``--sanitize`` compute-sanitizer runs too. Printed per candidate: verdict, baseline and candidate
medians, speedup, and the share of copy bandwidth (a device-to-device copy of the bytes the kernel
must move, timed with torch in the same process; the speedup's numerator for memory-bound kernels).
Writes memrecipes-<gpu>.md/.json under --out (default tests/bench/results).

This is the generators' own check; the end-to-end claim (``kernellsp optimize --proposer recipes``) is
bench_recipes.py's.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
sys.path[:0] = [str(ROOT), str(ROOT / "tests"), str(ROOT / "tests" / "bench")]

from bench_optimize import _time_reference, _with_sizes  # noqa: E402
from helpers.gpuinfo import gpu_slug  # noqa: E402

from kernellsp.optimize.propose.base import splice_kernel  # noqa: E402
from kernellsp.optimize.propose.recipes import recipe  # noqa: E402
from kernellsp.optimize.propose.recipes.base import Match, contexts_for  # noqa: E402
from kernellsp.optimize.verify.gate import VerifyOptions, verify  # noqa: E402
from kernellsp.profile.environment import runner_environment  # noqa: E402
from kernellsp.run.runner import LocalRunner  # noqa: E402
from kernellsp.source.model import parse_source  # noqa: E402
from kernellsp.source.spec import specs_from_source  # noqa: E402

RECIPES = ("transpose-tiled", "rowreduce-warp-block", "stencil-tiled")
CORPUS = "tests/recipes/corpus/"
#: (file, main-size overrides): the issue's sizes where the sample's are smaller.
FILES: list[tuple[str, dict[str, int]]] = [
    ("samples/transpose_naive.cu", {"ROWS": 8192, "COLS": 8192}),
    ("samples/softmax_row.cu", {}),
    ("samples/layernorm.cu", {}),
    ("samples/conv1d.cu", {}),
    ("samples/stencil2d.cu", {}),
    (CORPUS + "transpose_1d_divmod.cu", {}),
    (CORPUS + "transpose_nchw_to_nhwc.cu", {}),
    (CORPUS + "transpose_half_launcher.cu", {}),
    (CORPUS + "transpose_naive_f32.cu", {}),
    (CORPUS + "transpose_i32_restrict.cu", {}),
    (CORPUS + "transpose_rowcol_swapped.cu", {}),
    (CORPUS + "rowreduce_rmsnorm_bf16.cu", {}),
    (CORPUS + "rowreduce_rmsnorm_block_f32.cu", {}),
    (CORPUS + "rowreduce_softmax_launcher.cu", {}),
    (CORPUS + "rowreduce_logsoftmax_f32.cu", {}),
    (CORPUS + "rowreduce_layernorm_thread.cu", {}),
    (CORPUS + "rowreduce_row_max.cu", {}),
    (CORPUS + "rowreduce_row_sum.cu", {}),
    (CORPUS + "rowreduce_row_mean.cu", {}),
    (CORPUS + "stencil_conv2d_mask.cu", {}),
    (CORPUS + "stencil_conv2d_valid_launcher.cu", {}),
    (CORPUS + "stencil_conv1d_mask.cu", {}),
    (CORPUS + "stencil_heat_1d.cu", {}),
    (CORPUS + "stencil_jacobi_2d.cu", {}),
]


def candidates(path: Path, text: str) -> list[tuple[str, str]]:
    """``(label, candidate text)`` of every point of every matching memory recipe."""
    model = parse_source(text, str(path))
    entry = specs_from_source(model)[0][0].entry
    out = []
    for name in RECIPES:
        r = recipe(name)
        assert r is not None, name
        for ctx in contexts_for(model, entry):
            m = r.match(ctx)
            if not isinstance(m, Match):
                continue
            for p in r.points(ctx, m):
                rw = r.generate(ctx, m, p)
                out.append((r.label(name, p), splice_kernel(text, rw.kernel, rw.code, rw.launch)))
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--only", nargs="*")
    ap.add_argument("--sanitize", action="store_true")
    ap.add_argument("--workers", type=int, default=6)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument(
        "--corpus-points", type=int, default=0, help="at most this many points per corpus file (0: all)"
    )
    ap.add_argument("--points", type=int, default=0, help="at most this many points per file (0: all)")
    ap.add_argument(
        "--pick", nargs="*", default=[], help="NAME=i,j: only these point indices for files containing NAME"
    )
    ap.add_argument("--out", default=str(ROOT / "tests" / "bench" / "results"))
    args = ap.parse_args()
    runner = LocalRunner()
    env = runner_environment(runner)
    work = Path(tempfile.mkdtemp(prefix="kernellsp-memrecipes-"))
    (work / "kernellsp.toml").write_text("")
    jobs: list[tuple[str, Path, str, str, str, str]] = []
    refs: dict[str, Any] = {}
    for rel, sizes in FILES:
        if args.only and not any(o in rel for o in args.only):
            continue
        src = ROOT / rel
        path = work / src.name
        text = src.read_text()
        if sizes:
            text = _with_sizes(text, path, sizes)
        path.write_text(text)
        entry = specs_from_source(parse_source(text, str(path)))[0][0].entry
        try:
            refs[src.name] = _time_reference("copy", text, path, entry)
        except Exception as exc:  # the row still runs without a reference
            refs[src.name] = {"ms": None, "note": str(exc)}
        try:
            cands = candidates(path, text)
        except Exception as exc:
            print(f"{src.name}: generation failed: {type(exc).__name__}: {exc}", flush=True)
            continue
        if not cands:
            print(f"{src.name}: no memory recipe matches", flush=True)
        if args.corpus_points and rel.startswith(CORPUS):
            cands = cands[: args.corpus_points]
        picks = [p.split("=", 1) for p in args.pick if "=" in p]
        chosen = next((w for n, w in picks if n in rel), None)
        if chosen is not None:
            cands = [c for i, c in enumerate(cands) if str(i) in chosen.split(",")]
        elif args.points:
            cands = cands[: args.points]
        for label, cand in cands:
            jobs.append((src.name, path, text, entry, label, cand))
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    slug = gpu_slug(env.get("gpu", "?"))
    done: list[dict[str, Any]] = []
    opts = VerifyOptions(
        seeds=1,
        sanitize=args.sanitize,
        rounds=args.rounds,
        reps=10,
        min_gain_pct=0.0,
        patterns=(),
        sanitizer_tools=("memcheck", "racecheck", "synccheck"),
        sanitize_all_shapes=False,
    )

    def run(job: tuple[str, Path, str, str, str, str]) -> dict[str, Any]:
        name, path, text, entry, label, cand = job
        t0 = time.monotonic()
        try:
            v = verify(path, text, cand, entry, runner, opts, environment=env)
        except Exception as exc:
            return {
                "file": name,
                "candidate": label,
                "verdict": f"error: {exc}"[:300],
                "wall_s": time.monotonic() - t0,
            }
        st = v.stats or {}
        row = {
            "file": name,
            "candidate": label,
            "verdict": v.kind,
            "message": v.message[:300],
            "baseline_ms": st.get("baseline_median_ms"),
            "candidate_ms": st.get("candidate_median_ms"),
            "speedup": st.get("speedup"),
            "wall_s": time.monotonic() - t0,
            "phases": v.details.get("phase_seconds"),
        }
        ref = refs.get(name) or {}
        if ref.get("ms") and row["candidate_ms"]:
            row["pct_copy"] = 100.0 * ref["ms"] / row["candidate_ms"]
            row["base_pct_copy"] = 100.0 * ref["ms"] / row["baseline_ms"] if row["baseline_ms"] else None
        print(_line(row), flush=True)
        done.append(row)
        # Written after every row: a run cut short by its time limit still leaves what it measured.
        (out / f"memrecipes-{slug}.json").write_text(
            json.dumps({"environment": env, "references": refs, "rows": done}, indent=1, default=str) + "\n"
        )
        return row

    with ThreadPoolExecutor(max_workers=args.workers) as pool:
        rows = list(pool.map(run, jobs))
    table = render(rows, refs, env)
    print(table)
    (out / f"memrecipes-{slug}.md").write_text(table)
    (out / f"memrecipes-{slug}.json").write_text(
        json.dumps({"environment": env, "references": refs, "rows": rows}, indent=1, default=str) + "\n"
    )
    return 0


def _f(v: Any, fmt: str) -> str:
    return format(v, fmt) if isinstance(v, int | float) else "n/a"


def _line(r: dict[str, Any]) -> str:
    return (
        f"| {r['file']} | {r['candidate']} | {r['verdict']} | {_f(r.get('baseline_ms'), '.4f')} | "
        f"{_f(r.get('candidate_ms'), '.4f')} | {_f(r.get('speedup'), '.2f')} | {_f(r.get('base_pct_copy'), '.0f')} | "
        f"{_f(r.get('pct_copy'), '.0f')} | {r.get('wall_s', 0):.0f} | {(r.get('message') or '')[:120]} |"
    )


def render(rows: list[dict[str, Any]], refs: dict[str, Any], env: dict[str, Any]) -> str:
    lines = [
        f"# Memory recipes, every candidate through the gate ({env.get('gpu', '?')})",
        "",
        f"GPU {env.get('gpu')}, driver {env.get('driver')}, nvcc {env.get('nvcc_version')}. One seed, every "
        "declared shape, interleaved A/B timing (CUDA-event medians, L2 flushed). % copy = time of a "
        "device-to-device copy of the bytes the kernel must move / kernel time.",
        "",
        "| file | candidate | verdict | baseline ms | candidate ms | speedup | baseline % copy | % copy | wall s | message |",
        "|---|---|---|---:|---:|---:|---:|---:|---:|---|",
    ]
    lines += [_line(r) for r in rows]
    lines += [
        "",
        "Copy references (ms): " + ", ".join(f"{k} {_f(v.get('ms'), '.4f')}" for k, v in refs.items()),
        "",
    ]
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    raise SystemExit(main())
