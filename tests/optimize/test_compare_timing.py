"""Tests of the correctness comparison (kernellsp.optimize.verify.correctness) and the timing statistics (kernellsp.optimize.verify.timing).

Buffers are built the way the harness writes them (raw little-endian bytes; bf16 as the upper half
of an fp32). Timings are synthetic rounds with controlled noise, so the statistics can be checked
against a known truth: an A/A comparison must never win, a real 10% gain must.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from kernellsp.optimize.verify import correctness as compare
from kernellsp.optimize.verify import timing
from kernellsp.source.spec import Tolerance as SpecTolerance

N = 4096


def to_bytes(values: np.ndarray, dtype: str) -> bytes:
    """Values as the harness would dump them for ``dtype``."""
    if dtype == "bf16":
        f = np.asarray(values, dtype=np.float32)
        # Round to nearest even in the upper 16 bits (what __float2bfloat16 does).
        u = f.view(np.uint32).astype(np.uint64)
        u = (u + 0x7FFF + ((u >> 16) & 1)) >> 16
        return u.astype("<u2").tobytes()
    np_dtype = {"f16": "<f2", "f32": "<f4", "f64": "<f8", "i32": "<i4", "u8": "u1"}[dtype]
    return np.asarray(values).astype(np_dtype).tobytes()


def reference(dtype: str, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    if dtype == "i32":
        return rng.integers(-1000, 1000, N).astype(np.int64)
    return rng.normal(0.0, 3.0, N)


def tol(dtype: str) -> compare.Tolerance:
    return compare.resolve_tolerance(dtype)


def roundtrip(values: np.ndarray, dtype: str) -> np.ndarray:
    return compare.as_array(to_bytes(values, dtype), dtype).astype(np.float64)


DTYPES = ["f32", "f16", "bf16", "i32"]


# --------------------------------------------------------------------------------------------------
# compare.compare


@pytest.mark.parametrize("dtype", DTYPES)
def test_exact_match(dtype: str) -> None:
    w = to_bytes(reference(dtype), dtype)
    assert compare.compare("y", dtype, w, w, tol(dtype)) is None


@pytest.mark.parametrize("dtype", ["f32", "f16", "bf16"])
def test_reassociation_level_noise_passes(dtype: str) -> None:
    """Re-ordering a sum or contracting to FMA moves results by about an ulp of the stored type."""
    ref = roundtrip(reference(dtype), dtype)
    rng = np.random.default_rng(7)
    eps = {"f32": 2.0**-23, "f16": 2.0**-10, "bf16": 2.0**-7}[dtype]
    # One or two ulps up or down on a third of the elements.
    bump = rng.integers(-2, 3, N) * (rng.random(N) < 0.33)
    got = ref * (1 + bump * eps)
    assert compare.compare("y", dtype, to_bytes(got, dtype), to_bytes(ref, dtype), tol(dtype)) is None


def test_f32_small_absolute_noise_near_zero_passes() -> None:
    """atol scales with the reference's magnitude: 1e-7 where 0 was expected, in a buffer of O(1) values."""
    ref = reference("f32")
    ref[::17] = 0.0
    got = ref.copy()
    got[::17] = 1e-7
    assert compare.compare("y", "f32", to_bytes(got, "f32"), to_bytes(ref, "f32"), tol("f32")) is None


# Off by clearly more than the dtype's default rtol (f32 1e-4, f16 1e-2, bf16 2e-2); integers: by one.
OFF = {"f32": 1.01, "f16": 1.05, "bf16": 1.10}


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("index", [0, 1234, N - 1])
def test_single_element_off_fails_with_index(dtype: str, index: int) -> None:
    ref = reference(dtype)
    if dtype != "i32":
        ref = roundtrip(ref, dtype)
        ref[index] = 2.5  # well away from zero so the relative error is what counts
    got = ref.copy()
    if dtype == "i32":
        got[index] += 1
    else:
        got[index] *= OFF[dtype]
    mm = compare.compare("y", dtype, to_bytes(got, dtype), to_bytes(ref, dtype), tol(dtype))
    assert mm is not None
    assert mm.index == index
    assert mm.bad_elements == 1 and mm.count == N
    assert mm.buffer == "y"
    assert mm.want == pytest.approx(float(compare.as_array(to_bytes(ref, dtype), dtype)[index]))
    assert mm.got == pytest.approx(float(compare.as_array(to_bytes(got, dtype), dtype)[index]))
    text = mm.describe()
    assert f"y[{index}]" in text and "1 of 4096 elements differ" in text
    assert ("integers differ" if dtype == "i32" else "outside atol") in mm.reason


