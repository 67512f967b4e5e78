"""Tiled transpose: a padded shared-memory tile so that both the loads and the stores are coalesced.

Matches permutation copies ``out[f(p)] = in[g(p)]`` where the input is contiguous along one
coordinate of the thread's point and the output along another: matrix transposes in any spelling
(2-D launches either way round, 1-D launches that recover the row and column with ``/`` and ``%``,
the blog's ``y + j`` loop), batched ones and layout permutations such as NCHW -> NHWC (coordinates
that both sides see as one, like ``h * W + w``, are merged first), for any element type.

The rewrite reads a 32 x 32 tile of the input along its contiguous coordinate, then writes the
tile's transpose along the output's contiguous coordinate; the tile rows are padded (33 floats,
34 halves, 36 bytes) so the column reads hit 32 different banks. A ``__global__`` entry gets
blocks of 32 x (32 / rows_per_thread) threads, each moving ``rows_per_thread`` elements per phase,
and a 2-D grid over the tiles (the other coordinates, if any, run over ``blockIdx.z``); edges the
tile does not divide are bounds-checked with the user's own extents. A kernel launched by host code
keeps the host's block: the tile is the block's own footprint (its size read from the launch site).

Declines when the kernel does anything besides the one copy (arithmetic, several stores,
barriers, atomics), when the input and output are contiguous along the same coordinate (that is a
copy: the map recipe's job), when a store guard is not a bounds check on a coordinate, or when an
extent is not given by scalar arguments with a value in the spec.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from kernellsp.optimize.propose.recipes import _memshape as ms
from kernellsp.optimize.propose.recipes._elementwise.launch import spec_expr
from kernellsp.optimize.propose.recipes.base import (
    Decline,
    Match,
    RecipeContext,
    RecipeError,
    Rewrite,
    signature_text,
)
from kernellsp.source import spec as specmod
from kernellsp.source.ir import Access, KernelIR, Poly
from kernellsp.source.ir.control import _strip_parens

NAME = "transpose-tiled"
ARCHETYPE = "transpose"
RULES = ("KL404", "KL601", "KL501", "KL510")
PARAMS: dict[str, list[Any]] = {"rows_per_thread": [4, 8, 2]}

TILE = 32


@dataclass
class Transpose:
    """What :func:`match` found."""

    src: str
    dst: str
    ctype: str
    elem_bytes: int
    #: Index polynomials over the coordinate symbols ``A`` (input-contiguous), ``B`` and batch ones.
    src_index: Poly
    dst_index: Poly
    a: ms.Coord
    b: ms.Coord
    batch: list[ms.Coord]
    #: Host-launched: the block axes of the coordinates and the host's block.
    axes: tuple[str, str] | None = None
    block: tuple[int, int, int] | None = None


def match(ctx: RecipeContext) -> Match | Decline:
    ir = ctx.ir
    copy = _the_copy(ctx)
    if isinstance(copy, str):
        return Decline(copy)
    st, ld = copy
    si, di = ms.access_index(ir, ld), ms.access_index(ir, st)
    if si is None or di is None:
        return Decline("an index of the copy is not integer arithmetic on the thread's coordinates")
    conds = [c for g in st.guards for c in g.conds]
    loop_vars = {lp.var for lp in st.loops if lp.var}
    got = ms.solve_coordinates(ir, conds, [si, di], loop_vars)
    if isinstance(got, str):
        return Decline(got)
    unused = _unused_guards(ir, conds, got, loop_vars)
    if unused:
        return Decline(f"the store is guarded by `{unused}`, which is not a bounds check on a coordinate")
    axes = _contiguous_axes(ir, got, st, ld)
    if isinstance(axes, str):
        return Decline(axes)
    coords, a, b = axes
    batch = [c for c in coords.coords if c.name not in (a.name, b.name)]
    elem = ctx.elem_bytes(ld.base)
    if elem is None:
        return Decline(f"the element size of {ld.base} is unknown (no spec dtype)")
    t = Transpose(ld.base, st.base, ctx.ctype(ld.base), elem, coords.polys[0], coords.polys[1], a, b, batch)
    if ctx.host_launched:
        why = _host_tile(ctx, t)
        if why:
            return Decline(why)
    else:
        for c in coords.coords:
            if spec_expr(ctx, c.extent) is None:
                return Decline(
                    f"the extent {c.extent} of {c.origin} is not given by the spec's sizes (scalar args "
                    "with a value)"
                )
    binding = {
        "input": f"{ld.base} ({ctx.dtype(ld.base) or t.ctype})",
        "output": st.base,
        "input contiguous along": f"{a.origin} < {a.extent}",
        "output contiguous along": f"{b.origin} < {b.extent}",
        "launch": f"kept (host block {t.block[0]}x{t.block[1]})" if t.block else "spec launch field",
    }
    if batch:
        binding["batch"] = ", ".join(f"{c.origin} < {c.extent}" for c in batch)
    return Match(binding, t)


def _the_copy(ctx: RecipeContext) -> tuple[Access, Access] | str:
    """The kernel's one store and one load, a plain copy between two buffers of one element type."""
    ir = ctx.ir
    if ir.barriers or ir.atomics or ir.warp_ops:
        return "the kernel synchronises or uses atomics/warp primitives: not a plain permutation copy"
    if any(v.shared for v in ir.locals.values()):
        return "the kernel already uses shared memory"
    stores = ir.stores()
    loads = ir.loads()
    if len(stores) != 1 or len(loads) != 1 or stores[0].kind != "store":
        return (
            f"a permutation copy has one load and one store; this kernel has {len(loads)} load(s) and "
            f"{len(stores)} store(s)"
        )
    st, ld = stores[0], loads[0]
    if st.base == ld.base:
        return f"{st.base} is both read and written (in-place permutation)"
    if not _is_copy(ir, st, ld):
        return f"the store to {st.base} is not a plain copy of the load from {ld.base}"
    if ctx.ctype(st.base) != ctx.ctype(ld.base):
        return f"{ld.base} and {st.base} have different element types: a conversion, not a permutation"
    if any(not g.exact for g in st.guards):
        return "a guard of the store is not a conjunction of comparisons"
    return st, ld


