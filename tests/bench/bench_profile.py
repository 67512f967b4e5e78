"""Benchmark: profile every sample on the GPU with the fast set and record what kernellsp reports.

Run on a GPU host from the repository root::

    python -m tests.bench.bench_profile --write            # tests/bench/results/profile-<gpu>.md
    python -m tests.bench.bench_profile --write --fixtures # also keep the .ncu-rep files as test fixtures
                                                           # (tests/fixtures/ncu/samples-<gpu>/)

Per sample it prints the wall time of ``kernellsp profile`` (fast set, cold cache, one run) with its
phase breakdown (parse and plan, build, ncu, report, rules, and the rest: Python start-up, the GPU
query, output), the kernel duration under ncu, the roofline position (share of DRAM and of FP32
peak), the bottleneck and the top findings. The harness runtime object is built once before the
samples (as it is once per machine and toolchain) and its time is reported on its own line.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tests"))

from helpers.gpuinfo import gpu_slug  # noqa: E402  (tests/helpers/gpuinfo.py)

SAMPLES = ROOT / "samples"
RESULTS = ROOT / "tests" / "bench" / "results"
FIXTURES = ROOT / "tests" / "fixtures" / "ncu"  # samples-<gpu>/ under it
TARGET_S = 5.0
#: The phases of ``environment.phases`` the table shows, in order (see kernellsp.profile.ncu.profile_file).
PHASE_COLUMNS = (
    ("plan", ("parse_s", "plan_s")),
    ("build", ("build_s",)),
    ("ncu", ("ncu_s",)),
    ("report", ("report_s",)),
    ("rules", ("rules_s",)),
)


def build_runtime(env: dict[str, str]) -> dict[str, object]:
    """Build the harness runtime object into the bench's cache, as the first profile on a machine would."""
    code = (
        "import json, time\n"
        "from kernellsp.profile.environment import runner_environment\n"
        "from kernellsp.profile.ncu import ProfileOptions\n"
        "from kernellsp.run import harness_build as hb\n"
        "from kernellsp.run.runner import LocalRunner\n"
        "from kernellsp.settings import load_settings\n"
        "opts = ProfileOptions.from_settings(load_settings(None))\n"
        "r = LocalRunner(); e = runner_environment(r); t = time.monotonic()\n"
        "key, fut = hb.ensure_runtime(r, opts.arch, r.require('nvcc'), e.get('nvcc_version'), opts.build_timeout_s)\n"
        "res = fut.result()\n"
        "print(json.dumps({'seconds': time.monotonic() - t, 'returncode': res.returncode, 'arch': opts.arch}))\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, cwd=ROOT)
    if proc.returncode != 0:
        return {"error": (proc.stderr or proc.stdout)[-400:]}
    return json.loads(proc.stdout.strip().splitlines()[-1])


def phase_values(row: dict) -> dict[str, float]:
    """The table's phase columns of one row, plus ``other``: the wall time no phase accounts for."""
    ph = row.get("environment", {}).get("phases", {})
    out = {name: sum(float(ph.get(k, 0.0)) for k in keys) for name, keys in PHASE_COLUMNS}
    out["other"] = row["wall_s"] - sum(out.values())
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument(
        "--write", action="store_true", help="write tests/bench/results/profile-<gpu>.md and .json"
    )
    ap.add_argument(
        "--fixtures",
        action="store_true",
        help="copy the .ncu-rep files and the sources to tests/fixtures/ncu/samples-<gpu>/",
    )
    ap.add_argument("samples", nargs="*", help="sample file names (default: all)")
    args = ap.parse_args()
    files = [SAMPLES / s for s in args.samples] if args.samples else sorted(SAMPLES.glob("*.cu"))
    cache = tempfile.mkdtemp(prefix="kernellsp-bench-cache-")
    reports = Path(tempfile.mkdtemp(prefix="kernellsp-bench-reports-"))
    env = {**os.environ, "KERNELLSP_CACHE_DIR": cache}
    rows = []
    gpu = "?"
    runtime = build_runtime(env)
    print(f"harness runtime object: {runtime}", flush=True)
    for f in files:
        t0 = time.monotonic()
        proc = subprocess.run(
            [
                sys.executable,
                "-m",
                "kernellsp",
                "profile",
                str(f),
                "--format",
                "json",
                "--save-report",
                str(reports),
            ],
            capture_output=True,
            text=True,
            env=env,
            cwd=ROOT,
        )
        wall = time.monotonic() - t0
        if proc.returncode != 0:
            rows.append(
                {"sample": f.name, "wall_s": wall, "error": (proc.stderr or proc.stdout).strip()[-400:]}
            )
            print(
                f"{f.name}: FAILED ({wall:.1f} s): {(proc.stderr or proc.stdout).strip()[-400:]}", flush=True
            )
            continue
        data = json.loads(proc.stdout)
        gpu = data["environment"].get("gpu", gpu)
        # The same profile again: a cache hit must not touch the GPU.
        t1 = time.monotonic()
        again = subprocess.run(
            [sys.executable, "-m", "kernellsp", "profile", str(f), "--format", "json"],
            capture_output=True,
            text=True,
            env=env,
            cwd=ROOT,
        )
        warm = time.monotonic() - t1
        cached = again.returncode == 0 and json.loads(again.stdout).get("wall_s") == data.get("wall_s")
        row = {
            "sample": f.name,
            "wall_s": wall,
            "warm_wall_s": warm,
            "warm_cached": cached,
            "profile_wall_s": data["wall_s"],
            "environment": data["environment"],
            "kernels": [],
        }
        for k in data["kernels"]:
            mine = [x for x in data["findings"] if x["kernel"] == k["name"] and x["code"] != "KL590"]
            row["kernels"].append(
                {
                    "name": k["name"],
                    "duration_us": (k["duration_ns"] or 0) / 1000,
                    "dram_pct": k["dram_pct"],
                    "fp32_pct": k["fp32_pct"],
                    "bottleneck": k["bottleneck"],
                    "findings": [f"{x['code']} L{x['range']['start_line'] + 1}" for x in mine[:6]],
                    "top": [f"{x['code']}: {x['message']}" for x in mine[:3]],
                    "hot_lines": k["hot_lines"][:3],
                }
            )
        rows.append(row)
        ks = row["kernels"]
        print(
            f"{f.name}: {wall:.1f} s cold, {warm:.1f} s cached; "
            + "; ".join(
                f"{k['name']} {k['duration_us']:.1f} us {k['bottleneck']} {' '.join(k['findings'])}"
                for k in ks
            ),
            flush=True,
        )
    table = render(rows, gpu, runtime)
    print(table)
    slug = gpu_slug(gpu)
    if args.write:
        RESULTS.mkdir(parents=True, exist_ok=True)
        (RESULTS / f"profile-{slug}.md").write_text(table)
        (RESULTS / f"profile-{slug}.json").write_text(
            json.dumps({"runtime_object": runtime, "rows": rows}, indent=2, default=str) + "\n"
        )
    if args.fixtures:
        fixtures = FIXTURES / f"samples-{slug}"
        fixtures.mkdir(parents=True, exist_ok=True)
        for rep in reports.glob("*.ncu-rep"):
            shutil.copy2(rep, fixtures / rep.name)
        for f in files:
            shutil.copy2(f, fixtures / f.name)
    shutil.rmtree(cache, ignore_errors=True)
    return 0 if all("error" not in r for r in rows) else 1


def render(rows: list[dict], gpu: str, runtime: dict[str, object]) -> str:
    env = next((r["environment"] for r in rows if "environment" in r), {})
    lines = [
        f"# `kernellsp profile` on the samples ({gpu})",
        "",
        f"GPU {gpu}, driver {env.get('driver', '?')}, ncu {env.get('ncu_version', '?')}, nvcc {env.get('nvcc_version', '?')}, "
        f"host {platform.node()}; fast section set (SpeedOfLight, LaunchStats, Occupancy, WarpStateStats, SourceCounters "
        "+ roofline and atomic counters), `--import-source yes`, one launch per kernel, ncu's default "
        "clock control (base clocks), so durations are under locked clocks.",
        "",
        "Wall = `kernellsp profile FILE` end to end, cold cache (nothing of this file built or profiled before), "
        "split into its phases (seconds): plan = parsing, binding the spec, generating the harness; build = for a "
        "__global__ entry, the entry unit (the user's file, the tables, the glue) compiled device-only to a cubin "
        "while the host harness (no user code: built once per plan, cached after) is compiled and linked with the "
        "shared runtime object; for a host launcher, the entry unit compiled and linked with that object; ncu = the fast-set run; report = reading the .ncu-rep; rules = the profile rules; other = Python "
        "start-up and imports, the GPU query and the output. Cached = the same command again (no GPU work).",
        "",
        "Harness runtime object (compiled once per machine, arch and nvcc; every profile links it): "
        + (
            f"{float(runtime['seconds']):.1f} s for {runtime.get('arch')}."
            if "seconds" in runtime
            else f"not built: {runtime.get('error')}"
        ),
        "",
        "| sample | kernel | duration (us) | DRAM % of peak | FP32 % of peak | bottleneck | findings (code line) "
        "| plan | build | ncu | report | rules | other | wall (s) | cached (s) |",
        "|---|---|---:|---:|---:|---|---|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in rows:
        if "error" in r:
            lines.append(f"| {r['sample']} | FAILED | | | | {r['error'][:120]} | | {r['wall_s']:.1f} | |")
            continue
        for i, k in enumerate(r["kernels"]):
            dram = f"{k['dram_pct']:.1f}" if k["dram_pct"] is not None else "?"
            fp32 = f"{k['fp32_pct']:.1f}" if k["fp32_pct"] is not None else "?"
            wall = f"{r['wall_s']:.1f}" if i == 0 else ""
            ph = " | ".join(f"{v:.2f}" for v in phase_values(r).values()) if i == 0 else " | " * 5
            warm = f"{r['warm_wall_s']:.1f}{'' if r['warm_cached'] else ' (miss!)'}" if i == 0 else ""
            lines.append(
                f"| {r['sample'] if i == 0 else ''} | {k['name']} | {k['duration_us']:.1f} | {dram} | {fp32} | "
                f"{k['bottleneck']} | {', '.join(k['findings'])} | {ph} | {wall} | {warm} |"
            )
    ok = [r for r in rows if "error" not in r]
    if ok:
        med = {name: statistics.median(phase_values(r)[name] for r in ok) for name in phase_values(ok[0])}
        lines.append(
            "| **median** | | | | | | | "
            + " | ".join(f"{v:.2f}" for v in med.values())
            + f" | {statistics.median(r['wall_s'] for r in ok):.1f} | {statistics.median(r['warm_wall_s'] for r in ok):.1f} |"
        )
    over = [r["sample"] for r in ok if r["environment"].get("phases", {}).get("ncu_s", 1e9) > TARGET_S]
    lines += [
        "",
        f"Samples whose fast-set ncu run exceeds {TARGET_S:.0f} s: {', '.join(over) if over else 'none'}.",
        "",
        "## Top findings per kernel",
        "",
    ]
    for r in rows:
        for k in r.get("kernels", []):
            lines.append(f"- **{r['sample']} / {k['name']}** ({k['bottleneck']}):")
            lines += [f"  - {t}" for t in k["top"]] or ["  - (none)"]
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    raise SystemExit(main())