def test_f32_one_percent_off_fails_but_within_rtol_passes() -> None:
    ref = reference("f32")
    ref[10] = 4.0
    got = ref.copy()
    got[10] = 4.0 * 1.00005  # within rtol 1e-4 alone; one element barely moves the norm
    assert compare.compare("y", "f32", to_bytes(got, "f32"), to_bytes(ref, "f32"), tol("f32")) is None
    got[10] = 4.0 * 1.01
    mm = compare.compare("y", "f32", to_bytes(got, "f32"), to_bytes(ref, "f32"), tol("f32"))
    assert mm is not None and mm.index == 10


def test_every_element_slightly_off_fails_the_norm_bound() -> None:
    """Each element within rtol 1e-4, but a systematic 5e-5 relative bias exceeds norm_rtol 1e-5."""
    ref = reference("f32")
    got = ref * (1 + 5e-5)
    mm = compare.compare("y", "f32", to_bytes(got, "f32"), to_bytes(ref, "f32"), tol("f32"))
    assert mm is not None
    assert "norm-relative error" in mm.reason
    assert mm.norm_rel_err == pytest.approx(5e-5, rel=0.05)
    assert mm.bad_elements == 0


@pytest.mark.parametrize("dtype", ["f32", "f16", "bf16"])
def test_nan_in_got_fails(dtype: str) -> None:
    ref = roundtrip(reference(dtype), dtype)
    got = ref.copy()
    got[77] = np.nan
    mm = compare.compare("out", dtype, to_bytes(got, dtype), to_bytes(ref, dtype), tol(dtype))
    assert mm is not None and mm.index == 77
    assert "NaN" in mm.reason
    assert math.isnan(mm.got)
    assert "out[77]" in mm.describe()


@pytest.mark.parametrize("dtype", ["f32", "f16", "bf16"])
def test_inf_handling(dtype: str) -> None:
    ref = roundtrip(reference(dtype), dtype)
    ref[5] = np.inf
    ref[6] = -np.inf
    same = ref.copy()
    assert compare.compare("y", dtype, to_bytes(same, dtype), to_bytes(ref, dtype), tol(dtype)) is None
    flipped = ref.copy()
    flipped[5] = -np.inf
    mm = compare.compare("y", dtype, to_bytes(flipped, dtype), to_bytes(ref, dtype), tol(dtype))
    assert mm is not None and mm.index == 5 and "non-finite" in mm.reason
    finite = ref.copy()
    finite[6] = -1e4
    mm = compare.compare("y", dtype, to_bytes(finite, dtype), to_bytes(ref, dtype), tol(dtype))
    assert mm is not None and mm.index == 6
    # An inf where a number was expected fails too.
    bad = roundtrip(reference(dtype), dtype)
    want = bad.copy()
    bad[9] = np.inf
    mm = compare.compare("y", dtype, to_bytes(bad, dtype), to_bytes(want, dtype), tol(dtype))
    assert mm is not None and mm.index == 9 and "non-finite" in mm.reason


def test_nan_in_want_never_matches() -> None:
    ref = reference("f32")
    ref[3] = np.nan
    mm = compare.compare("y", "f32", to_bytes(ref, "f32"), to_bytes(ref, "f32"), tol("f32"))
    assert mm is not None and mm.index == 3


