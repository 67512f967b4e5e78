"""Elementwise map: 128-bit vector loads and stores in a grid-stride loop.

Matches kernels whose work is a set of independent elements, one per thread, each reading its
inputs at the element's own index and writing its outputs there (any number of inputs and
outputs, any mix of f32/f16/bf16/i32/u8... element types, 1-D or 2-D ``row * W + col`` indexing,
the usual guards, or an existing scalar grid-stride loop). The rewrite keeps the user's element
body verbatim inside a lambda and feeds it from 16-byte vector loads: each thread moves 16 bytes
per stream per step instead of 1-4, so a memory-bound map reaches copy bandwidth with a quarter
(or a sixteenth, for bytes) of the load/store instructions. Pointers that are not 16-byte aligned
fall back to the scalar loop (checked at run time), and a scalar tail handles ``n % E`` elements.

Declines when elements are not independent (barriers, shared memory, atomics, reads of an output
at another index), when the body exits early or writes inside a loop, when a stream is strided
(interleaved ``x[2*i]``, per-thread chunks: the ``coalesce`` recipe's job), or when the guard is not
a plain bound check on the thread index.
"""

from __future__ import annotations

from typing import Any

from kernellsp.optimize.propose.recipes import _elementwise as ew
from kernellsp.optimize.propose.recipes.base import Decline, Match, RecipeContext, Rewrite

NAME = "map-vectorize"
ARCHETYPE = "map"
RULES = ("KL501", "KL510", "KL505")
PARAMS: dict[str, list[Any]] = {"unroll": [1, 2], "block": [0, 512, 128], "spread": [0, 1]}


def match(ctx: RecipeContext) -> Match | Decline:
    el = ew.analyse(ctx)
    if isinstance(el, Decline):
        return el
    if el.form == "chunk":
        return Decline(
            "each thread handles a chunk of consecutive elements (uncoalesced): the coalesce recipe applies"
        )
    strided = [s for s in el.streams if s.stride > 1]
    if strided:
        return Decline(
            f"{strided[0].param} is interleaved (stride {strided[0].stride} per element): the coalesce "
            "recipe applies"
        )
    if ctx.host_launched and el.form == "2d":
        return Decline(
            "a 2-D kernel behind a host launcher: its launch (which may not cover the image) must stay, "
            "and a linearised loop cannot reproduce which pixels it reaches"
        )
    declined = ew.launch_decline(ctx, el)
    return declined if declined is not None else Match(el.binding(ctx), el)


def points(ctx: RecipeContext, m: Match) -> list[dict[str, Any]]:
    """Host-launched kernels keep their block: only the unroll varies."""
    if ctx.host_launched:
        # Under a one-thread-per-element launch, busy blocks interleaved with idle ones (spread) beat
        # the first 1/E of the blocks doing everything; both are offered, verification picks.
        return [{"unroll": 1, "block": 0, "spread": 1}, {"unroll": 1, "block": 0, "spread": 0}]
    return [
        {"unroll": 1, "block": 0},
        {"unroll": 2, "block": 0},
        {"unroll": 1, "block": 512},
        {"unroll": 1, "block": 128},
    ]


def generate(ctx: RecipeContext, m: Match, params: dict[str, Any]) -> Rewrite:
    el: ew.ElementLoop = m.data
    return ew.generate(
        ctx, el, params, "elementwise map with 128-bit vector loads/stores in a grid-stride loop"
    )
