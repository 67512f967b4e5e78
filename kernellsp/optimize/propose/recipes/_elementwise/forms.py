"""The ways of assigning elements to threads: a guard, a 2-D guard, a grid-stride loop, per-thread chunks."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from kernellsp.optimize.propose.recipes._elementwise.body import _finish
from kernellsp.optimize.propose.recipes._elementwise.model import ElementLoop, Form
from kernellsp.optimize.propose.recipes._elementwise.statements import (
    _depends_on_locals,
    _exit_only,
    _index_decl,
    _is_uniform,
    _min_call,
    _stmts,
)
from kernellsp.optimize.propose.recipes.base import (
    Decline,
    RecipeContext,
)
from kernellsp.source.ir import THREAD_SYMBOLS, KernelIR, Poly

if TYPE_CHECKING:
    import tree_sitter


def analyse(ctx: RecipeContext, reduce: str = "") -> ElementLoop | Decline:
    """Recognise an element loop in ``ctx.kernel`` (see the module docstring), or say why not.

    With ``reduce="atomic"``, the element body may instead combine a value into one address with an
    atomic (``atomicAdd(out, x[i])``); with ``reduce="scatter"``, into a data-dependent address of one
    buffer (``atomicAdd(&bins[data[i]], 1)``). Those atomics are returned in ``ElementLoop.atomics``.
    """
    ir = ctx.ir
    why = _kernel_decline(ir, reduce)
    if why is not None:
        return why
    prelude, exits, rest = _split_head(ir, ir.statements())
    if not rest:
        return Decline("no element body found after the index computation")
    # The element region: one guarded block, one loop, or the statements after an early return.
    # A guard around a loop (the normal form of an early return before a chunk or grid-stride loop)
    # bounds the loop's elements as that early return did: it joins the exits.
    while (
        len(rest) == 1
        and rest[0].type == "if_statement"
        and rest[0].child_by_field_name("alternative") is None
    ):
        inner = _stmts(rest[0].child_by_field_name("consequence") or rest[0])
        p2, e2, r2 = _split_head(ir, inner)
        if len(r2) == 1 and r2[0].type in ("for_statement", "while_statement"):
            prelude, exits, rest = prelude + p2, [*exits, rest[0], *e2], r2
            continue
        break
    if (
        len(rest) == 1
        and rest[0].type == "if_statement"
        and rest[0].child_by_field_name("alternative") is None
    ):
        return _guarded(
            ctx,
            prelude,
            exits,
            rest[0],
            _stmts(rest[0].child_by_field_name("consequence") or rest[0]),
            reduce,
        )
    if len(rest) == 1 and rest[0].type == "while_statement":
        return _while_form(ctx, prelude, exits, rest[0], reduce)
    if len(rest) == 1 and rest[0].type == "for_statement":
        return _loop_form(ctx, prelude, exits, rest[0], reduce)
    if exits:
        return _guarded(ctx, prelude, exits, None, rest, reduce)
    return Decline("the element body is not guarded by a bound check (`if (i < n)` or `if (i >= n) return;`)")


def _kernel_decline(ir: KernelIR, reduce: str) -> Decline | None:
    """Why the kernel as a whole is no element loop (synchronisation, atomics, shared memory, printf, no store)."""
    if ir.barriers or ir.warp_ops:
        return Decline(
            "the kernel synchronises threads (__syncthreads/__syncwarp/shuffles): elements are not independent"
        )
    if ir.atomics and not reduce:
        return Decline(
            "the kernel uses atomics: not an elementwise map (the reduction/histogram recipes handle those)"
        )
    if any(v.shared for v in ir.locals.values()):
        return Decline("the kernel uses __shared__ memory: elements are not independent")
    if any("printf" in c for c in ir.calls):
        return Decline("the kernel calls printf: reordering elements would change its output")
    if not ir.stores() and not (reduce and ir.atomics):
        return Decline("the kernel writes no pointer parameter")
    return None


def _split_head(
    ir: KernelIR, stmts: list[tree_sitter.Node]
) -> tuple[list[tree_sitter.Node], list[tree_sitter.Node], list[tree_sitter.Node]]:
    """The kernel's leading statements split into the uniform prelude, the thread-dependent early exits
    (index declarations dropped), and the rest: the element region."""
    prelude: list[tree_sitter.Node] = []
    exits: list[tree_sitter.Node] = []
    i = 0
    while i < len(stmts):
        s = stmts[i]
        if _index_decl(ir, s):
            i += 1
            continue
        if s.type == "if_statement" and s.child_by_field_name("alternative") is None and _exit_only(ir, s):
            if _is_uniform(ir, s):
                prelude.append(s)
            else:
                exits.append(s)
            i += 1
            continue
        if s.type == "declaration" and _is_uniform(ir, s):
            prelude.append(s)
            i += 1
            continue
        break
    return prelude, exits, stmts[i:]


def _guard_conds(
    ctx: RecipeContext, exits: list[tree_sitter.Node], guard: tree_sitter.Node | None
) -> list[Any] | str:
    from kernellsp.source.ir import conjuncts

    ir = ctx.ir
    conds = []
    for e in exits:
        # An early exit holds under the negation of its condition; a guard around the region under its own.
        got, exact = conjuncts(ir, e.child_by_field_name("condition"), negate=_exit_only(ir, e))
        if not exact:
            return f"the early exit `{ir.text(e).split(chr(10))[0]}` is not a plain bound check"
        conds += got
    if guard is not None:
        got, exact = conjuncts(ir, guard.child_by_field_name("condition"))
        if not exact:
            return f"the guard `{ir.text(guard.child_by_field_name('condition'))}` is not a conjunction of bound checks"
        conds += got
    return conds


def _guarded(
    ctx: RecipeContext, prelude: list[Any], exits: list[Any], guard: Any, body: list[Any], reduce: str = ""
) -> ElementLoop | Decline:
    ir = ctx.ir
    conds = _guard_conds(ctx, exits, guard)
    if isinstance(conds, str):
        return Decline(conds)
    bounds: dict[str, tuple[Poly, str]] = {}
    for c in conds:
        hit = None
        for a in ("x", "y", "z"):
            b = c.bounds_above(Poly.sym(f"gid.{a}"))
            if b is not None and not b.depends_on(THREAD_SYMBOLS) and not _depends_on_locals(ir, b):
                hit = a
                rhs = c.node.child_by_field_name("right") if c.node is not None else None
                text = ir.text(rhs) if rhs is not None and c.upper_bound(Poly.sym(f"gid.{a}")) else b.c_text()
                if a in bounds:
                    return Decline(f"two bounds on the same thread index ({c.text})")
                bounds[a] = (b, text)
                break
        if hit is None:
            return Decline(
                f"the guard condition `{c.text}` is not a bound `index < n` on a global thread index"
            )
    if set(bounds) == {"x"}:
        element = Poly.sym("gid.x")
        bound, text = bounds["x"]
        form: Form = "guard"
    elif set(bounds) == {"x", "y"}:
        w, wt = bounds["x"]
        h, ht = bounds["y"]
        element = w * Poly.sym("gid.y") + Poly.sym("gid.x")
        bound, text = w * h, f"{wt} * {ht}"
        form = "2d"
    elif set(bounds) == {"x", "y", "z"}:
        # A volume: (w, h, d) linearised as w*h*z + w*y + x (the index of a pitch-free 3-D array).
        w, wt = bounds["x"]
        h, ht = bounds["y"]
        d, dt = bounds["z"]
        element = w * h * Poly.sym("gid.z") + w * Poly.sym("gid.y") + Poly.sym("gid.x")
        bound, text = w * h * d, f"{wt} * {ht} * {dt}"
        form = "3d"
    elif not bounds:
        return Decline("the body is not guarded by a bound on the thread index")
    else:
        return Decline("bounds on the y or z index without one on x: not linearised by this recipe")
    return _finish(ctx, form, prelude, body, element, bound, text, lead=["gid.x"], reduce=reduce)


def _loop_form(
    ctx: RecipeContext, prelude: list[Any], exits: list[Any], loop_node: Any, reduce: str = ""
) -> ElementLoop | Decline:
    ir = ctx.ir
    lp = next((x for x in ir.loops if x.node == loop_node), None)
    if lp is None or lp.var is None or lp.start is None or lp.step is None:
        return Decline("the loop is not a counted loop (`for (i = start; i < bound; i += step)`)")
    inner = [
        c
        for c in ir.loops
        if c.node != loop_node and loop_node.start_byte <= c.node.start_byte < loop_node.end_byte
    ]
    if inner:
        return Decline("the element loop contains another loop")
    body = _stmts(lp.body) if lp.body is not None else []
    exit_conds = _guard_conds(ctx, exits, None)
    if isinstance(exit_conds, str):
        return Decline(exit_conds)
    v = Poly.sym(lp.var)
    if lp.grid_stride == "x":
        return _grid_stride_for(ctx, prelude, body, lp, exit_conds, reduce)
    if lp.step != Poly.const(1):
        return Decline(f"loop step `{lp.step}` is neither 1 (a per-thread chunk) nor a grid stride")
    # Chunk forms. Conditions on the element: loop conditions (a `min(...)` bound splits in two),
    # guards at the top of the loop body (`if (i >= n) break;` / `if (i < n) {...}`), early exits.
    got = _chunk_conds(ir, lp, body)
    if isinstance(got, Decline):
        return got
    conds, body = got
    chunked = _chunk_element(ir, lp.start, conds, v)
    if isinstance(chunked, Decline):
        return chunked
    chunk, element = chunked
    bounded = _chunk_bound(ir, conds + (exit_conds or []), element, v, chunk)
    if isinstance(bounded, Decline):
        return bounded
    global_bound, gtext = bounded
    chunk_text = chunk.c_text()
    return _finish(
        ctx,
        "chunk",
        prelude,
        body,
        element,
        global_bound,
        gtext,
        lead=[lp.var],
        loop_var=lp.var,
        chunk=chunk,
        chunk_text=chunk_text,
        reduce=reduce,
    )


def _grid_stride_for(
    ctx: RecipeContext, prelude: list[Any], body: list[Any], lp: Any, exit_conds: list[Any], reduce: str
) -> ElementLoop | Decline:
    """``for (i = gid; i < n; i += blockDim.x * gridDim.x)``: every element ``i`` of ``[0, n)``."""
    ir = ctx.ir
    v = Poly.sym(lp.var)
    if exit_conds and not all(_uniform_cond(ir, c) for c in exit_conds):
        return Decline("an early exit before the grid-stride loop depends on the thread")
    if len(lp.conds) != 1:
        return Decline(
            f"the grid-stride loop condition `{' && '.join(c.text for c in lp.conds)}` is not one bound"
        )
    b = lp.conds[0].bounds_above(v)
    if b is None or b.depends_on(THREAD_SYMBOLS) or _depends_on_locals(ir, b):
        return Decline(f"the grid-stride loop bound `{lp.conds[0].text}` is not uniform")
    text = _rhs_text(ir, lp.conds[0], v)
    return _finish(
        ctx, "grid-stride", prelude, body, v, b, text, lead=[lp.var], loop_var=lp.var, reduce=reduce
    )


def _chunk_conds(ir: KernelIR, lp: Any, body: list[Any]) -> tuple[list[Any], list[Any]] | Decline:
    """A chunk loop's conditions on the element (its own, and its body's leading guards) and the body
    under them, without the leading index declarations."""
    conds = list(lp.conds)
    conds = _expand_min_bounds(ir, conds)
    # Leading index declarations inside the loop (`int i = start + k;`) are resolved by the IR.
    while body and body[0].type == "declaration" and _index_decl_in_loop(ir, body[0], lp.var):
        body = body[1:]
    while body and body[0].type == "if_statement" and body[0].child_by_field_name("alternative") is None:
        head = body[0]
        cons_node = head.child_by_field_name("consequence")
        cons = _stmts(cons_node) if cons_node is not None else []
        from kernellsp.source.ir import conjuncts

        if len(cons) == 1 and cons[0].type == "break_statement":
            got, exact = conjuncts(ir, head.child_by_field_name("condition"), negate=True)
            if not exact:
                return Decline(f"the loop exit `{ir.text(head).splitlines()[0]}` is not a bound check")
            conds += got
            body = body[1:]
            continue
        if len(body) == 1:
            got, exact = conjuncts(ir, head.child_by_field_name("condition"))
            if not exact:
                return Decline(
                    f"the guard `{ir.text(head.child_by_field_name('condition'))}` is not a bound check"
                )
            conds += got
            body = cons
            continue
        break
    # Drop leading index declarations inside the loop (`int i = start + k;`).
    body = [s for s in body if not (s.type == "declaration" and _index_decl_in_loop(ir, s, lp.var))]
    return conds, body


def _chunk_element(ir: KernelIR, start: Poly, conds: list[Any], v: Poly) -> tuple[Poly, Poly] | Decline:
    """The chunk size and the element index of a chunk loop counting ``v`` from ``start``."""
    # Element candidates: the loop variable itself when it starts at the chunk start (t*C), else t*C + k.
    gid = Poly.sym("gid.x")
    if start.is_const and start.value == 0:
        chunk = None
        for c in conds:
            b = c.bounds_above(v)
            if b is not None and not b.depends_on(THREAD_SYMBOLS) and not _depends_on_locals(ir, b):
                chunk = b
                break
        if chunk is None:
            return Decline("the loop bound is not a per-thread chunk size")
        element = chunk * gid + v
    else:
        split = start.split(["gid.x"])
        if split is None or set(split[0]) != {"gid.x"} or split[1] != Poly():
            return Decline(f"the loop starts at `{start}`, not at a multiple of the global thread index")
        chunk = split[0]["gid.x"]
        element = v
    if chunk.depends_on(THREAD_SYMBOLS) or _depends_on_locals(ir, chunk):
        return Decline(f"the chunk size `{chunk}` is not uniform across threads")
    return chunk, element


def _chunk_bound(
    ir: KernelIR, conds: list[Any], element: Poly, v: Poly, chunk: Poly
) -> tuple[Poly, str] | Decline:
    """The bound on the element index (and its spelling) among a chunk loop's conditions; every other
    condition must be the chunk's own extent or an early exit implied by that bound."""
    gid = Poly.sym("gid.x")
    chunk_start = chunk * gid
    global_bound: Poly | None = None
    gtext = ""
    for c in conds:
        b = c.bounds_above(element)
        if b is not None and not b.depends_on(THREAD_SYMBOLS) and not _depends_on_locals(ir, b):
            if global_bound is not None and b != global_bound:
                return Decline(f"two different bounds on the element index ({global_bound} and {b})")
            global_bound, gtext = b, _rhs_text(ir, c, element)
            continue
        # The chunk's own extent: k < C (counter from 0), or i < start + C (counter from the chunk start).
        if _is_extent(c, v, chunk_start + chunk if element == v else chunk):
            continue
        # `if (start >= n) return;`: the chunk starts before the bound (implied by the element bound).
        sb = c.bounds_above(chunk_start)
        if sb is not None and not sb.depends_on(THREAD_SYMBOLS):
            if global_bound is None:
                global_bound, gtext = sb, _rhs_text(ir, c, chunk_start)
            elif sb != global_bound:
                return Decline(f"the early exit bound {sb} differs from the element bound {global_bound}")
            continue
        return Decline(
            f"the condition `{c.text}` is neither the chunk extent nor a bound on the element index"
        )
    if global_bound is None:
        return Decline("no bound on the element index (`i < n`) was found: the chunks may run past the data")
    return global_bound, gtext


