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


@dataclass
class _DistCheck:
    """One ``dist`` text being checked against its buffer's dtype: where problems and warnings go."""

    dtype: str
    name: str
    text: str
    where: str
    problems: list[str]
    warnings: list[str]

    @property
    def is_int(self) -> bool:
        return self.dtype in _INT_RANGE

    @property
    def fmax(self) -> float:
        return _FLOAT_MAX.get(self.dtype, 0.0)

    def bad(self, msg: str) -> None:
        self.problems.append(f"{self.where}: {self.text!r}: {msg}")

    def fits(self, x: int) -> bool:
        if self.is_int:
            lo, hi = _INT_RANGE[self.dtype]
            return lo <= x <= hi
        return abs(x) <= self.fmax

    def weak(self) -> None:
        """A legal distribution that makes every element equal."""
        self.warnings.append(
            f"{self.where}: {self.text!r} makes every element equal; comparisons against it are weak"
        )


def _integral(x: float | int) -> int | None:
    if isinstance(x, int):
        return x
    return int(x) if x.is_integer() else None


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
    parsed = _parse_dist(text, names, where, problems)
    if parsed is None:
        return None
    kind, params = parsed
    ck = _DistCheck(a.dtype, a.name, text, where, problems, warnings)
    if kind in ("uniform", "normal"):
        return _plan_continuous(ck, kind, params)
    if kind == "randint":
        return _plan_randint(ck, params)
    if kind == "ones":
        if params:
            ck.bad("ones takes no parameters")
            return None
        warnings.append(f"{where}: ones() makes every element equal; comparisons against it are weak")
        return DistPlan(kind)
    if kind == "arange":
        return _plan_arange(ck, params)
    return _plan_choice(ck, params)


def _parse_dist(
    text: str, names: Mapping[str, exprs.Value], where: str, problems: list[str]
) -> tuple[DistKind, list[float | int]] | None:
    """The distribution's kind and its parameters evaluated as finite numbers; None after a problem."""
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
    return kind, params


def _plan_continuous(ck: _DistCheck, kind: DistKind, params: list[float | int]) -> DistPlan | None:
    """``uniform(lo, hi)`` or ``normal(mean, std)``."""
    if len(params) != 2:
        ck.bad(f"{kind} takes two parameters")
        return None
    p0, p1 = float(params[0]), float(params[1])
    if kind == "uniform":
        if p0 > p1:
            ck.bad("lo must not exceed hi")
            return None
        if not math.isfinite(p1 - p0):
            ck.bad("hi - lo overflows a double")
            return None
        if not ck.is_int and max(abs(p0), abs(p1)) > ck.fmax:
            ck.bad(f"the range exceeds what {ck.dtype} can hold (±{ck.fmax:g})")
            return None
        if p0 == p1:
            ck.weak()
    elif p1 < 0:
        ck.bad("std must not be negative")
        return None
    return DistPlan(kind, (p0, p1), (0, 0))


def _plan_randint(ck: _DistCheck, params: list[float | int]) -> DistPlan | None:
    """``randint(lo, hi)``, hi exclusive."""
    if len(params) != 2:
        ck.bad("randint takes two parameters (lo, hi), hi exclusive")
        return None
    lo_i, hi_i = _integral(params[0]), _integral(params[1])
    if lo_i is None or hi_i is None:
        ck.bad("randint bounds must be integers")
        return None
    if lo_i >= hi_i:
        ck.bad("randint needs lo < hi (hi is exclusive)")
        return None
    if not (lo_i >= -(2**63) and hi_i <= 2**63 - 1):
        ck.bad("randint bounds must fit a signed 64-bit integer")
        return None
    if not (ck.fits(lo_i) and ck.fits(hi_i - 1)):
        ck.bad(f"values {lo_i}..{hi_i - 1} do not fit {ck.dtype}")
        return None
    return DistPlan("randint", (float(lo_i), float(hi_i)), (lo_i, hi_i))


def _plan_arange(ck: _DistCheck, params: list[float | int]) -> DistPlan | None:
    """``arange()``, ``arange(start)`` or ``arange(start, step)``."""
    if len(params) > 2:
        ck.bad("arange takes at most two parameters (start, step)")
        return None
    start, step = (list(params) + [0, 1][len(params) :])[:2]
    if ck.is_int:
        si_, st_ = _integral(start), _integral(step)
        if si_ is None or st_ is None or not (-(2**63) <= si_ < 2**63 and -(2**63) <= st_ < 2**63):
            ck.bad(f"start and step must be 64-bit integers for {ck.dtype}")
            return None
        return DistPlan("arange", (float(si_), float(st_)), (si_, st_))
    return DistPlan("arange", (float(start), float(step)), (0, 0))


def _plan_choice(ck: _DistCheck, params: list[float | int]) -> DistPlan | None:
    """``choice(a, b, ...)``."""
    if not params:
        ck.bad("choice needs at least one value")
        return None
    ivals: list[int] = []
    for x in params:
        xi = _integral(x)
        if ck.is_int:
            if xi is None:
                ck.bad(f"{x} is not an integer, but {ck.name} is {ck.dtype}")
                return None
            if not ck.fits(xi):
                ck.bad(f"{x} does not fit {ck.dtype}")
                return None
        elif abs(float(x)) > ck.fmax:
            ck.bad(f"{x} does not fit {ck.dtype}")
            return None
        ivals.append(xi if xi is not None and -(2**63) <= xi < 2**63 else 0)
    if len(set(params)) == 1:
        ck.weak()
    return DistPlan("choice", tuple(float(x) for x in params), tuple(ivals))
