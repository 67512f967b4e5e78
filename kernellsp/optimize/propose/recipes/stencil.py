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

import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from kernellsp.optimize.propose.recipes import _memshape as ms
from kernellsp.optimize.propose.recipes._elementwise.launch import spec_expr
from kernellsp.optimize.propose.recipes.base import (
    CTYPE_BYTES,
    Decline,
    Match,
    RecipeContext,
    RecipeError,
    Rewrite,
    replace_nodes,
    signature_text,
)
from kernellsp.source import exprs
from kernellsp.source import spec as specmod
from kernellsp.source.ir import THREAD_SYMBOLS, KernelIR, Poly, walk

if TYPE_CHECKING:
    import tree_sitter

NAME = "stencil-tiled"
ARCHETYPE = "stencil"
RULES = ("KL501", "KL502", "KL503", "KL510", "KL601")
PARAMS: dict[str, list[Any]] = {"per_thread": [8, 4, 16], "specialise": [True, False]}

#: Static shared memory a tile may take (bytes): well under the 48 KiB static limit.
TILE_BYTES = 32 * 1024
#: Filter taps kept in registers in the specialised path, at most.
MAX_REG_TAPS = 64


@dataclass
class Read:
    """One read of a tiled input: ``offx``/``offy`` relative to the point (loop variables and parameters)."""

    node: tree_sitter.Node
    offx: Poly
    offy: Poly


@dataclass
class Tiled:
    """An input read around the point: its reads, pitch (2-D) and element count (kernel text)."""

    array: str
    ctype: str
    elem_bytes: int
    pitch: Poly | None
    reads: list[Read]
    count_c: str
    #: Halo polynomials (parameters only): the minima and maxima of the offsets per axis.
    min_x: list[Poly] = field(default_factory=list)
    max_x: list[Poly] = field(default_factory=list)
    min_y: list[Poly] = field(default_factory=list)
    max_y: list[Poly] = field(default_factory=list)


@dataclass
class Filter:
    """An input read at indices that do not depend on the point (the filter): kept in registers when small."""

    array: str
    ctype: str
    nodes: list[tree_sitter.Node]
    count_spec: str


@dataclass
class Stencil:
    """What :func:`match` found."""

    dims: int
    tiled: list[Tiled]
    #: Extents of the point coordinates (kernel parameters), for the launch of a __global__ entry.
    extent_x: Poly | None
    extent_y: Poly | None
    #: Parameters that size the filter loops (their main-shape values specialise a path).
    sizes: list[str]
    filters: list[Filter]
    #: Divmod atoms used by offsets: name -> C text.
    atoms: dict[str, str]
    host_block: tuple[int, int, int] | None = None


# --------------------------------------------------------------------------------------------------
# Matching


def match(ctx: RecipeContext) -> Match | Decline:
    ir = ctx.ir
    if ir.barriers or ir.atomics or ir.warp_ops:
        return Decline("the kernel synchronises or uses atomics/warp primitives")
    if any(v.shared for v in ir.locals.values()):
        return Decline("the kernel already uses shared memory")
    if any(lp.grid_stride for lp in ir.loops) or "gridDim" in ir.identifiers(ir.body):
        return Decline("a grid-stride loop: points are not one per thread")
    if any(lp.kind != "for" for lp in ir.loops):
        return Decline("a while/do loop in the point's code")
    if ir.uses_builtin(ir.body, ("threadIdx",)) and any(
        "".join(ir.text(n).split()) in ("threadIdx.z", "blockIdx.z", "blockDim.z")
        for n in walk(ir.body)
        if n.type == "field_expression"
    ):
        return Decline("a 3-D launch: 3-D stencils are not tiled by this recipe")
    written = ir.written()
    loads = [a for a in ir.global_accesses() if a.kind == "load"]
    if any(a.base in written for a in loads):
        return Decline("an output is read back: points are not independent")
    by_array: dict[str, list[Any]] = {}
    for a in loads:
        by_array.setdefault(a.base, []).append(a)
    ranges = _loop_ranges(ir)
    if isinstance(ranges, str):
        return Decline(ranges)
    tiled: list[Tiled] = []
    filters: list[Filter] = []
    atoms: dict[str, str] = {}
    dims = 0
    for array, accs in by_array.items():
        idx = [ms.access_index(ir, a) for a in accs]
        if any(p is None for p in idx):
            return Decline(f"an index of {array} is not integer arithmetic (a min/max clamp or a macro)")
        polys = [p for p in idx if p is not None]
        if not any(p.depends_on(THREAD_SYMBOLS) for p in polys):
            filters.append(
                Filter(array, ctx.ctype(array), [a.node for a in accs], _count_spec(ctx, array) or "")
            )
            continue
        t = _tiled(ctx, array, accs, polys, ranges)
        if isinstance(t, str):
            return Decline(t)
        if t is None:
            continue  # read at the point only (a pointwise input): no tile needed
        d = 2 if t.pitch is not None else 1
        if dims and d != dims:
            return Decline("inputs are read as 1-D and 2-D grids at once")
        dims = d
        tiled.append(t)
    if not tiled:
        return Decline("no input is read around the point (no neighbours, no filter loop): not a stencil")
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
    return Match(binding, st)


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