def _while_form(
    ctx: RecipeContext, prelude: list[Any], exits: list[Any], node: Any, reduce: str
) -> ElementLoop | Decline:
    """``i = gid; while (i < n) { ...; i += blockDim.x * gridDim.x; }``: a grid-stride loop written as a while."""
    ir = ctx.ir
    lp = next((x for x in ir.loops if x.node == node), None)
    if lp is None or lp.var is None or lp.grid_stride != "x" or lp.body is None or len(lp.conds) != 1:
        return Decline("the while loop is not a grid-stride loop over the elements")
    v = Poly.sym(lp.var)
    b = lp.conds[0].bounds_above(v)
    if b is None or b.depends_on(THREAD_SYMBOLS) or _depends_on_locals(ir, b):
        return Decline(f"the loop bound `{lp.conds[0].text}` is not uniform")
    if exits:
        return Decline("an early exit before the grid-stride loop")
    body = [st for st in _stmts(lp.body) if not _is_update_of(ir, st, lp.var)]
    return _finish(
        ctx,
        "grid-stride",
        prelude,
        body,
        v,
        b,
        _rhs_text(ir, lp.conds[0], v),
        lead=[lp.var],
        loop_var=lp.var,
        reduce=reduce,
    )


def _is_update_of(ir: KernelIR, st: Any, var: str) -> bool:
    e = st.named_children[0] if st.type == "expression_statement" and st.named_children else None
    if e is None or e.type not in ("assignment_expression", "update_expression"):
        return False
    tgt = e.child_by_field_name("left") or e.child_by_field_name("argument")
    return tgt is not None and ir.text(tgt) == var


