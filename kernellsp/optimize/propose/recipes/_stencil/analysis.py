"""The stencil analysis: loop ranges, the inputs read around the point and their offsets, extents, the launch, the halo."""

from __future__ import annotations

from typing import Any

from kernellsp.optimize.propose.recipes import _memshape as ms
from kernellsp.optimize.propose.recipes._elementwise.launch import spec_expr
from kernellsp.optimize.propose.recipes._stencil.model import Filter, Read, Stencil, Tiled
from kernellsp.optimize.propose.recipes.base import (
    CTYPE_BYTES,
    RecipeContext,
)
from kernellsp.source.ir import THREAD_SYMBOLS, KernelIR, Poly, walk


def _kernel_decline(ir: KernelIR) -> str:
    """Why the kernel as a whole is not one independent point per thread (sync, shared memory, grid-stride
    or while loops, a 3-D launch)."""
    if ir.barriers or ir.atomics or ir.warp_ops:
        return "the kernel synchronises or uses atomics/warp primitives"
    if any(v.shared for v in ir.locals.values()):
        return "the kernel already uses shared memory"
    if any(lp.grid_stride for lp in ir.loops) or "gridDim" in ir.identifiers(ir.body):
        return "a grid-stride loop: points are not one per thread"
    if any(lp.kind != "for" for lp in ir.loops):
        return "a while/do loop in the point's code"
    if ir.uses_builtin(ir.body, ("threadIdx",)) and any(
        "".join(ir.text(n).split()) in ("threadIdx.z", "blockIdx.z", "blockDim.z")
        for n in walk(ir.body)
        if n.type == "field_expression"
    ):
        return "a 3-D launch: 3-D stencils are not tiled by this recipe"
    return ""


def _inputs(
    ctx: RecipeContext, by_array: dict[str, list[Any]], ranges: dict[str, tuple[Poly, Poly]]
) -> tuple[list[Tiled], list[Filter], int] | str:
    """The inputs read around the point (tiled, with the grid's dimensions) and the filters (read at no
    thread-dependent index)."""
    ir = ctx.ir
    tiled: list[Tiled] = []
    filters: list[Filter] = []
    dims = 0
    for array, accs in by_array.items():
        idx = [ms.access_index(ir, a) for a in accs]
        if any(p is None for p in idx):
            return f"an index of {array} is not integer arithmetic (a min/max clamp or a macro)"
        polys = [p for p in idx if p is not None]
        if not any(p.depends_on(THREAD_SYMBOLS) for p in polys):
            filters.append(
                Filter(array, ctx.ctype(array), [a.node for a in accs], _count_spec(ctx, array) or "")
            )
            continue
        t = _tiled(ctx, array, accs, polys, ranges)
        if isinstance(t, str):
            return t
        if t is None:
            continue  # read at the point only (a pointwise input): no tile needed
        d = 2 if t.pitch is not None else 1
        if dims and d != dims:
            return "inputs are read as 1-D and 2-D grids at once"
        dims = d
        tiled.append(t)
    if not tiled:
        return "no input is read around the point (no neighbours, no filter loop): not a stencil"
    return tiled, filters, dims


def _loop_ranges(ir: KernelIR) -> dict[str, tuple[Poly, Poly]] | str:
    """``var -> (first, last)`` (inclusive) of counted loops (``+1`` steps), divmod atoms allowed."""
    out: dict[str, tuple[Poly, Poly]] = {}
    for lp in ir.loops:
        if lp.var is None:
            return "a loop without a counter"
        init = lp.node.child_by_field_name("initializer")
        start_node = None
        if init is not None and init.type == "declaration":
            d = init.child_by_field_name("declarator")
            start_node = d.child_by_field_name("value") if d is not None else None
        elif init is not None and init.type == "assignment_expression":
            start_node = init.child_by_field_name("right")
        start = ir.poly(start_node, divmod=True) if start_node is not None else None
        cond = lp.node.child_by_field_name("condition")
        last = None
        if cond is not None and cond.type == "binary_expression":
            op = ir.text(cond.child_by_field_name("operator"))
            left, right = cond.child_by_field_name("left"), cond.child_by_field_name("right")
            if left is not None and ir.text(left).strip() == lp.var and op in ("<", "<="):
                b = ir.poly(right, divmod=True)
                if b is not None:
                    last = b - 1 if op == "<" else b
        if start is None or last is None or lp.step != Poly.const(1):
            out[lp.var] = (Poly.sym("?"), Poly.sym("?"))  # unusable; an offset over it declines
            continue
        out[lp.var] = (start, last)
    return out


