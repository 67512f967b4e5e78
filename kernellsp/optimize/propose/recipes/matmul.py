"""Tiled matrix product: shared-memory block tiles, 8x8 register blocking per thread, 16-byte accesses.

Matches ``C[i,j] = f(init + sum_k A[i,k] * B[k,j], C[i,j])`` in fp32 with any of the four operand
layouts (row- or column-major A and B, read from the index expressions, leading dimensions as
parameters or expressions such as ``K``), either output layout, with or without alpha/beta (``f``
is the user's own output expression, ``init`` the accumulator's start, e.g. a bias ``b[j]``), 2-D
launches either way round, 1-D launches split with ``/`` and ``%``, 1-D blocks split into rows and
columns, and batches over ``blockIdx.z`` or an outer loop. The kernel is replaced by the generator
in :mod:`._gemm_codegen` (a warp-tiled SGEMM: 128x128 block tiles, 8 or 16 deep k-slices, 64x32
warp tiles, 8x8 outputs per thread, double-buffered shared memory fed through registers or cp.async,
predicated edges): every output accumulates in the same k order as the naive loop, so the result is
bit-identical to it. A ``__global__`` entry gets a 1-D grid of one 256-thread block per output tile
through the spec's launch field; a kernel launched by host code keeps the host's launch when its
block is 256 threads (the blocks then loop over the tiles).

Parameters: ``tile`` names the block tile, k-slice depth and pipeline (``r2``: register prefetch,
two blocks per SM; ``r1``: one block per SM, no register cap; ``s3``: three cp.async stages), and
``orient`` computes C or its transpose (``BA`` swaps the roles of A and B, which changes which
operand is transposed into shared memory). Points are pruned with ptxas' resource report: a tile
that spills more than a few registers or cannot be resident is not proposed.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, TypeVar

from kernellsp.optimize.propose.recipes import _gemm_codegen as cg
from kernellsp.optimize.propose.recipes import _memshape as ms
from kernellsp.optimize.propose.recipes._elementwise.launch import spec_expr
from kernellsp.optimize.propose.recipes._product.analysis import analyse
from kernellsp.optimize.propose.recipes._product.model import Product, Term, is_batch
from kernellsp.optimize.propose.recipes.base import (
    Decline,
    Match,
    RecipeContext,
    RecipeError,
    Rewrite,
    signature_text,
)
from kernellsp.source import spec as specmod
from kernellsp.source.ir import Poly

NAME = "matmul-tiled"
ARCHETYPE = "matmul"
RULES = ("KL504", "KL502", "KL503", "KL510", "KL404", "KL601")

#: Tile configurations by name, best first on an H100 at 4096^3 (tests/bench/results/gemm-codegen-h100.md).
TILES: dict[str, cg.GemmTile] = {
    "128x128x16/r2": cg.GemmTile(bk=16, min_blocks=2),
    "128x128x8/r2": cg.GemmTile(bk=8, min_blocks=2),
    "128x128x16/r1w": cg.GemmTile(bk=16, wm=32, wn=64, min_blocks=1),
    "128x128x8/s3": cg.GemmTile(bk=8, stages=3, min_blocks=2),
    "128x128x16/r1": cg.GemmTile(bk=16, min_blocks=1),
    "128x128x8/s4": cg.GemmTile(bk=8, stages=4, min_blocks=2),
    "64x128x8/r2": cg.GemmTile(bm=64, wm=32, wn=64, min_blocks=2),
}
PARAMS: dict[str, list[Any]] = {"tile": list(TILES), "orient": ["AB", "BA"]}

#: ptxas spill stores (bytes) above which a tile is not proposed; the measured tiles spill 48-88 bytes
#: outside the inner loop at no measurable cost.
MAX_SPILL_BYTES = 128
#: Points offered (best first), before the ptxas prune.
MAX_POINTS = 8
#: Blocks of a relaunched host kernel: 4 per multiprocessor of an H100 (132), each looping over tiles.
PERSISTENT_GRID = 528


@dataclass
class Gemm:
    """What :func:`match` found: the generator's binding (orientation AB) and the spec extents."""

    binding: cg.GemmBinding
    m_spec: str | None
    n_spec: str | None
    batch_spec: str | None
    host_block: int | None = None
    #: Under a host launcher whose block no tile fits: relaunch with the tile's block and a persistent grid
    #: of :data:`PERSISTENT_GRID` blocks that loop over the tiles (any grid is correct for a tile loop).
    relaunch: bool = False


