"""The product analysis: one dot product per output, read off the kernel IR in named steps."""

from __future__ import annotations

from typing import Any

from kernellsp.optimize.propose.recipes import _memshape as ms
from kernellsp.optimize.propose.recipes._product.macros import (
    _function_macros,
    _in_subscript_index,
    _macro_index,
)
from kernellsp.optimize.propose.recipes._product.model import PURE_CALLS, Product, Term
from kernellsp.optimize.propose.recipes.base import RecipeContext
from kernellsp.source.ir import Access, Accumulation, Cond, KernelIR, LocalVar, Loop, Poly, walk
from kernellsp.source.ir.control import _strip_parens

_SENT = "\x00"


def analyse(ctx: RecipeContext) -> Product | str:
    """The product the kernel computes, or why it is not one (a sentence for ``--explain``)."""
    ir = ctx.ir
    why = _kernel_decline(ir)
    if why:
        return why
    found = _the_accumulation(ctx)
    if isinstance(found, str):
        return found
    accum, lv, acc_ctype = found
    loops = _reduction_loops(ir, accum, lv)
    if isinstance(loops, str):
        return loops
    loop, k, kbound, outer, batch_loop = loops
    got_factors = _factors(ir, accum)
    if isinstance(got_factors, str):
        return got_factors
    factors, converts = got_factors
    stored = _the_store(ir, loop, outer, factors)
    if isinstance(stored, str):
        return stored
    st, rhs = stored
    # Every other read must belong to the output expression or the initial value.
    allowed = {f.node.id for f in factors}
    regions = [rhs] + ([lv.value_node] if lv.value_node is not None else [])
    macros = _function_macros(ctx.model.text)
    # The factors' conversions (`__half2float(A[..])`) are part of the product, not calls outside it.
    conv_calls: set[int] = set()
    value = accum.value_node
    if any(converts) and value is not None:
        value = _strip_parens(ir, value)
        for side in ("left", "right"):
            n = value.child_by_field_name(side)
            if n is not None and _strip_parens(ir, n).type == "call_expression":
                conv_calls.add(_strip_parens(ir, n).id)
    why = _outside_product_decline(ir, allowed, regions, macros, accum.var, k, batch_loop, conv_calls)
    if why:
        return why
    # Indices with / and % as atoms, guards re-read with them.
    order = [factors[0], factors[1], st, *[x for x in ir.loads() if x.node.id not in allowed]]
    solved = _coordinates(ir, factors, st, order, macros, allowed, batch_loop)
    if isinstance(solved, str):
        return solved
    coords, terms = solved
    why = _linearity_decline(ir, coords, terms, factors, st, k)
    if why:
        return why
    templates = _templates(ctx, accum.var, lv, rhs, terms, st, coords, batch_loop, k)
    if isinstance(templates, str):
        return templates
    epilogue, init_text, extras = templates
    return Product(
        acc=accum.var,
        acc_ctype=acc_ctype,
        loop=loop,
        k=k,
        kbound=kbound,
        factors=(terms[factors[0].node.id], terms[factors[1].node.id]),
        store=terms[st.node.id],
        coords=coords,
        batch_loop=batch_loop,
        epilogue=epilogue,
        init=init_text,
        extras=extras,
        converts=converts,
    )


def _kernel_decline(ir: KernelIR) -> str | None:
    """Why the kernel as a whole is not one dot product per thread (sync, atomics, shared or local arrays)."""
    if ir.barriers:
        return "the kernel synchronises (__syncthreads/__syncwarp): it is not one dot product per thread"
    if ir.atomics:
        return "the kernel uses atomics: it is not one dot product per thread"
    if ir.warp_ops:
        return "the kernel uses warp primitives: it is not one dot product per thread"
    if any(v.shared for v in ir.locals.values()):
        return "the kernel already stages data in shared memory"
    if any(v.is_array for v in ir.locals.values()):
        return "the kernel keeps a local array: it is not one dot product per thread"
    return None


def _the_accumulation(ctx: RecipeContext) -> tuple[Accumulation, LocalVar, str] | str:
    """The one plain sum into a local scalar (its accumulation, its local and its C type), or why not."""
    ir = ctx.ir
    sums = [a for a in ir.accumulations if a.op == "sum"]
    if len(ir.accumulations) != 1 or len(sums) != 1:
        if not ir.accumulations:
            return "no accumulation `acc += x[..] * y[..]` inside a loop"
        return (
            f"{len(ir.accumulations)} accumulations ({', '.join(a.var for a in ir.accumulations)}): a product "
            "recipe needs exactly one sum"
        )
    accum = sums[0]
    if accum.negated or accum.companions:
        return f"the accumulation into {accum.var} is not a plain sum"
    lv = ir.locals.get(accum.var)
    if lv is None or lv.is_pointer:
        return f"the accumulator {accum.var} is not a local scalar"
    acc_ctype = ctx.template_map().get(lv.ctype, lv.ctype).replace("const ", "").strip()
    if lv.assignments != 1:
        return f"{accum.var} is assigned {lv.assignments} times; a product accumulates into it once per iteration"
    return accum, lv, acc_ctype


