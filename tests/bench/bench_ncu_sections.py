"""Benchmark: what each ncu section costs on one small kernel (chooses the on-save "fast set").

    python tests/bench/bench_ncu_sections.py --write [SAMPLE.cu]

Builds the sample's harness once (timing the build), then runs it without a profiler and under ncu
with several section sets, one launch each (``--profile-from-start off``, as kernellsp does), and
prints the wall time of each. Writes tests/bench/results/ncu-sections-<gpu>.md.
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]

from gpuinfo import gpu_slug, local_gpu_name  # noqa: E402  (tests/gpuinfo.py)

from kernellsp import harness  # noqa: E402
from kernellsp.profile.ncu import EXTRA_METRICS, FAST_SECTIONS  # noqa: E402
from kernellsp.source.model import parse_source  # noqa: E402
from kernellsp.source.spec import specs_from_source  # noqa: E402

VARIANTS: dict[str, list[str]] = {
    "fast set (kernellsp default)": FAST_SECTIONS,
    "- MemoryWorkloadAnalysis_Tables": [s for s in FAST_SECTIONS if s != "MemoryWorkloadAnalysis_Tables"],
    "- WarpStateStats": [s for s in FAST_SECTIONS if s != "WarpStateStats"],
    "- SourceCounters": [s for s in FAST_SECTIONS if s != "SourceCounters"],
    "SpeedOfLight+LaunchStats+Occupancy": ["SpeedOfLight", "LaunchStats", "Occupancy"],
}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("sample", nargs="?", default="vector_add.cu")
    ap.add_argument("--write", action="store_true")
    args = ap.parse_args()
    src = ROOT / "samples" / args.sample
    text = src.read_text()
    model = parse_source(text, str(src))
    b = specs_from_source(model)[0][0]
    work = Path(tempfile.mkdtemp(prefix="kernellsp-ncu-sections-"))
    (work / "src").mkdir()
    (work / "src" / src.name).write_text(text)
    plan = harness.plan_harness(model, b.spec, b.entry)
    (work / "h.cu").write_text(harness.generate_harness(plan, f"src/{src.name}"))
    rows = []
    for label, flags in (("nvcc -O3 (default)", []), ("nvcc -O3 -Xcompiler -O1", ["-Xcompiler", "-O1"])):
        cmd = harness.harness_compile_command("h.cu", "h", "sm_90", flags)
        t0 = time.monotonic()
        subprocess.run(cmd, cwd=work, check=True, capture_output=True)
        rows.append((f"build: {label}", time.monotonic() - t0))
    run = ["./h", "--mode", "profile", "--shape", "0", "--seed", "1", "--out", "o"]
    t0 = time.monotonic()
    subprocess.run(run, cwd=work, check=True, capture_output=True)
    rows.append(("harness alone, no profiler", time.monotonic() - t0))
    for label, sections in VARIANTS.items():
        cmd = ["ncu", "--force-overwrite", "--export", "p", "--import-source", "yes", "--profile-from-start", "off"]
        for s in sections:
            cmd += ["--section", s]
        cmd += ["--metrics", ",".join(EXTRA_METRICS), *run]
        t0 = time.monotonic()
        subprocess.run(cmd, cwd=work, check=True, capture_output=True)
        rows.append((f"ncu: {label}", time.monotonic() - t0))
    gpu = local_gpu_name()
    lines = [f"# Cost of ncu sections on {args.sample} ({gpu})", "", "| step | wall (s) |", "|---|---:|"]
    lines += [f"| {k} | {v:.2f} |" for k, v in rows]
    out = "\n".join(lines) + "\n"
    print(out)
    if args.write:
        slug = gpu_slug(gpu)
        (ROOT / "tests" / "bench" / "results" / f"ncu-sections-{slug}.md").write_text(out)
    shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
