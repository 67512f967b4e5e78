"""Benchmark: what the build steps and each ncu option cost on one small kernel (chooses the on-save set).

    python tests/bench/bench_ncu_sections.py --write [SAMPLE.cu]

Builds the sample's harness with the split build (the runtime object, the entry unit, the link: each
timed; and the old single-unit build for comparison), then runs it without a profiler and under ncu
with several section sets and options, one launch each (``--profile-from-start off``, as kernellsp
does), and prints the wall time of each. Writes tests/bench/results/ncu-sections-<gpu>.md.
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

from helpers.gpuinfo import gpu_slug, local_gpu_name  # noqa: E402  (tests/helpers/gpuinfo.py)

from kernellsp.profile.ncu import EXTRA_METRICS  # noqa: E402
from kernellsp.profile.outcome import FAST_SECTIONS  # noqa: E402
from kernellsp.run import harness  # noqa: E402
from kernellsp.run import harness_build as hb  # noqa: E402
from kernellsp.source.model import parse_source  # noqa: E402
from kernellsp.source.spec import specs_from_source  # noqa: E402

FAST = [x for s in FAST_SECTIONS for x in ("--section", s)] + ["--metrics", ",".join(EXTRA_METRICS)]
VARIANTS: dict[str, list[str]] = {
    "fast set (kernellsp default)": [*FAST, "--import-source", "yes"],
    "fast set, --cache-control none --clock-control none": [
        *FAST,
        "--import-source",
        "yes",
        "--cache-control",
        "none",
        "--clock-control",
        "none",
    ],
    "fast set, --apply-rules no": [*FAST, "--import-source", "yes", "--apply-rules", "no"],
    "fast set, no --import-source": FAST,
    "- SourceCounters": [x for s in FAST_SECTIONS if s != "SourceCounters" for x in ("--section", s)]
    + ["--metrics", ",".join(EXTRA_METRICS)],
    "SpeedOfLight only": ["--section", "SpeedOfLight"],
    "one metric (gpu__time_duration.sum): the floor": ["--metrics", "gpu__time_duration.sum"],
}


def _timed(cmd: list[str], cwd: Path) -> float:
    t0 = time.monotonic()
    subprocess.run(cmd, cwd=cwd, check=True, capture_output=True)
    return time.monotonic() - t0


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
    (work / "u.cu").write_text(harness.generate_harness(plan, f"src/{src.name}", split=True))
    (work / hb.RUNTIME_SOURCE).write_text(hb.runtime_unit_source())
    flags = list(b.spec.flags)
    rows = [
        (
            "build: single unit, runtime inlined (before)",
            _timed(harness.harness_compile_command("h.cu", "h1", "sm_90", flags), work),
        ),
        ("build: runtime object (once per toolchain)", _timed(hb.runtime_compile_command("sm_90"), work)),
        (
            "build: entry unit (per change)",
            _timed(hb.unit_compile_command("u.cu", "u.o", "sm_90", flags), work),
        ),
        (
            "build: link (per change)",
            _timed(hb.link_command(["u.o", hb.RUNTIME_OBJECT], "h", "sm_90", flags), work),
        ),
    ]
    run = ["./h", "--mode", "profile", "--shape", "0", "--seed", "1", "--out", "o"]
    rows.append(("harness alone, no profiler", _timed(run, work)))
    rows.append(("ncu --version (start-up)", _timed(["ncu", "--version"], work)))
    for label, opts in VARIANTS.items():
        cmd = ["ncu", "--force-overwrite", "--export", "p", "--profile-from-start", "off", *opts, *run]
        rows.append((f"ncu: {label}", _timed(cmd, work)))
    gpu = local_gpu_name()
    lines = [
        f"# Cost of the build steps and of ncu options on {args.sample} ({gpu})",
        "",
        "| step | wall (s) |",
        "|---|---:|",
    ]
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
