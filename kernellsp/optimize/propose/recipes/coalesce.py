"""Coalescing: consecutive threads take consecutive elements (chunked or interleaved access).

Matches element loops whose threads own chunks (``thread t handles [t*C, (t+1)*C)``: a warp's 32
lanes then touch addresses ``C`` elements apart, so every load pulls 32 separate sectors) or read
interleaved records (``x[2*i]``, ``x[2*i+1]``: half of every sector wasted per access). The rewrite
assigns elements grid-stride (lane ``k`` of a warp takes element ``base + k``) and loads 16-byte
vectors, so each warp request is fully coalesced; interleaved records are loaded whole and split in
registers. The element set is exactly the original's: ``[0, min(n, threads * C))`` for a
host-launched kernel (its launch is kept and read at run time), ``[0, n)`` for a ``__global__`` entry
after checking, per declared shape, that the original launch covered every element.

Declines what is not an element loop (see the map recipe), unit-stride one-element-per-thread
kernels (the map recipe's job), and chunk loops whose chunk size or bound is not uniform.
"""

from __future__ import annotations

from typing import Any

from kernellsp.optimize.propose.recipes import _elementwise as ew
from kernellsp.optimize.propose.recipes.base import Decline, Match, RecipeContext, Rewrite

NAME = "coalesce"
ARCHETYPE = "strided"
RULES = ("KL404", "KL601", "KL502", "KL510")
PARAMS: dict[str, list[Any]] = {"unroll": [1, 2], "block": [0, 512]}


def match(ctx: RecipeContext) -> Match | Decline:
    el = ew.analyse(ctx)
    if isinstance(el, Decline):
        return el
    strided = [s for s in el.streams if s.stride > 1]
    if el.form != "chunk" and not strided:
        return Decline(
            "accesses are already consecutive across threads (one element per thread): the map recipe applies"
        )
    declined = ew.launch_decline(ctx, el)
    return declined if declined is not None else Match(el.binding(ctx), el)


def points(ctx: RecipeContext, m: Match) -> list[dict[str, Any]]:
    if ctx.host_launched:
        return [{"unroll": 1, "block": 0}, {"unroll": 2, "block": 0}]
    return [{"unroll": 1, "block": 0}, {"unroll": 2, "block": 0}, {"unroll": 1, "block": 512}]


def generate(ctx: RecipeContext, m: Match, params: dict[str, Any]) -> Rewrite:
    el: ew.ElementLoop = m.data
    what = (
        "coalesced: consecutive threads take consecutive elements (was: per-thread chunks), 128-bit loads"
        if el.form == "chunk"
        else "coalesced: interleaved records loaded whole with 128-bit loads"
    )
    return ew.generate(ctx, el, params, what)
