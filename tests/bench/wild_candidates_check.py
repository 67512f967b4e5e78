"""Every recipe candidate on the wild corpus passes the scope gate and compiles (no GPU needed).

Run from the repository root::

    python tests/bench/wild_candidates_check.py [--only TEXT ...] [--points N] [--precision] [--dir DIR]

For each ``tests/wild/*.cu`` entry, every recipe that binds generates its first ``--points``
candidates through the proposer's own path (``splice_kernel`` into the original file); each is
judged by the scope gate and compiled with the real nvcc for sm_90. Prints one line per candidate
and a summary; exits 1 when any candidate fails. A CPU-side companion of ``bench_wild_explain.py``:
a recipe that binds but writes code that does not build would bind for nothing. ``--precision`` also
compiles both sides to PTX and fails a candidate that adds approximate or reduced-precision math the
original does not use (what the gate refuses by default: kernellsp.optimize.verify.precision_ops).
``--dir`` takes another folder of spec'd files (the samples, the optimize suite): every spec'd entry.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]


def main() -> int:
    sys.path.insert(0, str(ROOT / "tests" / "bench"))
    from bench_wild_explain import WILD, manifests

    from kernellsp.source import spec
    from kernellsp.source.model import parse_source

    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--only", nargs="*")
    ap.add_argument("--points", type=int, default=1)
    ap.add_argument("--precision", action="store_true")
    ap.add_argument("--dir", type=Path, default=WILD)
    args = ap.parse_args()
    meta = manifests() if args.dir == WILD else {}
    bad = total = 0
    for f in sorted(args.dir.glob("*.cu")):
        if args.only and not any(o in f.name for o in args.only):
            continue
        text = f.read_text()
        model = parse_source(text, str(f))
        if f.name in meta:
            entries = [str(meta[f.name].get("entry", ""))]
        else:
            entries = [b.entry for b in spec.specs_from_source(model)[0]]
        for entry in entries:
            b, t = _check_entry(f, text, model, entry, args)
            bad += b
            total += t
    print(f"{total} candidates, {bad} failed")
    return 1 if bad else 0


def _ptx(path: Path, text: str) -> str:
    with tempfile.TemporaryDirectory() as tmp:
        src = Path(tmp) / path.name
        src.write_text(text)
        out = Path(tmp) / "k.ptx"
        subprocess.run(
            ["nvcc", "-arch=sm_90", "-std=c++17", "-ptx", "-I", str(path.parent), "-o", str(out), str(src)],
            check=True,
            capture_output=True,
        )
        return out.read_text()


def _check_entry(f: Path, text: str, model: Any, entry: str, args: argparse.Namespace) -> tuple[int, int]:
    from kernellsp.build import nvcc
    from kernellsp.optimize.propose.base import add_includes, splice_kernel
    from kernellsp.optimize.propose.recipes import Match, RecipeError, recipes
    from kernellsp.optimize.propose.recipes.base import contexts_for
    from kernellsp.optimize.verify import precision_ops
    from kernellsp.optimize.verify.scope import check_scope, edit_targets
    from kernellsp.source.model import parse_source

    bad = total = 0
    base_ptx = _ptx(f, text) if args.precision else ""
    targets = edit_targets(model, entry)
    for ctx in contexts_for(model, entry):
        for r in recipes():
            m = r.match(ctx)
            if not isinstance(m, Match):
                continue
            for params in r.points(ctx, m)[: args.points]:
                total += 1
                label = f"{f.name} {r.name}{params}"
                try:
                    rw = r.generate(ctx, m, params)
                    launcher = (
                        (ctx.launch_site.caller if ctx.launch_site else entry) if ctx.host_launched else None
                    )
                    cand = splice_kernel(text, rw.kernel, rw.code, rw.launch, rw.host_config, launcher)
                    cand = add_includes(cand, rw.includes)
                except (RecipeError, ValueError) as exc:
                    print(f"GENFAIL {label}: {exc}")
                    bad += 1
                    continue
                sc = check_scope(text, cand, targets, entry=entry)
                if not sc.ok:
                    print(f"SCOPE   {label}: {sc.reason}")
                    bad += 1
                    continue
                res = nvcc.build(f, cand, parse_source(cand, str(f)), use_cache=False)
                if not res.ok:
                    msgs = [str(x) for x in res.messages if x.severity == "error"][:2]
                    print(f"COMPILE {label}: {msgs}")
                    bad += 1
                    continue
                if args.precision:
                    added = [k.name for k in precision_ops.added_kinds(base_ptx, _ptx(f, cand)) if k.coarse]
                    if added:
                        print(f"PRECISION {label}: {added}")
                        bad += 1
                        continue
                print(f"ok      {label}")
    return bad, total


if __name__ == "__main__":
    sys.path.insert(0, str(ROOT))
    raise SystemExit(main())