def _contiguous_axes(
    ir: KernelIR, coords: ms.Coords, st: Access, ld: Access
) -> tuple[ms.Coords, ms.Coord, ms.Coord] | str:
    """The coordinates (folded) with the one the input is contiguous along and the one the output is."""
    a = next((c for c in coords.coords if coords.polys[0].coeff(c.name) == Poly.const(1)), None)
    b = next((c for c in coords.coords if coords.polys[1].coeff(c.name) == Poly.const(1)), None)
    if a is None or b is None:
        side = ld.base if a is None else st.base
        return f"{side} is not contiguous along any coordinate of the thread's point"
    if a.name == b.name:
        return f"{ld.base} and {st.base} are contiguous along the same coordinate: a copy, not a transpose"
    coords, _ = ms.fold(coords, a.name, [0, 1])
    coords, _ = ms.fold(coords, b.name, [0, 1])
    a, b = coords.coord(a.name), coords.coord(b.name)
    params = {p.name for p in ir.params if not p.is_pointer}
    for p in (coords.polys[0], coords.polys[1], *(c.extent for c in coords.coords)):
        free = sorted(s for s in p.symbols() if not s.startswith("@") and s not in params)
        if free:
            return f"an index or extent uses {free[0]}, which is not a scalar parameter"
    return coords, a, b


def points(ctx: RecipeContext, m: Match) -> list[dict[str, Any]]:
    """A host-launched kernel keeps the host's block (one point); otherwise the rows per thread vary."""
    if ctx.host_launched:
        return [{"rows_per_thread": "host"}]
    return [{"rows_per_thread": r} for r in PARAMS["rows_per_thread"]]


