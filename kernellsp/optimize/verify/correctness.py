"""Output comparison for the correctness gate: dtype-aware, magnitude-aware, NaN-strict.

An element passes when ``|got - want| <= atol + rtol * |want|``, where ``atol`` scales with the
reference's magnitude (``atol_rel * max|want|``, so a tolerance never lets zeros pass for outputs
of size 1e3), and the whole buffer must also pass a norm-relative bound
``||got - want|| / ||want|| <= norm_rtol``. NaN or infinity never matches a finite number; a NaN
in the reference makes the reference invalid. Integer outputs must match exactly. A reference
whose outputs are all zero, or all one value, is refused as degenerate: it cannot tell a correct
kernel from one that writes a constant.

Beside the tolerance, :func:`error_budget` bounds a candidate's error by the baseline's own: a
tolerance the spec loosened for rounding must not let an approximation through (a reduction that
reads half its input and doubles the result stays within 1e-3 of the mean on uniform inputs).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from kernellsp.source.spec import FLOAT_DTYPES
from kernellsp.source.spec import Tolerance as SpecTolerance


@dataclass(frozen=True)
class Tolerance:
    """Resolved tolerance for one dtype."""

    rtol: float
    atol_rel: float
    atol_abs: float
    norm_rtol: float


#: Defaults per dtype. fp32 allows re-association (reductions in another order, FMA contraction) but
#: not a downgrade to fp16/bf16/tf32 arithmetic, which lands near 1e-3 norm error.
DEFAULTS: dict[str, Tolerance] = {
    "f64": Tolerance(rtol=1e-9, atol_rel=1e-12, atol_abs=0.0, norm_rtol=1e-10),
    "f32": Tolerance(rtol=1e-4, atol_rel=1e-5, atol_abs=0.0, norm_rtol=1e-5),
    "f16": Tolerance(rtol=1e-2, atol_rel=1e-3, atol_abs=0.0, norm_rtol=5e-3),
    "bf16": Tolerance(rtol=2e-2, atol_rel=4e-3, atol_abs=0.0, norm_rtol=1e-2),
}
EXACT = Tolerance(0.0, 0.0, 0.0, 0.0)
#: Elements per step of :func:`compare_error` (its float64 temporaries then stay in cache).
_CHUNK = 1 << 18

_NP_DTYPES = {
    "f16": "<f2",
    "f32": "<f4",
    "f64": "<f8",
    "i8": "i1",
    "u8": "u1",
    "i16": "<i2",
    "u16": "<u2",
    "i32": "<i4",
    "u32": "<u4",
    "i64": "<i8",
    "u64": "<u8",
}


def resolve_tolerance(dtype: str, spec_tol: SpecTolerance | None = None) -> Tolerance:
    """The tolerance for ``dtype``, with the spec's explicit values overriding the defaults."""
    if dtype not in FLOAT_DTYPES:
        return EXACT
    base = DEFAULTS[dtype]
    if spec_tol is None:
        return base
    return Tolerance(
        rtol=spec_tol.rtol if spec_tol.rtol is not None else base.rtol,
        atol_rel=base.atol_rel if spec_tol.atol is None else 0.0,
        atol_abs=spec_tol.atol if spec_tol.atol is not None else 0.0,
        norm_rtol=spec_tol.norm_rtol
        if spec_tol.norm_rtol is not None
        else max(base.norm_rtol, spec_tol.rtol or 0.0)
        if spec_tol.rtol is not None
        else base.norm_rtol,
    )


def as_array(data: bytes, dtype: str) -> np.ndarray[Any, Any]:
    """Raw little-endian bytes as a numpy array (bf16 widened to float32)."""
    if dtype == "bf16":
        return (np.frombuffer(data, dtype="<u2").astype(np.uint32) << 16).view(np.float32)
    return np.frombuffer(data, dtype=_NP_DTYPES[dtype])


@dataclass
class Mismatch:
    """Why a buffer did not match: the first bad element and summary statistics."""

    buffer: str
    index: int
    got: float | int
    want: float | int
    bad_elements: int
    count: int
    max_abs_err: float
    norm_rel_err: float
    reason: str

    def describe(self) -> str:
        return (
            f"{self.buffer}[{self.index}] = {self.got!r}, expected {self.want!r} ({self.reason}; "
            f"{self.bad_elements} of {self.count} elements differ, max |err| {self.max_abs_err:.3g}, "
            f"norm-relative error {self.norm_rel_err:.3g})"
        )


def compare(name: str, dtype: str, got: bytes, want: bytes, tol: Tolerance) -> Mismatch | None:
    """``None`` when ``got`` matches ``want`` within ``tol``; otherwise the first mismatch."""
    return compare_error(name, dtype, got, want, tol)[0]


