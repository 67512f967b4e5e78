"""The reduce-tree recipe on public kernels of the wild corpus (binding proven by executing one block)."""

from __future__ import annotations

import time
from pathlib import Path

from kernellsp.optimize.propose.recipes import explain
from kernellsp.source.model import parse_source

WILD = Path(__file__).resolve().parents[1] / "wild"


def _tree(name: str) -> dict[str, tuple[bool, str]]:
    path = WILD / name
    rows = explain(parse_source(path.read_text(), str(path)), "solve")
    return {r.kernel: (r.matched, r.reason) for r in rows if r.recipe == "reduce-tree"}


def test_binds_on_block_reductions() -> None:
    assert _tree("bs_reduction_babelstream_dot.cu")["dot_kernel"][0]
    assert _tree("bs_scan_shoc_scan.cu")["reduce"][0]


def test_a_scan_is_declined_before_any_rewrite_is_executed() -> None:
    """A block that writes one element per thread is no reduction whatever the cut: declined at once (it used to
    execute about a hundred candidate rewrites symbolically first, 17 s of a 20 s --explain)."""
    t0 = time.monotonic()
    matched, reason = _tree("bs_scan_shoc_scan.cu")["scan_single_block"]
    assert not matched
    assert reason.startswith("the block writes 64 global elements with 1 write statement(s)")
    assert time.monotonic() - t0 < 15
