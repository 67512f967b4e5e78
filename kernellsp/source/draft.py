"""Draft launch specs ("Add launch spec"): what the signature, the launch sites and the kernel's indexing say.

A draft must be a spec the user can keep, not one that fails on save. From the kernel IR
(:mod:`kernellsp.source.ir`) it infers:

* **sizes**: the integer scalar parameters (``n``, ``M``, ``rows``) become sizes, named in upper case;
* **dimensionality**: a kernel indexed by ``threadIdx.y``/``blockIdx.y`` gets a 2-D grid (``z``: 3-D), each
  axis over the size its guard bounds it by (``if (row < M && col < N)``: x over ``N``, y over ``M``);
* **counts**: each pointer's element count is the largest index it is read or written at, plus one, over the
  ranges its guards and loops give every index variable (``A[row * K + k]`` with ``row < M``, ``k < K``: ``M
  * K``), written as a product of sizes;
* **directions**: ``const`` or only read: ``in``; only written: ``out``; otherwise ``inout``;
* **size values** that keep every buffer a few MiB (``1 << 20`` for a 1-D size, 2048 for a matrix side).

What it cannot infer it says, as ``# CHECK:`` comments in the block (a count where the index is not
a polynomial, a grid axis no guard bounds). A kernel with a struct argument passed by value has no
supported spec yet: :func:`draft_problem` says so and why, and no draft is written.
"""

from __future__ import annotations

import itertools
import math
import re
from dataclasses import dataclass, field

from kernellsp.source import exprs
from kernellsp.source.ir import AXES, Access, Cond, Guard, KernelIR, Loop, Poly, kernel_ir
from kernellsp.source.model import Function, SourceModel

#: Values the numeric probe gives the sizes (distinct primes, so products identify their factors).
_PROBE = (101, 103, 107, 109, 113, 127, 131, 137)


@dataclass
class Draft:
    """A draft spec's parts and what could not be inferred (one line each, shown as ``# CHECK:`` comments)."""

    sizes: dict[str, int] = field(default_factory=dict)
    counts: dict[str, str] = field(default_factory=dict)
    dirs: dict[str, str] = field(default_factory=dict)
    grid: list[str] | None = None
    block: list[int] | None = None
    notes: list[str] = field(default_factory=list)


#: Names that stand for integers or scalars in the file: enums (passed as their underlying integer) and
#: typedef/using aliases (their target is checked like any C type).
_ENUM = re.compile(r"\benum\s+(?:class\s+|struct\s+)?(\w+)")
_ALIAS = re.compile(r"\btypedef\s+([\w\s]+?)\s+(\w+)\s*;|\busing\s+(\w+)\s*=\s*([\w\s]+?)\s*;")


def _scalar_names(source_text: str) -> set[str]:
    from kernellsp.source.spec import dtype_for_ctype

    names = set(_ENUM.findall(source_text))
    for m in _ALIAS.finditer(source_text):
        target, name = (m.group(1), m.group(2)) if m.group(2) else (m.group(4), m.group(3))
        if dtype_for_ctype(target) is not None:
            names.add(name)
    return names


def struct_params(fn: Function, source_text: str = "") -> list[str]:
    """Parameters passed by value whose type kernellsp cannot fill (a struct, ``float3``): ``"p (Params)"``.

    Enums and typedef/using aliases of scalar types declared in ``source_text`` are scalars, not structs.
    """
    from kernellsp.source.spec import dtype_for_ctype

    templ = set(re.findall(r"\b(?:typename|class)\s+(\w+)", fn.template_params or ""))
    scalars = _scalar_names(source_text)
    out = []
    for p in fn.params:
        base = re.sub(r"\b(const|volatile)\b", "", p.base_type).strip()
        if p.is_pointer or dtype_for_ctype(p.base_type) is not None or base in templ or base in scalars:
            continue
        if p.base_type.strip() in ("bool",):
            continue
        out.append(f"{p.name} ({p.base_type.strip()})")
    return out


def draft_problem(fn: Function, source_text: str = "") -> str | None:
    """Why no launch spec can describe ``fn`` yet, or ``None`` (``source_text``: the file, for its enums)."""
    structs = struct_params(fn, source_text)
    if not structs:
        return None
    return (
        f"{fn.name} takes {', '.join(structs)} by value, and launch specs cannot describe struct arguments yet; "
        f'add a host launcher (extern "C" void run_{fn.name}(...)) that builds the struct from pointers and '
        "scalars and launches the kernel, and add the spec to the launcher"
    )