def _is_extent(c: Any, v: Poly, end: Poly) -> bool:
    """Is condition ``c`` exactly ``v < end``?"""
    if c.op not in ("<", "<=", ">", ">=") or c.lhs is None or c.rhs is None:
        return False
    d = c.lhs - c.rhs if c.op in ("<", "<=") else c.rhs - c.lhs
    if c.op in ("<=", ">="):
        d = d - 1
    return bool(d == v - end)


def _uniform_cond(ir: KernelIR, c: Any) -> bool:
    return c.node is not None and _is_uniform(ir, c.node)


def _rhs_text(ir: KernelIR, c: Any, var: Poly) -> str:
    """The user's spelling of a bound (``n`` in ``i < n``), or the polynomial's text."""
    ub = c.upper_bound(var)
    if ub is not None and c.node is not None:
        side = c.node.child_by_field_name("right" if c.lhs == var else "left")
        if side is not None and not ub[1]:
            return ir.text(side)
    b = c.bounds_above(var)
    return b.c_text() if b is not None else c.text


def _expand_min_bounds(ir: KernelIR, conds: list[Any]) -> list[Any]:
    """``k < len`` with ``len = min(a, b)`` (or ``k < min(a, b)``) becomes ``k < a`` and ``k < b``."""
    from kernellsp.source.ir import Cond

    out = []
    for c in conds:
        node = c.node
        right = node.child_by_field_name("right") if node is not None else None
        left = node.child_by_field_name("left") if node is not None else None
        target = right
        if right is not None and right.type == "identifier" and right is not None:
            var = ir.locals.get(ir.text(right))
            if var is not None and var.value_node is not None and var.assignments == 0:
                target = var.value_node
        call = _min_call(ir, target) if target is not None and c.op in ("<", "<=") else None
        if call is None or left is None:
            out.append(c)
            continue
        lp = ir.poly(left)
        for arg in call:
            out.append(Cond(f"{ir.text(left)} {c.op} {ir.text(arg)}", c.op, lp, ir.poly(arg), None))
    return out


def _index_decl_in_loop(ir: KernelIR, s: Any, loop_var: str) -> bool:
    names = [d for d in s.children_by_field_name("declarator")]
    ok = bool(names)
    for d in names:
        name_node = d.child_by_field_name("declarator") or d
        while name_node.type in ("pointer_declarator",):
            name_node = name_node.child_by_field_name("declarator") or name_node
        var = ir.locals.get(ir.text(name_node))
        if var is None:
            return False
        p = ir.poly(var.value_node) if var.value_node is not None else None
        ok = ok and p is not None and (loop_var in p.symbols() or p.depends_on(THREAD_SYMBOLS))
    return ok
