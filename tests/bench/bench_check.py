"""Benchmark: wall time of ``kernellsp check samples/`` on the CPU, cold and warm cache.

Run from the repository root (it is a script, not a pytest test: pytest collects only ``test_*.py``)::

    python tests/bench/bench_check.py            # print the table
    python tests/bench/bench_check.py --write    # also write tests/bench/results/check-cpu.md

Each run starts a fresh, empty ``KERNELLSP_CACHE_DIR`` and times ``python -m kernellsp check samples/``
twice as a subprocess: cold (every file is built with nvcc and disassembled with nvdisasm) and warm
(the same cache, so every build is a content-hash hit). Targets on the 2-core CI machine: median
warm < 3 s, median cold < 20 s.
"""

from __future__ import annotations

import argparse
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
RESULTS = ROOT / "tests" / "bench" / "results"
TARGET_WARM_S = 3.0
TARGET_COLD_S = 20.0


def _check(cache: str) -> tuple[float, int, str]:
    env = {**os.environ, "KERNELLSP_CACHE_DIR": cache}
    env.pop("KERNELLSP_NO_CACHE", None)
    t0 = time.perf_counter()
    proc = subprocess.run(
        [sys.executable, "-m", "kernellsp", "check", "samples/"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    wall = time.perf_counter() - t0
    if proc.returncode not in (0, 1):
        raise SystemExit(f"kernellsp check failed (exit {proc.returncode}):\n{proc.stderr[-2000:]}")
    summary = proc.stdout.strip().splitlines()[-1] if proc.stdout.strip() else ""
    return wall, proc.returncode, summary


def _nvcc_version() -> str:
    nvcc = shutil.which("nvcc") or "/usr/local/cuda/bin/nvcc"
    try:
        out = subprocess.run([nvcc, "--version"], capture_output=True, text=True, timeout=30).stdout
    except OSError:
        return "not found"
    return next((ln.strip() for ln in out.splitlines() if "release" in ln), out.strip() or "?")


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "?"


def facts() -> dict[str, str]:
    sys.path.insert(0, str(ROOT))
    from kernellsp import __version__
    from kernellsp.build import toolchain

    load = ", ".join(f"{x:.2f}" for x in os.getloadavg()) if hasattr(os, "getloadavg") else "?"
    return {
        "date": datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "load average at the end (1, 5, 15 min)": load,
        "kernellsp": __version__,
        "nproc": str(os.cpu_count()),
        "cpu": _cpu_model(),
        "python": platform.python_version(),
        "nvcc": _nvcc_version(),
        "nvdisasm": toolchain.tool_version("nvdisasm") or "not found",
        "samples": str(len(list((ROOT / "samples").glob("*.cu")))),
    }


def render(rows: list[tuple[int, float, float]], info: dict[str, str], summary: str) -> str:
    cold = statistics.median(r[1] for r in rows)
    warm = statistics.median(r[2] for r in rows)
    out = [
        "# `kernellsp check samples/` on the CPU",
        "",
        "Each run: a fresh empty `KERNELLSP_CACHE_DIR`, then `python -m kernellsp check samples/` cold "
        "(nvcc + nvdisasm for every file) and warm (same cache). Wall time of the subprocess.",
        "",
        "| run | cold s | warm s |",
        "|---|---:|---:|",
        *[f"| {i} | {c:.2f} | {w:.2f} |" for i, c, w in rows],
        f"| **median** | **{cold:.2f}** | **{warm:.2f}** |",
        "",
        "| target | limit | median | result |",
        "|---|---:|---:|---|",
        f"| warm | < {TARGET_WARM_S:g} s | {warm:.2f} s | {'PASS' if warm < TARGET_WARM_S else 'FAIL'} |",
        f"| cold | < {TARGET_COLD_S:g} s | {cold:.2f} s | {'PASS' if cold < TARGET_COLD_S else 'FAIL'} |",
        "",
        "Machine:",
        "",
        *[f"- {k}: {v}" for k, v in info.items()],
        "",
        f"Output summary: {summary}",
        "",
    ]
    return "\n".join(out)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runs", type=int, default=3, help="cold/warm pairs (default 3)")
    ap.add_argument("--write", action="store_true", help="write tests/bench/results/check-cpu.md")
    args = ap.parse_args()
    rows: list[tuple[int, float, float]] = []
    summary = ""
    for i in range(1, args.runs + 1):
        with tempfile.TemporaryDirectory(prefix="kernellsp-bench-check-") as cache:
            cold, rc_cold, summary = _check(cache)
            warm, rc_warm, warm_summary = _check(cache)
        if (rc_cold, summary) != (rc_warm, warm_summary):
            raise SystemExit(f"cold and warm runs disagree: {summary!r} vs {warm_summary!r}")
        rows.append((i, cold, warm))
        print(f"run {i}: cold {cold:.2f} s, warm {warm:.2f} s", file=sys.stderr, flush=True)
    table = render(rows, facts(), summary)
    print(table)
    if args.write:
        RESULTS.mkdir(parents=True, exist_ok=True)
        (RESULTS / "check-cpu.md").write_text(table, encoding="utf-8")
        print(f"wrote {RESULTS / 'check-cpu.md'}", file=sys.stderr)
    cold = statistics.median(r[1] for r in rows)
    warm = statistics.median(r[2] for r in rows)
    return 0 if warm < TARGET_WARM_S and cold < TARGET_COLD_S else 1


if __name__ == "__main__":
    raise SystemExit(main())