def _tiled(
    ctx: RecipeContext, array: str, accs: list[Any], polys: list[Poly], ranges: dict[str, tuple[Poly, Poly]]
) -> Tiled | str | None:
    ir = ctx.ir
    pitch = None
    if any(p.depends_on({"gid.y"}) for p in polys):
        pitches = {p.coeff("gid.y") for p in polys}
        if len(pitches) != 1:
            return f"{array} is read with different row pitches"
        pitch = pitches.pop()
        if pitch.depends_on(THREAD_SYMBOLS) or pitch == Poly():
            return f"{array}'s row pitch is not uniform"
    reads = []
    for a, p in zip(accs, polys, strict=True):
        rest = p - Poly.sym("gid.x") - (pitch * Poly.sym("gid.y") if pitch is not None else Poly())
        if rest.depends_on(THREAD_SYMBOLS) or p.coeff("gid.x") != Poly.const(1):
            return f"{array} is read at {a.index_text}, not at the point plus an offset"
        offy, offx = _split_rows(rest, pitch)
        if offx is None or offy is None:
            return f"{array}[{a.index_text}]: the offset does not split into a row and a column offset"
        reads.append(Read(a.node, offx, offy))
    if all(r.offx == Poly() and r.offy == Poly() for r in reads):
        return None
    count = _count_c(ctx, array)
    if count is None:
        return f"the element count of {array} is not expressible in the kernel's parameters (spec count)"
    ctype = ctx.ctype(array)
    size = ctx.elem_bytes(array) or CTYPE_BYTES.get(ctype)
    if size is None:
        return f"the element type of {array} is unknown"
    t = Tiled(array, ctype, size, pitch, reads, count)
    for r in reads:
        for off, lo, hi in ((r.offx, t.min_x, t.max_x), (r.offy, t.min_y, t.max_y)):
            got = _bounds(off, ranges)
            if isinstance(got, str):
                return got
            lo.append(got[0])
            hi.append(got[1])
    del ir
    return t


def _split_rows(rest: Poly, pitch: Poly | None) -> tuple[Poly | None, Poly | None]:
    """``rest = offy * pitch + offx``: terms with the pitch's monomial are rows, the others columns."""
    if pitch is None:
        return Poly(), rest
    if pitch.value is not None:
        # A constant pitch: split constants as offy * pitch + offx with |offx| < pitch / 2.
        c = rest.value
        if c is None:
            return None, None
        q = round(c / pitch.value)
        return Poly.const(q), Poly.const(c - q * pitch.value)
    if len(pitch.terms) != 1:
        return None, None
    ((pm, _),) = pitch.terms.items()
    rows = Poly({m: c for m, c in rest.terms.items() if all(m.count(s) >= pm.count(s) for s in pm)})
    return ms.exact_div(rows, pitch), rest - rows


def _bounds(off: Poly, ranges: dict[str, tuple[Poly, Poly]]) -> tuple[Poly, Poly] | str:
    """(min, max) of an offset over the loop variables' ranges (constant coefficients only)."""
    lo = hi = off
    for var in sorted(off.symbols()):
        if var not in ranges:
            continue
        coef = off.coeff(var)
        if coef.value is None or any(var in m and len(m) > 1 and m.count(var) > 1 for m in off.terms):
            return f"an offset is not linear in the loop variable {var}"
        first, last = ranges[var]
        if (
            first.symbols() & set(ranges)
            or last.symbols() & set(ranges)
            or "?" in first.symbols() | last.symbols()
        ):
            return f"the range of {var} is not a rectangle of known bounds"
        lo = lo.subs(var, first if coef.value > 0 else last)
        hi = hi.subs(var, last if coef.value > 0 else first)
    return lo, hi


def _all_offsets(tiled: list[Tiled]) -> list[Poly]:
    return [p for t in tiled for p in (*t.min_x, *t.max_x, *t.min_y, *t.max_y)]


def _params_in(ir: KernelIR, p: Poly) -> set[str]:
    out: set[str] = set()
    names = {q.name for q in ir.params if not q.is_pointer}
    for s in p.symbols():
        if s in names:
            out.add(s)
        elif s in ir.divmods:
            _, num, den = ir.divmods[s]
            out |= _params_in(ir, num) | _params_in(ir, den)
    return out


def _atom_text(ir: KernelIR, name: str) -> str:
    op, num, den = ir.divmods[name]
    rn = {s: _atom_text(ir, s) for s in (num.symbols() | den.symbols()) if s in ir.divmods}
    return f"(({num.c_text(rn)}) {op} ({den.c_text(rn)}))"


def _count_spec(ctx: RecipeContext, array: str) -> str | None:
    a = ctx.arg_spec(array)
    return str(a.count) if a is not None and a.count is not None else None