def infer(fn: Function, model: SourceModel, size_names: dict[str, str]) -> Draft:
    """Counts, directions and the launch of ``fn`` from its IR; ``size_names`` maps size parameters to their names
    in the spec (``n`` → ``N``)."""
    d = Draft()
    ir = kernel_ir(model, fn) if fn.kind == "global" else None
    if ir is None:
        return d
    # Two assignments of distinct primes: an expression that fits both is the count, not a coincidence.
    probes = [
        {p: vals[i % len(vals)] + 10 * (i // len(vals)) for i, p in enumerate(size_names)}
        for vals in (_PROBE, _PROBE[3:] + _PROBE[:3])
    ]
    pointers = [p.name for p in fn.params if p.is_pointer]
    for name in pointers:
        acc = [a for a in ir.accesses if a.base == name and a.space == "global"]
        kinds = {a.kind for a in acc}
        if kinds == {"load"}:
            d.dirs[name] = "in"
        elif kinds == {"store"}:
            d.dirs[name] = "out"
        if not acc:
            continue
        count, why = _count(ir, acc, probes, size_names)
        if count is not None:
            d.counts[name] = count
        else:
            d.notes.append(f"count of {name}: {why}")
    used = _thread_axes(ir)
    if used:
        dims = max(AXES.index(a) for a in used) + 1
        block = [256] if dims == 1 else [16, 16] if dims == 2 else [8, 8, 4]
        tile = _square_tile(ir, model)
        if tile is not None and dims == 2:
            block = [tile, tile]
        grid: list[str] = []
        for i, a in enumerate(AXES[:dims]):
            tiled = _tiled_axis(ir, a, probes, size_names)
            if tiled is not None:  # blockIdx.a * TILE + threadIdx.a: the block is TILE along a
                block[i] = tiled[1]
                grid.append(f"ceil_div({tiled[0]}, {tiled[1]})")
                continue
            b = block[i]
            ext, per_block = _axis_extent(ir, a, probes, size_names)
            if ext is None:
                d.notes.append(
                    f"launch.grid: no guard bounds the {a} index; the grid's {a} axis covers the first size"
                )
                ext = next(iter(size_names.values()), "N")
            # One block per row (blockIdx.x = row, the threads loop over the row): the grid is the row count.
            grid.append(ext if per_block else f"ceil_div({ext}, {b})")
        d.block = block
        d.grid = grid
    return d


def _thread_axes(ir: KernelIR) -> set[str]:
    out: set[str] = set()
    for a in ir.accesses:
        if a.index is None:
            continue
        for s in a.index.symbols():
            if s.split(".")[0] in ("threadIdx", "blockIdx", "gid") and "." in s:
                out.add(s.split(".")[1])
    for v in ir.index_vars.values():
        for s in v.symbols():
            if s.split(".")[0] in ("threadIdx", "blockIdx", "gid") and "." in s:
                out.add(s.split(".")[1])
    return out


def _square_tile(ir: KernelIR, model: SourceModel) -> int | None:
    """``T`` of a ``__shared__ float tile[T][T]`` (a tiled kernel's block is ``T x T``), from a numeric #define."""
    text = model.text[ir.fn.span.start_byte : ir.fn.span.end_byte] if ir.fn.span.end_byte else ""
    m = re.search(r"__shared__[^;\[]*\[\s*(\w+)\s*\]\s*\[\s*(\w+)\s*(?:\+\s*1\s*)?\]", text)
    if m is None:
        return None
    vals = []
    for g in (m.group(1), m.group(2)):
        try:
            vals.append(exprs.evaluate_int(model.defines.get(g, g), {}))
        except exprs.ExprError:
            return None
    return vals[0] if vals[0] == vals[1] and 1 <= vals[0] * vals[1] <= 1024 else None


def _bounds(ir: KernelIR, acc_guards: list[Guard], loops: list[Loop]) -> list[Cond]:
    conds = [c for g in acc_guards for c in g.conds]
    for lp in loops:
        conds.extend(lp.conds)
    return conds


def _count(
    ir: KernelIR, accesses: list[Access], probes: list[dict[str, int]], names: dict[str, str]
) -> tuple[str | None, str]:
    """The element count of one pointer over all its accesses (sizes, products, small offsets), or ``(None, why)``."""
    values = []
    for probe in probes:
        best = 0
        for a in accesses:
            if a.index is None:
                return (
                    None,
                    f"its index {a.index_text!r} (line {a.line + 1}) is not a polynomial kernellsp can bound",
                )
            top = _max_index(a.index, _bounds(ir, a.guards, a.loops), a.loops, probe)
            if top is None:
                return None, f"no guard or loop bounds its index {a.index_text!r} (line {a.line + 1})"
            best = max(best, top + 1)
        values.append(best)
    expr = _as_expression(values, probes, names)
    if expr is None:
        return (
            None,
            f"its largest index is not a product of the sizes ({', '.join(names.values()) or 'none'})",
        )
    return expr, ""


def _num(p: Poly, probe: dict[str, int]) -> int | None:
    total = 0
    for m, c in p.terms.items():
        v = c
        for s in m:
            if s not in probe:
                return None
            v *= probe[s]
        total += v
    return total


def _max_index(index: Poly, conds: list[Cond], loops: list[Loop], probe: dict[str, int]) -> int | None:
    """The largest value ``index`` takes when every non-size symbol stays inside its bounds (numeric, sizes probed).

    The index is split into groups of variables that one condition bounds together (``t*TILE + tx < K`` bounds
    the pair), each group ranging over ``[0, bound)``; a whole index bounded by one guard is the easy case."""
    for c in conds:
        b = c.bounds_above(index)
        if b is not None and _num(b, probe) is not None:
            return (_num(b, probe) or 0) - 1
    variables = sorted(index.symbols() - set(probe))
    if not variables:
        return _num(index, probe)
    split = index.split(variables)
    if split is None:
        return None
    coeffs, rest = split
    total = _num(rest, probe)
    if total is None:
        return None
    left = set(variables)
    starts = {lp.var: lp.start for lp in loops if lp.var is not None and lp.start is not None}
    total += _bound_groups(coeffs, left, conds, probe)
    for v in sorted(left):
        top = _bound_one(v, coeffs[v], conds, starts, probe)
        if top is None:
            return None
        total += top
    return total


def _bound_groups(coeffs: dict[str, Poly], left: set[str], conds: list[Cond], probe: dict[str, int]) -> int:
    """The largest value of the groups of variables one condition bounds; their variables leave ``left``."""
    total = 0
    # Variables one condition bounds together first (t*TILE + tx < K), largest groups first; then one at a time.
    for size in range(len(left), 1, -1):
        for group in itertools.combinations(sorted(left), size):
            if not set(group) <= left:
                continue
            sub = sum((coeffs[v] * Poly.sym(v) for v in group), Poly())
            # A common factor of sizes (K*(32*by + ty) in row*K): bound the group without it, then scale.
            factor, base = _factor_out(sub)
            mult = _num(factor, probe)
            for c in conds:
                b = c.bounds_above(base)
                bn = _num(b, probe) if b is not None else None
                if bn is not None and bn >= 1 and mult is not None and mult > 0:
                    total += mult * (bn - 1)
                    left -= set(group)
                    break
    return total


def _bound_one(
    v: str, coeff: Poly, conds: list[Cond], starts: dict[str, Poly], probe: dict[str, int]
) -> int | None:
    """The largest value of ``coeff * v`` with ``v`` from its loop start (or 0) to its bound, or ``None``."""
    mult = _num(coeff, probe)
    if mult is None:
        return None
    lo_p = starts.get(v)
    lo = (_num(lo_p, probe) if lo_p is not None else 0) or 0
    hi = None
    for c in conds:
        b = c.bounds_above(Poly.sym(v))
        hi = _num(b, probe) if b is not None else None
        if hi is not None:
            break
    if hi is None or hi - 1 < lo:
        return None
    return mult * (hi - 1) if mult > 0 else mult * lo


def _factor_out(p: Poly) -> tuple[Poly, Poly]:
    """``(F, Q)`` with ``p == F * Q``, ``F`` the largest monomial (sizes, and a positive integer) dividing every term."""
    if not p.terms:
        return Poly.const(1), p
    monos = list(p.terms)
    common = set(monos[0])
    for m in monos[1:]:
        common &= set(m)
    common_syms = tuple(sorted(s for s in common if "." not in s))
    g = 0
    for c in p.terms.values():
        g = math.gcd(g, abs(c))
    g = g or 1
    quot: dict[tuple[str, ...], int] = {}
    for m, c in p.terms.items():
        rest = list(m)
        for s_ in common_syms:
            rest.remove(s_)
        quot[tuple(rest)] = c // g
    return Poly({common_syms: g}), Poly(quot)


def _as_expression(values: list[int], probes: list[dict[str, int]], names: dict[str, str]) -> str | None:
    """The expression over sizes that gives ``values[i]`` under ``probes[i]``: a product of at most three sizes
    times a small constant, plus a small constant (``M * K``, ``2 * RADIUS + 1``, ``1``). A count a little short
    of a product (a stencil that never reads the last row: ``NX * NY - 1``) is rounded up to the product: the
    buffer holds the whole grid."""
    params = list(names)
    for r in range(0, min(3, len(params)) + 1):
        for combo in itertools.combinations_with_replacement(params, r):
            prods = [math.prod(pr[p] for p in combo) for pr in probes]
            for k in range(1, 65):
                offs = {v - k * pv for v, pv in zip(values, prods, strict=True)}
                if len(offs) != 1:
                    continue
                c = offs.pop()
                if not combo:
                    return str(k + c) if k + c > 0 else None
                factors = ([str(k)] if k != 1 else []) + [names[p] for p in combo]
                text = " * ".join(factors)
                if abs(c) <= 16:
                    return text if c <= 0 else f"{text} + {c}"
            # An offset of one size (in[idx + nx] past the last row): "NX * NY + NX".
            for q in params:
                for k in range(1, 65):
                    for kq in (1, 2):
                        offs = {
                            v - k * pv - kq * pr[q] for v, pv, pr in zip(values, prods, probes, strict=True)
                        }
                        if len(offs) == 1 and abs(c := offs.pop()) <= 16 and combo:
                            head = " * ".join(([str(k)] if k != 1 else []) + [names[p] for p in combo])
                            tail = f"{kq} * {names[q]}" if kq != 1 else names[q]
                            return f"{head} + {tail}" + (f" + {c}" if c > 0 else "")
    return None


def _axis_extent(
    ir: KernelIR, axis: str, probes: list[dict[str, int]], names: dict[str, str]
) -> tuple[str | None, bool]:
    """The size the index of ``axis`` is guarded by, spelled with spec names, and whether it counts blocks (an
    index of ``blockIdx`` alone: one block per row) rather than threads (``gid``: ``if (col < N)``)."""
    for sym_name, per_block in ((f"gid.{axis}", False), (f"blockIdx.{axis}", True)):
        sym = Poly.sym(sym_name)
        vals: list[int] = []
        for probe in probes:
            found = None
            for a in ir.accesses:
                for g in a.guards:
                    for c in g.conds:
                        b = c.bounds_above(sym)
                        n = _num(b, probe) if b is not None else None
                        if n is not None:
                            found = n
                            break
                    if found is not None:
                        break
                if found is not None:
                    break
            if found is None:
                for lp in ir.loops:
                    if lp.grid_stride == axis and (b := lp.bound()) is not None:
                        found = _num(b, probe)
                        break
            if found is None:
                break
            vals.append(found)
        if len(vals) == len(probes):
            return _as_expression(vals, probes, names), per_block
        if per_block is False and any(
            sym_name in (a.index.symbols() if a.index else set()) for a in ir.accesses
        ):
            return None, False
    uses_block = any(f"blockIdx.{axis}" in (a.index.symbols() if a.index else set()) for a in ir.accesses)
    return None, uses_block


def _tiled_axis(
    ir: KernelIR, axis: str, probes: list[dict[str, int]], names: dict[str, str]
) -> tuple[str, int] | None:
    """``(extent, T)`` for an index written ``blockIdx.a * T + threadIdx.a`` with a constant tile ``T`` (the block is
    ``T`` threads along ``a``) and a guard bounding it (``row < M``)."""
    bi, ti = f"blockIdx.{axis}", f"threadIdx.{axis}"
    for a in ir.accesses:
        for g in a.guards:
            for c in g.conds:
                lhs = c.lhs if c.op in ("<", "<=") else c.rhs if c.op in (">", ">=") else None
                if lhs is None or lhs.symbols() != {bi, ti} or lhs.coeff(ti) != Poly.const(1):
                    continue
                tile = lhs.coeff(bi).value
                if tile is None or not 1 < tile <= 1024:
                    continue
                vals = []
                for probe in probes:
                    b = c.bounds_above(lhs)
                    n = _num(b, probe) if b is not None else None
                    if n is None:
                        break
                    vals.append(n)
                if len(vals) == len(probes) and (ext := _as_expression(vals, probes, names)) is not None:
                    return ext, tile
    return None