G = TypeVar("G", bound=Gemm)


def match(ctx: RecipeContext) -> Match | Decline:
    p = analyse(ctx)
    if isinstance(p, str):
        return Decline(p)
    got = classify(ctx, p)
    if isinstance(got, str):
        return Decline(got)
    return Match(describe(got.binding, got.host_block, relaunch=got.relaunch), got)


def describe(
    b: cg.GemmBinding, host_block: int | None, relaunch: bool = False, **extra: str
) -> dict[str, str]:
    """The binding as ``--explain`` shows it (``extra`` lines after the sizes)."""
    out = {
        "A": f"{b.a.name} ({b.a.layout}-major, leading dimension {b.a.ld})",
        "B": f"{b.b.name} ({b.b.layout}-major, leading dimension {b.b.ld})",
        "C": f"{b.c.name} ({b.c.layout}-major, leading dimension {b.c.ld})",
        "M x N x K": f"{b.m} x {b.n} x {b.k}",
        **extra,
        "output": b.c.name + "[i,j] = " + b.epilogue.format(acc="acc", c=f"{b.c.name}[i,j]", i="i", j="j"),
        "accumulator starts at": b.init.format(i="i", j="j"),
        "launch": f"kept (host block of {host_block} threads)"
        if host_block
        else (
            f"relaunched through the host launcher ({PERSISTENT_GRID} blocks looping over the tiles)"
            if relaunch
            else "spec launch field (1-D grid)"
        ),
    }
    if b.batch is not None:
        out["batch"] = b.batch
    return out


def classify(ctx: RecipeContext, p: Product) -> Gemm | str:
    """Read the GEMM binding off the analysed product, or say why it is not a matrix-matrix product."""
    got_roles = roles(p)
    if isinstance(got_roles, str):
        return got_roles
    p, ci, cj, cb = got_roles
    f0, f1, st = p.factors[0], p.factors[1], p.store
    for t in (f0, f1, st):
        ct = ctx.ctype(t.access.base)
        if ct != "float":
            kind = "f16/bf16 (the matmul-tensorcore recipe's)" if "half" in ct or "16" in ct else ct
            return f"{t.access.base} holds {kind}: the tiled recipe covers fp32 operands and output"
    why = p.conversion_decline("tiled")
    if why:
        return why
    if p.acc_ctype != "float":
        return f"the accumulator {p.acc} is {p.acc_ctype}: the tiled recipe accumulates in fp32 like the naive loop"
    binding = bind(ctx, p, ci, cj, cb)
    if isinstance(binding, str):
        return binding
    return with_launch(ctx, Gemm(binding, None, None, None), ci, cj, cb)


