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
    if ctx.host_launched and el.form in ("2d", "3d") and not _host_launch_covers(ctx, el):
        return Decline(
            f"a {el.form.upper()} kernel behind a host launcher whose launch does not provably cover the "
            "whole image at every declared shape: a linearised loop could reach pixels the original does not"
        )
    declined = ew.launch_decline(ctx, el)
    return declined if declined is not None else Match(el.binding(ctx), el)


def _host_launch_covers(ctx: RecipeContext, el: ew.ElementLoop) -> bool:
    """Does the host's launch reach every (x, y[, z]) of the guarded extent at every declared shape?"""
    lm = ctx.launch_model
    if lm is None or not lm.complete or not lm.shapes:
        return False
    w = el.element.coeff("gid.y")
    plane = el.element.coeff("gid.z") if el.form == "3d" else None
    for s in lm.shapes:
        env = dict(s.params)
        vals = [_value(p, env) for p in (w, plane, el.bound) if p is not None]
        if any(v is None for v in vals):
            return False
        wv, *rest = vals
        n = rest[-1]
        pv = rest[0] if plane is not None else n
        if s.threads(0) < (wv or 0) or s.threads(1) * (wv or 1) < (pv or 0):
            return False
        if plane is not None and s.threads(2) * (pv or 1) < (n or 0):
            return False
    return True


def _value(p: Any, env: dict[str, int]) -> int | None:
    total = 0
    for mono, c in p.terms.items():
        term = c
        for sym in mono:
            if sym not in env:
                return None
            term *= env[sym]
        total += term
    return total


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
