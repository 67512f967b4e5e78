"""Benchmark the recipe proposer alone (issue 11): `optimize --proposer recipes` per suite row, one table.

Run on a GPU host from the repository root::

    python tests/bench/bench_recipes.py [--suite tests/bench/recipes_suite.toml] [--only NAME ...]
        [--rounds 1] [--candidates 4] [--timeout 120] [--out FILE.md]

Each row of the suite runs through ``tests/bench/bench_optimize.py`` (same harness, same reference
timing: a device-to-device copy of the bytes for memory-bound kernels, a read-only streaming reduction
for reductions) in its own process with a wall-clock limit, so one slow or broken row cannot take the
table down. The combined table has, per file: entry, baseline ms, best verified ms, speedup with its
confidence interval, reference ms and % of reference, the issue's target and whether it was met, the
winning recipe and the wall time of the whole optimize run.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import time
import tomllib
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]


def _toml_case(case: dict) -> str:
    lines = ["[[case]]"]
    for k, v in case.items():
        if isinstance(v, dict):
            inner = ", ".join(f"{kk} = {vv}" for kk, vv in v.items())
            lines.append(f"{k} = {{ {inner} }}")
        else:
            lines.append(f'{k} = "{v}"')
    return "\n".join(lines) + "\n"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--suite", default=str(ROOT / "tests" / "bench" / "recipes_suite.toml"))
    ap.add_argument("--only", nargs="*", help="rows whose file name contains one of these")
    ap.add_argument("--rounds", type=int, default=1)
    ap.add_argument("--candidates", type=int, default=4)
    ap.add_argument("--seeds", type=int, default=2)
    ap.add_argument("--timeout", type=float, default=120.0)
    ap.add_argument("--out", help="also write the table here")
    ap.add_argument("--json-dir", help="keep each row's JSON (every candidate's verdict) here as <file>.json")
    ap.add_argument("--points", type=int, default=1, help="--verify-only: candidates verified per row")
    ap.add_argument(
        "--verify-only",
        action="store_true",
        help="no loop: verify each matching recipe's default candidate against the original (one gate "
        "run per row, progress printed as it goes)",
    )
    args = ap.parse_args()
    if args.verify_only:
        return verify_only(args)
    cases = tomllib.loads(Path(args.suite).read_text())["case"]
    if args.only:
        cases = [c for c in cases if any(o in c["file"] for o in args.only)]
    header: list[str] = []
    rows: list[str] = []
    for case in cases:
        with tempfile.NamedTemporaryFile("w", suffix=".toml", delete=False) as f:
            f.write(_toml_case(case))
        cmd = [
            sys.executable,
            str(ROOT / "tests" / "bench" / "bench_optimize.py"),
            "--proposer",
            "recipes",
            "--rounds",
            str(args.rounds),
            "--candidates",
            str(args.candidates),
            "--seeds",
            str(args.seeds),
            "--suite",
            f.name,
        ] + (["--write"] if args.json_dir else [])
        t0 = time.monotonic()
        try:
            out = subprocess.run(cmd, capture_output=True, text=True, timeout=args.timeout, cwd=ROOT)
            text = out.stdout
            if out.returncode:
                text += out.stderr[-2000:]
        except subprocess.TimeoutExpired as exc:
            text = (exc.stdout or b"").decode() if isinstance(exc.stdout, bytes) else (exc.stdout or "")
            rows.append(
                f"| {Path(case['file']).name} | | | | | timeout after {args.timeout:.0f} s | | | "
                f"{case.get('target', '')} | no | | | {time.monotonic() - t0:.0f} |"
            )
        print(text, flush=True)
        if args.json_dir:
            # --write left the row's JSON in tests/bench/results (a scratch copy on the GPU host): keep it.
            done = sorted(
                (ROOT / "tests" / "bench" / "results").glob("optimize-*.json"),
                key=lambda p: p.stat().st_mtime,
            )
            if done:
                Path(args.json_dir).mkdir(parents=True, exist_ok=True)
                (Path(args.json_dir) / f"{Path(case['file']).stem}.json").write_text(done[-1].read_text())
        table = [ln for ln in text.splitlines() if ln.startswith("|")]
        if table and not header:
            header = table[:2]
        rows += table[2:]
    result = "\n".join(["# optimize --proposer recipes", "", *header, *rows]) + "\n"
    print(result)
    if args.out:
        Path(args.out).write_text(result)
    return 0


def verify_only(args: argparse.Namespace) -> int:
    """One full gate run per suite row on the first candidate the recipe proposer makes; prints as it goes."""
    sys.path[:0] = [str(ROOT), str(ROOT / "tests" / "bench")]
    from bench_optimize import _time_reference, _with_sizes

    from kernellsp.optimize.propose.base import ProposalContext
    from kernellsp.optimize.propose.recipes.proposer import RecipeProposer
    from kernellsp.optimize.verify.gate import VerifyOptions, verify
    from kernellsp.profile.environment import runner_environment
    from kernellsp.run.runner import LocalRunner
    from kernellsp.source import spec as specmod
    from kernellsp.source.model import parse_source

    t0 = time.monotonic()
    runner = LocalRunner()
    env = runner_environment(runner)
    print(f"environment in {time.monotonic() - t0:.1f} s: {env.get('gpu')}", flush=True)
    cases = tomllib.loads(Path(args.suite).read_text())["case"]
    if args.only:
        cases = [c for c in cases if any(o in c["file"] for o in args.only)]
    work = Path(tempfile.mkdtemp(prefix="kernellsp-bench-recipes-"))
    (work / "kernellsp.toml").write_text("")
    lines = [
        "| file | candidate | verdict | baseline ms | candidate ms | speedup | reference ms | % of reference | "
        "gate s | message |",
        "|---|---|---|---:|---:|---:|---:|---:|---:|---|",
    ]
    for case in cases:
        src = ROOT / case["file"]
        path = work / src.name
        text = src.read_text()
        if case.get("sizes"):
            text = _with_sizes(text, path, case["sizes"])
        path.write_text(text)
        model = parse_source(text, str(path))
        bound = specmod.specs_from_source(model)[0][0]
        ctx = ProposalContext(str(path), text, text, bound.entry, model, bound)
        cands = RecipeProposer().propose(ctx, args.points)
        if not cands:
            print(f"{src.name}: no recipe candidate", flush=True)
            continue
        ref = _time_reference(case["reference"], text, path, bound.entry) if case.get("reference") else {}
        for cand in cands:
            lines.append(
                _verify_row(args, src, path, text, bound.entry, cand, ref, runner, env, verify, VerifyOptions)
            )
            if args.out:
                Path(args.out).write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    return 0


def _verify_row(
    args: argparse.Namespace,
    src: Path,
    path: Path,
    text: str,
    entry: str,
    cand: Any,
    ref: dict,
    runner: Any,
    env: dict,
    verify: Any,
    options: Any,
) -> str:
    """One gate run of ``cand`` against the original; the table row (printed as soon as it is known)."""
    t1 = time.monotonic()
    v = verify(
        path,
        text,
        cand.text,
        entry,
        runner,
        options(seeds=args.seeds, rounds=3, reps=10),
        env,
        progress=lambda m, _p, n=src.name, t=t1: print(
            f"  {n} {time.monotonic() - t:6.1f} s: {m}", flush=True
        ),
    )
    st = v.stats or {}
    b, c = st.get("baseline_median_ms"), st.get("candidate_median_ms")
    pct = 100.0 * ref["ms"] / c if ref.get("ms") and c and v.accepted else None
    row = (
        f"| {src.name} | {cand.description} | {v.kind} | {b or 0:.4f} | {c or 0:.4f} | {st.get('speedup') or 0:.3f} "
        f"| {ref.get('ms') or 0:.4f} | {pct or 0:.0f} | {time.monotonic() - t1:.0f} | {v.message[:160]} |"
    )
    print(row, flush=True)
    return row


if __name__ == "__main__":
    raise SystemExit(main())