def bind(
    ctx: RecipeContext, p: Product, ci: ms.Coord, cj: ms.Coord, cb: ms.Coord | None
) -> cg.GemmBinding | str:
    """The generators' binding of product ``p`` with row, column and batch coordinates ``ci``, ``cj``, ``cb``:
    operand layouts from the index expressions, the output expression and initial value over ``{i}``/``{j}``
    (shared with the tensor-core recipe)."""
    f0, f1, st = p.factors[0], p.factors[1], p.store
    names = {c.name for c in p.coords} | {p.k}
    a_op = _operand(f0, ci.name, p.k, names, cb)
    b_op = _operand(f1, p.k, cj.name, names, cb)
    c_op = _operand(st, ci.name, cj.name, names, cb)
    for what, op in (("A", a_op), ("B", b_op), ("C", c_op)):
        if isinstance(op, str):
            return f"{what} ({(f0, f1, st)['ABC'.index(what)].access.base}): {op}"
    assert not isinstance(a_op, str) and not isinstance(b_op, str) and not isinstance(c_op, str)
    for _text, t in p.extras:
        if cb is not None and cb.name in t.index.symbols():
            return f"the output expression reads {t.access.base} per batch item"
    epilogue, init = p.epilogue, p.init
    for old, new in ((ci.name, "{i}"), (cj.name, "{j}")):
        epilogue = epilogue.replace("{" + old + "}", new)
        init = init.replace("{" + old + "}", new)
    clash = sorted(q.name for q in ctx.ir.params if q.name.startswith(cg.P))
    if clash:
        return f"parameter {clash[0]} starts with the generator's prefix {cg.P}"
    return cg.GemmBinding(
        entry=ctx.kernel.name,
        signature=signature_text(ctx),
        m=ci.extent.c_text(),
        n=cj.extent.c_text(),
        k=p.kbound.c_text(),
        a=a_op,
        b=b_op,
        c=c_op,
        epilogue=epilogue,
        init=init,
        batch=cb.extent.c_text() if cb else None,
    )


def spec_extents(
    ctx: RecipeContext, ci: ms.Coord, cj: ms.Coord, cb: ms.Coord | None
) -> tuple[str, str, str | None] | str:
    """M, N and the batch count as spec expressions (for the spec's launch field), or why one is missing."""
    m_spec, n_spec = spec_expr(ctx, ci.extent), spec_expr(ctx, cj.extent)
    batch_spec = spec_expr(ctx, cb.extent) if cb else None
    for what, spec_text, coord in (("M", m_spec, ci), ("N", n_spec, cj), ("batch", batch_spec, cb)):
        if coord is not None and spec_text is None:
            return (
                f"the extent {coord.extent} ({what}) is not given by the spec (scalar arguments with a value)"
            )
    assert m_spec is not None and n_spec is not None
    return m_spec, n_spec, batch_spec


def roles(p: Product) -> tuple[Product, ms.Coord, ms.Coord, ms.Coord | None] | str:
    """The product with its factors as A and B, the row coordinate (A's own), the column coordinate
    (B's own) and the batch coordinate, if any.

    ``a[..] * b[..]`` and ``b[..] * a[..]`` are one product: A is the factor that moves with the
    output's row, the coordinate along which the output is *not* contiguous (a row-major C). Only an
    output contiguous along neither keeps the order written. The binding is then the same however the
    kernel orders its operands (the ``BA`` orientation still offers the transposed problem).
    """
    got = _coordinate_roles(p)
    if isinstance(got, str):
        return got
    ci, cj, cb = got
    st = p.store.index
    if st.coeff(cj.name) != Poly.const(1) and st.coeff(ci.name) == Poly.const(1):
        p = replace(p, factors=(p.factors[1], p.factors[0]), converts=(p.converts[1], p.converts[0]))
        ci, cj = cj, ci
    return p, ci, cj, cb


def _coordinate_roles(p: Product) -> tuple[ms.Coord, ms.Coord, ms.Coord | None] | str:
    """The coordinates f0 alone moves with (rows), f1 alone (columns) and the batch, if any."""
    f0, f1, st = p.factors[0], p.factors[1], p.store
    for c in p.coords:
        if not p.moves(st, c.name):
            return f"the output does not move with {c.origin}: several threads would write one element"
    # A batch coordinate is known by where it comes from (an outer loop, blockIdx.z): a batch that only
    # one operand moves with (a shared B) would otherwise look like a second row coordinate.
    known = [c for c in p.coords if is_batch(p, c)]
    rows = [c for c in p.coords if c not in known and p.moves(f0, c.name) and not p.moves(f1, c.name)]
    cols = [c for c in p.coords if c not in known and p.moves(f1, c.name) and not p.moves(f0, c.name)]
    batch = [c for c in p.coords if c not in rows and c not in cols]
    if not rows or not cols:
        return (
            "one factor moves with no output coordinate of its own: a matrix-vector product (matvec recipe), "
            "not a matrix-matrix product"
        )
    if len(rows) > 1 or len(cols) > 1:
        return "an operand moves with two output coordinates (a tensor contraction, not a matrix product)"
    if len(batch) > 1:
        return "more than one batch coordinate"
    return rows[0], cols[0], (batch[0] if batch else None)