def compare_error(
    name: str, dtype: str, got: bytes, want: bytes, tol: Tolerance
) -> tuple[Mismatch | None, float]:
    """:func:`compare`, and the norm-relative error of ``got`` (:func:`norm_rel_error`) from the same pass.

    Elements bit-identical to the reference pass without arithmetic (unless the reference is not finite
    there: NaN never matches), so the float64 work is done only where the outputs differ: a rewrite that
    reproduces the baseline bit for bit costs one comparison of bytes.
    """
    g = as_array(got, dtype)
    w = as_array(want, dtype)
    if g.shape != w.shape:
        return (
            Mismatch(
                name,
                0,
                len(g),
                len(w),
                max(len(g), len(w)),
                len(w),
                float("inf"),
                float("inf"),
                "different element counts",
            ),
            float("inf"),
        )
    if dtype not in FLOAT_DTYPES:
        return _compare_integers(name, g, w), 0.0
    if got == want and bool(np.isfinite(w).all()):
        return None, 0.0
    # In chunks that stay in cache: the float64 temporaries of a 16M-element output cost more in memory
    # traffic than in arithmetic.
    bits = np.dtype(f"<u{w.dtype.itemsize}")
    gb, wb = g.view(bits), w.view(bits)
    with np.errstate(over="ignore", invalid="ignore"):
        aw = np.abs(w)
        scale = float(np.max(aw, where=np.isfinite(w), initial=0.0))
    atol = tol.atol_abs + tol.atol_rel * scale
    first: tuple[int, float, float, str] | None = None
    n_bad, sq_err, sq_w, max_err = 0, 0.0, 0.0, 0.0
    arg_max: tuple[int, float, float] | None = None
    for lo in range(0, len(w), _CHUNK):
        hi = min(len(w), lo + _CHUNK)
        wc = w[lo:hi]
        fw = np.isfinite(wc)
        w64 = wc.astype(np.float64)
        sq_w += float(np.dot(w64[fw], w64[fw])) if not fw.all() else float(np.dot(w64, w64))
        # Positions to judge: bits that differ, and every non-finite reference element (NaN never matches).
        sel = np.flatnonzero((gb[lo:hi] != wb[lo:hi]) | ~fw)
        if sel.size == 0:
            continue
        g64 = g[lo:hi][sel].astype(np.float64)
        ws = w64[sel]
        fs = fw[sel]
        with np.errstate(invalid="ignore", over="ignore"):
            err = np.abs(g64 - ws)
            ok = err <= atol + tol.rtol * np.abs(ws)
            fin = np.isfinite(g64) & fs
            d = (g64 - ws)[fin]
            sq_err += float(np.dot(d, d))
        # Non-finite values match only the identical non-finite value (inf == inf).
        nonfinite = ~np.isfinite(g64) | ~fs
        same_inf = np.isinf(g64) & np.isinf(ws) & (np.sign(g64) == np.sign(ws))
        ok = np.where(nonfinite, same_inf, ok)
        finite_err = np.where(np.isfinite(err), err, np.inf)
        k = int(np.argmax(finite_err))
        if arg_max is None or finite_err[k] > max_err:
            max_err = float(finite_err[k])
            arg_max = (lo + int(sel[k]), float(g64[k]), float(ws[k]))
        bad = np.flatnonzero(~ok)
        n_bad += int(bad.size)
        if bad.size and first is None:
            k = int(bad[0])
            reason = (
                "NaN where a number was expected"
                if np.isnan(g64[k]) and not np.isnan(ws[k])
                else "non-finite value"
                if not np.isfinite(g64[k])
                else f"outside atol {atol:.3g} + rtol {tol.rtol:g}·|want|"
            )
            first = (lo + int(sel[k]), float(g64[k]), float(ws[k]), reason)
    norm_w = float(np.sqrt(sq_w))
    norm_err = float(np.sqrt(sq_err)) / norm_w if norm_w > 0 else 0.0
    if first is not None:
        i, gv, wv, reason = first
        return Mismatch(name, i, gv, wv, n_bad, len(w), max_err, norm_err, reason), norm_err
    if norm_err > tol.norm_rtol and arg_max is not None:
        i, gv, wv = arg_max
        return (
            Mismatch(
                name,
                i,
                gv,
                wv,
                0,
                len(w),
                max_err,
                norm_err,
                f"norm-relative error {norm_err:.3g} exceeds {tol.norm_rtol:g}",
            ),
            norm_err,
        )
    return None, norm_err


def _compare_integers(name: str, g: np.ndarray[Any, Any], w: np.ndarray[Any, Any]) -> Mismatch | None:
    bad = np.flatnonzero(g != w)
    if bad.size == 0:
        return None
    i = int(bad[0])
    diff = np.abs(g.astype(np.float64) - w.astype(np.float64))
    return Mismatch(
        name,
        i,
        int(g[i]),
        int(w[i]),
        int(bad.size),
        len(w),
        float(diff.max()),
        float(np.linalg.norm(diff)) / max(float(np.linalg.norm(w.astype(np.float64))), 1e-300),
        "integers differ",
    )


