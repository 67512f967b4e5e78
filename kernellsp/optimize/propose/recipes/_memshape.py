"""Shared analysis of the memory recipes (transpose, row reductions, stencils): coordinates and launches.

A thread of a naive kernel works on one *point* of an index space: ``(row, col)`` of a matrix, a
pixel, a ``(n, c, h, w)`` tensor element. The guards say how large the space is (``x < cols``),
the indices say how points map to memory (``in[y * cols + x]``). :func:`solve_coordinates` turns
the guards into named coordinates ``@0, @1, ...`` with extents and rewrites the indices over them,
whatever the spelling: a 2-D launch, a 1-D launch split with ``/`` and ``%`` (the two digits of one
index), a loop variable that adds rows (``y + j``), a 3-D grid whose ``z`` packs two dimensions.
The recipes then read strides off the rewritten indices.

Also here: the launch configuration a host launcher gives its kernel (``dim3`` variables evaluated
through ``#define`` constants and the caller's constant locals), and small code-generation helpers.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from kernellsp.optimize.propose.recipes.base import RecipeContext, host_int
from kernellsp.source.ir import Access, Cond, KernelIR, Poly, walk
from kernellsp.source.ir.expressions import _pointer_base, _subscript_parts

#: Thread symbols that may serve as the pivot of a coordinate (coefficient one), best first.
_PIVOTS = ("gid.", "threadIdx.")
_LATER_PIVOTS = ("blockIdx.",)


def access_index(ir: KernelIR, acc: Access) -> Poly | None:
    """``acc``'s element index with integer ``/`` and ``%`` as atoms (see ``KernelIR.poly(divmod=True)``)."""
    if acc.node.type != "subscript_expression":
        return acc.index
    base, idx = _subscript_parts(ir, acc.node)
    if base is None or idx is None:
        return None
    pnames = {p.name for p in ir.params if p.is_pointer}
    param, off = _pointer_base(ir, base, pnames, 0)
    if param is None or off is None:
        return None
    ip = ir.poly(idx, divmod=True)
    return off + ip if ip is not None else None


def varying(ir: KernelIR, p: Poly, loop_vars: set[str]) -> bool:
    """Does ``p`` differ between threads or iterations (thread symbols, loop variables, atoms over them)?"""
    for s in p.symbols():
        if s.startswith(("threadIdx.", "blockIdx.", "gid.")) or s in loop_vars:
            return True
        atom = ir.divmods.get(s)
        if atom is not None and (varying(ir, atom[1], loop_vars) or varying(ir, atom[2], loop_vars)):
            return True
    return False


def exact_div(p: Poly, d: Poly) -> Poly | None:
    """``p / d`` when ``d`` is a single monomial dividing every term of ``p`` exactly, else ``None``."""
    if len(d.terms) != 1:
        return None
    ((dm, dc),) = d.terms.items()
    out: dict[tuple[str, ...], int] = {}
    for m, c in p.terms.items():
        rest = list(m)
        for s in dm:
            if s not in rest:
                return None
            rest.remove(s)
        if c % dc:
            return None
        out[tuple(rest)] = c // dc
    return Poly(out)


@dataclass
class Coord:
    """A coordinate ``@k`` of the thread's point, ``0 <= @k < extent`` (``extent`` over parameters)."""

    name: str
    extent: Poly
    #: What it was in the kernel (a thread expression), for messages and --explain.
    origin: str
    #: The thread expression it replaced when that was one symbol (``gid.x``), for fixed launches.
    pivot: str | None = None


@dataclass
class Coords:
    """``polys`` (the caller's indices) rewritten over ``coords`` and parameters only."""

    coords: list[Coord]
    polys: list[Poly]
    #: Positions (in the caller's ``conds``) of the guards that are coordinate bounds.
    used: list[int] = field(default_factory=list)

    def coord(self, name: str) -> Coord:
        return next(c for c in self.coords if c.name == name)