def with_launch(
    ctx: RecipeContext,
    g: G,
    ci: ms.Coord,
    cj: ms.Coord,
    cb: ms.Coord | None,
    threads: set[int] | None = None,
    kernels: str = "the tiled kernels",
) -> G | str:
    """``g`` with the host launch's block (host launchers: a 1-D block of one of ``threads``, the fp32 tiles'
    by default) or the spec's M, N and batch counts (shared with the tensor-core recipe)."""
    if ctx.host_launched:
        sizes = threads if threads is not None else {t.threads for t in TILES.values()}
        dims = ms.block_dims(ctx)
        if dims is None:
            return "the host launch's block size could not be read (it must be a constant)"
        if dims[1] != 1 or dims[2] != 1 or dims[0] not in sizes:
            # The tiles need their own block: relaunch through the launcher (grid and block only).
            if ctx.launch_site is None or len(ctx.launch_site.config) < 2:
                return f"the host launches blocks of {dims[0]}x{dims[1]}x{dims[2]} and its launch cannot be rewritten"
            g.relaunch = True
            return g
        g.host_block = dims[0]
        return g
    extents = spec_extents(ctx, ci, cj, cb)
    if isinstance(extents, str):
        return extents
    g.m_spec, g.n_spec, g.batch_spec = extents
    return g


def _operand(t: Term, first: str, second: str, names: set[str], batch: Any) -> cg.Operand | str:
    """The operand's layout from its index ``s1*first + s2*second (+ batch + offset)``."""
    idx = t.index
    s1, s2 = idx.coeff(first), idx.coeff(second)
    for s in (s1, s2):
        if s.depends_on(names):
            return f"the index {idx} is not linear in the matrix coordinates"
    layout: cg.Layout
    if s2 == Poly.const(1) and s1 != Poly.const(1):
        layout, ld = "row", s1
    elif s1 == Poly.const(1) and s2 != Poly.const(1):
        layout, ld = "col", s2
    else:
        return f"the index {idx} is contiguous along neither matrix dimension (strides {s1} and {s2})"
    if ld == Poly():
        return f"the index {idx} does not move along one of the matrix dimensions"
    bstride = idx.coeff(batch.name) if batch is not None else Poly()
    if bstride.depends_on(names):
        return f"the batch stride of {idx} is not linear"
    offset = idx.without(names)
    return cg.Operand(
        t.access.base,
        layout,
        ld.c_text(),
        offset.c_text() if offset != Poly() else "0",
        bstride.c_text() if bstride != Poly() else "0",
    )


def oriented(b: cg.GemmBinding, orient: str) -> cg.GemmBinding:
    """``b`` itself (``AB``) or the transposed problem ``C^T = B^T A^T`` (``BA``): same outputs, other roles."""
    if orient == "AB":
        return b
    flip = {"row": "col", "col": "row"}
    a = replace(b.b, layout=flip[b.b.layout])  # type: ignore[arg-type]
    bb = replace(b.a, layout=flip[b.a.layout])  # type: ignore[arg-type]
    c = replace(b.c, layout=flip[b.c.layout])  # type: ignore[arg-type]
    swap = {"{i}": "\x00j", "{j}": "\x00i"}
    epi, init = b.epilogue, b.init
    for old, new in swap.items():
        epi, init = epi.replace(old, new), init.replace(old, new)
    epi = epi.replace("\x00i", "{i}").replace("\x00j", "{j}")
    init = init.replace("\x00i", "{i}").replace("\x00j", "{j}")
    return replace(b, m=b.n, n=b.m, a=a, b=bb, c=c, epilogue=epi, init=init)


