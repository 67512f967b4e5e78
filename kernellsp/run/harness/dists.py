"""Input distributions: a spec's ``dist`` text (``uniform(lo, hi)``, ``randint(lo, hi)``, ...) checked and
evaluated for one shape into a :class:`DistPlan`.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from kernellsp.run.harness.common import _FLOAT_MAX, _INT_RANGE, DistKind
from kernellsp.source import exprs

if TYPE_CHECKING:
    from kernellsp.run.harness.plan import ArgPlan


_DIST_RE = re.compile(r"^\s*(uniform|normal|randint|ones|arange|choice)\s*\((.*)\)\s*$", re.S)


@dataclass(frozen=True)
class DistPlan:
    """An input distribution with its parameters evaluated for one shape.

    ``fparams`` and ``iparams`` hold the same parameters as doubles and as integers (the harness uses
    whichever the dtype and the distribution need). ``arange`` always has two: start and step.
    """

    kind: DistKind
    fparams: tuple[float, ...] = ()
    iparams: tuple[int, ...] = ()


def _plan_dist(
    a: ArgPlan,
    text: str | None,
    names: Mapping[str, exprs.Value],
    label: str,
    problems: list[str],
    warnings: list[str],
) -> DistPlan | None:
    assert a.dtype is not None
    where = f"args.{a.name}.dist ({label})"
    if text is None:
        return DistPlan("default")
    m = _DIST_RE.match(text)
    if m is None:
        problems.append(
            f"{where}: {text!r} is not uniform(lo, hi), normal(mean, std), randint(lo, hi), ones(), "
            "arange(), arange(start), arange(start, step) or choice(a, b, ...)"
        )
        return None
    kind: DistKind = m.group(1)  # type: ignore[assignment]
    inner = m.group(2).strip()
    raw: tuple[Any, ...] = ()
    if inner:
        try:
            val = exprs.evaluate(f"({inner},)", names)
        except exprs.ExprError as exc:
            problems.append(f"{where}: {exc}")
            return None
        raw = val if isinstance(val, tuple) else (val,)
    params: list[float | int] = []
    for x in raw:
        if isinstance(x, bool):
            x = int(x)
        if not isinstance(x, int | float) or (isinstance(x, float) and not math.isfinite(x)):
            problems.append(f"{where}: parameter {x!r} is not a finite number")
            return None
        params.append(x)
    is_int = a.dtype in _INT_RANGE
    fmax = _FLOAT_MAX.get(a.dtype, 0.0)

    def bad(msg: str) -> None:
        problems.append(f"{where}: {text!r}: {msg}")

    def integral(x: float | int) -> int | None:
        if isinstance(x, int):
            return x
        return int(x) if x.is_integer() else None

    def fits(x: int) -> bool:
        if is_int:
            lo, hi = _INT_RANGE[a.dtype]  # type: ignore[index]
            return lo <= x <= hi
        return abs(x) <= fmax

    if kind in ("uniform", "normal"):
        if len(params) != 2:
            bad(f"{kind} takes two parameters")
            return None
        p0, p1 = float(params[0]), float(params[1])
        if kind == "uniform":
            if p0 > p1:
                bad("lo must not exceed hi")
                return None
            if not math.isfinite(p1 - p0):
                bad("hi - lo overflows a double")
                return None
            if not is_int and max(abs(p0), abs(p1)) > fmax:
                bad(f"the range exceeds what {a.dtype} can hold (±{fmax:g})")
                return None
            if p0 == p1:
                warnings.append(
                    f"{where}: {text!r} makes every element equal; comparisons against it are weak"
                )
        elif p1 < 0:
            bad("std must not be negative")
            return None
        return DistPlan(kind, (p0, p1), (0, 0))
    if kind == "randint":
        if len(params) != 2:
            bad("randint takes two parameters (lo, hi), hi exclusive")
            return None
        lo_i, hi_i = integral(params[0]), integral(params[1])
        if lo_i is None or hi_i is None:
            bad("randint bounds must be integers")
            return None
        if lo_i >= hi_i:
            bad("randint needs lo < hi (hi is exclusive)")
            return None
        if not (lo_i >= -(2**63) and hi_i <= 2**63 - 1):
            bad("randint bounds must fit a signed 64-bit integer")
            return None
        if not (fits(lo_i) and fits(hi_i - 1)):
            bad(f"values {lo_i}..{hi_i - 1} do not fit {a.dtype}")
            return None
        return DistPlan(kind, (float(lo_i), float(hi_i)), (lo_i, hi_i))
    if kind == "ones":
        if params:
            bad("ones takes no parameters")
            return None
        warnings.append(f"{where}: ones() makes every element equal; comparisons against it are weak")
        return DistPlan(kind)
    if kind == "arange":
        if len(params) > 2:
            bad("arange takes at most two parameters (start, step)")
            return None
        start, step = (list(params) + [0, 1][len(params) :])[:2]
        if is_int:
            si_, st_ = integral(start), integral(step)
            if si_ is None or st_ is None or not (-(2**63) <= si_ < 2**63 and -(2**63) <= st_ < 2**63):
                bad(f"start and step must be 64-bit integers for {a.dtype}")
                return None
            return DistPlan(kind, (float(si_), float(st_)), (si_, st_))
        return DistPlan(kind, (float(start), float(step)), (0, 0))
    # choice
    if not params:
        bad("choice needs at least one value")
        return None
    ivals: list[int] = []
    for x in params:
        xi = integral(x)
        if is_int:
            if xi is None:
                bad(f"{x} is not an integer, but {a.name} is {a.dtype}")
                return None
            if not fits(xi):
                bad(f"{x} does not fit {a.dtype}")
                return None
        elif abs(float(x)) > fmax:
            bad(f"{x} does not fit {a.dtype}")
            return None
        ivals.append(xi if xi is not None and -(2**63) <= xi < 2**63 else 0)
    if len(set(params)) == 1:
        warnings.append(f"{where}: {text!r} makes every element equal; comparisons against it are weak")
    return DistPlan(kind, tuple(float(x) for x in params), tuple(ivals))
