"""GPU check of the baseline's higher-precision oracle (kernellsp.optimize.verify.oracle) on a poor baseline.

Writes FILE at the given main sizes (as tests/bench/optimize_suite.toml does), asks the recipe library for
candidates, verifies the first K of them with the full gate on this machine's GPU, and prints each verdict
with what the oracle rescued (details["oracle"]). Run from the repository root::

    python tests/bench/oracle_check.py samples/reduce_atomic.cu N=67108864
    python tests/bench/oracle_check.py tests/recipes/corpus/matvec_rowwise.cu ROWS=16384 COLS=16384 --count 2

Evidence (baseline, candidate, verdict.json) goes under --out (default /tmp/kernellsp-oracle-check).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from kernellsp.optimize.propose.base import ProposalContext  # noqa: E402
from kernellsp.optimize.propose.recipes.proposer import RecipeProposer  # noqa: E402
from kernellsp.optimize.verify.gate import VerifyOptions, verify, write_evidence  # noqa: E402
from kernellsp.run.runner import LocalRunner  # noqa: E402
from kernellsp.source.model import parse_source  # noqa: E402
from kernellsp.source.spec import patch_spec_block, specs_from_source  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("file")
    ap.add_argument("sizes", nargs="*", help="NAME=VALUE overrides of the spec's main sizes")
    ap.add_argument("--count", type=int, default=1, help="how many recipe candidates to verify")
    ap.add_argument("--out", default="/tmp/kernellsp-oracle-check")
    args = ap.parse_args()
    src = Path(args.file)
    text = src.read_text()
    bound = specs_from_source(parse_source(text, str(src)))[0][0]
    assert bound.block is not None
    sizes = {k: int(v) for k, v in (kv.split("=", 1) for kv in args.sizes)}
    text = patch_spec_block(text, bound.block, {"sizes": {**bound.spec.sizes, **sizes}})
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    path = out / src.name
    path.write_text(text)
    model = parse_source(text, str(path))
    bound = specs_from_source(model)[0][0]
    cands = RecipeProposer().propose(
        ProposalContext(str(path), text, text, bound.entry, model, bound), args.count
    )
    accepted = 0
    for i, cand in enumerate(cands):
        v = verify(path, text, cand.text, bound.entry, LocalRunner(), VerifyOptions())
        write_evidence(out / f"cand{i}", path, text, cand.text, v)
        accepted += v.accepted
        print(f"{cand.description}: {v.kind}: {v.message}")
        print(json.dumps({k: v.details.get(k) for k in ("oracle_source", "oracle")}, indent=1, default=str))
    return 0 if cands and accepted == len(cands) else 1


if __name__ == "__main__":
    raise SystemExit(main())