@pytest.mark.parametrize("dtype", DTYPES)
def test_length_mismatch(dtype: str) -> None:
    ref = reference(dtype)
    mm = compare.compare("y", dtype, to_bytes(ref[:-1], dtype), to_bytes(ref, dtype), tol(dtype))
    assert mm is not None
    assert "different element counts" in mm.reason
    assert mm.got == N - 1 and mm.want == N
    assert math.isinf(mm.max_abs_err)


def test_integer_outputs_must_match_exactly_even_with_a_spec_tolerance() -> None:
    t = compare.resolve_tolerance("i32", SpecTolerance(rtol=0.5, atol=10.0))
    assert t == compare.EXACT
    ref = reference("i32")
    got = ref.copy()
    got[100] += 1
    mm = compare.compare("bins", "i32", to_bytes(got, "i32"), to_bytes(ref, "i32"), t)
    assert mm is not None and mm.index == 100 and mm.got == ref[100] + 1 and mm.want == ref[100]
    assert mm.max_abs_err == 1.0


def test_bf16_is_widened_from_the_upper_half() -> None:
    raw = np.array([0x3F80, 0xC000, 0x7F80], dtype="<u2").tobytes()  # 1.0, -2.0, inf
    assert list(compare.as_array(raw, "bf16")) == [1.0, -2.0, np.inf]


# --------------------------------------------------------------------------------------------------
# compare.resolve_tolerance


def _plain_compare(g: np.ndarray, w: np.ndarray, tol: compare.Tolerance) -> tuple[int | None, int, float]:
    """The rule of compare(), written out on whole arrays: (first bad index, bad count, norm-relative error)."""
    g64, w64 = g.astype(np.float64), w.astype(np.float64)
    fw = np.isfinite(w64)
    atol = tol.atol_abs + tol.atol_rel * (float(np.max(np.abs(w64[fw]))) if fw.any() else 0.0)
    with np.errstate(invalid="ignore", over="ignore"):
        err = np.abs(g64 - w64)
        ok = err <= atol + tol.rtol * np.abs(w64)
    nonfinite = ~np.isfinite(g64) | ~fw
    ok = np.where(nonfinite, np.isinf(g64) & np.isinf(w64) & (np.sign(g64) == np.sign(w64)), ok)
    fin = np.isfinite(g64) & fw
    norm_w = float(np.linalg.norm(w64[fw]))
    with np.errstate(invalid="ignore", over="ignore"):
        norm_err = float(np.linalg.norm((g64 - w64)[fin])) / norm_w if norm_w > 0 else 0.0
    bad = np.flatnonzero(~ok)
    return (int(bad[0]) if bad.size else None), int(bad.size), norm_err


