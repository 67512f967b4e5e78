"""Shapes nobody declared: a few sizes drawn from the verification's seed, checked beside the spec's own.

A rewrite specialised to the main shape (hard-coded dimensions, a tile path with a wrong generic tail) can be
right on every shape the spec lists and wrong on the sizes an application calls it with. The gate therefore
adds a few shapes of its own to every verification: odd sizes, sizes one below and one or two above a power of two,
one above and below a multiple of a common tile (16, 32, 64, 128) and half a tile past one. They stay within what the spec shows about its sizes:

* only the size variables that a declared shape changes are varied (the others keep the main shape's value);
  variables that are equal in the main shape and every declared shape stay equal;
* a variable whose main and declared values share a factor (all multiples of 4, say) keeps it;
* values stay small (at most the main shape's value and about the largest declared one), so a drawn shape
  costs what an edge shape costs;
* a drawn shape is kept only where the spec's expressions plan (positive counts, scalars in range) and, at
  run time, the baseline handles it (runs, writes every output, leaves the guard pages alone:
  :mod:`kernellsp.optimize.verify.correctness_gate`); otherwise it is dropped and the evidence says why.

The seed is the verification's (or the optimize run's, so that every round and the final verification build
the same harness): the code under test cannot know the sizes before it runs.
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable, Sequence

from kernellsp.source.spec import KernelSpec

#: Tiles whose multiples (and their neighbours) are drawn.
_TILES = (16, 32, 64, 128)
#: Values stay at or below max(largest declared value + this, _FLOOR) and the main shape's value.
_MARGIN = 64
_FLOOR = 1100
#: Drawn values spread over the residues modulo this (in units of the variable's common factor).
_RESIDUES = 8


def varied_sizes(kspec: KernelSpec) -> list[list[str]]:
    """Groups of size variables that the declared shapes vary, each group tied (equal in every shape)."""
    names = [n for n in kspec.sizes if any(n in sh for sh in kspec.shapes)]
    if not names:
        return []
    values = {n: [_value(kspec, sh, n) for sh in kspec.all_shapes()] for n in names}
    groups: list[list[str]] = []
    for n in names:
        for g in groups:
            if values[g[0]] == values[n]:
                g.append(n)
                break
        else:
            groups.append([n])
    return groups


def draw_shapes(
    kspec: KernelSpec,
    seed: int,
    count: int,
    admissible: Callable[[dict[str, int]], bool] = lambda _s: True,
) -> list[dict[str, int]]:
    """Up to ``count`` shapes (overrides of the main sizes) that no declared shape equals, drawn with
    ``seed``; ``admissible`` filters them (e.g. whether the spec plans them)."""
    groups = varied_sizes(kspec)
    if not groups or count <= 0:
        return []
    rng = random.Random(seed)
    declared = [_resolved(kspec, sh) for sh in kspec.all_shapes()]
    seen = {
        g[0]: [v for sh in kspec.all_shapes() if (v := _value(kspec, sh, g[0])) is not None] for g in groups
    }
    steps = {n: _common_factor(vs) for n, vs in seen.items()}
    choices = {n: _candidates(kspec, n, steps[n]) for n in seen}
    # Residues (mod 8, in units of the variable's common factor) the shapes so far cover: each drawn value
    # prefers one not covered yet, so a path that is wrong for a remainder nobody declared (a float4 tail
    # that handles one leftover element, rows in groups of four) meets one.
    covered = {n: {(v // steps[n]) % _RESIDUES for v in vs} for n, vs in seen.items()}
    out: list[dict[str, int]] = []
    for _ in range(8 * count):
        if len(out) == count:
            break
        shape: dict[str, int] = {}
        for g in groups:
            n = g[0]
            fresh = [v for v in choices[n] if (v // steps[n]) % _RESIDUES not in covered[n]]
            if choices[n]:
                shape.update(dict.fromkeys(g, rng.choice(fresh or choices[n])))
        if not shape or shape in out:
            continue
        full = {**_resolved(kspec, {}), **shape}
        if any(all(full.get(k) == d.get(k) for k in shape) for d in declared):
            continue
        if admissible(shape):
            out.append(shape)
            for n in covered:
                if n in shape:
                    covered[n].add((shape[n] // steps[n]) % _RESIDUES)
    return out


def _value(kspec: KernelSpec, shape: dict[str, int], name: str) -> int | None:
    v = _resolved(kspec, shape).get(name)
    return v if isinstance(v, int) and not isinstance(v, bool) else None


def _resolved(kspec: KernelSpec, shape: dict[str, int]) -> dict[str, object]:
    try:
        return dict(kspec.resolved_sizes(shape))
    except Exception:  # a spec expression that does not evaluate: validation reports it elsewhere
        return {}


def _candidates(kspec: KernelSpec, name: str, step: int) -> list[int]:
    """Values to draw ``name`` from (multiples of ``step``): neighbours of powers of two and tile
    multiples, and odd sizes."""
    seen = [v for sh in kspec.all_shapes() if (v := _value(kspec, sh, name)) is not None]
    main = _value(kspec, {}, name)
    if main is None or main < 2 or not seen:
        return []
    cap = min(main, max(max(seen[1:] or [0]) + _MARGIN, _FLOOR))
    pool: set[int] = set()
    p = 2
    while p <= cap + 1:
        pool |= {p - step, p + step, p + 2 * step}
        p *= 2
    for t in _TILES:
        for k in (1, 2, 3, 5, 7):
            pool |= {k * t - step, k * t + step, k * t + t // 2}
    if step == 1:
        pool |= {3, 5, 7, 31, 33, 97, 255, 257, 509, 1021}
    return sorted(v for v in pool if 1 <= v <= cap and v % step == 0 and v not in seen)


def _common_factor(values: Sequence[int]) -> int:
    """The largest power of two dividing every value (1 when one is odd): what the spec's sizes keep."""
    g = 0
    for v in values:
        g = math.gcd(g, v)
    return g & -g if g > 0 else 1