def _reduction_loops(
    ir: KernelIR, accum: Accumulation, lv: LocalVar
) -> tuple[Loop, str, Poly, list[Loop], Loop | None] | str:
    """The reduction loop (its variable and bound), the loops around it and the batch loop among them."""
    if not accum.loops:
        return f"the accumulation into {accum.var} is not inside a loop"
    loop = accum.loops[-1]
    why = _check_loop(ir, loop, accum.node)
    if why:
        return why
    k = loop.var or ""
    kbound = loop.bound()
    assert kbound is not None  # _check_loop made sure
    outer = accum.loops[:-1]
    if len(outer) > 1:
        return "the reduction loop sits inside more than one outer loop"
    batch_loop = outer[0] if outer else None
    if batch_loop is not None:
        why = _check_batch_loop(ir, batch_loop, lv.decl)
        if why:
            return why
    return loop, k, kbound, outer, batch_loop


def _factors(ir: KernelIR, accum: Accumulation) -> tuple[list[Access], tuple[str | None, str | None]] | str:
    """The factors of `acc += X * Y`: two reads of pointer parameters, in the order written, each plain or
    converted to float (:data:`CONVERSIONS`), with the conversion of each (None: a plain read)."""
    value = accum.value_node
    if value is None:
        return f"the value added to {accum.var} could not be read"
    value = _strip_parens(ir, value)
    if value.type != "binary_expression" or ir.text(value.child_by_field_name("operator")) != "*":
        calls = [
            ir.text(n.child_by_field_name("function")) for n in walk(value) if n.type == "call_expression"
        ]
        if calls:
            return (
                f"the product converts or transforms its operands ({calls[0]}(...)): the tiled recipes take "
                "plain fp32 loads `x[..] * y[..]`"
            )
        return f"the value added to {accum.var} (`{ir.text(value)}`) is not a product of two array reads"
    loads_by_node = {a.node.id: a for a in ir.loads()}
    factors: list[Access] = []
    converts: list[str | None] = []
    for side in ("left", "right"):
        n = value.child_by_field_name(side)
        n = _strip_parens(ir, n) if n is not None else None
        conv = _conversion(ir, n) if n is not None else None
        if conv is not None:
            converts.append(conv[0])
            n = conv[1]
        else:
            converts.append(None)
        got = loads_by_node.get(n.id) if n is not None else None
        if got is None:
            return _factor_decline(ir, n)
        factors.append(got)
    return factors, (converts[0], converts[1])


#: Conversions of one 16-bit float load to fp32 a factor may be wrapped in (mixed-precision products).
CONVERSIONS = frozenset({"__half2float", "__bfloat162float", "__low2float", "float", "static_cast<float>"})


def _conversion(ir: KernelIR, n: Any) -> tuple[str, Any] | None:
    """``(conversion, inner node)`` when ``n`` converts one value to float (``__half2float(x)``,
    ``(float)x``, ``static_cast<float>(x)``, ``float(x)``); None otherwise."""
    if n.type == "cast_expression":
        ty = n.child_by_field_name("type")
        inner = n.child_by_field_name("value")
        if ty is not None and inner is not None and ir.text(ty).strip() == "float":
            return "(float)", _strip_parens(ir, inner)
        return None
    if n.type != "call_expression":
        return None
    fn = ir.text(n.child_by_field_name("function")).replace(" ", "")
    args = n.child_by_field_name("arguments")
    named = [c for c in args.named_children if c.type != "comment"] if args is not None else []
    if fn in CONVERSIONS and len(named) == 1:
        return fn, _strip_parens(ir, named[0])
    return None


def _factor_decline(ir: KernelIR, n: Any) -> str:
    """Why the factor ``n`` is not a plain read of a pointer parameter."""
    text = ir.text(n) if n is not None else "?"
    if n is not None and n.type == "cast_expression":
        return (
            f"the factor `{text}` converts its load with a cast: the tiled recipes take plain fp32 "
            "loads `x[..] * y[..]`"
        )
    if n is not None and any(c.type == "call_expression" for c in walk(n)):
        return (
            f"the factor `{text}` converts or transforms a load: the tiled recipes take plain fp32 "
            "loads `x[..] * y[..]`"
        )
    return f"the factor `{text}` is not a read of a pointer parameter"