def solve_coordinates(
    ir: KernelIR, conds: list[Cond], polys: list[Poly], loop_vars: set[str]
) -> Coords | str:
    """Rewrite ``polys`` over the coordinates that the guards ``conds`` bound, or say why that fails.

    Each guard ``G < U`` (``U`` free of thread symbols) whose ``G`` varies per thread defines a
    coordinate with extent ``U``; the guard's pivot (``gid.x``, a loop variable...: a symbol with
    coefficient one) is eliminated by substitution. A pair ``n / d``, ``n % d`` over one coordinate
    ``n`` splits it into two digits ``q = n / d`` (extent ``U / d``) and ``r = n % d`` (extent ``d``).
    Every thread symbol must be gone afterwards, and each index must be linear in the coordinates.
    """
    coords: list[Coord] = []
    work = list(polys)
    subs: list[tuple[str, Poly]] = []
    atoms = {k: (v[0], v[1], v[2]) for k, v in ir.divmods.items()}
    seen: list[Poly] = []
    used: list[int] = []
    for ci, c in enumerate(conds):
        if c.op is None or c.lhs is None or c.rhs is None:
            continue
        if c.op in ("<", "<="):
            g, u = c.lhs, c.rhs + (1 if c.op == "<=" else 0)
        elif c.op in (">", ">="):
            g, u = c.rhs, c.lhs + (1 if c.op == ">=" else 0)
        else:
            continue
        if not varying(ir, g, loop_vars) or varying(ir, u, loop_vars):
            continue
        if g in seen:
            used.append(ci)
            continue
        seen.append(g)
        for piv, val in subs:
            g = g.subs(piv, val)
        if any(g == Poly.sym(cd.name) for cd in coords):
            used.append(ci)
            continue
        pivot = _pivot(g, _PIVOTS) or _pivot(g, names=loop_vars) or _pivot(g, _LATER_PIVOTS)
        if pivot is None:
            continue
        name = f"@{len(coords)}"
        value = Poly.sym(name) - (g - Poly.sym(pivot))
        subs.append((pivot, value))
        work = [p.subs(pivot, value) for p in work]
        atoms = {k: (op, n.subs(pivot, value), d.subs(pivot, value)) for k, (op, n, d) in atoms.items()}
        coords.append(Coord(name, u, str(g), pivot if g == Poly.sym(pivot) else None))
        used.append(ci)
    # Digits: n / d and n % d over one coordinate n.
    got = _split_digits(ir, coords, work, atoms, loop_vars)
    if isinstance(got, str):
        return got
    work = got
    names = {c.name for c in coords}
    for p in work:
        left = sorted(s for s in p.symbols() if s not in names and varying(ir, Poly.sym(s), loop_vars))
        if left:
            return f"the index depends on {left[0]}, which no bounds check turns into a coordinate"
        split = p.split(names)
        if split is None or any(v.depends_on(names) for v in split[0].values()):
            return "an index is not linear in the thread's coordinates"
    return Coords(coords, work, used)


def _split_digits(
    ir: KernelIR,
    coords: list[Coord],
    work: list[Poly],
    atoms: dict[str, tuple[str, Poly, Poly]],
    loop_vars: set[str],
) -> list[Poly] | str:
    """Split each coordinate ``n`` that a pair ``n / d``, ``n % d`` reads into its two digits (``coords`` is
    updated in place): ``work`` rewritten over them, or why the bound does not split."""
    for k, (op, num, den) in list(atoms.items()):
        if op != "/":
            continue
        mod = next((m for m, (o, n2, d2) in atoms.items() if o == "%" and n2 == num and d2 == den), None)
        target = next((cd for cd in coords if num == Poly.sym(cd.name)), None)
        if mod is None or target is None or varying(ir, den, loop_vars):
            continue
        q_ext = exact_div(target.extent, den)
        if q_ext is None:
            return f"the bound {target.extent} of {target.origin} is not a multiple of the divisor {den}"
        qn, rn = f"@{len(coords)}", f"@{len(coords) + 1}"
        whole = Poly.sym(qn) * den + Poly.sym(rn)
        work = [p.subs(k, Poly.sym(qn)).subs(mod, Poly.sym(rn)).subs(target.name, whole) for p in work]
        coords.remove(target)
        coords += [
            Coord(qn, q_ext, f"({target.origin}) / {den}"),
            Coord(rn, den, f"({target.origin}) % {den}"),
        ]
    return work


def _pivot(g: Poly, prefixes: tuple[str, ...] = (), names: set[str] | None = None) -> str | None:
    """A symbol of ``g`` that occurs only as the term ``1 * s``: solving ``g = @k`` for it is exact."""
    for s in sorted(g.symbols()):
        wanted = s.startswith(prefixes) if prefixes else s in (names or set())
        if wanted and g.terms.get((s,)) == 1 and all(s not in m or m == (s,) for m in g.terms):
            return s
    return None


def fold(coords: Coords, fast: str, idx: list[int]) -> tuple[Coords, list[str]]:
    """Merge coordinates into ``fast`` where every index in ``idx`` sees them as one (``h * W + w``).

    A coordinate ``p`` folds into ``fast`` when, in every listed index, ``coef(p) == extent(fast) *
    coef(fast)``: then ``fast' = p * extent(fast) + fast`` has the same strides. Returns the new
    coordinates and the names folded (outermost last).
    """
    folded: list[str] = []
    changed = True
    cs = Coords(list(coords.coords), list(coords.polys))
    while changed:
        changed = False
        f = cs.coord(fast)
        for c in cs.coords:
            if c.name == fast:
                continue
            if all(cs.polys[i].coeff(c.name) == f.extent * cs.polys[i].coeff(fast) for i in idx):
                new_polys = list(cs.polys)
                for i in idx:
                    new_polys[i] = cs.polys[i].subs(c.name, Poly())
                cs = Coords(
                    [
                        Coord(fast, c.extent * f.extent, f"{c.origin}, {f.origin}") if x.name == fast else x
                        for x in cs.coords
                        if x.name != c.name
                    ],
                    new_polys,
                    cs.used,
                )
                folded.append(c.name)
                changed = True
                break
    return cs, folded


