"""The launch of a rewritten ``__global__`` entry and the proof that the original covered every element."""

from __future__ import annotations

from typing import Any

from kernellsp.optimize.propose.recipes._elementwise.model import ElementLoop
from kernellsp.optimize.propose.recipes.base import (
    CTYPE_BYTES,
    Decline,
    RecipeContext,
    RecipeError,
)
from kernellsp.source import spec as specmod
from kernellsp.source.ir import Poly


def new_launch(
    ctx: RecipeContext, el: ElementLoop, per_thread: int, params: dict[str, Any]
) -> specmod.LaunchSpec:
    """``grid = ceil_div(n, block * per_thread)`` with ``n`` in the spec's size names."""
    bound = spec_expr(ctx, el.bound)
    if bound is None:
        raise RecipeError(f"the bound {el.bound} cannot be written in the spec's size names")
    block = launch_block(ctx, params)
    check_coverage(ctx, el)
    return specmod.LaunchSpec(grid=f"ceil_div({bound}, ({block}) * {per_thread})", block=block)


def launch_block(ctx: RecipeContext, params: dict[str, Any]) -> int | str:
    """The block of the new launch: ``params['block']``, else the spec's 1-D block expression, else 256."""
    if params.get("block"):
        return int(params["block"])
    launch = ctx.launch()
    if launch is not None:
        dims = launch.block_dims()
        if len(dims) == 1 or all(str(d).strip() == "1" for d in dims[1:]):
            return dims[0]
    return 256


def spec_expr(ctx: RecipeContext, p: Poly) -> str | None:
    """A polynomial in kernel parameters rewritten in the spec's names (``n`` -> ``N``), or ``None``."""
    rename: dict[str, str] = {}
    for s in p.symbols():
        v = ctx.value_expr(s)
        if v is None:
            return None
        rename[s] = f"({v})"
    return p.c_text(rename).replace(" ", "")


def launch_decline(ctx: RecipeContext, el: ElementLoop) -> Decline | None:
    """Why the element loop's launch cannot be rewritten (for a ``__global__`` entry: the bound must come from
    the spec and the original launch must provably cover every element), or ``None``. Host launches stay."""
    if ctx.host_launched:
        return None
    if spec_expr(ctx, el.bound) is None:
        return Decline(
            f"the bound {el.bound_text} is not given by the spec's sizes (scalar args with a value)"
        )
    try:
        check_coverage(ctx, el)
    except RecipeError as exc:
        return Decline(f"cannot prove the original launch covered every element: {exc}")
    return None


def check_coverage(ctx: RecipeContext, el: ElementLoop) -> None:
    """Raise :class:`RecipeError` unless the spec's ORIGINAL launch covered every element for every shape.

    The rewrite processes ``[0, n)``; the original processed only the elements its threads reached
    (``threads * chunk`` of them, or ``gridDim*blockDim`` per axis), so a launch that fell short left
    elements alone that the rewrite would write. Grid-stride loops cover everything under any launch.
    """
    if el.form == "grid-stride":
        return
    launch = ctx.spec.spec.launch if ctx.spec is not None else None
    if launch is None:
        raise RecipeError("no launch to check the coverage against")
    for names in ctx.shapes():
        dims = specmod.launch_dims(launch, names)
        if isinstance(dims, str):
            raise RecipeError(dims)
        tx, ty = dims[0][0] * dims[1][0], dims[0][1] * dims[1][1]
        syms = el.bound.symbols() | (el.chunk.symbols() if el.chunk is not None else set())
        if el.form in ("2d", "3d"):
            syms |= el.element.coeff("gid.y").symbols()
        if el.form == "3d":
            syms |= el.element.coeff("gid.z").symbols()
        values = {s: _param_value(ctx, s, names) for s in syms}
        if any(v is None for v in values.values()):
            raise RecipeError("the bound has no value in the spec")
        n = _eval(el.bound, values)
        if el.form == "chunk" and el.chunk is not None:
            covered = tx * ty * dims[0][2] * dims[1][2] * _eval(el.chunk, values)
            if covered < n:
                raise RecipeError(f"the spec's launch covers {covered} of {n} elements in one shape")
        elif el.form == "3d":
            w, plane = _eval(el.element.coeff("gid.y"), values), _eval(el.element.coeff("gid.z"), values)
            tz = dims[0][2] * dims[1][2]
            if tx < w or ty * w < plane or tz * plane < n:
                raise RecipeError(
                    f"the spec's launch covers {tx} x {ty} x {tz} threads for a {n}-element volume"
                )
        elif el.form == "2d":
            w = _eval(el.element.coeff("gid.y"), values)
            if tx < w or ty * w < n:
                raise RecipeError(
                    f"the spec's launch covers {tx} x {ty} threads for a {w} x {n // max(w, 1)} image"
                )
        elif tx < n:
            raise RecipeError(f"the spec's launch has {tx} threads for {n} elements in one shape")


def _param_value(ctx: RecipeContext, name: str, names: dict[str, Any]) -> int | None:
    from kernellsp.source import exprs

    v = ctx.value_expr(name)
    if v is None:
        return None
    try:
        return exprs.evaluate_int(v, names)
    except exprs.ExprError:
        return None


def _eval(p: Poly, values: dict[str, Any]) -> int:
    total = 0
    for m, c in p.terms.items():
        term = c
        for s in m:
            term *= int(values[s])
        total += term
    return total


def ctype_bytes(ctype: str) -> int | None:
    return CTYPE_BYTES.get(ctype)