def _the_store(
    ir: KernelIR, loop: Loop, outer: list[Loop], factors: list[Access]
) -> tuple[Access, Any] | str:
    """The one store of the output (``=`` or ``+=``, after the reduction loop) and its stored value."""
    stores = ir.stores()
    if len(stores) != 1:
        return f"the kernel writes {len(stores)} places; a product writes its output once"
    st = stores[0]
    if not (st.kind == "store" and st.op == "=") and not (st.kind == "update" and st.op == "+="):
        return f"the output is written with `{st.op}`, not `=` or `+=`"
    if any(lp is loop for lp in st.loops):
        return "the output is written inside the reduction loop"
    if [lp.node.id for lp in st.loops] != [lp.node.id for lp in outer]:
        return "the output store and the reduction loop sit in different loops"
    for f in factors:
        if f.base == st.base:
            return f"{f.base} is both an operand and the output (in-place product)"
    rhs = _store_rhs(ir, st)
    if rhs is None:
        return "the stored value could not be read"
    return st, rhs


def _outside_product_decline(
    ir: KernelIR,
    allowed: set[int],
    regions: list[Any],
    macros: dict[str, tuple[list[str], str]],
    acc: str,
    k: str,
    batch_loop: Loop | None,
    conv_calls: set[int] | None = None,
) -> str | None:
    """A read or call outside the product and its output expression, or a reassigned local."""
    for a in ir.loads():
        if a.node.id in allowed:
            continue
        if not any(_inside(a.node, r) for r in regions):
            return f"the kernel reads {a.base}[{a.index_text}] outside the product and its output expression"
    for n in walk(ir.body):
        if (
            n.type == "call_expression"
            and n.id not in (conv_calls or ())
            and not any(_inside(n, r) for r in regions)
        ):
            fname = ir.text(n.child_by_field_name("function"))
            if fname in macros and _in_subscript_index(n):
                continue  # an index macro (IDX2(r, c, ld)): expanded below
            return f"the kernel calls {fname}() outside the output expression"
    for name, v in ir.locals.items():
        if name in (acc, k) or (batch_loop is not None and name == batch_loop.var):
            continue
        if v.assignments:
            return f"the local {name} is reassigned: only the accumulator and the loop variables may change"
    return None


def _coordinates(
    ir: KernelIR,
    factors: list[Access],
    st: Access,
    order: list[Access],
    macros: dict[str, tuple[list[str], str]],
    allowed: set[int],
    batch_loop: Loop | None,
) -> tuple[list[ms.Coord], dict[int, Term]] | str:
    """The output's coordinates (from the store's guards, plus the batch loop's) and every read's index over them."""
    idx: dict[int, Poly] = {}
    for a in [*factors, st, *[x for x in ir.loads() if x.node.id not in allowed]]:
        p = ms.access_index(ir, a)
        if p is None:
            p = _macro_index(ir, a, macros)
        if p is None:
            return f"the index of {a.base} (`{a.index_text}`) is not integer arithmetic on thread indices"
        idx[a.node.id] = p
    if any(not g.exact for g in st.guards):
        return "a guard of the output store is not a conjunction of comparisons"
    conds = [_divmod_cond(ir, c) for g in st.guards for c in g.conds]
    pivots = set(ir.divmods)
    solved = ms.solve_coordinates(ir, conds, [idx[a.node.id] for a in order], pivots)
    if isinstance(solved, str):
        return solved
    unused = _unused_guard(ir, conds, solved, pivots)
    if unused:
        return f"the output is guarded by `{unused}`, which is not a bounds check on the output's coordinates"
    coords = list(solved.coords)
    terms = {a.node.id: Term(a, p) for a, p in zip(order, solved.polys, strict=True)}
    if batch_loop is not None:
        bb = batch_loop.bound()
        assert bb is not None and batch_loop.var
        coords.append(ms.Coord(batch_loop.var, bb, f"{batch_loop.var} (outer loop)"))
    return coords, terms


