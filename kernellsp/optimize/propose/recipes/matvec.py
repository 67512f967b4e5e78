"""Matrix-vector product at memory bandwidth: a warp per row, or a column-split block reduction.

Matches ``y[i] = f(init + sum_k A[i,k] * x[k], y[i])`` in fp32, where one factor moves with the
output coordinate and the reduction variable (the matrix) and the other with the reduction variable
only (the vector): row-wise products (``A[i*lda + k]``, the naive one-thread-per-row walk that a warp
reads 32 rows apart), column-wise ones (``A[i + k*lda]``, or ``A^T x`` over a row-major A), with or
without alpha/beta, strided vectors, a batch over ``blockIdx.z`` or an outer loop.

The rewrite (:func:`._gemv_codegen.gemv_body`) streams the matrix once with 16-byte loads: for a
row-major matrix one warp owns a row (several loads in flight per lane, a shuffle reduction); for a
column-major one each thread owns four consecutive outputs and the block splits the reduction into
groups whose partial sums meet in shared memory. The sum is a tree, not the naive left-to-right
chain, so results agree within the spec's tolerance rather than bit for bit. A ``__global__`` entry
gets its grid through the spec's launch field; a host-launched kernel keeps the host's 1-D launch
(any grid: the warps and blocks stride over the rows), provided its block is a multiple of 32.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from kernellsp.optimize.propose.recipes import _gemv_codegen as gv
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

NAME = "matvec-bandwidth"
ARCHETYPE = "matvec"
RULES = ("KL404", "KL601", "KL501", "KL510")
#: Row-major matrix: warps per block and 16-byte loads in flight per lane. Column-major: outputs per block.
PARAMS: dict[str, list[Any]] = {"warps": [8, 4], "unroll": [4, 8], "cols": [32, 64]}


@dataclass
class Gemv:
    """What :func:`match` found."""

    binding: gv.GemvBinding
    m_spec: str | None
    batch_spec: str | None
    host_block: int | None = None


def match(ctx: RecipeContext) -> Match | Decline:
    p = analyse(ctx)
    if isinstance(p, str):
        return Decline(p)
    got = classify(ctx, p)
    if isinstance(got, str):
        return Decline(got)
    b = got.binding
    binding = {
        "matrix": f"{b.a.name} ({'row' if b.a.layout == 'row' else 'column'}-major, leading dimension {b.a.ld})",
        "vector": f"{b.x} (stride {b.x_stride})",
        "output": f"{b.y}[i] (stride {b.y_stride}) = " + b.epilogue.format(acc="acc", c=f"{b.y}[i]", i="i"),
        "rows x reduction": f"{b.m} x {b.n}",
        "accumulator starts at": b.init.format(i="i"),
        "launch": f"kept (host block of {got.host_block} threads)" if got.host_block else "spec launch field",
    }
    if b.batch is not None:
        binding["batch"] = b.batch
    return Match(binding, got)


def classify(ctx: RecipeContext, p: Product) -> Gemv | str:
    """Read the GEMV binding off the analysed product, or say why it is not a matrix-vector product."""
    st = p.store
    roles = _roles(p)
    if isinstance(roles, str):
        return roles
    mat, vec, ci, cb = roles
    for t in (mat, vec, st):
        ct = ctx.ctype(t.access.base)
        if ct != "float":
            return f"{t.access.base} holds {ct}: the matvec recipe covers fp32 operands and output"
    why = p.conversion_decline("matvec")
    if why:
        return why
    if p.acc_ctype != "float":
        return f"the accumulator {p.acc} is {p.acc_ctype}: the matvec recipe accumulates in fp32"
    names = {c.name for c in p.coords} | {p.k}
    layout_ld = _matrix_layout(p, mat, ci, names)
    if isinstance(layout_ld, str):
        return layout_ld
    layout, ld = layout_ld
    strides = _strides(p, mat, vec, ci, cb, names)
    if isinstance(strides, str):
        return strides
    xs, ys, bstride = strides
    clash = sorted(q.name for q in ctx.ir.params if q.name.startswith(gv.P))
    if clash:
        return f"parameter {clash[0]} starts with the generator's prefix {gv.P}"
    epilogue = p.epilogue.replace("{" + ci.name + "}", "{i}")
    init = p.init.replace("{" + ci.name + "}", "{i}")
    moff = mat.index.without(names)

    def text(q: Poly) -> str:
        return q.c_text() if q != Poly() else "0"

    binding = gv.GemvBinding(
        entry=ctx.kernel.name,
        signature=signature_text(ctx),
        m=ci.extent.c_text(),
        n=p.kbound.c_text(),
        a=gv.Operand(mat.access.base, layout, ld.c_text(), text(moff), text(bstride[mat.access.base])),
        x=vec.access.base,
        y=st.access.base,
        x_stride=xs.c_text(),
        y_stride=ys.c_text(),
        epilogue=epilogue,
        init=init,
        batch=cb.extent.c_text() if cb else None,
        x_batch_stride=text(bstride[vec.access.base]),
        y_batch_stride=text(bstride[st.access.base]),
    )
    return _with_launch(ctx, Gemv(binding, None, None), ci, cb)


def _roles(p: Product) -> tuple[Term, Term, ms.Coord, ms.Coord | None] | str:
    """The matrix and the vector among the factors, the row coordinate and the batch coordinate (if any)."""
    f0, f1, st = p.factors[0], p.factors[1], p.store
    for c in p.coords:
        if not p.moves(st, c.name):
            return f"the output does not move with {c.origin}: several threads would write one element"
    known = [c for c in p.coords if is_batch(p, c)]
    own0 = [c for c in p.coords if c not in known and p.moves(f0, c.name) and not p.moves(f1, c.name)]
    own1 = [c for c in p.coords if c not in known and p.moves(f1, c.name) and not p.moves(f0, c.name)]
    if own0 and own1:
        return "both factors move with an output coordinate of their own: a matrix-matrix product (matmul recipe)"
    if not own0 and not own1:
        return "neither factor moves with an output coordinate: a dot product, not a matrix-vector product"
    mat, vec = (f0, f1) if own0 else (f1, f0)
    rows = own0 or own1
    if len(rows) > 1:
        return "the matrix moves with two output coordinates (a tensor contraction)"
    ci = rows[0]
    batch = [c for c in p.coords if c is not ci]
    if len(batch) > 1:
        return "more than one batch coordinate"
    cb = batch[0] if batch else None
    return mat, vec, ci, cb


def _matrix_layout(p: Product, mat: Term, ci: ms.Coord, names: set[str]) -> tuple[gv.Layout, Poly] | str:
    """The matrix's layout (contiguous along the rows' reduction or along the rows) and leading dimension."""
    si, sk = mat.index.coeff(ci.name), mat.index.coeff(p.k)
    if si.depends_on(names) or sk.depends_on(names):
        return f"the index of {mat.access.base} is not linear in the row and reduction variables"
    layout: gv.Layout
    if sk == Poly.const(1) and si != Poly.const(1):
        layout, ld = "row", si
    elif si == Poly.const(1) and sk != Poly.const(1):
        layout, ld = "col", sk
    else:
        return (
            f"{mat.access.base} is contiguous along neither the rows nor the reduction (strides {si}, {sk})"
        )
    return layout, ld


def _strides(
    p: Product, mat: Term, vec: Term, ci: ms.Coord, cb: ms.Coord | None, names: set[str]
) -> tuple[Poly, Poly, dict[str, Poly]] | str:
    """The vector's and the output's element strides and every operand's batch stride."""
    st = p.store
    xs, ys = vec.index.coeff(p.k), st.index.coeff(ci.name)
    if xs.depends_on(names) or ys.depends_on(names):
        return "a vector index is not linear"
    for t, what in ((vec, "vector"), (st, "output")):
        if t.index.without(names) != Poly():
            return f"the {what} {t.access.base} is read at a constant offset ({t.index.without(names)}), not from 0"
    bstride = {t.access.base: (t.index.coeff(cb.name) if cb is not None else Poly()) for t in (mat, vec, st)}
    if any(v.depends_on(names) for v in bstride.values()):
        return "a batch stride is not linear"
    if cb is not None and bstride[st.access.base] == Poly():
        return f"the output does not move with the batch coordinate {cb.origin}"
    for _, t in p.extras:
        if cb is not None and cb.name in t.index.symbols():
            return f"the output expression reads {t.access.base} per batch item"
    return xs, ys, bstride