# --------------------------------------------------------------------------------------------------
# Host launches


def host_dim3(ctx: RecipeContext, text: str) -> tuple[int, int, int] | None:
    """The three dimensions of a launch-site expression (``dim3`` variable or literal, or an int)."""
    site = ctx.launch_site
    if site is None:
        return None
    t = text.strip()
    caller = ctx.model.function(site.caller) if site.caller else None
    ctext = ctx.model.text[caller.span.start_byte : caller.span.end_byte] if caller else ""
    if re.fullmatch(r"[A-Za-z_]\w*", t):
        m = re.search(rf"\bdim3\s+{re.escape(t)}\s*[({{]([^;]*)[)}}]\s*;", ctext)
        if m is None:
            m2 = re.search(rf"\bdim3\s+{re.escape(t)}\s*=\s*dim3\s*[({{]([^;]*)[)}}]\s*;", ctext)
            m = m2
        if m is not None:
            parts = _split_args(m.group(1))
        else:
            v = host_int(ctx.model, site, t)
            return (v, 1, 1) if v is not None else None
    else:
        dm = re.fullmatch(r"dim3\s*[({](.*)[)}]", t, re.S)
        if dm is None:
            v = host_int(ctx.model, site, t)
            return (v, 1, 1) if v is not None else None
        parts = _split_args(dm.group(1))
    vals = [host_int(ctx.model, site, p) for p in parts]
    if not vals or len(vals) > 3 or any(v is None for v in vals):
        return None
    out = [int(v) for v in vals if v is not None] + [1] * (3 - len(vals))
    return out[0], out[1], out[2]


def _split_args(text: str) -> list[str]:
    parts, depth, cur = [], 0, ""
    for ch in text:
        if ch in "([{":
            depth += 1
        elif ch in ")]}":
            depth -= 1
        if ch == "," and depth == 0:
            parts.append(cur.strip())
            cur = ""
        else:
            cur += ch
    if cur.strip():
        parts.append(cur.strip())
    return parts


def block_dims(ctx: RecipeContext) -> tuple[int, int, int] | None:
    """The block the kernel runs with (main shape): the host's launch, or the spec's (the launch model first)."""
    lm = ctx.launch_model
    if lm is not None and lm.complete and lm.shapes:
        block = [lm.block_dim(a) for a in range(3)]
        if all(d is not None for d in block):
            return int(block[0] or 0), int(block[1] or 0), int(block[2] or 0)
    if ctx.host_launched:
        if ctx.launch_site is None or len(ctx.launch_site.config) < 2:
            return None
        return host_dim3(ctx, ctx.launch_site.config[1])
    from kernellsp.source import exprs
    from kernellsp.source import spec as specmod

    launch = ctx.launch()
    if launch is None or ctx.spec is None:
        return None
    try:
        dims = specmod.launch_dims(launch, ctx.spec.spec.resolved_sizes())
    except exprs.ExprError:
        return None
    if isinstance(dims, str):
        return None
    b = dims[1]
    return int(b[0]), int(b[1]), int(b[2])


def uses_text(ir: KernelIR, node: object, names: set[str]) -> bool:
    """Does the subtree mention any identifier in ``names``?"""
    return any(n.type == "identifier" and ir.text(n) in names for n in walk(node))  # type: ignore[arg-type]


def wide(p: Poly, rename: dict[str, str] | None = None) -> str:
    """C text of an integer polynomial computed in 64 bits (each product starts with a ``long long``)."""
    rn = rename or {}
    if not p.terms:
        return "0"
    parts: list[str] = []
    for m, c in sorted(p.terms.items(), key=lambda t: (-len(t[0]), t[0])):
        factors = [rn.get(s, s) for s in m]
        if abs(c) != 1 or not factors:
            factors.insert(0, f"{abs(c)}LL")
        else:
            factors[0] = f"(long long){factors[0]}"
        text = " * ".join(factors)
        parts.append((" - " if c < 0 else " + ") + text if parts else ("-" if c < 0 else "") + text)
    return "".join(parts)


def pad_for(elem_bytes: int) -> int:
    """Row padding (elements) of a 32-wide shared tile that makes column reads conflict-free.

    A padded row of ``32 + pad`` elements must span an odd number of 4-byte banks: 33 for 4- and
    8-byte elements, 34 halves (17 words) for 2-byte ones, 36 bytes (9 words) for 1-byte ones.
    """
    return {1: 4, 2: 2}.get(elem_bytes, 1)
