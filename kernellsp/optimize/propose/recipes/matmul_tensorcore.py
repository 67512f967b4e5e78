"""Matrix product of 16-bit floats on tensor cores: WMMA fragments, fp32 accumulation, cp.async staging.

Matches the products the fp32 tiled recipe matches (any of the four operand layouts, alpha/beta and
other output expressions, a bias as the accumulator's start, 2-D or 1-D launches, batches) when A
and B hold ``__half`` or ``__nv_bfloat16`` (both the same) and the accumulator is fp32, the factors
read plainly or converted (``__half2float(A[..])``, ``(float)A[..]``). The kernel is replaced by the
generator in :mod:`._mma_codegen`: 16x16x16 ``nvcuda::wmma`` fragments with fp32 accumulators, block
tiles staged through shared memory in the operands' own layouts by 16-byte ``cp.async`` (two stages),
element-wise zero-filled loads at the edges and for unaligned operands, and the user's output
expression applied element by element. Adds ``#include <mma.h>`` (on the scope gate's allow-list).

Declines: fp32 or integer operands (the tiled and other recipes' cases), mixed 16-bit types, an
accumulator that is not fp32 (summing in half precision would change the result's accuracy class),
and a spec whose tolerance is exact (rtol = atol = 0): tensor cores sum in another order than the
loop, so the result differs in the last bits. Host launchers keep their launch when it has
256-thread blocks (the blocks loop over the tiles).

Parameters: ``tile`` names the block tile, slice depth and warp tile.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from kernellsp.optimize.propose.recipes import _mma_codegen as mc
from kernellsp.optimize.propose.recipes._product.analysis import analyse
from kernellsp.optimize.propose.recipes._product.model import Product
from kernellsp.optimize.propose.recipes.base import (
    Decline,
    Match,
    RecipeContext,
    RecipeError,
    Rewrite,
)
from kernellsp.optimize.propose.recipes.matmul import (
    PERSISTENT_GRID,
    Gemm,
    bind,
    describe,
    roles,
    with_launch,
)
from kernellsp.source import spec as specmod

NAME = "matmul-tensorcore"
ARCHETYPE = "matmul"
RULES = ("KL504", "KL502", "KL503", "KL510", "KL404", "KL601")

#: Tile configurations by name (block tile x slice depth / warp tile), 256 threads each.
TILES: dict[str, mc.MmaTile] = {
    "128x128x32/w64x32": mc.MmaTile(),
    "128x128x32/w32x64": mc.MmaTile(wm=32, wn=64),
    "128x64x32/w32x32": mc.MmaTile(bn=64, wm=32, wn=32),
    "64x128x32/w32x32": mc.MmaTile(bm=64, wm=32, wn=32),
}
PARAMS: dict[str, list[Any]] = {"tile": list(TILES)}


@dataclass
class MmaGemm(Gemm):
    """What :func:`match` found: the fp32 recipe's binding and extents, and the WMMA element type."""

    elem: str = "__half"


def match(ctx: RecipeContext) -> Match | Decline:
    p = analyse(ctx)
    if isinstance(p, str):
        return Decline(p)
    got = classify(ctx, p)
    if isinstance(got, str):
        return Decline(got)
    inputs = f"{got.elem}, fp32 accumulation on tensor cores (WMMA 16x16x16)"
    return Match(describe(got.binding, got.host_block, relaunch=got.relaunch, inputs=inputs), got)


def classify(ctx: RecipeContext, p: Product) -> MmaGemm | str:
    """Read the binding off the analysed product, or say why tensor cores do not apply."""
    got_roles = roles(p)
    if isinstance(got_roles, str):
        return got_roles
    p, ci, cj, cb = got_roles
    f0, f1 = p.factors
    ta, tb = ctx.ctype(f0.access.base), ctx.ctype(f1.access.base)
    for name, ct in ((f0.access.base, ta), (f1.access.base, tb)):
        if ct not in mc.MMA_TYPES:
            return f"{name} holds {ct or 'an unknown type'}: tensor cores here take __half or __nv_bfloat16 operands"
    if mc.MMA_TYPES[ta] != mc.MMA_TYPES[tb]:
        return f"the operands hold different types ({ta} and {tb}): one WMMA fragment type takes both"
    if p.acc_ctype != "float":
        return (
            f"the accumulator {p.acc} is {p.acc_ctype}: the tensor-core recipe accumulates in fp32 and would "
            "change the result's precision"
        )
    tol = ctx.spec.spec.tolerance if ctx.spec is not None else None
    if tol is not None and tol.rtol == 0 and tol.atol == 0 and not tol.norm_rtol:
        return (
            "the spec's tolerance is exact (rtol = atol = 0): tensor cores sum in another order than the loop"
        )
    binding = bind(ctx, p, ci, cj, cb)
    if isinstance(binding, str):
        return binding
    g = MmaGemm(binding, None, None, None, elem=mc.MMA_TYPES[ta])
    return with_launch(ctx, g, ci, cj, cb, threads={256}, kernels="the tensor-core kernels")


def points(ctx: RecipeContext, m: Match) -> list[dict[str, Any]]:
    """Every tile that fits the operands' layouts, best guess first."""
    g: MmaGemm = m.data
    return [{"tile": name} for name, t in TILES.items() if not t.problems(g.binding.a, g.binding.b)]


def generate(ctx: RecipeContext, m: Match, params: dict[str, Any]) -> Rewrite:
    g: MmaGemm = m.data
    name = str(params.get("tile", next(iter(TILES))))
    tile = TILES.get(name)
    if tile is None:
        raise RecipeError(f"unknown tile {name!r} (known: {', '.join(TILES)})")
    try:
        code = mc.mma_body(g.binding, tile, g.elem, tile_loop=g.host_block is not None or g.relaunch)
    except ValueError as exc:
        raise RecipeError(str(exc)) from None
    if g.relaunch:
        threads = getattr(tile, "threads", 256)
        return Rewrite(
            ctx.kernel.name, code, includes=["<mma.h>"], host_config=(str(PERSISTENT_GRID), str(threads))
        )
    if g.host_block is not None:
        return Rewrite(ctx.kernel.name, code, includes=["<mma.h>"])
    assert g.m_spec is not None and g.n_spec is not None
    launch = mc.mma_launch(tile, g.m_spec, g.n_spec, g.batch_spec)
    return Rewrite(ctx.kernel.name, code, specmod.LaunchSpec.model_validate(launch), includes=["<mma.h>"])
