"""Tiled stencils and convolutions: a shared-memory tile with its halo, several outputs per thread.

Matches kernels that compute one output point per thread (1-D ``i``, or 2-D ``(x, y)`` over a row-major
grid of pitch ``P``) from an input read at the point plus offsets: constant offsets (3-point and
5-point stencils, Jacobi sweeps) or offsets that run over a filter loop (``in[i + j]`` for ``j`` in
``[-r, r]``, ``in[(y + dy) * W + x + dx]``, "valid" convolutions ``in[(r + i) * W + c + j]``), with
the user's own zero-padding or boundary tests, any element type.

The rewrite keeps the user's per-point code verbatim inside a lambda (so its guards, its early
returns and its arithmetic stay as written) and changes where the input comes from and how many
points a thread computes: each block first loads its points' footprint plus the halo into a static
shared tile with coalesced loads (element ``g`` of the input at tile position ``g - origin``, so
every index the user reads maps to the same element), then calls the lambda for
``per_thread`` points (2-D: consecutive rows of one column, so neighbouring outputs share tile
reads; 1-D: points a block apart, so lanes stay on consecutive banks), with the input reads turned
into tile reads. The halo is computed at run time from the offsets' ranges; the tile is sized for
the spec's main shape, and a launch whose halo does not fit (another filter size) takes the same
lambda with global reads, so every size stays correct. When the filter's size is a spec size,
the main shape's value gets a specialised path: the size becomes a constant, the filter loops are
unrolled, and a small filter (64 taps at most) is read once into registers.

A ``__global__`` entry gets blocks of 256 threads (32 x 8 in 2-D) and a grid over its guarded
extent; a host-launched kernel keeps the host's block and grid (one point per thread) and gets the
tile alone.

Declines for 3-D stencils, indices through ``min``/``max`` clamps or macros, reads of the input that
are not the point plus an offset, offsets whose range is not a counted loop's, non-rectangular
filter loops, barriers, shared memory, atomics, grid-stride loops, and outputs read back.
"""

from __future__ import annotations

from typing import Any

from kernellsp.optimize.propose.recipes._elementwise.launch import spec_expr
from kernellsp.optimize.propose.recipes._stencil.analysis import (
    _all_offsets,
    _atom_text,
    _check_launch,
    _extents,
    _inputs,
    _kernel_decline,
    _loop_ranges,
    _main_halo,
    _params_in,
)
from kernellsp.optimize.propose.recipes._stencil.codegen import _Gen
from kernellsp.optimize.propose.recipes._stencil.model import Stencil
from kernellsp.optimize.propose.recipes.base import (
    Decline,
    Match,
    RecipeContext,
    RecipeError,
    Rewrite,
)
from kernellsp.source import spec as specmod

NAME = "stencil-tiled"
ARCHETYPE = "stencil"
RULES = ("KL501", "KL502", "KL503", "KL510", "KL601")
PARAMS: dict[str, list[Any]] = {"per_thread": [8, 4, 16], "specialise": [True, False], "vec": [True, False]}


def match(ctx: RecipeContext) -> Match | Decline:
    ir = ctx.ir
    why = _kernel_decline(ir)
    if why:
        return Decline(why)
    written = ir.written()
    loads = [a for a in ir.global_accesses() if a.kind == "load"]
    # An output read back at its own point (`hz[p] = hz[p] - ...`) is an update of that point; read
    # anywhere else, points would depend on each other.
    stored = {(a.base, a.index) for a in ir.stores()}
    if any(a.base in written and (a.index is None or (a.base, a.index) not in stored) for a in loads):
        return Decline("an output is read back away from the point it writes: points are not independent")
    by_array: dict[str, list[Any]] = {}
    for a in loads:
        by_array.setdefault(a.base, []).append(a)
    ranges = _loop_ranges(ir)
    if isinstance(ranges, str):
        return Decline(ranges)
    inputs = _inputs(ctx, by_array, ranges)
    if isinstance(inputs, str):
        return Decline(inputs)
    tiled, filters, dims = inputs
    atoms: dict[str, str] = {}
    for p in _all_offsets(tiled):
        for s in p.symbols():
            if s in ir.divmods:
                atoms[s] = _atom_text(ir, s)
    ext = _extents(ir, dims)
    if isinstance(ext, str):
        return Decline(ext)
    sizes = sorted({s for p in _all_offsets(tiled) for s in _params_in(ir, p)})
    st = Stencil(dims, tiled, ext[0], ext[1], sizes, filters, atoms)
    why = _check_launch(ctx, st)
    if why:
        return Decline(why)
    halo = _main_halo(ctx, st)
    if isinstance(halo, str):
        return Decline(halo)
    return Match(_binding(ctx, st, halo), st)


