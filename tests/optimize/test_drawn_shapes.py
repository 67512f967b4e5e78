"""The shapes a verification draws beside the declared ones (kernellsp.optimize.verify.drawn_shapes)."""

from __future__ import annotations

from pathlib import Path

import pytest

from kernellsp.optimize.verify import drawn_shapes
from kernellsp.optimize.verify.gate import _drawn_shapes
from kernellsp.optimize.verify.sanitizer_gate import _sanitizer_plan
from kernellsp.optimize.verify.verdict import VerifyOptions
from kernellsp.run import harness
from kernellsp.source import spec
from kernellsp.source.model import parse_source

REPO = Path(__file__).resolve().parents[2]


def _spec(name: str) -> tuple[spec.KernelSpec, str, str]:
    text = (REPO / "samples" / name).read_text()
    b = spec.specs_from_source(parse_source(text, name))[0][0]
    return b.spec, b.entry, text


def _with(kspec: spec.KernelSpec, **changes: object) -> spec.KernelSpec:
    return kspec.model_copy(update=changes)


def test_only_declared_variables_vary_and_ties_hold() -> None:
    kspec, _, _ = _spec("sgemm_naive.cu")
    assert drawn_shapes.varied_sizes(kspec) == [["M"], ["N"], ["K"]]
    square = _with(kspec, shapes=[{"M": 100, "N": 100, "K": 100}, {"M": 7, "N": 7, "K": 7}])
    assert drawn_shapes.varied_sizes(square) == [["M", "N", "K"]]
    for shape in drawn_shapes.draw_shapes(square, 3, 3):
        assert shape["M"] == shape["N"] == shape["K"]
    only_m = _with(kspec, shapes=[{"M": 100}])
    assert all(set(s) == {"M"} for s in drawn_shapes.draw_shapes(only_m, 3, 3))
    assert drawn_shapes.draw_shapes(_with(kspec, shapes=[]), 3, 3) == []


def test_draws_are_small_new_deterministic_and_spread_over_residues() -> None:
    kspec, _, _ = _spec("vector_add.cu")
    declared = {16777216, 1000, 4097, 1}
    for seed in range(200):
        shapes = drawn_shapes.draw_shapes(kspec, seed, 3)
        assert shapes == drawn_shapes.draw_shapes(kspec, seed, 3)  # replay: the same seed, the same shapes
        values = [s["N"] for s in shapes]
        assert len(values) == 3 and len(set(values)) == 3
        assert all(2 <= v <= 4097 + 64 and v not in declared for v in values)
        # The declared sizes are 0 or 1 modulo 8; the drawn ones take three other residues.
        assert len({v % 8 for v in values} - {0, 1}) == 3
    assert len({tuple(s["N"] for s in drawn_shapes.draw_shapes(kspec, k, 3)) for k in range(50)}) > 20


def test_a_common_factor_of_the_declared_sizes_is_kept() -> None:
    kspec, _, _ = _spec("vector_add.cu")
    by16 = _with(kspec, shapes=[{"N": 1024}, {"N": 48}])
    for seed in range(50):
        assert all(s["N"] % 16 == 0 for s in drawn_shapes.draw_shapes(by16, seed, 3))


def test_admissible_filters_and_the_gate_plans_both_sides() -> None:
    kspec, entry, text = _spec("transpose_naive.cu")
    assert all(s["ROWS"] > 100 for s in drawn_shapes.draw_shapes(kspec, 1, 2, lambda s: s["ROWS"] > 100))
    model = parse_source(text, "transpose_naive.cu")
    opts = VerifyOptions(drawn_shapes=3, shape_seed=None)
    drawn = _drawn_shapes(model, kspec, model, kspec, entry, opts, run_seed=11)
    assert drawn == drawn_shapes.draw_shapes(kspec, 11, 3) and len(drawn) == 3
    assert _drawn_shapes(model, kspec, model, kspec, entry, VerifyOptions(shape_seed=11), 99) == drawn
    assert _drawn_shapes(model, kspec, model, kspec, entry, VerifyOptions(drawn_shapes=0), 11) == []
    plan = harness.plan_harness(model, _with(kspec, shapes=[*kspec.shapes, *drawn]), entry)
    assert [sp.overrides for sp in plan.shapes[-3:]] == drawn
    # The drawn shapes are compared with the baseline, not sanitized.
    first = len(plan.shapes) - 3
    sanitized = [i for i, _ in _sanitizer_plan(plan, VerifyOptions(), text, 0, skip=range(first, first + 3))]
    assert sanitized and all(i < first for i in sanitized)


@pytest.mark.parametrize("name", sorted(p.name for p in (REPO / "samples").glob("*.cu")))
def test_every_sample_plans_its_drawn_shapes(name: str) -> None:
    kspec, entry, text = _spec(name)
    model = parse_source(text, name)
    drawn = _drawn_shapes(model, kspec, model, kspec, entry, VerifyOptions(), run_seed=5)
    assert drawn, name  # every sample declares shapes that vary a size
    harness.plan_harness(model, _with(kspec, shapes=[*kspec.shapes, *drawn]), entry)