@pytest.mark.parametrize("dtype", ["f32", "f16"])
@pytest.mark.parametrize("case", range(12))
def test_chunked_compare_agrees_with_the_whole_array_rule(dtype: str, case: int) -> None:
    """compare_error works in chunks and only on differing bits: across chunk edges, with NaN/inf on either
    side, bit-identical stretches and scattered errors, it gives the plain rule's verdict, index and error."""
    rng = np.random.default_rng(case)
    n = int(rng.choice([1, 7, compare._CHUNK - 1, compare._CHUNK + 3, 3 * compare._CHUNK + 17]))
    npd = np.float32 if dtype == "f32" else np.float16
    w = rng.normal(0, 3, n).astype(npd)
    g = w.copy()
    k = rng.integers(0, n, size=int(rng.integers(0, 6)))
    g[k] = (g[k] * npd(1 + rng.choice([1e-6, 1e-3, 0.1]))).astype(npd)  # a few elements off
    if case % 3 == 1 and n > 3:
        g[-1] = np.inf if case % 2 else np.nan
    if case % 4 == 2:
        w[n // 2] = np.nan if case % 8 == 2 else np.inf
        g[n // 2] = w[n // 2]  # identical non-finite bits: inf matches inf, NaN never matches
    if case % 5 == 4:
        g = (w.astype(np.float64) * (1 + 1e-4)).astype(npd)  # every element slightly off
    tol = compare.resolve_tolerance(dtype)
    mm, err = compare.compare_error("y", dtype, g.tobytes(), w.tobytes(), tol)
    first, nbad, norm_err = _plain_compare(g, w, tol)
    assert err == pytest.approx(norm_err, rel=1e-9, abs=1e-15)
    if first is not None:
        assert mm is not None and mm.index == first and mm.bad_elements == nbad
    elif norm_err > tol.norm_rtol:
        assert mm is not None and mm.bad_elements == 0
    else:
        assert mm is None


def test_resolve_tolerance_defaults() -> None:
    for dtype in ("f64", "f32", "f16", "bf16"):
        assert compare.resolve_tolerance(dtype) == compare.DEFAULTS[dtype]
        assert compare.resolve_tolerance(dtype, None) == compare.DEFAULTS[dtype]
    for dtype in ("i8", "u8", "i16", "u16", "i32", "u32", "i64", "u64"):
        assert compare.resolve_tolerance(dtype) == compare.EXACT
    assert compare.DEFAULTS["f32"].rtol == 1e-4


def test_resolve_tolerance_with_spec_values() -> None:
    base = compare.DEFAULTS["f32"]
    # rtol only: the magnitude-relative atol stays, the norm bound widens to at least rtol.
    t = compare.resolve_tolerance("f32", SpecTolerance(rtol=1e-3))
    assert t == compare.Tolerance(rtol=1e-3, atol_rel=base.atol_rel, atol_abs=0.0, norm_rtol=1e-3)
    # A tighter rtol keeps the default norm bound.
    t = compare.resolve_tolerance("f32", SpecTolerance(rtol=1e-6))
    assert t.rtol == 1e-6 and t.norm_rtol == base.norm_rtol
    # atol replaces the magnitude-relative one with an absolute bound.
    t = compare.resolve_tolerance("f32", SpecTolerance(atol=1e-6))
    assert t == compare.Tolerance(rtol=base.rtol, atol_rel=0.0, atol_abs=1e-6, norm_rtol=base.norm_rtol)
    # softmax_row's spec.
    t = compare.resolve_tolerance("f32", SpecTolerance(rtol=1e-3, atol=1e-6))
    assert t == compare.Tolerance(rtol=1e-3, atol_rel=0.0, atol_abs=1e-6, norm_rtol=1e-3)
    t = compare.resolve_tolerance("f16", SpecTolerance(norm_rtol=0.1))
    assert t.norm_rtol == 0.1 and t.rtol == compare.DEFAULTS["f16"].rtol
    # An empty spec tolerance is the default.
    assert compare.resolve_tolerance("bf16", SpecTolerance()) == compare.DEFAULTS["bf16"]


def test_spec_tolerance_changes_the_verdict() -> None:
    ref = reference("f32")
    got = ref.copy()
    got[50] *= 1.0005
    assert compare.compare("y", "f32", to_bytes(got, "f32"), to_bytes(ref, "f32"), tol("f32")) is not None
    loose = compare.resolve_tolerance("f32", SpecTolerance(rtol=1e-3))
    assert compare.compare("y", "f32", to_bytes(got, "f32"), to_bytes(ref, "f32"), loose) is None


# --------------------------------------------------------------------------------------------------
# compare.reference_problem


def test_reference_problem() -> None:
    f32 = lambda a: ("f32", to_bytes(np.asarray(a, dtype=np.float64), "f32"))  # noqa: E731
    assert compare.reference_problem({"y": f32(reference("f32"))}) is None
    assert compare.reference_problem({"y": f32([1.0, 2.0])}) is None
    zero = compare.reference_problem({"y": f32(np.zeros(100))})
    assert zero is not None and "all zero" in zero and "constant" in zero
    const = compare.reference_problem({"y": f32(np.full(100, 3.0))})
    assert const is not None and "all 3.0" in const
    nan = np.ones(100)
    nan[42] = np.nan
    msg = compare.reference_problem({"y": f32(nan)})
    assert msg is not None and "y[42] is NaN" in msg
    single = compare.reference_problem({"out": f32([0.0])})
    assert single is not None and "single zero" in single
    assert compare.reference_problem({"out": f32([5.0])}) is None
    # Several buffers: degenerate only when every element of every buffer holds one value.
    assert compare.reference_problem({"a": f32(np.zeros(10)), "b": f32(np.ones(10))}) is None
    both = compare.reference_problem({"a": f32(np.full(10, 2.0)), "b": f32(np.full(10, 2.0))})
    assert both is not None and "all 2.0" in both
    # Integers: a histogram with varied bins is fine, an all-zero one is not.
    ints = ("i32", to_bytes(reference("i32"), "i32"))
    assert compare.reference_problem({"bins": ints}) is None
    zi = compare.reference_problem({"bins": ("i32", to_bytes(np.zeros(256, dtype=np.int64), "i32"))})
    assert zi is not None and "all zero" in zi
    # f16 and bf16 NaN are seen as NaN too.
    for dt in ("f16", "bf16"):
        msg = compare.reference_problem({"y": (dt, to_bytes(nan, dt))})
        assert msg is not None and "NaN" in msg, dt


# --------------------------------------------------------------------------------------------------
# timing.paired_speedup


def synthetic_rounds(
    rng: np.random.Generator,
    base_ms: float,
    cand_ms: float,
    noise: float,
    rounds: int = 5,
    reps: int = 15,
    drift: float = 0.0,
) -> tuple[list[list[float]], list[list[float]]]:
    """A B A B rounds: per-round drift shared by both (clock, temperature), per-rep noise independent."""
    a, b = [], []
    for _ in range(rounds):
        d = 1.0 + drift * rng.standard_normal()
        a.append(list(base_ms * d * (1 + noise * rng.standard_normal(reps))))
        b.append(list(cand_ms * d * (1 + noise * rng.standard_normal(reps))))
    return a, b


def test_identical_distributions_ci_contains_one_and_is_not_accepted() -> None:
    a, b = synthetic_rounds(np.random.default_rng(123), 0.5, 0.5, 0.01)
    s = timing.paired_speedup(a, b)
    assert s.ci_low <= 1.0 <= s.ci_high
    assert s.ci_low <= s.speedup <= s.ci_high
    assert not timing.accepts(s, 2.0)
    assert s.rounds == 5 and s.reps_per_round == 15 and s.confidence == 0.95
    assert s.baseline_median_ms == pytest.approx(0.5, rel=0.01)
    assert s.candidate_median_ms == pytest.approx(0.5, rel=0.01)
    assert 0 < s.baseline_spread_pct < 5 and 0 < s.candidate_spread_pct < 5
    assert set(s.to_dict()) >= {"speedup", "ci_low", "ci_high", "rounds"}


def test_twenty_aa_comparisons_accept_nothing() -> None:
    contains = 0
    for seed in range(20):
        rng = np.random.default_rng(1000 + seed)
        a, b = synthetic_rounds(rng, 1.0, 1.0, noise=0.01, drift=0.02)
        s = timing.paired_speedup(a, b, n_boot=1000, seed=seed)
        assert not timing.accepts(s, 2.0), (seed, s)
        assert not timing.accepts(s, 0.5), (seed, s)
        contains += s.ci_low <= 1.0 <= s.ci_high
    assert contains >= 18  # a 95% interval; in practice all 20


def test_true_ten_percent_speedup_is_accepted() -> None:
    a, b = synthetic_rounds(np.random.default_rng(5), 1.0, 1.0 / 1.1, noise=0.01)
    s = timing.paired_speedup(a, b)
    assert s.speedup == pytest.approx(1.1, rel=0.01)
    assert s.ci_low > 1.0 and s.ci_low <= s.speedup <= s.ci_high
    assert timing.accepts(s, 2.0)
    assert not timing.accepts(s, 20.0)


def test_pairing_cancels_round_drift() -> None:
    """±5% drift between rounds would swamp a 5% gain unpaired; paired A/B rounds still see it."""
    a, b = synthetic_rounds(np.random.default_rng(9), 1.0, 1.0 / 1.05, noise=0.005, drift=0.05)
    s = timing.paired_speedup(a, b)
    assert s.speedup == pytest.approx(1.05, rel=0.01)
    assert timing.accepts(s, 2.0)


def test_slower_candidate_is_not_accepted() -> None:
    a, b = synthetic_rounds(np.random.default_rng(3), 1.0, 1.1, noise=0.01)
    s = timing.paired_speedup(a, b)
    assert s.speedup < 1.0 and s.ci_high < 1.0
    assert not timing.accepts(s, 0.0)


def test_bootstrap_is_reproducible_for_a_seed() -> None:
    a, b = synthetic_rounds(np.random.default_rng(4), 1.0, 0.95, noise=0.02)
    s1 = timing.paired_speedup(a, b, n_boot=500, seed=11)
    s2 = timing.paired_speedup(a, b, n_boot=500, seed=11)
    assert s1 == s2


def test_invalid_timings_are_dropped() -> None:
    a = [[1.0, 1.0, float("nan"), 1.0], [1.0, -1.0, 1.0, 0.0]]
    b = [[0.5, float("inf"), 0.5, 0.5], [0.5, 0.5, 0.5, 0.5]]
    s = timing.paired_speedup(a, b, n_boot=200)
    assert s.speedup == pytest.approx(2.0)
    assert s.ci_low == pytest.approx(2.0) and s.ci_high == pytest.approx(2.0)


@pytest.mark.parametrize(
    ("a", "b", "words"),
    [
        ([], [], "same, non-zero number"),
        ([[1.0]], [], "same, non-zero number"),
        ([[1.0]], [[1.0], [1.0]], "same, non-zero number"),
        ([[1.0], []], [[1.0], [1.0]], "no valid timings"),
        ([[1.0]], [[float("nan"), 0.0, -2.0, float("inf")]], "no valid timings"),
    ],
)
def test_bad_inputs_raise(a: list[list[float]], b: list[list[float]], words: str) -> None:
    with pytest.raises(ValueError, match=words):
        timing.paired_speedup(a, b, n_boot=10)


# --------------------------------------------------------------------------------------------------
# timing.roofline_floor_ms and peak_dram_bandwidth

H200 = {"name": "NVIDIA H200", "mem_clock_khz": 2619000, "mem_bus_width": 6144}


def test_peak_dram_bandwidth() -> None:
    bw = timing.peak_dram_bandwidth(H200)
    assert bw == pytest.approx(2 * 2619000e3 * 6144 / 8)
    assert bw == pytest.approx(4.02e12, rel=0.005)
    assert timing.peak_dram_bandwidth({"memory_clock_khz": 2619000, "mem_bus_width_bits": 6144}) == bw
    assert timing.peak_dram_bandwidth(None) is None
    assert timing.peak_dram_bandwidth({}) is None
    assert timing.peak_dram_bandwidth({"mem_clock_khz": 2619000}) is None
    assert timing.peak_dram_bandwidth({"mem_bus_width": 6144, "mem_clock_khz": 0}) is None


def test_roofline_floor_ms() -> None:
    bw = timing.peak_dram_bandwidth(H200)
    # softmax_row's main shape: read and write 16384 x 1024 floats.
    footprint = 2 * 16384 * 1024 * 4
    floor = timing.roofline_floor_ms(footprint, bw)
    assert floor == pytest.approx(1e3 * footprint / bw)
    assert floor == pytest.approx(0.0334, rel=0.01)
    # The compute bound wins when it is the larger one.
    assert timing.roofline_floor_ms(footprint, bw, flops=1e12, peak_flops=1e14) == pytest.approx(10.0)
    assert timing.roofline_floor_ms(footprint, bw, flops=1.0, peak_flops=1e14) == pytest.approx(floor)
    assert timing.roofline_floor_ms(None, None, flops=2e9, peak_flops=1e12) == pytest.approx(2.0)
    assert timing.roofline_floor_ms(None, bw) is None
    assert timing.roofline_floor_ms(footprint, None) is None
    assert timing.roofline_floor_ms(0, bw) is None