def _binding(ctx: RecipeContext, st: Stencil, halo: tuple[int, int, int, int]) -> dict[str, str]:
    """What ``--explain`` prints for a match."""
    dims, tiled, sizes, filters = st.dims, st.tiled, st.sizes, st.filters
    binding = {
        "dims": f"{dims}-D",
        "tiled": ", ".join(f"{t.array} ({ctx.dtype(t.array) or t.ctype})" for t in tiled),
        "halo (main shape)": "x [-{}, +{}]".format(*halo[:2])
        + (" y [-{}, +{}]".format(*halo[2:]) if dims == 2 else ""),
        "launch": "kept (host launcher)" if ctx.host_launched else "spec launch field",
    }
    if sizes:
        binding["filter sizes"] = ", ".join(sizes)
    if filters:
        binding["filters"] = ", ".join(f.array for f in filters)
    return binding


def points(ctx: RecipeContext, m: Match) -> list[dict[str, Any]]:
    if ctx.host_launched:
        return [{"per_thread": 1, "specialise": True}, {"per_thread": 1, "specialise": False}]
    st: Stencil = m.data
    if st.dims == 1:
        # 1-D: 16-byte tile loads and 4 points per thread first (conv1d, R = 7, 2^24 points on the H100, a
        # hand-written sweep: 0.0576 ms against 0.0617 ms for scalar loads and 8 points; a copy of the bytes 0.0488).
        pts = [
            {"per_thread": 4, "specialise": True, "vec": True},
            {"per_thread": 8, "specialise": True, "vec": True},
        ]
        # Three candidates: the vector tiles fall back to scalar loads themselves when the input is not aligned.
        pts.append(
            {"per_thread": 8, "specialise": False, "vec": True}
            if st.sizes
            else {"per_thread": 16, "specialise": True, "vec": True}
        )
        return pts
    # Larger tiles keep more bytes in flight per SM (a block waits for its whole tile at the barrier).
    pts = [{"per_thread": s, "specialise": True} for s in PARAMS["per_thread"]]
    if st.sizes:
        pts.insert(1, {"per_thread": 8, "specialise": False})
    return pts


def generate(ctx: RecipeContext, m: Match, params: dict[str, Any]) -> Rewrite:
    st: Stencil = m.data
    per = int(params.get("per_thread", 4))
    if per not in (1, 2, 4, 8, 16):
        raise RecipeError("per_thread is 1, 2, 4, 8 or 16")
    if ctx.host_launched:
        assert st.host_block is not None
        bx, by = st.host_block[0], st.host_block[1]
        per = 1
    else:
        bx, by = (32, 8) if st.dims == 2 else (256, 1)
    vbx, vby = (bx * per, by) if st.dims == 1 else (bx, by * per)
    halo = _main_halo(ctx, st)
    if isinstance(halo, str):
        raise RecipeError(halo)
    vec = bool(params.get("vec", False)) and not ctx.host_launched
    g = _Gen(ctx, st, bx, by, vbx, vby, per, halo, bool(params.get("specialise", True)), vec)
    code = g.kernel()
    launch = None
    if not ctx.host_launched:
        assert st.extent_x is not None
        gx = f"ceil_div({spec_expr(ctx, st.extent_x)}, {vbx})"
        if st.dims == 2:
            assert st.extent_y is not None
            launch = specmod.LaunchSpec(
                grid=[gx, f"ceil_div({spec_expr(ctx, st.extent_y)}, {vby})"], block=[bx, by]
            )
        else:
            launch = specmod.LaunchSpec(grid=gx, block=bx)
    return Rewrite(ctx.kernel.name, code, launch)
