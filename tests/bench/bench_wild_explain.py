"""How often a recipe binds on the wild corpus (public naive kernels, ``tests/wild/``): no GPU needed.

Run from the repository root::

    python tests/bench/bench_wild_explain.py [--write] [--only TEXT ...]

For every ``tests/wild/*.cu`` it runs what ``kernellsp optimize FILE --explain --format json``
runs (in this process: the same functions, no subprocess per file) and prints one row per kernel:
its kind (from the manifests), the recipes that bind (``fit`` when the recipe's archetype serves
the kind), the canonicalisation passes that fired, or the first decline reason of the recipes that
serve the kind. The summary counts kernels with any binding, with a fitting binding, and internal
errors. ``--write`` writes ``tests/bench/results/wild-explain.md``.

The corpus measures; nothing here (or in any test) pins a wild kernel's binding.
"""

from __future__ import annotations

import argparse
import collections
import sys
import time
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
WILD = ROOT / "tests" / "wild"
OUT = ROOT / "tests" / "bench" / "results" / "wild-explain.md"

#: The recipe archetypes that serve each kind of the corpus manifests.
SERVES: dict[str, set[str]] = {
    "elementwise": {"map", "strided"},
    "transpose": {"transpose"},
    "reduction": {"reduce"},
    "histogram": {"histogram"},
    "stencil": {"stencil"},
    "convolution": {"stencil"},
    "pooling": {"stencil", "pooling", "window"},
    "rownorm": {"rowreduce"},
    "colreduce": {"rowreduce", "colreduce", "reduce"},
    "matmul": {"matmul"},
    "batched-matmul": {"matmul"},
    "matvec": {"matvec", "rowreduce"},
    "scan": {"scan"},
    "gather-scatter": {"map", "strided", "gather"},
    "physics-finance": {"map", "strided", "stencil", "matmul"},
    "other": set(),
}


def manifests() -> dict[str, dict[str, object]]:
    out: dict[str, dict[str, object]] = {}
    for m in sorted(WILD.glob("manifest*.toml")):
        out.update(tomllib.loads(m.read_text()).get("files", {}))
    return out


def explain_file(path: Path, entry: str) -> tuple[list[object], list[object], str | None]:
    from kernellsp.optimize.propose.recipes import canonical_passes, explain
    from kernellsp.source.model import parse_source

    try:
        model = parse_source(path.read_text(encoding="utf-8", errors="replace"), str(path))
        return explain(model, entry), canonical_passes(model, entry), None
    except Exception as exc:  # the table reports every internal error by file
        return [], [], f"{type(exc).__name__}: {exc}"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--write", action="store_true", help=f"write {OUT.relative_to(ROOT)}")
    ap.add_argument("--only", nargs="*", help="files whose name contains one of these")
    args = ap.parse_args()
    meta = manifests()
    files = sorted(WILD.glob("*.cu"))
    if args.only:
        files = [f for f in files if any(o in f.name for o in args.only)]
    rows = []
    t0 = time.perf_counter()
    counts: collections.Counter[str] = collections.Counter()
    per_kind: dict[str, list[int]] = collections.defaultdict(lambda: [0, 0, 0])
    for f in files:
        info = meta.get(f.name, {})
        kind = str(info.get("kind", "?"))
        entry = str(info.get("entry", ""))
        expl, fired, err = explain_file(f, entry)
        matched = [r for r in expl if getattr(r, "matched", False)]
        fits = [r for r in matched if r.archetype in SERVES.get(kind, set())]
        internal = [r for r in expl if "internal error" in getattr(r, "reason", "")]
        counts["files"] += 1
        per_kind[kind][0] += 1
        if matched:
            counts["bound"] += 1
            per_kind[kind][1] += 1
        if fits:
            counts["fit"] += 1
            per_kind[kind][2] += 1
        if err or internal:
            counts["errors"] += 1
        passes = ", ".join(dict.fromkeys(p.name for p in fired)) or "-"
        if matched:
            what = ", ".join(f"{r.recipe}{' (fit)' if r in fits else ''}" for r in matched)
        elif err:
            what = f"ERROR {err}"
        else:
            serving = [r for r in expl if r.archetype in SERVES.get(kind, set())] or expl
            what = "declined: " + (serving[0].reason if serving else "no recipe ran")
            if internal:
                what = "INTERNAL " + internal[0].reason
        rows.append((f.name, kind, what.replace("|", "\\|").replace("\n", " "), passes))
        print(f"{f.name:60s} {kind:16s} {what[:110]}", flush=True)
    wall = time.perf_counter() - t0
    n = max(counts["files"], 1)
    summary = (
        f"{counts['files']} kernels: a recipe binds on {counts['bound']} ({100 * counts['bound'] / n:.0f}%), "
        f"a recipe of the kernel's class on {counts['fit']} ({100 * counts['fit'] / n:.0f}%), "
        f"internal errors {counts['errors']}; {wall:.1f} s on this machine"
    )
    print(summary)
    if args.write:
        lines = [
            "# Wild corpus: which recipe binds (`optimize --explain`)",
            "",
            "Written by `python tests/bench/bench_wild_explain.py --write` (no GPU). Kernels: `tests/wild/`",
            "(public naive kernels, provenance in `tests/wild/manifest-*.toml`). *fit*: the recipe's archetype",
            "serves the kernel's kind. *passes*: canonicalisation passes that changed the kernel first.",
            "",
            f"**{summary}.**",
            "",
            "| kind | kernels | any recipe | recipe of its class |",
            "|---|---:|---:|---:|",
        ]
        for kind, (k, b, fi) in sorted(per_kind.items()):
            lines.append(f"| {kind} | {k} | {b} | {fi} |")
        lines += [
            "",
            "| file | kind | recipe bound, or the decline | passes that fired |",
            "|---|---|---|---|",
        ]
        lines += [f"| `{a}` | {b} | {c} | {d} |" for a, b, c, d in rows]
        OUT.write_text("\n".join(lines) + "\n")
        print(f"wrote {OUT.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.path.insert(0, str(ROOT))
    raise SystemExit(main())