def norm_rel_error(dtype: str, got: bytes, want: bytes) -> float:
    """``||got - want|| / ||want||`` over the elements finite in both (0 when ``want`` is all zero or not a float)."""
    if dtype not in FLOAT_DTYPES:
        return 0.0
    g = as_array(got, dtype).astype(np.float64)
    w = as_array(want, dtype).astype(np.float64)
    fin = np.isfinite(g) & np.isfinite(w)
    norm_w = float(np.linalg.norm(w[fin]))
    return float(np.linalg.norm((g - w)[fin])) / norm_w if norm_w > 0 else 0.0


def norm(dtype: str, data: bytes) -> float:
    """The 2-norm of the finite elements of a float buffer (0 for integer dtypes)."""
    if dtype not in FLOAT_DTYPES:
        return 0.0
    a = as_array(data, dtype).astype(np.float64)
    return float(np.linalg.norm(a[np.isfinite(a)]))


#: The error budget: a candidate's norm-relative error against the reference may be at most this many
#: times the baseline's own error, whatever the spec's tolerance allows (see :func:`error_budget`).
BUDGET_FACTOR = 10.0


def budget_floor(dtype: str) -> float | None:
    """The error of an honest re-association for ``dtype`` on well-conditioned data (None: integers, compared exactly).

    The defaults' norm tolerance: reductions in another order, FMA contraction and a different but
    correctly rounded library function stay below it; a downgrade to fp16/bf16/tf32 arithmetic does not.
    """
    return DEFAULTS[dtype].norm_rtol if dtype in DEFAULTS else None


def within_quick_budget(dtype: str, err: float, factor: float = BUDGET_FACTOR) -> bool:
    """True when ``err`` is within the budget whatever the baseline's own error is (no extra runs needed)."""
    floor = budget_floor(dtype)
    return floor is None or factor <= 0 or err <= factor * floor


def error_budget(dtype: str, conditioning: float, spread: float, factor: float = BUDGET_FACTOR) -> float:
    """The most norm-relative error a candidate may have against the baseline on one input set.

    The baseline's own error is estimated two ways, and the larger counts:

    * its **conditioning**: ``||B(|x|)|| / ||B(x)||``, the baseline run on the absolute values of the
      same inputs against its run on the inputs. Rounding errors of sums and products scale with the
      sum of the magnitudes of the terms (``|fl(sum x) - sum x| <= n eps sum |x|``); when the terms
      cancel, an honest re-association moves the result by that much more than the result's own size.
      So the honest error is :func:`budget_floor` times the conditioning (at least 1);
    * its **run-to-run spread**: the norm-relative difference between repeated baseline launches on
      the same inputs (atomics in another order), its nondeterminism.

    ``factor`` (default 10) times the larger of the two: an error an order of magnitude above what the
    baseline itself shows is approximation (a sub-sampled input, a precision downgrade), not rounding,
    even inside a loose spec tolerance.
    """
    floor = budget_floor(dtype)
    if floor is None or factor <= 0:
        return float("inf")
    return factor * max(floor * max(1.0, conditioning), spread)


def reference_problem(buffers: dict[str, tuple[str, bytes]]) -> str | None:
    """Why a reference output cannot serve as a test oracle, or ``None``.

    ``buffers`` maps output names to (dtype, bytes). The reference is degenerate when every output
    element of every buffer holds one and the same value (all zeros included) while there is more
    than one element, and invalid when it holds NaN.
    """
    values = []
    total = 0
    for name, (dtype, data) in buffers.items():
        a = as_array(data, dtype)
        total += a.size
        if dtype in FLOAT_DTYPES and a.size and np.isnan(a.astype(np.float64)).any():
            i = int(np.flatnonzero(np.isnan(a.astype(np.float64)))[0])
            return f"the reference output {name}[{i}] is NaN: the baseline itself is broken on these inputs"
        if a.size:
            values.append(np.unique(a[: min(a.size, 1 << 22)]))
    if total <= 1:
        if values and values[0].size == 1 and float(values[0][0]) == 0.0:
            return "the reference output is a single zero: it cannot tell a correct kernel from one that writes nothing"
        return None
    uniq = np.unique(np.concatenate([v.astype(np.float64) for v in values])) if values else np.array([])
    if uniq.size <= 1:
        what = "all zero" if uniq.size == 1 and uniq[0] == 0 else f"all {uniq[0] if uniq.size else '?'}"
        return (
            f"the reference output is {what}: a constant reference cannot tell a correct kernel from one "
            "that writes a constant; change the spec's input distributions or sizes"
        )
    return None
