"""Element loops: the analysis and the code generator shared by the map and coalescing recipes.

An *element loop* is a kernel whose work splits into independent elements ``e`` in ``[0, n)``: for
each element a straight-line body reads stream inputs at ``s*e + o`` (``s`` a small constant
stride, ``0 <= o < s``), computes, and writes stream outputs at ``s*e + o``; other reads are of
buffers the kernel never writes (broadcast scalars, lookup tables). :func:`analyse` recognises the
usual ways of assigning elements to threads:

* ``guard``: one element per thread, ``e = gid`` under ``if (e < n) {...}`` or ``if (e >= n) return;``;
* ``grid-stride``: ``for (e = gid; e < n; e += blockDim.x * gridDim.x)``;
* ``2d``: ``e = row * W + col`` with ``col < W && row < H`` (linearised to ``[0, W*H)``);
* ``chunk``: thread ``t`` takes ``[t*C, (t+1)*C)`` (``for (k = 0; k < C; k++) { i = t*C + k; ... }``, the
  pointer form ``p = x + t*C; p[k]``, ``for (i = begin; i < min(begin + C, n); i++)``, ``if (i >= n) break;``).

:func:`generate` writes one kernel body for all of them: the element body becomes a lambda (the
user's statements, unchanged but for the stream accesses, which become register operands); a
grid-stride loop over 16-byte vectors loads every input stream with 128-bit loads (4 floats, 8
halves or bf16s, 16 bytes), applies the lambda per element, and stores the outputs with 128-bit
stores; a scalar tail handles ``n % E`` elements and a scalar grid-stride loop handles pointers that
are not 16-byte aligned (checked at run time). The loop is correct under any launch, so a
host-launched kernel keeps the launch its host code gives (threads past the work exit at once);
a ``__global__`` entry gets ``grid = ceil_div(n, block * E * unroll)``: one batch of vectors per
thread, which needs no SM count (the spec language has none) and has the fewest loop trips.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

from kernellsp.optimize.propose.recipes.base import (
    CTYPE_BYTES,
    Decline,
    RecipeContext,
    RecipeError,
    Rewrite,
    indent,
    replace_nodes,
    signature_text,
)
from kernellsp.source import spec as specmod
from kernellsp.source.ir import THREAD_SYMBOLS, Access, Atomic, KernelIR, Poly, walk

if TYPE_CHECKING:
    import tree_sitter

Form = Literal["guard", "grid-stride", "2d", "chunk"]
_EXIT_TYPES = ("return_statement", "break_statement", "continue_statement", "goto_statement")


@dataclass
class Stream:
    """A pointer accessed at ``stride*e + offset`` for element ``e``."""

    param: str
    ctype: str
    stride: int
    reads: set[int] = field(default_factory=set)
    writes: set[int] = field(default_factory=set)
    #: Some write happens only on some paths of the body: the old values are loaded first.
    conditional_write: bool = False
    accesses: list[tuple[Access, int]] = field(default_factory=list)

    @property
    def loaded(self) -> bool:
        return bool(self.reads) or self.conditional_write

    def slot(self, offset: int) -> str:
        return f"kl_{self.param}" + (f"_{offset}" if self.stride > 1 else "")


@dataclass
class ElementLoop:
    """What :func:`analyse` found; :func:`generate` turns it into code."""

    form: Form
    body: list[tree_sitter.Node]
    prelude: list[tree_sitter.Node]
    element: Poly
    bound: Poly
    bound_text: str
    streams: list[Stream]
    #: Declarations the lambda starts with: the user's index variables in terms of ``kl_i``.
    redefine: list[str]
    replace: dict[int, str]
    #: Chunk form: the chunk size (elements per thread) as C text and polynomial.
    chunk: Poly | None = None
    chunk_text: str | None = None
    #: Names the user gave the element index (for --explain).
    index_names: list[str] = field(default_factory=list)
    #: Reductions: the atomics that combine each element's value into one address.
    atomics: list[Atomic] = field(default_factory=list)

    def binding(self, ctx: RecipeContext) -> dict[str, str]:
        ins = [s.param for s in self.streams if s.reads]
        outs = [s.param for s in self.streams if s.writes]
        dts = {s.param: (ctx.dtype(s.param) or s.ctype) for s in self.streams}
        out = {
            "form": self.form,
            "index": ", ".join(self.index_names) or str(self.element),
            "bound": self.bound_text,
            "inputs": ", ".join(f"{p} ({dts[p]})" for p in ins) or "none",
            "outputs": ", ".join(f"{p} ({dts[p]})" for p in outs),
        }
        strided = [f"{s.param} x{s.stride}" for s in self.streams if s.stride > 1]
        if strided:
            out["interleaved"] = ", ".join(strided)
        if self.chunk_text:
            out["chunk"] = self.chunk_text
        out["launch"] = "kept (host launcher)" if ctx.host_launched else "spec launch field"
        return out


# --------------------------------------------------------------------------------------------------
# Analysis


def _is_uniform(ir: KernelIR, node: tree_sitter.Node) -> bool:
    """No thread/block indices, no index variables, no memory writes: the same value in every thread.

    ``blockDim``/``gridDim`` are uniform across the grid (``int stride = blockDim.x * gridDim.x;``).
    """
    if ir.uses_builtin(node, ("threadIdx", "blockIdx")):
        return False
    ids = ir.identifiers(node)
    if ids & set(ir.index_vars):
        return False
    if any(
        n.type in ("assignment_expression", "update_expression")
        for n in walk(node)
        if n.type != "declaration"
    ):
        return node.type == "declaration" and not any(
            n.type in ("assignment_expression", "update_expression") for n in walk(node)
        )
    written = ir.written()
    return not any(
        a.base in written
        for a in ir.global_accesses()
        if node.start_byte <= a.node.start_byte < node.end_byte
    )


def _index_decl(ir: KernelIR, node: tree_sitter.Node) -> bool:
    """A declaration of thread-index variables only (``int i = blockIdx.x * blockDim.x + threadIdx.x;``)."""
    if node.type != "declaration":
        return False
    names = [
        ir.text(d.child_by_field_name("declarator") or d) for d in node.children_by_field_name("declarator")
    ]
    names = [re.sub(r"[^\w].*$", "", n.lstrip("*& ")) for n in names]
    if not names:
        return False
    for name in names:
        var = ir.locals.get(name)
        if var is None or var.is_array or var.shared:
            return False
        if name in ir.index_vars:
            continue
        if any(lp.var == name and lp.grid_stride for lp in ir.loops):
            continue  # `int i = gid;` of a `while (i < n) { ...; i += stride; }` grid-stride loop
        if var.is_pointer and var.points_to is not None:
            continue  # `const float* p = src + start;`: resolved into accesses by the IR
        # `int len = min(chunk, n - start)`: a chunk-loop bound, resolved by the chunk analysis.
        if (
            var.value_node is not None
            and _min_call(ir, var.value_node) is not None
            and not any(
                n.type in ("subscript_expression", "pointer_expression") for n in walk(var.value_node)
            )
            and ir.identifiers(var.value_node) & set(ir.index_vars)
        ):
            continue
        return False
    return True


def _stmts(node: tree_sitter.Node) -> list[tree_sitter.Node]:
    if node.type == "compound_statement":
        return [c for c in node.named_children if c.type != "comment"]
    return [node]


def analyse(ctx: RecipeContext, reduce: str = "") -> ElementLoop | Decline:
    """Recognise an element loop in ``ctx.kernel`` (see the module docstring), or say why not.

    With ``reduce="atomic"``, the element body may instead combine a value into one address with an
    atomic (``atomicAdd(out, x[i])``); with ``reduce="scatter"``, into a data-dependent address of one
    buffer (``atomicAdd(&bins[data[i]], 1)``). Those atomics are returned in ``ElementLoop.atomics``.
    """
    ir = ctx.ir
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
    stmts = ir.statements()
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
    rest = stmts[i:]
    if not rest:
        return Decline("no element body found after the index computation")
    # The element region: one guarded block, one loop, or the statements after an early return.
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


def _exit_only(ir: KernelIR, s: tree_sitter.Node) -> bool:
    cons = s.child_by_field_name("consequence")
    kids = _stmts(cons) if cons is not None else []
    return len(kids) == 1 and kids[0].type == "return_statement" and kids[0].named_child_count == 0


def _guard_conds(
    ctx: RecipeContext, exits: list[tree_sitter.Node], guard: tree_sitter.Node | None
) -> list[Any] | str:
    from kernellsp.source.ir import conjuncts

    ir = ctx.ir
    conds = []
    for e in exits:
        got, exact = conjuncts(ir, e.child_by_field_name("condition"), negate=True)
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
    elif not bounds:
        return Decline("the body is not guarded by a bound on the thread index")
    else:
        return Decline("a 3-D launch: not linearised by this recipe")
    return _finish(ctx, form, prelude, body, element, bound, text, lead=["gid.x"], reduce=reduce)


def _depends_on_locals(ir: KernelIR, p: Poly) -> bool:
    """Does ``p`` mention a local that was not substituted (reassigned, loop variable)?"""
    return any(s in ir.locals for s in p.symbols())


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
    if lp.step != Poly.const(1):
        return Decline(f"loop step `{lp.step}` is neither 1 (a per-thread chunk) nor a grid stride")
    # Chunk forms. Conditions on the element: loop conditions (a `min(...)` bound splits in two),
    # guards at the top of the loop body (`if (i >= n) break;` / `if (i < n) {...}`), early exits.
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
    # Element candidates: the loop variable itself when it starts at the chunk start (t*C), else t*C + k.
    start = lp.start
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
    chunk_start = chunk * gid
    global_bound: Poly | None = None
    gtext = ""
    for c in conds + (exit_conds or []):
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


def _min_call(ir: KernelIR, n: Any) -> list[Any] | None:
    while n.type in ("parenthesized_expression",):
        n = n.named_children[0]
    if n.type != "call_expression" or ir.text(n.child_by_field_name("function")) not in (
        "min",
        "::min",
        "std::min",
        "umin",
        "llmin",
    ):
        return None
    args = n.child_by_field_name("arguments")
    kids = [c for c in args.named_children if c.type != "comment"] if args is not None else []
    return kids if len(kids) == 2 else None


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


def _finish(
    ctx: RecipeContext,
    form: Form,
    prelude: list[Any],
    body: list[Any],
    element: Poly,
    bound: Poly,
    bound_text: str,
    lead: list[str],
    loop_var: str | None = None,
    chunk: Poly | None = None,
    chunk_text: str | None = None,
    reduce: str = "",
    accumulators: frozenset[str] = frozenset(),
    outside_writes: bool = False,
) -> ElementLoop | Decline:
    ir = ctx.ir
    # Index declarations inside the body (`int idx = row * width + col;`) are redefined from the element index.
    body = [st for st in body if not _index_decl(ir, st) or _has_access(ir, st)]
    if not body:
        return Decline("the element body is empty")
    body_start, body_end = body[0].start_byte, body[-1].end_byte

    def in_body(n: Any) -> bool:
        return body_start <= n.start_byte and n.end_byte <= body_end

    early_return = False
    for n in ir.exits:
        if in_body(n):
            if (
                n.type == "return_statement"
                and n.named_child_count == 0
                and not any(
                    in_body(lp.node) and lp.node.start_byte <= n.start_byte < lp.node.end_byte
                    for lp in ir.loops
                )
            ):
                # `return;` ends this element only: it becomes the lambda's return (outputs are preloaded).
                early_return = True
                continue
            return Decline(f"the element body exits early (`{ir.text(n)}`): not a straight-line element body")
    for lp in ir.loops:
        if in_body(lp.node) and (
            lp.var is None
            or lp.step is None
            or len(lp.conds) != 1
            or _depends_on_locals(ir, lp.bound() or Poly())
        ):
            return Decline(
                "the element body loops a data-dependent number of times: its divergent compute, not "
                "the stream loads, bounds the kernel"
            )
    if any(in_body(lp.node) for lp in ir.loops):
        inner = next(lp for lp in ir.loops if in_body(lp.node))
        if any(
            a.space == "global"
            and in_body(a.node)
            and inner.node.start_byte <= a.node.start_byte < inner.node.end_byte
            and a.kind != "load"
            for a in ir.accesses
        ):
            return Decline("the element body writes memory inside a loop")
    lead_var = (
        "gid.x" if element.coeff("gid.x") == Poly.const(1) and form != "chunk" else (loop_var or "gid.x")
    )
    if form == "chunk" and loop_var is not None:
        lead_var = loop_var
    streams: dict[str, Stream] = {}
    replace: dict[int, str] = {}
    other_reads: list[Access] = []
    written = ir.written()
    atomics = []
    for at in ir.atomics:
        if not in_body(at.node):
            return Decline(f"the atomic `{ir.text(at.node)}` is outside the element body")
        target = at.target
        if target is None or target.space != "global":
            return Decline(f"the atomic `{ir.text(at.node)}` does not target a global buffer")
        if target.index is None and reduce != "scatter":
            return Decline(
                f"the atomic `{ir.text(at.node)}` updates a data-dependent address (a scatter: the "
                "histogram recipe's shape)"
            )
        per_element = target.index is None or target.index.depends_on(THREAD_SYMBOLS | set(ir.locals))
        if reduce == "atomic" and per_element:
            return Decline(
                f"the atomic `{ir.text(at.node)}` updates an address that differs per element (a scatter: "
                "the histogram recipe's shape)"
            )
        if reduce == "scatter" and not per_element:
            return Decline(
                f"the atomic `{ir.text(at.node)}` updates one address for all elements (a reduction: the "
                "reduce recipe's shape)"
            )
        if at.result_used:
            return Decline(
                f"the value returned by `{ir.text(at.node)}` is used: the order of updates is observable"
            )
        atomics.append(at)
    for a in ir.accesses:
        if a.space != "global" or a.kind == "atomic":
            continue
        if not in_body(a.node):
            if outside_writes:
                continue
            if a.kind != "load" or a.base in written:
                return Decline(f"{a.base} is accessed outside the element body")
            continue
        st = _stream_position(a.index, element, lead_var)
        if st is None:
            if a.kind != "load":
                return Decline(
                    f"{a.base}[{a.index_text}] is written at an index that is not the element's "
                    f"(element {element.c_text()})"
                )
            other_reads.append(a)
            continue
        s, o = st
        pi = ir.param(a.base)
        if pi is None:
            return Decline(f"{a.base} is not a parameter")
        stream = streams.setdefault(a.base, Stream(a.base, pi.ctype, s))
        if stream.stride != s:
            return Decline(f"{a.base} is accessed with two strides ({stream.stride} and {s}) per element")
        if a.kind == "load":
            stream.reads.add(o)
        else:
            stream.writes.add(o)
            if a.kind == "update":
                stream.reads.add(o)
            body_guards = [g for g in a.guards if in_body(g.node)]
            if body_guards or any(in_body(lp.node) for lp in a.loops):
                stream.conditional_write = True
        stream.accesses.append((a, o))
        replace[a.node.id] = stream.slot(o)
    lead_syms = {lead_var} | ({loop_var} if loop_var else set()) | THREAD_SYMBOLS
    for a in other_reads:
        if a.loops and any(in_body(lp.node) for lp in a.loops):
            return Decline(
                f"each element reads {a.base} in a loop ({a.base}[{a.index_text}]): a per-element reduction "
                "(the matmul/matvec/row-reduction recipes' shape), not a map"
            )
        if a.index is None:
            return Decline(
                f"{a.base}[{a.index_text}] is a data-dependent gather: its random accesses, not the "
                "stream loads, bound the kernel"
            )
        if a.index.depends_on(lead_syms) or _depends_on_locals(ir, a.index):
            return Decline(
                f"{a.base}[{a.index_text}] reads a neighbour of the element (a stencil), not the "
                "element itself"
            )
        if a.base in streams and streams[a.base].writes:
            return Decline(
                f"{a.base} is written per element and also read at {a.index_text}: elements depend on "
                "each other"
            )
        if a.base in written:
            return Decline(
                f"{a.base} is read at {a.index_text}, which is not the element's index, and written"
            )
    if early_return:
        for strm in streams.values():
            if strm.writes:
                strm.conditional_write = True
        for n in ir.exits:
            if in_body(n) and n.type == "return_statement":
                replace[n.id] = "return kl_acc;" if reduce == "atomic" else "return;"
    if not reduce and not any(s.writes for s in streams.values()):
        return Decline("no output is written at the element's index")
    if reduce and any(s.writes for s in streams.values()):
        return Decline("the kernel writes per-element outputs as well as reducing: not a pure reduction")
    for strm in streams.values():
        if (
            strm.writes
            and strm.stride > 1
            and strm.writes != set(range(strm.stride))
            and not strm.reads >= set(range(strm.stride))
        ):
            strm.conditional_write = True
        if strm.stride > 4:
            return Decline(
                f"{strm.param} is read with a stride of {strm.stride} elements per element: too sparse to vectorise"
            )
        if _bytes(ctx, strm) is None:
            return Decline(f"the element type of {strm.param} ({strm.ctype}) has no known size")
        pinfo = ctx.ir.param(strm.param)
        if pinfo is None or not pinfo.is_pointer:
            return Decline(f"{strm.param} is not a pointer parameter")
    # Identifiers of the body that are thread-dependent must be expressible from the element index.
    redefine: list[str] = []
    index_names: list[str] = []
    used: set[str] = set()
    for stmt in body:
        for n in walk(stmt):
            if any(
                n.start_byte >= a.node.start_byte and n.end_byte <= a.node.end_byte
                for a, _ in (x for s in streams.values() for x in s.accesses)
            ):
                continue
            if n.type == "identifier":
                used.add(ir.text(n))
    if used & {"threadIdx", "blockIdx", "blockDim", "gridDim"}:
        return Decline("the element body reads threadIdx/blockIdx/blockDim/gridDim directly")
    for name in sorted(used):
        var = ir.locals.get(name)
        if name == loop_var:
            if element == Poly.sym(loop_var):
                redefine.append(
                    f"const {_decl_type(ir, name)} {name} = static_cast<{_decl_type(ir, name)}>(kl_i);"
                )
                index_names.append(name)
                continue
            return Decline(f"the element body uses the loop counter {name} outside the stream accesses")
        if var is None or name not in ir.index_vars:
            if var is not None and var.points_to is not None:
                return Decline(f"the element body uses the local pointer {name} outside a subscript")
            continue
        ip = ir.index_vars[name]
        if _assigned_in(ir, name, body):
            return Decline(f"the element body assigns the index variable {name}")
        t = _decl_type(ir, name)
        if ip == element:
            redefine.append(f"const {t} {name} = static_cast<{t}>(kl_i);")
            index_names.append(name)
        elif form == "2d" and ip == Poly.sym("gid.x"):
            redefine.append(
                f"const {t} {name} = static_cast<{t}>(kl_i % ({_poly_ll(bound_text_w(element))}));"
            )
        elif form == "2d" and ip == Poly.sym("gid.y"):
            redefine.append(
                f"const {t} {name} = static_cast<{t}>(kl_i / ({_poly_ll(bound_text_w(element))}));"
            )
        else:
            return Decline(f"the element body uses {name} = {ip}, which is not the element index")
    if not index_names:
        index_names = [n for n, p in ir.index_vars.items() if p == element] or [str(element)]
    # Locals assigned inside the body but declared outside it would be shared by all elements a thread handles.
    for stmt in body:
        for n in walk(stmt):
            if n.type in ("assignment_expression", "update_expression"):
                tgt = n.child_by_field_name("left") or n.child_by_field_name("argument")
                if tgt is not None and tgt.type == "identifier":
                    var = ir.locals.get(ir.text(tgt))
                    if var is not None and not in_body(var.decl) and ir.text(tgt) not in accumulators:
                        return Decline(
                            f"the element body assigns {ir.text(tgt)}, which is declared outside it"
                        )
    return ElementLoop(
        form,
        body,
        prelude,
        element,
        bound,
        bound_text,
        sorted(streams.values(), key=lambda s: _param_pos(ir, s.param)),
        redefine,
        replace,
        chunk,
        chunk_text,
        index_names,
        atomics,
    )


def _has_access(ir: KernelIR, node: Any) -> bool:
    return any(node.start_byte <= a.node.start_byte < node.end_byte for a in ir.accesses)


def bound_text_w(element: Poly) -> Poly:
    """The row width ``W`` of a 2-D element index ``W*gid.y + gid.x``."""
    return element.coeff("gid.y")


def _poly_ll(p: Poly) -> str:
    return p.c_text()


def _param_pos(ir: KernelIR, name: str) -> int:
    p = ir.param(name)
    return p.position if p else 0


def _assigned_in(ir: KernelIR, name: str, body: list[Any]) -> bool:
    for stmt in body:
        for n in walk(stmt):
            if n.type in ("assignment_expression", "update_expression"):
                tgt = n.child_by_field_name("left") or n.child_by_field_name("argument")
                if tgt is not None and ir.text(tgt) == name:
                    return True
    return False


def _decl_type(ir: KernelIR, name: str) -> str:
    var = ir.locals.get(name)
    t = (var.ctype if var is not None else "long long").replace("const ", "").strip()
    return t or "long long"


def _stream_position(index: Poly | None, element: Poly, lead: str) -> tuple[int, int] | None:
    """``(s, o)`` with ``index == s*element + o``, ``1 <= s``, ``0 <= o < s``; else ``None``."""
    if index is None:
        return None
    s_poly = index.coeff(lead)
    lead_coeff = element.coeff(lead)
    if s_poly.value is None or lead_coeff.value is None or lead_coeff.value == 0:
        return None
    if s_poly.value % lead_coeff.value:
        return None
    s = s_poly.value // lead_coeff.value
    if s < 1:
        return None
    rest = index - element * s
    if rest.value is None or not 0 <= rest.value < s:
        return None
    return s, rest.value


def _bytes(ctx: RecipeContext, s: Stream) -> int | None:
    b = ctx.elem_bytes(s.param)
    return b if b in (1, 2, 4, 8) else None


# --------------------------------------------------------------------------------------------------
# Generation


def elements_per_vector(ctx: RecipeContext, el: ElementLoop) -> int:
    """Elements per thread step: 16 bytes of the narrowest stream (times its stride)."""
    widths = []
    for s in el.streams:
        b = _bytes(ctx, s)
        if b is None:
            raise RecipeError(f"unknown element size of {s.param}")
        widths.append(b * s.stride)
    return max(1, 16 // min(widths))


@dataclass
class Reduction:
    """How :func:`generate` turns the element loop into a reduction: each element's body yields a value
    (``kl_acc``, starting at ``identity``; ``replace`` rewrites the body's atomics into ``kl_acc`` updates),
    each thread combines its elements' values in registers (``kl_total``), and ``epilogue`` combines the
    threads' totals and publishes them (warp shuffles, shared memory, one atomic per block)."""

    #: ``None``: the body updates the user's own accumulators (captured by reference) and returns nothing.
    acc_type: str | None
    identity: str
    combine: Any  # Callable[[str, str], str]: C expression combining two values
    replace: dict[int, str]
    epilogue: str
    #: Elements per thread of the new launch, in vectors (``grid = ceil_div(n, block * E * items)``).
    items: int = 1
    #: Statements before the loop (after the prelude) and the threads' mapping: ``(tid, threads)``.
    prologue: list[str] = field(default_factory=list)
    threads: tuple[str, str] | None = None


def generate(
    ctx: RecipeContext, el: ElementLoop, params: dict[str, Any], what: str, reduction: Reduction | None = None
) -> Rewrite:
    """The rewritten kernel for an element loop (see the module docstring); ``what`` heads its comment."""
    ir = ctx.ir
    unroll = int(params.get("unroll", 1))
    E = elements_per_vector(ctx, el)
    for s in el.streams:
        b = _bytes(ctx, s)
        assert b is not None
        if (E * s.stride * b) % 16:
            raise RecipeError(f"{s.param}: {E} elements are not a whole number of 16-byte vectors")
    lines: list[str] = []
    add = lines.append
    # Not "// kernellsp ...": a comment whose first word is kernellsp is read as a launch spec.
    add(f"// Rewritten by a kernellsp recipe: {what}.")
    for p in el.prelude:
        add(ir.text(p))
    one_d = _one_d(ctx)
    spread = (
        bool(params.get("spread"))
        and ctx.host_launched
        and one_d
        and reduction is None
        and el.form == "guard"
    )
    if spread:
        # The host's launch gives one thread per element and vectors need 1/E of them: every E-th block
        # works (E times as much), so working and idle blocks interleave on the SMs instead of the idle
        # ones trailing at the end.
        add(f"if (blockIdx.x % {E} != 0) return;")
        add(f"const long long kl_tid = static_cast<long long>(blockIdx.x / {E}) * blockDim.x + threadIdx.x;")
        add(f"const long long kl_threads = static_cast<long long>((gridDim.x + {E - 1}) / {E}) * blockDim.x;")
    elif reduction is not None and reduction.threads is not None:
        add(f"const long long kl_tid = {reduction.threads[0]};")
        add(f"const long long kl_threads = {reduction.threads[1]};")
    elif one_d:
        add("const long long kl_tid = static_cast<long long>(blockIdx.x) * blockDim.x + threadIdx.x;")
        add("const long long kl_threads = static_cast<long long>(gridDim.x) * blockDim.x;")
    else:
        add(
            "const long long kl_threads = static_cast<long long>(gridDim.x) * gridDim.y * gridDim.z * blockDim.x * "
            "blockDim.y * blockDim.z;"
        )
        add(
            "const long long kl_tid = ((static_cast<long long>(blockIdx.z) * gridDim.y + blockIdx.y) * gridDim.x + "
            "blockIdx.x) * (blockDim.x * blockDim.y * blockDim.z) + (threadIdx.z * blockDim.y + threadIdx.y) * blockDim.x + "
            "threadIdx.x;"
        )
    n_expr = _ll(el.bound)
    if el.form == "chunk" and el.chunk is not None:
        # Thread t of the original handled [t*C, (t+1)*C): together [0, threads*C) of the launch it ran with.
        if ctx.host_launched:
            add(f"const long long kl_n = min({n_expr}, kl_threads * ({_ll(el.chunk)}));")
        else:
            add(
                f"const long long kl_n = {n_expr};  // the spec's launch covered every element (checked per shape)"
            )
    elif ctx.host_launched and el.form == "guard":
        # One element per thread: the original reached [0, min(n, threads)) under the launch it keeps.
        add(f"const long long kl_n = min({n_expr}, static_cast<long long>(gridDim.x) * blockDim.x);")
    else:
        add(f"const long long kl_n = {n_expr};")
    # The element body, once, as a lambda over the element index and its stream operands.
    args = ["const long long kl_i"]
    for s in el.streams:
        for o in sorted(s.reads | s.writes):
            if o in s.writes:
                args.append(f"{s.ctype}& {s.slot(o)}")
            else:
                args.append(f"const {s.ctype} {s.slot(o)}")
    red = reduction
    returns = red is not None and red.acc_type is not None
    for line in red.prologue if red else []:
        add(line)
    add(f"auto kl_element = [&]({', '.join(args)})" + (f" -> {red.acc_type} {{" if red and returns else " {"))
    if red and returns:
        add(f"    {red.acc_type} kl_acc = {red.identity};")
    for r in el.redefine:
        add("    " + r)
    for stmt in el.body:
        add(indent(_dedent(replace_nodes(ir, stmt, {**el.replace, **(red.replace if red else {})})), 4))
    if red and returns:
        add("    return kl_acc;")
    add("};")
    if red and returns:
        add(f"{red.acc_type} kl_total = {red.identity};")
    # Scalar path: one element with plain loads and stores (tail, unaligned pointers).
    add("auto kl_scalar = [&](const long long kl_e) {")
    call = ["kl_e"]
    for s in el.streams:
        for o in sorted(s.reads | s.writes):
            idx = f"kl_e * {s.stride} + {o}" if s.stride > 1 else "kl_e"
            if o in s.reads or (o in s.writes and s.conditional_write):
                add(f"    {s.ctype} {s.slot(o)} = {s.param}[{idx}];")
            else:
                add(f"    {s.ctype} {s.slot(o)};")
            call.append(s.slot(o))
    if red and red.acc_type is not None:
        add(f"    kl_total = {red.combine('kl_total', 'kl_element(' + ', '.join(call) + ')')};")
    else:
        add(f"    kl_element({', '.join(call)});")
    for s in el.streams:
        for o in sorted(s.writes):
            idx = f"kl_e * {s.stride} + {o}" if s.stride > 1 else "kl_e"
            add(f"    {s.param}[{idx}] = {s.slot(o)};")
    add("};")
    # Vector path: E elements per step, 16-byte loads/stores.
    ptrs = " | ".join(f"reinterpret_cast<unsigned long long>({s.param})" for s in el.streams)
    add(f"constexpr int kl_E = {E};  // elements per 16-byte vector of the narrowest stream")
    add(f"const bool kl_aligned = (({ptrs}) & 15ull) == 0;")
    add("if (kl_aligned) {")
    add("    const long long kl_nvec = kl_n / kl_E;")
    vec_body = _vector_step(el, unroll, red)
    add("    long long kl_v = kl_tid;")
    if unroll > 1:
        add(f"    for (; kl_v + {unroll - 1} * kl_threads < kl_nvec; kl_v += {unroll} * kl_threads) {{")
        add(indent(vec_body, 8))
        add("    }")
    add("    for (; kl_v < kl_nvec; kl_v += kl_threads) {")
    add(indent(_vector_step(el, 1, red), 8))
    add("    }")
    add(
        "    for (long long kl_e = kl_nvec * kl_E + kl_tid; kl_e < kl_n; kl_e += kl_threads) kl_scalar(kl_e);"
    )
    add("} else {")
    add("    for (long long kl_e = kl_tid; kl_e < kl_n; kl_e += kl_threads) kl_scalar(kl_e);")
    add("}")
    if red:
        add(red.epilogue)
    code = signature_text(ctx) + "\n{\n" + indent("\n".join(lines), 4) + "\n}\n"
    launch = None
    if not ctx.host_launched:
        launch = new_launch(ctx, el, E * (red.items if red else unroll), params)
    return Rewrite(ctx.kernel.name, code, launch)


def _vector_step(el: ElementLoop, unroll: int, red: Reduction | None = None) -> str:
    """Load ``unroll`` vectors of every loaded stream, apply the element lambda, store the outputs."""
    out: list[str] = []
    add = out.append
    u_idx = "[kl_u]" if unroll > 1 else ""
    for s in el.streams:
        dims = f"[{unroll}]" if unroll > 1 else ""
        add(f"alignas(16) {s.ctype} kl_{s.param}_r{dims}[{_times('kl_E', s.stride)}];")
    if unroll > 1:
        add("#pragma unroll")
        add(f"for (int kl_u = 0; kl_u < {unroll}; ++kl_u) {{")
    pad = "    " if unroll > 1 else ""
    v = "(kl_v + kl_u * kl_threads)" if unroll > 1 else "kl_v"
    for s in el.streams:
        if s.loaded:
            add(f"{pad}{{")
            add(
                f"{pad}    const uint4* kl_src = reinterpret_cast<const uint4*>({s.param} + {_times(v + ' * kl_E', s.stride)});"
            )
            add(f"{pad}    uint4* kl_dst = reinterpret_cast<uint4*>(kl_{s.param}_r{u_idx});")
            add(f"{pad}    #pragma unroll")
            add(
                f"{pad}    for (int kl_w = 0; kl_w < int(sizeof(kl_{s.param}_r{u_idx}) / 16); ++kl_w) kl_dst[kl_w] = kl_src[kl_w];"
            )
            add(f"{pad}}}")
    if unroll > 1:
        add("}")
        add("#pragma unroll")
        add(f"for (int kl_u = 0; kl_u < {unroll}; ++kl_u) {{")
    add(f"{pad}#pragma unroll")
    add(f"{pad}for (int kl_k = 0; kl_k < kl_E; ++kl_k) {{")
    call = [f"{v} * kl_E + kl_k"]
    for s in el.streams:
        for o in sorted(s.reads | s.writes):
            call.append(f"kl_{s.param}_r{u_idx}[{_times('kl_k', s.stride, o)}]")
    if red and red.acc_type is not None:
        add(f"{pad}    kl_total = {red.combine('kl_total', 'kl_element(' + ', '.join(call) + ')')};")
    else:
        add(f"{pad}    kl_element({', '.join(call)});")
    add(f"{pad}}}")
    for s in el.streams:
        if s.writes:
            add(f"{pad}{{")
            add(
                f"{pad}    uint4* kl_out = reinterpret_cast<uint4*>({s.param} + {_times(v + ' * kl_E', s.stride)});"
            )
            add(f"{pad}    const uint4* kl_reg = reinterpret_cast<const uint4*>(kl_{s.param}_r{u_idx});")
            add(f"{pad}    #pragma unroll")
            add(
                f"{pad}    for (int kl_w = 0; kl_w < int(sizeof(kl_{s.param}_r{u_idx}) / 16); ++kl_w) kl_out[kl_w] = kl_reg[kl_w];"
            )
            add(f"{pad}}}")
    if unroll > 1:
        add("}")
    return "\n".join(out)


def _times(base: str, stride: int, offset: int = 0) -> str:
    """``base * stride + offset`` without the ``* 1`` and ``+ 0`` noise."""
    out = base if stride == 1 else f"{base} * {stride}"
    return f"{out} + {offset}" if offset else out


def _dedent(text: str) -> str:
    lines = text.split("\n")
    if len(lines) == 1:
        return text
    rest = [ln for ln in lines[1:] if ln.strip()]
    cut = min((len(ln) - len(ln.lstrip()) for ln in rest), default=0)
    # The first line was cut at the node start; the rest keep the source indentation.
    base = max(0, cut - 4) if lines[-1].strip().startswith("}") else cut
    return "\n".join([lines[0]] + [ln[base:] if len(ln) >= base else ln.lstrip() for ln in lines[1:]])


def _ll(p: Poly) -> str:
    """C text of a uniform polynomial computed in 64-bit (each factor cast first)."""
    rename = {s: f"static_cast<long long>({s})" for s in p.symbols()}
    return p.c_text(rename) if p.symbols() else p.c_text()


def _one_d(ctx: RecipeContext) -> bool:
    if ctx.host_launched:
        return ctx.block_is_1d() and ctx.grid_is_1d()
    return True  # a __global__ entry gets a 1-D launch


def new_launch(
    ctx: RecipeContext, el: ElementLoop, per_thread: int, params: dict[str, Any]
) -> specmod.LaunchSpec:
    """``grid = ceil_div(n, block * per_thread)`` with ``n`` in the spec's size names."""
    bound = spec_expr(ctx, el.bound)
    if bound is None:
        raise RecipeError(f"the bound {el.bound} cannot be written in the spec's size names")
    block = launch_block(ctx, params)
    check_coverage(ctx, el)
    return specmod.LaunchSpec(grid=f"ceil_div({bound}, ({block}) * {per_thread})", block=block)


def launch_block(ctx: RecipeContext, params: dict[str, Any]) -> int | str:
    """The block of the new launch: ``params['block']``, else the spec's 1-D block expression, else 256."""
    if params.get("block"):
        return int(params["block"])
    launch = ctx.launch()
    if launch is not None:
        dims = launch.block_dims()
        if len(dims) == 1 or all(str(d).strip() == "1" for d in dims[1:]):
            return dims[0]
    return 256


def spec_expr(ctx: RecipeContext, p: Poly) -> str | None:
    """A polynomial in kernel parameters rewritten in the spec's names (``n`` -> ``N``), or ``None``."""
    rename: dict[str, str] = {}
    for s in p.symbols():
        v = ctx.value_expr(s)
        if v is None:
            return None
        rename[s] = f"({v})"
    return p.c_text(rename).replace(" ", "")


def launch_decline(ctx: RecipeContext, el: ElementLoop) -> Decline | None:
    """Why the element loop's launch cannot be rewritten (for a ``__global__`` entry: the bound must come from
    the spec and the original launch must provably cover every element), or ``None``. Host launches stay."""
    if ctx.host_launched:
        return None
    if spec_expr(ctx, el.bound) is None:
        return Decline(
            f"the bound {el.bound_text} is not given by the spec's sizes (scalar args with a value)"
        )
    try:
        check_coverage(ctx, el)
    except RecipeError as exc:
        return Decline(f"cannot prove the original launch covered every element: {exc}")
    return None


def check_coverage(ctx: RecipeContext, el: ElementLoop) -> None:
    """Raise :class:`RecipeError` unless the spec's ORIGINAL launch covered every element for every shape.

    The rewrite processes ``[0, n)``; the original processed only the elements its threads reached
    (``threads * chunk`` of them, or ``gridDim*blockDim`` per axis), so a launch that fell short left
    elements alone that the rewrite would write. Grid-stride loops cover everything under any launch.
    """
    if el.form == "grid-stride":
        return
    launch = ctx.spec.spec.launch if ctx.spec is not None else None
    if launch is None:
        raise RecipeError("no launch to check the coverage against")
    for names in ctx.shapes():
        dims = specmod.launch_dims(launch, names)
        if isinstance(dims, str):
            raise RecipeError(dims)
        tx, ty = dims[0][0] * dims[1][0], dims[0][1] * dims[1][1]
        syms = el.bound.symbols() | (el.chunk.symbols() if el.chunk is not None else set())
        if el.form == "2d":
            syms |= el.element.coeff("gid.y").symbols()
        values = {s: _param_value(ctx, s, names) for s in syms}
        if any(v is None for v in values.values()):
            raise RecipeError("the bound has no value in the spec")
        n = _eval(el.bound, values)
        if el.form == "chunk" and el.chunk is not None:
            covered = tx * ty * dims[0][2] * dims[1][2] * _eval(el.chunk, values)
            if covered < n:
                raise RecipeError(f"the spec's launch covers {covered} of {n} elements in one shape")
        elif el.form == "2d":
            w = _eval(el.element.coeff("gid.y"), values)
            if tx < w or ty * w < n:
                raise RecipeError(
                    f"the spec's launch covers {tx} x {ty} threads for a {w} x {n // max(w, 1)} image"
                )
        elif tx < n:
            raise RecipeError(f"the spec's launch has {tx} threads for {n} elements in one shape")


def _param_value(ctx: RecipeContext, name: str, names: dict[str, Any]) -> int | None:
    from kernellsp.source import exprs

    v = ctx.value_expr(name)
    if v is None:
        return None
    try:
        return exprs.evaluate_int(v, names)
    except exprs.ExprError:
        return None


def _eval(p: Poly, values: dict[str, Any]) -> int:
    total = 0
    for m, c in p.terms.items():
        term = c
        for s in m:
            term *= int(values[s])
        total += term
    return total


def ctype_bytes(ctype: str) -> int | None:
    return CTYPE_BYTES.get(ctype)