def points(ctx: RecipeContext, m: Match) -> list[dict[str, Any]]:
    """Tile and orientation points, best first, without those ptxas says spill heavily or cannot be resident."""
    g: Gemm = m.data
    pts = [
        {"tile": name, "orient": o}
        for name in TILES
        for o in ("AB", "BA")
        if g.host_block is None or TILES[name].threads == g.host_block
    ]
    # Best guesses first: the two best tiles as written, the best one transposed (it moves the shared-memory
    # transposition to the other operand, which pays for some layouts), then the rest alternating.
    order = list(TILES)
    pts.sort(key=lambda q: 2 * order.index(q["tile"]) + (0 if q["orient"] == "AB" else 3))
    # The loop verifies a few per round; compiling all 14 for the ptxas prune cost 11 s of a 124 s run (H100).
    return prune(ctx, m, pts[:MAX_POINTS])


def prune(ctx: RecipeContext, m: Match, pts: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """``pts`` without those whose kernel ptxas reports spilling more than :data:`MAX_SPILL_BYTES` or too large
    to be resident (registers x threads > 64K, static shared memory > 48 KB).

    All points are compiled in one nvcc run: the file plus each point's kernel under its own name. A
    template kernel has no instantiation under the new names, so its points are kept unpruned.
    """
    import re

    from kernellsp.build import nvcc
    from kernellsp.source.model import parse_source

    if ctx.kernel.template_params:
        return pts
    name = ctx.kernel.name
    extra: list[str] = []
    names: list[str] = []
    keep: list[dict[str, Any]] = []
    for i, q in enumerate(pts):
        try:
            code = generate(ctx, m, q).code
        except RecipeError:
            continue
        new = f"{name}__kl_point{i}"
        extra.append(re.sub(rf"\b{re.escape(name)}(?=\s*\()", new, code, count=1))
        names.append(new)
        keep.append(q)
    text = ctx.text + "\n\n" + "\n".join(extra)
    res = nvcc.build(Path(ctx.model.path or "candidate.cu"), text, parse_source(text, ctx.model.path))
    if not res.ok:
        # One point that does not compile must not hide the others: keep them all, the gate decides.
        return keep
    out = []
    for q, new in zip(keep, names, strict=True):
        r = next((r for r in res.resources if nvcc.match_kernel(r.mangled, new)), None)
        t = TILES[str(q["tile"])]
        if r is None or (
            r.spill_stores <= MAX_SPILL_BYTES
            and r.registers * t.threads <= 65536
            and r.smem_static <= 48 * 1024
        ):
            out.append(q)
    return out


def generate(ctx: RecipeContext, m: Match, params: dict[str, Any]) -> Rewrite:
    g: Gemm = m.data
    name = str(params.get("tile", next(iter(TILES))))
    tile = TILES.get(name)
    if tile is None:
        raise RecipeError(f"unknown tile {name!r} (known: {', '.join(TILES)})")
    orient = str(params.get("orient", "AB"))
    if orient not in ("AB", "BA"):
        raise RecipeError(f"orient must be AB or BA, not {orient!r}")
    if g.host_block is not None and tile.threads != g.host_block:
        raise RecipeError(f"tile {name} needs {tile.threads}-thread blocks; the host launches {g.host_block}")
    b = oriented(g.binding, orient)
    try:
        code = cg.gemm_body(b, tile, tile_loop=g.host_block is not None or g.relaunch)
    except ValueError as exc:
        raise RecipeError(str(exc)) from None
    if g.relaunch:
        return Rewrite(ctx.kernel.name, code, host_config=(str(PERSISTENT_GRID), str(tile.threads)))
    if g.host_block is not None:
        return Rewrite(ctx.kernel.name, code)
    assert g.m_spec is not None and g.n_spec is not None
    ms_, ns_ = (g.m_spec, g.n_spec) if orient == "AB" else (g.n_spec, g.m_spec)
    launch = cg.gemm_launch(tile, ms_, ns_, g.batch_spec)
    return Rewrite(ctx.kernel.name, code, specmod.LaunchSpec.model_validate(launch))