def _param_values(ctx: RecipeContext) -> dict[str, int] | None:
    shapes = ctx.shapes()
    if not shapes:
        return None
    out: dict[str, int] = {}
    for p in ctx.ir.params:
        if p.is_pointer:
            continue
        v = ctx.value_expr(p.name)
        if v is None:
            continue
        try:
            val = exprs.evaluate(v, shapes[0])
        except exprs.ExprError:
            continue
        if isinstance(val, int) and not isinstance(val, bool):
            out[p.name] = val
    return out


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
    values = _param_values(ctx)
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


# --------------------------------------------------------------------------------------------------
# Generation


def points(ctx: RecipeContext, m: Match) -> list[dict[str, Any]]:
    if ctx.host_launched:
        return [{"per_thread": 1, "specialise": True}, {"per_thread": 1, "specialise": False}]
    st: Stencil = m.data
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
    g = _Gen(ctx, st, bx, by, vbx, vby, per, halo, bool(params.get("specialise", True)))
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


class _Gen:
    def __init__(
        self,
        ctx: RecipeContext,
        st: Stencil,
        bx: int,
        by: int,
        vbx: int,
        vby: int,
        per: int,
        halo: tuple[int, int, int, int],
        specialise: bool,
    ) -> None:
        self.ctx, self.ir, self.st = ctx, ctx.ir, st
        self.bx, self.by, self.vbx, self.vby, self.per = bx, by, vbx, vby, per
        self.halo = halo
        self.specialise = specialise and bool(st.sizes)
        self.twc = vbx + halo[0] + halo[1]
        if st.dims == 2 and bx < 32 and 32 % bx == 0:
            # A warp spans 32 / bx tile rows: a row pitch of bx (mod 32) words puts them on disjoint banks
            # (a 16-wide block with pitch 22 read 2-way conflicted: slower than the naive kernel on an H100).
            self.twc += (bx - self.twc % 32) % 32
        self.thc = (vby + halo[2] + halo[3]) if st.dims == 2 else 1
        for t in st.tiled:
            if self.twc * self.thc * t.elem_bytes > TILE_BYTES // max(1, len(st.tiled)):
                raise RecipeError(
                    f"the tile of {t.array} ({self.twc}x{self.thc}) does not fit in shared memory"
                )

    def _rn(self, p: Poly, special: dict[str, int] | None = None) -> str:
        """C text of an offset polynomial (divmod atoms spelled out; specialised sizes as constants)."""
        text = p.c_text(self.st.atoms)
        for name, value in (special or {}).items():
            text = re.sub(rf"\b{re.escape(name)}\b", f"({value})", text)
        return text

    def _virtual(self) -> dict[int, str]:
        out: dict[int, str] = {}
        for n in walk(self.ir.body):
            if n.type != "field_expression":
                continue
            text = "".join(self.ir.text(n).split())
            if not text.startswith(("threadIdx.", "blockIdx.", "blockDim.")):
                continue
            kind, a = text.split(".")
            if a not in ("x", "y"):
                continue
            out[n.id] = {"threadIdx": f"kl_vt{a}", "blockIdx": f"blockIdx.{a}", "blockDim": f"kl_vb{a}"}[kind]
        return out

    def _halo_defs(self) -> str:
        lines = []
        for t in self.st.tiled:
            a = t.array
            for name, polys, neg in (
                (f"kl_hxl_{a}", t.min_x, True),
                (f"kl_hxr_{a}", t.max_x, False),
                (f"kl_hyl_{a}", t.min_y, True),
                (f"kl_hyr_{a}", t.max_y, False),
            ):
                if name.startswith("kl_hy") and self.st.dims == 1:
                    continue
                expr = "0"
                for p in polys:
                    v = f"(int)({'-' if neg else ''}({self._rn(p)}))"
                    expr = f"max({expr}, {v})"
                lines.append(f"const int {name} = {expr};")
        return "\n".join(lines)

    def _fits(self) -> str:
        hx_lo, hx_hi, hy_lo, hy_hi = self.halo
        conds = []
        for t in self.st.tiled:
            a = t.array
            conds += [f"kl_hxl_{a} <= {hx_lo}", f"kl_hxr_{a} <= {hx_hi}"]
            if self.st.dims == 2:
                conds += [f"kl_hyl_{a} <= {hy_lo}", f"kl_hyr_{a} <= {hy_hi}"]
        return " && ".join(conds)

    def _load(self) -> str:
        out = []
        for t in self.st.tiled:
            a = t.array
            if self.st.dims == 2:
                assert t.pitch is not None
                out.append(
                    f"{{\n    const long long kl_c0 = (long long)blockIdx.x * {self.vbx} - kl_hxl_{a};\n"
                    f"    const long long kl_r0 = (long long)blockIdx.y * {self.vby} - kl_hyl_{a};\n"
                    f"    const int kl_tw = {self.vbx} + kl_hxl_{a} + kl_hxr_{a};\n"
                    f"    const int kl_th = {self.vby} + kl_hyl_{a} + kl_hyr_{a};\n"
                    f"    const long long kl_n = {t.count_c};\n"
                    "    // One pass over the tile's capacity rows, consecutive threads on consecutive columns (the\n"
                    "    // division is by a constant); columns past this launch's halo are skipped.\n"
                    f"    for (int kl_i = threadIdx.y * {self.bx} + threadIdx.x; kl_i < kl_th * {self.twc}; "
                    f"kl_i += {self.bx * self.by}) {{\n"
                    f"        const int kl_ty = kl_i / {self.twc}, kl_tx = kl_i - kl_ty * {self.twc};\n"
                    "        if (kl_tx >= kl_tw) continue;\n"
                    f"        const long long kl_g = (kl_r0 + kl_ty) * (long long)({self._rn(t.pitch)}) + kl_c0 + kl_tx;\n"
                    f"        kl_tile_{a}[kl_i] = (kl_g >= 0 && kl_g < kl_n) ? {a}[kl_g] : {t.ctype}();\n"
                    "    }\n}"
                )
            else:
                out.append(
                    f"{{\n    const long long kl_c0 = (long long)blockIdx.x * {self.vbx} - kl_hxl_{a};\n"
                    f"    const int kl_tw = {self.vbx} + kl_hxl_{a} + kl_hxr_{a};\n"
                    f"    const long long kl_n = {t.count_c};\n"
                    f"    for (int kl_tx = threadIdx.x; kl_tx < kl_tw; kl_tx += {self.bx}) {{\n"
                    "        const long long kl_g = kl_c0 + kl_tx;\n"
                    f"        kl_tile_{a}[kl_tx] = (kl_g >= 0 && kl_g < kl_n) ? {a}[kl_g] : {t.ctype}();\n"
                    "    }\n}"
                )
        return "\n".join(out)

    def _lambda(
        self, name: str, tiled: bool, special: dict[str, int] | None, decided: dict[int, str] | None = None
    ) -> str:
        rep = self._virtual()
        rep.update(decided or {})
        if tiled:
            for t in self.st.tiled:
                a = t.array
                for r in t.reads:
                    col = f"kl_vtx + ({self._rn(r.offx, special)}) + kl_hxl_{a}"
                    if self.st.dims == 2:
                        row = f"kl_vty + ({self._rn(r.offy, special)}) + kl_hyl_{a}"
                        rep[r.node.id] = f"kl_tile_{a}[({row}) * {self.twc} + {col}]"
                    else:
                        rep[r.node.id] = f"kl_tile_{a}[{col}]"
        if special is not None:
            for n in walk(self.ir.body):
                if n.type == "identifier" and self.ir.text(n) in special and n.id not in rep:
                    parent = n.parent
                    if parent is not None and parent.type == "field_expression":
                        continue
                    rep[n.id] = f"{special[self.ir.text(n)]}"
                # A pragma needs a line of its own: only loops that are statements of a block get one
                # (nvcc unrolls the others anyway once their bounds are constants).
                stmt = n.parent
                if (
                    n.type == "for"
                    and stmt is not None
                    and stmt.type == "for_statement"
                    and stmt.parent is not None
                    and stmt.parent.type == "compound_statement"
                ):
                    rep[n.id] = "\n#pragma unroll\nfor"
            for f in self.regs:
                for node in f.nodes:
                    idx = node.child_by_field_name("indices")
                    inner = next((c for c in idx.named_children), None) if idx is not None else None
                    if inner is None:
                        continue
                    rep[node.id] = f"kl_w_{f.array}[{replace_nodes(self.ir, inner, rep)}]"
        body = replace_nodes(self.ir, self.ir.body, rep)
        params = "int kl_vtx" + (", int kl_vty" if self.st.dims == 2 else "")
        return f"auto {name} = [&]({params}) {body};\n"

    def _interior(self) -> tuple[dict[int, str], list[str]]:
        """Comparisons whose value is the same for every point of an interior block, and the test for such a block.

        A bounds test ``x + dx < width`` (or ``idx >= 0``, ``x == 0``...) over one point coordinate, loop
        variables with counted ranges and parameters has a range over the block's points; where that
        range decides it, the test becomes ``true``/``false`` in a lambda that runs only when the block
        passes the run-time conditions returned. Which value to expect is read at the spec's main shape
        for a block in the middle of the grid; comparisons that are not decided there stay as written.
        """
        ir, st = self.ir, self.st
        ranges = _loop_ranges(ir)
        values = _param_values(self.ctx)
        if isinstance(ranges, str) or values is None:
            return {}, []
        extents = {"x": st.extent_x, "y": st.extent_y}
        sizes = {"x": self.vbx, "y": self.vby}
        decided: dict[int, str] = {}
        conds: list[str] = []
        for n in walk(ir.body):
            if n.type != "binary_expression":
                continue
            op = ir.text(n.child_by_field_name("operator"))
            if op not in ("<", "<=", ">", ">=", "==", "!="):
                continue
            a, b = (
                ir.poly(n.child_by_field_name("left"), divmod=True),
                ir.poly(n.child_by_field_name("right"), divmod=True),
            )
            if a is None or b is None:
                continue
            d = a - b if op in (">", ">=") else b - a
            axes = [ax for ax in "xy" if d.coeff(f"gid.{ax}").value in (1, -1)]
            if len(axes) != 1:
                continue
            ax = axes[0]
            sgn = d.coeff(f"gid.{ax}").value
            rest = d - Poly.sym(f"gid.{ax}") * sgn  # type: ignore[operator]
            if rest.depends_on(THREAD_SYMBOLS) or d.depends_on(
                {f"gid.{o}" for o in "xyz" if o != ax} | {"?"}
            ):
                continue
            bounds = _bounds(rest, ranges)
            ext = extents.get(ax)
            if isinstance(bounds, str) or ext is None:
                continue
            lo_r, hi_r = bounds
            v = sizes[ax]
            x0 = f"((long long)blockIdx.{ax} * {v})"
            lo_c = f"({x0} + ({self._rn(lo_r)}))" if sgn == 1 else f"(({self._rn(lo_r)}) - {x0} - {v - 1})"
            hi_c = f"({x0} + {v - 1} + ({self._rn(hi_r)}))" if sgn == 1 else f"(({self._rn(hi_r)}) - {x0})"
            strict = op in ("<", ">")
            # The block in the middle of the grid at the main shape says which value to expect.
            e_val, lo_v, hi_v = _eval(ir, ext, values), _eval(ir, lo_r, values), _eval(ir, hi_r, values)
            if e_val is None or lo_v is None or hi_v is None:
                continue
            xm = (e_val // 2) // v * v
            lo_d = xm + lo_v if sgn == 1 else lo_v - xm - (v - 1)
            hi_d = xm + v - 1 + hi_v if sgn == 1 else hi_v - xm
            if op in ("==", "!="):
                if lo_d > 0 or hi_d < 0:
                    decided[n.id] = "false" if op == "==" else "true"
                    conds.append(f"({lo_c} > 0 || {hi_c} < 0)")
                continue
            if (lo_d > 0) if strict else (lo_d >= 0):
                decided[n.id] = "true"
                conds.append(f"{lo_c} {'>' if strict else '>='} 0")
            elif (hi_d <= 0) if strict else (hi_d < 0):
                decided[n.id] = "false"
                conds.append(f"{hi_c} {'<=' if strict else '<'} 0")
        return decided, sorted(set(conds))

    def _calls(self, name: str) -> str:
        if self.st.dims == 2:
            return (
                f"#pragma unroll\nfor (int kl_s = 0; kl_s < {self.per}; ++kl_s) "
                f"{name}(threadIdx.x, threadIdx.y * {self.per} + kl_s);\n"
            )
        return f"#pragma unroll\nfor (int kl_s = 0; kl_s < {self.per}; ++kl_s) {name}(threadIdx.x + {self.bx} * kl_s);\n"

    @property
    def regs(self) -> list[Filter]:
        """Filters small enough (at the main shape) to live in registers in the specialised path."""
        values = _param_values(self.ctx) or {}
        shapes = self.ctx.shapes()
        out = []
        for f in self.st.filters:
            if not f.count_spec or not shapes:
                continue
            try:
                n = exprs.evaluate(f.count_spec, shapes[0])
            except exprs.ExprError:
                continue
            if isinstance(n, int) and 0 < n <= MAX_REG_TAPS and f.ctype in CTYPE_BYTES:
                out.append(Filter(f.array, f.ctype, f.nodes, str(n)))
        del values
        return out

    def kernel(self) -> str:
        st = self.st
        tiles = "".join(
            f"    __shared__ {t.ctype} kl_tile_{t.array}[{self.twc * self.thc}];\n" for t in st.tiled
        )
        vdefs = f"    const int kl_vbx = {self.vbx};\n" + (
            f"    const int kl_vby = {self.vby};\n" if st.dims == 2 else ""
        )
        if self.ctx.host_launched:
            vdefs = "    const int kl_vbx = blockDim.x;\n" + (
                "    const int kl_vby = blockDim.y;\n" if st.dims == 2 else ""
            )
        halos = _ind(self._halo_defs(), 4)
        fits = self._fits()
        plain = self._lambda("kl_point", False, None)
        decided, inner_conds = self._interior()
        tiled = self._lambda("kl_point_tiled", True, None)
        tiled_calls = self._calls("kl_point_tiled")
        if decided:
            # Interior blocks: the bounds tests the block's position decides are constants there.
            inner = self._lambda("kl_point_inner", True, None, decided)
            tiled_calls = (
                f"if ({' && '.join(inner_conds)}) {{\n"
                + _ind(inner + self._calls("kl_point_inner"), 4)
                + "\n} else {\n"
                + _ind(tiled_calls, 4)
                + "\n}\n"
            )
        special_block = ""
        values = _param_values(self.ctx) or {}
        if self.specialise and all(s in values for s in st.sizes):
            special = {s: values[s] for s in st.sizes}
            cond = " && ".join(f"{s} == {v}" for s, v in special.items())
            regs = "".join(
                f"{f.ctype} kl_w_{f.array}[{f.count_spec}];\n#pragma unroll\nfor (int kl_i = 0; kl_i < "
                f"{f.count_spec}; ++kl_i) kl_w_{f.array}[kl_i] = {f.array}[kl_i];\n"
                for f in self.regs
            )
            lam = self._lambda("kl_point_fixed", True, special)
            calls = self._calls("kl_point_fixed")
            if decided:
                inner = self._lambda("kl_point_fixed_inner", True, special, decided)
                calls = (
                    f"if ({' && '.join(inner_conds)}) {{\n"
                    + _ind(inner + self._calls("kl_point_fixed_inner"), 4)
                    + "\n} else {\n"
                    + _ind(calls, 4)
                    + "\n}\n"
                )
            special_block = f"if ({cond}) {{\n" + _ind(regs + lam + calls, 4) + "\n} else "
        body = (
            f"{tiles}{vdefs}{halos}\n"
            f"    if ({fits}) {{\n"
            f"{_ind(self._load(), 8)}\n        __syncthreads();\n"
            f"{_ind(special_block + '{' + chr(10) + _ind(tiled + tiled_calls, 4) + chr(10) + '}', 8)}\n"
            "    } else {\n"
            f"{_ind(plain + self._calls('kl_point'), 8)}\n"
            "    }\n"
        )
        what = (f"{self.per} point(s) per thread, " if self.per > 1 else "") + (
            "filter sizes specialised for the spec's main shape" if special_block else ""
        )
        return (
            f"{signature_text(self.ctx)}\n{{\n"
            f"    // Tiled stencil (kernellsp recipe {NAME}): the block's points plus halo are staged in shared\n"
            f"    // memory; the user's per-point code runs in a lambda reading the tile; {what or 'one point per thread'}.\n"
            f"    // A halo larger than the tile (another filter size) takes the same code with global reads.\n"
            f"{body}}}\n"
        )


def _ind(text: str, n: int) -> str:
    pad = " " * n
    return "\n".join(pad + ln if ln.strip() else "" for ln in text.rstrip("\n").split("\n"))
