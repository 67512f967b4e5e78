"""Benchmark: profile every sample on the GPU with the fast set and record what kernellsp reports.

Run on a GPU host from the repository root::

    python -m tests.bench.bench_profile --write            # tests/bench/results/profile-<gpu>.md
    python -m tests.bench.bench_profile --write --fixtures # also keep the .ncu-rep files as test fixtures
                                                           # (tests/fixtures/ncu/samples-<gpu>/)

Per sample it prints the wall time of ``kernellsp profile`` (fast set, cold cache, one run), the
kernel duration under ncu, the roofline position (share of DRAM and of FP32 peak), the bottleneck
and the top findings. The fast-set target is <= 5 s wall for a single-kernel sample.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tests"))

from gpuinfo import gpu_slug  # noqa: E402  (tests/gpuinfo.py)

SAMPLES = ROOT / "samples"
RESULTS = ROOT / "tests" / "bench" / "results"
FIXTURES = ROOT / "tests" / "fixtures" / "ncu"  # samples-<gpu>/ under it
TARGET_S = 5.0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--write", action="store_true", help="write tests/bench/results/profile-<gpu>.md and .json")
    ap.add_argument("--fixtures", action="store_true", help="copy the .ncu-rep files and the sources to tests/fixtures/ncu/samples-<gpu>/")
    ap.add_argument("samples", nargs="*", help="sample file names (default: all)")
    args = ap.parse_args()
    files = [SAMPLES / s for s in args.samples] if args.samples else sorted(SAMPLES.glob("*.cu"))
    cache = tempfile.mkdtemp(prefix="kernellsp-bench-cache-")
    reports = Path(tempfile.mkdtemp(prefix="kernellsp-bench-reports-"))
    env = {**os.environ, "KERNELLSP_CACHE_DIR": cache}
    rows = []
    gpu = "?"
    for f in files:
        t0 = time.monotonic()
        proc = subprocess.run([sys.executable, "-m", "kernellsp", "profile", str(f), "--format", "json",
                               "--save-report", str(reports)], capture_output=True, text=True, env=env, cwd=ROOT)  # fmt: skip
        wall = time.monotonic() - t0
        if proc.returncode != 0:
            rows.append({"sample": f.name, "wall_s": wall, "error": (proc.stderr or proc.stdout).strip()[-400:]})
            print(f"{f.name}: FAILED ({wall:.1f} s): {(proc.stderr or proc.stdout).strip()[-400:]}", flush=True)
            continue
        data = json.loads(proc.stdout)
        gpu = data["environment"].get("gpu", gpu)
        # The same profile again: a cache hit must not touch the GPU.
        t1 = time.monotonic()
        again = subprocess.run([sys.executable, "-m", "kernellsp", "profile", str(f), "--format", "json"],
                               capture_output=True, text=True, env=env, cwd=ROOT)  # fmt: skip
        warm = time.monotonic() - t1
        cached = again.returncode == 0 and json.loads(again.stdout).get("wall_s") == data.get("wall_s")
        row = {"sample": f.name, "wall_s": wall, "warm_wall_s": warm, "warm_cached": cached,
               "profile_wall_s": data["wall_s"], "environment": data["environment"], "kernels": []}  # fmt: skip
        for k in data["kernels"]:
            mine = [x for x in data["findings"] if x["kernel"] == k["name"] and x["code"] != "KL590"]
            row["kernels"].append({
                "name": k["name"], "duration_us": (k["duration_ns"] or 0) / 1000, "dram_pct": k["dram_pct"],
                "fp32_pct": k["fp32_pct"], "bottleneck": k["bottleneck"],
                "findings": [f"{x['code']} L{x['range']['start_line'] + 1}" for x in mine[:6]],
                "top": [f"{x['code']}: {x['message']}" for x in mine[:3]],
                "hot_lines": k["hot_lines"][:3],
            })  # fmt: skip
        rows.append(row)
        ks = row["kernels"]
        print(f"{f.name}: {wall:.1f} s cold, {warm:.1f} s cached; "
              + "; ".join(f"{k['name']} {k['duration_us']:.1f} us {k['bottleneck']} {' '.join(k['findings'])}" for k in ks),
              flush=True)  # fmt: skip
    table = render(rows, gpu)
    print(table)
    slug = gpu_slug(gpu)
    if args.write:
        RESULTS.mkdir(parents=True, exist_ok=True)
        (RESULTS / f"profile-{slug}.md").write_text(table)
        (RESULTS / f"profile-{slug}.json").write_text(json.dumps(rows, indent=2, default=str) + "\n")
    if args.fixtures:
        fixtures = FIXTURES / f"samples-{slug}"
        fixtures.mkdir(parents=True, exist_ok=True)
        for rep in reports.glob("*.ncu-rep"):
            shutil.copy2(rep, fixtures / rep.name)
        for f in files:
            shutil.copy2(f, fixtures / f.name)
    shutil.rmtree(cache, ignore_errors=True)
    return 0 if all("error" not in r for r in rows) else 1


def render(rows: list[dict], gpu: str) -> str:
    env = next((r["environment"] for r in rows if "environment" in r), {})
    lines = [
        f"# `kernellsp profile` on the samples ({gpu})",
        "",
        f"GPU {gpu}, driver {env.get('driver', '?')}, ncu {env.get('ncu_version', '?')}, nvcc {env.get('nvcc_version', '?')}, "
        f"host {platform.node()}; fast section set (SpeedOfLight, LaunchStats, Occupancy, WarpStateStats, SourceCounters "
        "+ roofline and atomic counters), `--import-source yes`, one launch per kernel, ncu's default "
        "clock control (base clocks), so durations are under locked clocks.",
        "",
        "Wall = `kernellsp profile FILE` end to end (harness generation, nvcc build, ncu, report reading, rules), "
        f"cold cache; ncu = the fast-set run alone (target <= {TARGET_S:.0f} s for a single-kernel sample); "
        "cached = the same command again (no GPU work).",
        "",
        "| sample | kernel | duration (us) | DRAM % of peak | FP32 % of peak | bottleneck | findings (code line) | ncu (s) | build (s) | wall (s) | cached (s) |",
        "|---|---|---:|---:|---:|---|---|---:|---:|---:|---:|",
    ]
    for r in rows:
        if "error" in r:
            lines.append(f"| {r['sample']} | FAILED | | | | {r['error'][:120]} | | {r['wall_s']:.1f} | |")
            continue
        for i, k in enumerate(r["kernels"]):
            dram = f"{k['dram_pct']:.1f}" if k["dram_pct"] is not None else "?"
            fp32 = f"{k['fp32_pct']:.1f}" if k["fp32_pct"] is not None else "?"
            wall = f"{r['wall_s']:.1f}" if i == 0 else ""
            ph = r.get("environment", {}).get("phases", {})
            ncu_s = next((f"{v:.1f}" for k, v in ph.items() if k.startswith("ncu_")), "") if i == 0 else ""
            build_s = next((f"{v:.1f}" for k, v in ph.items() if k.startswith("build_")), "") if i == 0 else ""
            warm = f"{r['warm_wall_s']:.1f}{'' if r['warm_cached'] else ' (miss!)'}" if i == 0 else ""
            lines.append(f"| {r['sample'] if i == 0 else ''} | {k['name']} | {k['duration_us']:.1f} | {dram} | {fp32} | "
                         f"{k['bottleneck']} | {', '.join(k['findings'])} | {ncu_s} | {build_s} | {wall} | {warm} |")  # fmt: skip
    ok = [r for r in rows if "error" not in r and len(r["kernels"]) == 1]
    def ncu_s(r: dict) -> float:
        return next((v for k, v in r["environment"].get("phases", {}).items() if k.startswith("ncu_")), 1e9)

    over = [r["sample"] for r in ok if ncu_s(r) > TARGET_S]
    lines += ["", f"Single-kernel samples whose fast-set ncu run exceeds {TARGET_S:.0f} s: {', '.join(over) if over else 'none'}.", "",
              "## Top findings per kernel", ""]  # fmt: skip
    for r in rows:
        for k in r.get("kernels", []):
            lines.append(f"- **{r['sample']} / {k['name']}** ({k['bottleneck']}):")
            lines += [f"  - {t}" for t in k["top"]] or ["  - (none)"]
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    raise SystemExit(main())