def _linearity_decline(
    ir: KernelIR, coords: list[ms.Coord], terms: dict[int, Term], factors: list[Access], st: Access, k: str
) -> str | None:
    """Why the indices are not linear in the coordinates and ``k`` over scalar parameters (or ``k`` moves
    the output, or fails to move a factor)."""
    names = {c.name for c in coords} | {k}
    params = {p.name for p in ir.params if not p.is_pointer}
    for t in terms.values():
        free = sorted(s for s in t.index.symbols() if s not in names and s not in params)
        if free:
            return f"the index of {t.access.base} uses {free[0]}, which is neither a coordinate nor a scalar parameter"
    for c in coords:
        free = sorted(s for s in c.extent.symbols() if s not in params)
        if free:
            return f"the extent {c.extent} of {c.origin} uses {free[0]}, which is not a scalar parameter"
    for t in terms.values():
        split = t.index.split(names)
        if split is None or any(v.depends_on(names) for v in split[0].values()):
            return (
                f"the index of {t.access.base} (`{t.access.index_text}`) is not linear in the output "
                f"coordinates and {k}"
            )
    for t in (terms[factors[0].node.id], terms[factors[1].node.id]):
        if t.index.coeff(k) == Poly():
            return f"{t.access.base}'s index does not move with the reduction variable {k}"
    if terms[st.node.id].index.coeff(k) != Poly():
        return f"the output index moves with the reduction variable {k}"
    return None


def _templates(
    ctx: RecipeContext,
    acc: str,
    lv: LocalVar,
    rhs: Any,
    terms: dict[int, Term],
    st: Access,
    coords: list[ms.Coord],
    batch_loop: Loop | None,
    k: str,
) -> tuple[str, str, list[tuple[str, Term]]] | str:
    """The output expression and the initial value as templates, with the reads they make."""
    out_coords = {c.name for c in coords}
    # Output expression and initial value as templates.
    ep = _template(ctx, rhs, acc, terms, st, out_coords, batch_loop, k)
    if isinstance(ep, str) and ep.startswith(_SENT):
        return ep[1:]
    assert isinstance(ep, tuple)
    epilogue, extras = ep
    if st.kind == "update":
        epilogue = "{c} + (" + epilogue + ")"
    init_text = "0"
    if lv.value_node is not None:
        it = _template(ctx, lv.value_node, None, terms, st, out_coords, batch_loop, k)
        if isinstance(it, str):
            return it[1:]
        init_text, more = it
        extras += more
        if "{c}" in init_text:
            return f"{acc} starts from the output's old value; write it as `out = {acc} + out` instead"
    else:
        return f"{acc} is declared without an initial value"
    return epilogue, init_text, extras


def _part(ir: Any, loop: Loop, field: str) -> str:
    """The source text of a part of the loop's header (``initializer``, ``update``), quoted."""
    n = loop.node.child_by_field_name(field) if loop.node is not None else None
    return f"`{ir.text(n).strip().rstrip(';')}`" if n is not None else "an expression it could not read"


def _check_loop(ir: object, loop: Loop, acc_node: object) -> str:
    from kernellsp.source.ir import THREAD_SYMBOLS

    if loop.kind != "for" or loop.var is None:
        return "the reduction loop is not a counted for loop"
    if loop.grid_stride:
        return "the reduction loop is a grid-stride loop, not k = 0 .. K-1"
    if loop.start is None or loop.start != Poly():
        return f"the reduction loop starts at {loop.start if loop.start is not None else _part(ir, loop, 'initializer')}, not 0"
    if loop.step is None or loop.step != Poly.const(1):
        return f"the reduction loop steps by {loop.step if loop.step is not None else _part(ir, loop, 'update')}, not 1"
    bound = loop.bound()
    if bound is None:
        return "the reduction loop's condition is not one bound `k < K`"
    if bound.depends_on(THREAD_SYMBOLS) or any(s.startswith(("div(", "mod(")) for s in bound.symbols()):
        return f"the reduction length {bound} differs between threads"
    body = loop.body
    if body is None:
        return "the reduction loop has no body"
    stmts = (
        [c for c in body.named_children if c.type != "comment"]
        if body.type == "compound_statement"
        else [body]
    )
    if len(stmts) != 1 or not _inside(acc_node, stmts[0]):
        return "the reduction loop does more than accumulate one product"
    return ""


def _check_batch_loop(ir: object, loop: Loop, acc_decl: object) -> str:
    if loop.kind != "for" or loop.var is None or loop.grid_stride:
        return "the loop around the reduction is not a counted batch loop"
    if loop.start is None or loop.start != Poly() or loop.step is None or loop.step != Poly.const(1):
        return "the loop around the reduction does not run b = 0 .. B-1 step 1"
    if loop.bound() is None:
        return "the loop around the reduction has no single bound"
    if loop.body is None or not _inside(acc_decl, loop.body):
        return "the accumulator is declared outside the batch loop, so it carries over between batch items"
    return ""