def _count_c(ctx: RecipeContext, array: str) -> str | None:
    """The spec's element count of ``array`` written over the kernel's scalar parameters."""
    import ast

    spec_count = _count_spec(ctx, array)
    if spec_count is None:
        return None
    reverse: dict[str, str] = {}
    for p in ctx.ir.params:
        if p.is_pointer:
            continue
        v = ctx.value_expr(p.name)
        if v is not None and v.strip().isidentifier():
            reverse.setdefault(v.strip(), p.name)
    try:
        tree = ast.parse(spec_count, mode="eval")
    except SyntaxError:
        return None

    def conv(n: ast.expr) -> str | None:
        if isinstance(n, ast.Constant) and isinstance(n.value, int):
            return f"{n.value}LL"
        if isinstance(n, ast.Name):
            return f"(long long){reverse[n.id]}" if n.id in reverse else None
        if isinstance(n, ast.BinOp):
            a, b = conv(n.left), conv(n.right)
            ops = {ast.Add: "+", ast.Sub: "-", ast.Mult: "*", ast.FloorDiv: "/"}
            op = ops.get(type(n.op))
            return f"({a} {op} {b})" if a and b and op else None
        return None

    return conv(tree.body)


def _extents(ir: KernelIR, dims: int) -> tuple[Poly | None, Poly | None] | str:
    """The largest guard bound of the point coordinates over every store (kernel parameters)."""
    out: list[Poly | None] = []
    for axis in ("x", "y")[:dims]:
        best: Poly | None = None
        for st in ir.stores():
            bounds = [
                b
                for g in st.guards
                for c in g.conds
                if (b := c.bounds_above(Poly.sym(f"gid.{axis}"))) is not None
            ]
            if not bounds:
                return f"a store is not bounds-checked on gid.{axis} (line {st.line + 1})"
            for b in bounds:
                if best is None:
                    best = b
                    continue
                diff = (b - best).value
                if diff is None:
                    return f"the stores are bounded by {best} and {b}, which do not compare"
                if diff > 0:
                    best = b
        out.append(best)
    return (out[0], out[1] if dims == 2 else None)


def _check_launch(ctx: RecipeContext, st: Stencil) -> str:
    block = ms.block_dims(ctx)
    if block is None:
        return "the block size is not known (spec launch or host launch site)"
    if st.dims == 1 and (block[1] != 1 or block[2] != 1):
        return "a 1-D stencil launched with a 2-D block"
    if block[2] != 1:
        return "a block with more than one thread along z"
    if ctx.host_launched:
        st.host_block = block
        return ""
    for e, axis in ((st.extent_x, "x"), (st.extent_y, "y")):
        if e is not None and spec_expr(ctx, e) is None:
            return f"the extent {e} along {axis} is not given by the spec's sizes (scalar args with a value)"
    launch = ctx.launch()
    if launch is None or (
        len(launch.grid_dims()) > st.dims and any(str(g) != "1" for g in launch.grid_dims()[st.dims :])
    ):
        return "the grid has more dimensions than the stencil"
    return ""


def _eval(ir: KernelIR, p: Poly, values: dict[str, int]) -> int | None:
    total = 0
    for m, c in p.terms.items():
        term = c
        for s in m:
            if s in values:
                term *= values[s]
            elif s in ir.divmods:
                op, num, den = ir.divmods[s]
                a, b = _eval(ir, num, values), _eval(ir, den, values)
                if a is None or not b:
                    return None
                q = abs(a) // abs(b) * (1 if (a >= 0) == (b >= 0) else -1)
                term *= q if op == "/" else a - q * b
            else:
                return None
        total += term
    return total


def _main_halo(ctx: RecipeContext, st: Stencil) -> tuple[int, int, int, int] | str:
    """The halo (left, right, top, bottom) at the spec's main shape: the tile's capacity."""
    values = ctx.main_param_values()
    if values is None:
        return "the spec has no shapes to size the tile for"
    hx_lo = hx_hi = hy_lo = hy_hi = 0
    for t in st.tiled:
        for polys, sign, which in ((t.min_x, -1, 0), (t.max_x, 1, 1), (t.min_y, -1, 2), (t.max_y, 1, 3)):
            for p in polys:
                v = _eval(ctx.ir, p, values)
                if v is None:
                    return f"the offset bound {p} has no value at the spec's main shape"
                h = max(0, sign * v)
                if which == 0:
                    hx_lo = max(hx_lo, h)
                elif which == 1:
                    hx_hi = max(hx_hi, h)
                elif which == 2:
                    hy_lo = max(hy_lo, h)
                else:
                    hy_hi = max(hy_hi, h)
    return hx_lo, hx_hi, hy_lo, hy_hi