def _with_launch(ctx: RecipeContext, g: Gemv, ci: ms.Coord, cb: ms.Coord | None) -> Gemv | str:
    """``g`` with the host launch's block (host launchers) or the spec's row and batch counts."""
    if ctx.host_launched:
        dims = ms.block_dims(ctx)
        if dims is None:
            return "the host launch's block size could not be read (it must be a constant)"
        if dims[1] != 1 or dims[2] != 1 or dims[0] % 32 or dims[0] > 1024:
            return (
                f"the host launches blocks of {dims[0]}x{dims[1]}x{dims[2]}; the matvec kernel needs a 1-D block "
                "of whole warps (this recipe keeps the host's launch)"
            )
        if cb is not None:
            return "a batched matrix-vector product behind a host launcher: the host's 1-D grid has no batch axis"
        g.host_block = dims[0]
        return g
    g.m_spec = spec_expr(ctx, ci.extent)
    if g.m_spec is None:
        return f"the row count {ci.extent} is not given by the spec (scalar arguments with a value)"
    if cb is not None:
        g.batch_spec = spec_expr(ctx, cb.extent)
        if g.batch_spec is None:
            return f"the batch count {cb.extent} is not given by the spec"
    return g


def points(ctx: RecipeContext, m: Match) -> list[dict[str, Any]]:
    g: Gemv = m.data
    if g.host_block is not None:
        if g.binding.a.layout == "row":
            return [{"unroll": 8}, {"unroll": 4}]
        return [{"cols": 32}]
    if g.binding.a.layout == "row":
        return [{"warps": 8, "unroll": 4}, {"warps": 4, "unroll": 8}, {"warps": 8, "unroll": 8}]
    return [{"cols": 32}, {"cols": 64}]


def _tile(g: Gemv, params: dict[str, Any]) -> gv.GemvTile:
    if g.binding.a.layout == "row":
        warps = g.host_block // 32 if g.host_block else int(params.get("warps", 8))
        return gv.GemvTile(warps=warps, unroll=int(params.get("unroll", 4)))
    cols = int(params.get("cols", 32))
    threads = g.host_block or 256
    if g.host_block:
        cols = 32
    splits = threads // (cols // 4)
    if splits < 1 or splits * (cols // 4) != threads:
        raise RecipeError(f"{threads} threads do not split into groups of {cols // 4}")
    return gv.GemvTile(cols_per_block=cols, splits=splits)


def generate(ctx: RecipeContext, m: Match, params: dict[str, Any]) -> Rewrite:
    g: Gemv = m.data
    t = _tile(g, params)
    try:
        code = gv.gemv_body(g.binding, t)
    except ValueError as exc:
        raise RecipeError(str(exc)) from None
    if g.host_block is not None:
        return Rewrite(ctx.kernel.name, code)
    assert g.m_spec is not None
    launch = gv.gemv_launch(t, g.binding.a.layout, g.m_spec, g.batch_spec)
    return Rewrite(ctx.kernel.name, code, specmod.LaunchSpec.model_validate(launch))