def _inside(n: object, region: object) -> bool:
    return bool(region.start_byte <= n.start_byte and n.end_byte <= region.end_byte)  # type: ignore[attr-defined]


def _store_rhs(ir: object, st: Access) -> object | None:
    node = st.node
    p = node.parent
    while p is not None and p.type not in ("assignment_expression",):
        p = p.parent
    if p is None:
        return None
    return p.child_by_field_name("right")


def _divmod_cond(ir: object, c: Cond) -> Cond:
    """``c`` with its sides re-read with ``/``, ``%`` as atoms (the IR's guards are read without)."""
    n = c.node
    if c.op is None or n is None or n.type != "binary_expression":
        return c
    left, right = n.child_by_field_name("left"), n.child_by_field_name("right")
    lp, rp = ir.poly(left, divmod=True), ir.poly(right, divmod=True)  # type: ignore[attr-defined]
    if lp is None or rp is None:
        return c
    return Cond(c.text, c.op, lp, rp, n)  # for a negated guard the IR already flipped the operator


def _unused_guard(ir: object, conds: list[Cond], coords: ms.Coords, pivots: set[str]) -> str:
    for i, c in enumerate(conds):
        if i in coords.used:
            continue
        if c.op is not None and c.lhs is not None and c.rhs is not None:
            # `x >= 0` / `0 <= x`: coordinates of a thread's point are never negative.
            if c.op == ">=" and c.rhs == Poly() and ms.varying(ir, c.lhs, pivots):  # type: ignore[arg-type]
                continue
            if c.op == "<=" and c.lhs == Poly() and ms.varying(ir, c.rhs, pivots):  # type: ignore[arg-type]
                continue
        return c.text
    return ""


def _template(
    ctx: RecipeContext,
    node: object,
    acc: str | None,
    terms: dict[int, Term],
    st: Access,
    coords: set[str],
    batch_loop: Loop | None,
    k: str,
) -> tuple[str, list[tuple[str, Term]]] | str:
    """The user's expression with ``{acc}``, ``{c}`` and coordinates ``{@n}`` as placeholders, or a decline
    (a string starting with a NUL)."""
    ir = ctx.ir
    params = {p.name for p in ir.params if not p.is_pointer}
    pointers = {p.name for p in ir.params if p.is_pointer}
    store_idx = terms[st.node.id].index
    repl: dict[int, str] = {}
    extras: list[tuple[str, Term]] = []
    skip: list[object] = []
    for n in walk(node):  # type: ignore[arg-type]
        if any(_inside(n, s) for s in skip):
            continue
        if n.type == "subscript_expression" and n.id in terms:
            t = terms[n.id]
            if t.access.base == st.base and t.index == store_idx:
                repl[n.id] = _SENT + "c" + _SENT
            else:
                if t.index.coeff(k) != Poly():
                    return _SENT + f"the output expression reads {t.access.base} along the reduction variable"
                if batch_loop is not None and batch_loop.var in t.index.symbols():
                    return _SENT + f"the output expression reads {t.access.base} per batch item"
                rename = {c: _SENT + c + _SENT for c in coords}
                repl[n.id] = f"{t.access.base}[{t.index.c_text(rename)}]"
                extras.append((repl[n.id], t))
            skip.append(n)
            continue
        if n.type == "identifier":
            name = ir.text(n)
            parent = n.parent
            if (
                parent is not None
                and parent.type == "call_expression"
                and parent.child_by_field_name("function") == n
            ):
                if name not in PURE_CALLS:
                    return _SENT + f"the output expression calls {name}(), which the recipe cannot prove pure"
                continue
            if acc is not None and name == acc:
                repl[n.id] = _SENT + "acc" + _SENT
            elif name in params:
                continue
            elif name in pointers:
                return _SENT + f"the output expression uses the pointer {name} other than by an indexed read"
            else:
                return _SENT + (
                    f"the output expression uses `{name}`, which is neither the accumulator nor a scalar "
                    "parameter"
                )
    from kernellsp.optimize.propose.recipes.base import replace_nodes

    text = replace_nodes(ir, node, repl)
    text = text.replace("{", "{{").replace("}", "}}")
    text = text.replace(_SENT + "acc" + _SENT, "{acc}").replace(_SENT + "c" + _SENT, "{c}")
    for c in coords:
        text = text.replace(_SENT + c + _SENT, "{" + c + "}")
    return " ".join(text.split()), extras