def generate(ctx: RecipeContext, m: Match, params: dict[str, Any]) -> Rewrite:
    t: Transpose = m.data
    if ctx.host_launched:
        return Rewrite(ctx.kernel.name, _host_code(ctx, t))
    rpt = int(params.get("rows_per_thread", 4))
    if rpt not in (1, 2, 4, 8, 16, 32):
        raise RecipeError(f"rows_per_thread must divide {TILE}")
    code = _code(ctx, t, rpt)
    grid: list[str | int] = [
        f"ceil_div({spec_expr(ctx, t.a.extent)}, {TILE})",
        f"ceil_div({spec_expr(ctx, t.b.extent)}, {TILE})",
    ]
    if t.batch:
        z = "*".join(f"({spec_expr(ctx, c.extent)})" for c in t.batch)
        grid.append(f"min({z}, 65535)")
    block: list[str | int] = [TILE, TILE // rpt]
    return Rewrite(ctx.kernel.name, code, specmod.LaunchSpec(grid=grid, block=block))


# --------------------------------------------------------------------------------------------------


def _is_copy(ir: Any, st: Access, ld: Access) -> bool:
    stmt = st.stmt
    if stmt is None:
        return False
    expr = next((c for c in stmt.named_children), None)
    if expr is None or expr.type != "assignment_expression":
        return False
    right = expr.child_by_field_name("right")
    if right is None:
        return False
    right = _strip_parens(ir, right)
    while right.type == "cast_expression":
        val = right.child_by_field_name("value")
        if val is None:
            return False
        right = _strip_parens(ir, val)
    return right == ld.node


def _unused_guards(ir: Any, conds: list[Any], coords: ms.Coords, loop_vars: set[str]) -> str:
    """The text of the first guard that is neither a coordinate's bound nor ``coordinate >= 0``."""
    for i, c in enumerate(conds):
        if i in coords.used:
            continue
        if c.op is not None and c.lhs is not None and c.rhs is not None:
            # `x >= 0` / `0 <= x`: coordinates of a thread's point are never negative.
            if c.op == ">=" and c.rhs == Poly() and ms.varying(ir, c.lhs, loop_vars):
                continue
            if c.op == "<=" and c.lhs == Poly() and ms.varying(ir, c.rhs, loop_vars):
                continue
        return c.text
    return ""


def _names(t: Transpose) -> dict[str, str]:
    rename = {t.a.name: "kl_a", t.b.name: "kl_b"}
    for i, c in enumerate(t.batch):
        rename[c.name] = f"kl_z{i}"
    return rename


def _batch_open(t: Transpose) -> tuple[str, str]:
    """The loop over the batch coordinates (``blockIdx.z`` grid-stride) and its closing text."""
    if not t.batch:
        return "", ""
    total = " * ".join(f"({ms.wide(c.extent)})" for c in t.batch)
    lines = [
        f"    const long long kl_nz = {total};",
        "    for (long long kl_z = blockIdx.z; kl_z < kl_nz; kl_z += gridDim.z) {",
        "        long long kl_rest = kl_z;",
    ]
    for i, c in enumerate(t.batch):
        if i == len(t.batch) - 1:
            lines.append(f"        const long long kl_z{i} = kl_rest;")
        else:
            lines.append(f"        const long long kl_z{i} = kl_rest % ({ms.wide(c.extent)});")
            lines.append(f"        kl_rest /= ({ms.wide(c.extent)});")
    # The tile is reused by the next batch element: every thread must be done reading it first.
    return "\n".join(lines) + "\n", "        __syncthreads();\n    }\n"


def _code(ctx: RecipeContext, t: Transpose, rpt: int) -> str:
    rename = _names(t)
    src_i = t.src_index.c_text(rename)
    dst_i = t.dst_index.c_text(rename)
    pad = ms.pad_for(t.elem_bytes)
    open_b, close_b = _batch_open(t)
    ind = "    " if t.batch else ""
    body = f"""
    // Tiled transpose (kernellsp recipe {NAME}): a {TILE}x{TILE} tile is read along {t.src}'s contiguous
    // coordinate and written along {t.dst}'s; rows padded to {TILE + pad} elements so column reads are
    // conflict-free; {rpt} elements per thread per phase.
    __shared__ {t.ctype} kl_tile[{TILE}][{TILE + pad}];
    const long long kl_na = {ms.wide(t.a.extent)};
    const long long kl_nb = {ms.wide(t.b.extent)};
    const long long kl_a0 = (long long)blockIdx.x * {TILE};
    const long long kl_b0 = (long long)blockIdx.y * {TILE};
{open_b}{ind}    #pragma unroll
{ind}    for (int kl_k = 0; kl_k < {TILE}; kl_k += {TILE // rpt}) {{
{ind}        const long long kl_a = kl_a0 + threadIdx.x;
{ind}        const long long kl_b = kl_b0 + threadIdx.y + kl_k;
{ind}        if (kl_a < kl_na && kl_b < kl_nb) {{
{ind}            kl_tile[threadIdx.y + kl_k][threadIdx.x] = {t.src}[{src_i}];
{ind}        }}
{ind}    }}
{ind}    __syncthreads();
{ind}    #pragma unroll
{ind}    for (int kl_k = 0; kl_k < {TILE}; kl_k += {TILE // rpt}) {{
{ind}        const long long kl_b = kl_b0 + threadIdx.x;
{ind}        const long long kl_a = kl_a0 + threadIdx.y + kl_k;
{ind}        if (kl_a < kl_na && kl_b < kl_nb) {{
{ind}            {t.dst}[{dst_i}] = kl_tile[threadIdx.x][threadIdx.y + kl_k];
{ind}        }}
{ind}    }}
{close_b}"""
    return f"{signature_text(ctx)}\n{{{body}}}\n"


def _host_tile(ctx: RecipeContext, t: Transpose) -> str:
    """Why the host's launch cannot carry a footprint tile (empty when it can); fills ``t.axes``/``t.block``."""
    if t.batch:
        return "a batched permutation behind a host launcher: the host's grid does not tile it"
    if (
        t.a.pivot is None
        or t.b.pivot is None
        or not t.a.pivot.startswith("gid.")
        or not t.b.pivot.startswith("gid.")
    ):
        return (
            "the kernel's coordinates are not the global thread indices, so the host launch's blocks do not "
            "cover tiles"
        )
    ax_a, ax_b = t.a.pivot[4:], t.b.pivot[4:]
    block = ms.block_dims(ctx)
    if block is None:
        site = ctx.launch_site
        return f"the host's block size ({site.config[1] if site and len(site.config) > 1 else '?'}) is not a constant"
    dims = dict(zip("xyz", block, strict=True))
    other = ({"x", "y", "z"} - {ax_a, ax_b}).pop()
    if dims[other] != 1:
        return f"the host's block has {dims[other]} threads along {other}, which the tile does not use"
    ta, tb = dims[ax_a], dims[ax_b]
    if ta * tb < 64:
        return f"the host's block ({ta}x{tb}) is too small for a shared tile to pay off"
    row = ta + _pad(ta, t.elem_bytes)
    if tb * row * t.elem_bytes > 48 * 1024:
        return "the host's block is too large for a static shared tile"
    t.axes, t.block = (ax_a, ax_b), block
    return ""


def _pad(width: int, elem_bytes: int) -> int:
    """Padding that gives a tile row of ``width`` elements an odd number of 4-byte words."""
    if elem_bytes >= 4:
        return 1
    for pad in range(1, 9):
        row = (width + pad) * elem_bytes
        if row % 4 == 0 and (row // 4) % 2 == 1:
            return pad
    return 1


def _host_code(ctx: RecipeContext, t: Transpose) -> str:
    assert t.axes is not None and t.block is not None
    ax_a, ax_b = t.axes
    dims = dict(zip("xyz", t.block, strict=True))
    ta, tb = dims[ax_a], dims[ax_b]
    rename = _names(t)
    src_i = t.src_index.c_text(rename)
    dst_i = t.dst_index.c_text(rename)
    row = ta + _pad(ta, t.elem_bytes)
    body = f"""
    // Tiled transpose (kernellsp recipe {NAME}) under the host's {t.block[0]}x{t.block[1]} block: the block's
    // {ta}x{tb} footprint is read along {t.src}'s contiguous coordinate into a padded shared tile and written
    // along {t.dst}'s, so both phases are coalesced.
    __shared__ {t.ctype} kl_tile[{tb}][{row}];
    const long long kl_na = {ms.wide(t.a.extent)};
    const long long kl_nb = {ms.wide(t.b.extent)};
    const long long kl_a0 = (long long)blockIdx.{ax_a} * {ta};
    const long long kl_b0 = (long long)blockIdx.{ax_b} * {tb};
    const int kl_t = threadIdx.x + threadIdx.y * blockDim.x;
    {{
        const int kl_ia = kl_t % {ta}, kl_ib = kl_t / {ta};
        const long long kl_a = kl_a0 + kl_ia;
        const long long kl_b = kl_b0 + kl_ib;
        if (kl_a < kl_na && kl_b < kl_nb) {{
            kl_tile[kl_ib][kl_ia] = {t.src}[{src_i}];
        }}
    }}
    __syncthreads();
    {{
        const int kl_ib = kl_t % {tb}, kl_ia = kl_t / {tb};
        const long long kl_a = kl_a0 + kl_ia;
        const long long kl_b = kl_b0 + kl_ib;
        if (kl_a < kl_na && kl_b < kl_nb) {{
            {t.dst}[{dst_i}] = kl_tile[kl_ib][kl_ia];
        }}
    }}
"""
    return f"{signature_text(ctx)}\n{{{body}}}\n"
