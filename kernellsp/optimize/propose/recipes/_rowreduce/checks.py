"""What the rewrite re-maps and keeps: builtins, loop bodies, cached input rows, literals, the launch."""

from __future__ import annotations

import re
from typing import Any

from kernellsp.optimize.propose.recipes import _memshape as ms
from kernellsp.optimize.propose.recipes._elementwise.launch import spec_expr
from kernellsp.optimize.propose.recipes._rowreduce.model import (
    ColLoop,
    RowProgram,
    Tree,
    _inside,
    ms_ctype_bytes,
)
from kernellsp.optimize.propose.recipes.base import RecipeContext
from kernellsp.source import exprs
from kernellsp.source.ir import KernelIR, Poly, walk


def _check_builtins(
    ir: KernelIR, form: str, axis: str, loops: list[ColLoop], trees: list[Tree], delete: list[Any]
) -> str:
    """Builtins may appear only where the rewrite re-maps them: the row index (and, per block, the loops)."""
    loop_heads = [(c.loop.node, c.loop.body) for c in loops]
    for n in walk(ir.body):
        if n.type != "field_expression":
            continue
        text = "".join(ir.text(n).split())
        if not text.startswith(("threadIdx.", "blockIdx.", "blockDim.")):
            continue
        if any(_inside(n, d) for d in delete):
            continue
        if not _builtin_remapped(ir, n, text, form, axis, loop_heads):
            return f"{text} is used beyond the row index (line {n.start_point[0] + 1})"
    if form == "block":
        return _tid_local_decline(ir, axis, loops, delete, loop_heads)
    return ""


def _in_loop_head(n: Any, loop_heads: list[tuple[Any, Any]]) -> bool:
    """Is ``n`` in the head of one of the loops (inside the loop, outside its body)?"""
    return any(_inside(n, lp) and not (body is not None and _inside(n, body)) for lp, body in loop_heads)


def _builtin_remapped(
    ir: KernelIR, n: Any, text: str, form: str, axis: str, loop_heads: list[tuple[Any, Any]]
) -> bool:
    """Does the rewrite re-map the builtin ``text`` (node ``n``) where it appears?"""
    in_head = _in_loop_head(n, loop_heads)
    kind, ax = text.split(".")
    if form == "block" and kind in ("threadIdx", "blockDim") and ax == axis and in_head:
        return True
    if form == "block" and kind == "threadIdx" and ax == axis and _is_tid_decl(ir, n):
        return True
    if form == "block" and kind == "blockIdx" and ax == axis:
        return True
    if form == "thread" and ax == axis:
        return True
    if ax != axis and kind in ("threadIdx", "blockIdx"):
        # Must be 0 in the original launch (checked with the spec) for the row mapping to hold.
        return True
    return ax != axis and kind == "blockDim"


def _tid_local_decline(
    ir: KernelIR, axis: str, loops: list[ColLoop], delete: list[Any], loop_heads: list[tuple[Any, Any]]
) -> str:
    # A `tid` local may feed only the loops and the trees.
    for name, v in ir.locals.items():
        if name in {c.var for c in loops}:
            continue
        if v.value_node is not None and ir.text(v.value_node).replace(" ", "") == f"threadIdx.{axis}":
            for n in walk(ir.body):
                if (
                    n.type == "identifier"
                    and ir.text(n) == name
                    and n.parent is not None
                    and n.parent != v.decl
                ):
                    if any(_inside(n, d) for d in delete):
                        continue
                    if _in_loop_head(n, loop_heads):
                        continue
                    if n.parent.type == "init_declarator":
                        continue
                    return f"{name} (threadIdx.{axis}) is used inside the row's computation (line {n.start_point[0] + 1})"
    return ""


def _is_tid_decl(ir: KernelIR, n: Any) -> bool:
    p = n.parent
    return p is not None and p.type == "init_declarator"


def _check_loop_bodies(ir: KernelIR, loops: list[ColLoop], row_sym: str) -> str:
    """Loop bodies may update only their accumulators and loop-local names; no exits, barriers or calls with effects."""
    for c in loops:
        body = c.loop.body
        if body is None:
            return "a loop has no body"
        why = _loop_state_decline(ir, c, body) or _loop_access_decline(ir, c, row_sym)
        if why:
            return why
    return ""


def _loop_state_decline(ir: KernelIR, c: ColLoop, body: Any) -> str:
    """State carried from one column to the next other than associative accumulators, exits, effectful calls."""
    for acc in c.accs:
        if acc.companions:
            return f"{acc.var} is an arg-max/arg-min (it carries an index): not an associative reduction"
    acc_vars = {a.var for a in c.accs}
    for n in walk(body):
        why = _node_state_decline(ir, c, body, acc_vars, n)
        if why:
            return why
    for acc in c.accs:
        if acc.value_node is not None and acc.var in ir.identifiers(acc.value_node):
            return f"the value added to {acc.var} depends on {acc.var}"
    return ""


def _node_state_decline(ir: KernelIR, c: ColLoop, body: Any, acc_vars: set[str], n: Any) -> str:
    """Why node ``n`` of the loop body exits, has effects, or carries state across columns."""
    if n.type in ("return_statement", "break_statement", "goto_statement"):
        return f"the loop over {c.var} exits early (line {n.start_point[0] + 1})"
    if n.type == "call_expression":
        fname = ir.text(n.child_by_field_name("function"))
        if fname.startswith(("__syncthreads", "atomic", "printf", "__sync")):
            return f"{fname} inside the loop over {c.var}"
    target = None
    if n.type == "assignment_expression":
        target = n.child_by_field_name("left")
    elif n.type == "update_expression":
        target = n.child_by_field_name("argument")
    if target is None or target.type != "identifier":
        return ""
    name = ir.text(target)
    var = ir.locals.get(name)
    if var is None or name == c.var:
        return ""
    if _inside(var.decl, body):
        return ""
    if name not in acc_vars:
        return (
            f"{name} carries state from one column to the next (line {n.start_point[0] + 1}) and is not "
            "an associative accumulator"
        )
    return ""


def _loop_access_decline(ir: KernelIR, c: ColLoop, row_sym: str) -> str:
    # Every access inside must be at column `var` (coefficient one) or not depend on it.
    for a in ir.global_accesses():
        if c.loop not in a.loops:
            continue
        if a.index is None:
            return f"an index of {a.base} is not integer arithmetic (line {a.line + 1})"
        coef = a.index.coeff(c.var)
        if a.index.depends_on({c.var}) and coef != Poly.const(1):
            return f"{a.base} is read with stride {coef} along the loop over {c.var}, not along the row"
        if a.kind != "load" and not a.index.depends_on({c.var}):
            return f"{a.base} is written at one place from every column (line {a.line + 1})"
        if a.index.depends_on({c.var}):
            pitch = (a.index - Poly.sym(c.var)).coeff(row_sym)
            if a.kind != "load" and pitch == Poly():
                return f"{a.base} is written at the same columns by every row (line {a.line + 1})"
            if pitch.value is not None and 0 < abs(pitch.value) < 32:
                return (
                    f"{a.base}'s rows start {pitch.value} element(s) apart: overlapping windows (a stencil), "
                    "not rows"
                )
    for a in ir.accesses:
        if a.space == "shared" and c.loop in a.loops:
            return "shared memory inside a loop over the row"
    return ""


def _row_inputs(
    ir: KernelIR, loops: list[ColLoop], row_sym: str, columns: bool = False
) -> dict[str, tuple[Poly, str, list[Any]]] | str:
    """Arrays read along the row (``base + j`` with ``base`` depending on the row) and never written; with
    ``columns``, the column vectors instead (``gamma[j]``: ``base`` independent of the row, the same for
    every row)."""
    written = ir.written()
    mixed: set[str] = set()
    out: dict[str, tuple[Poly, str, list[Any]]] = {}
    for c in loops:
        for a in ir.global_accesses():
            if c.loop not in a.loops or a.index is None or not a.index.depends_on({c.var}):
                continue
            base = a.index - Poly.sym(c.var)
            if base.depends_on({row_sym}) == columns:
                continue
            if columns and any(ir.param(sym) is None for sym in base.symbols()):
                continue  # an offset that is not the same for every thread (or not known to be): left to L1
            if columns and any(_inside(g.node, c.loop.node) for g in a.guards):
                # Read under a condition inside the loop (`if (j < k) ... gamma[j]`): the vector may hold fewer
                # elements than the row, so it is never loaded ahead for the whole row.
                mixed.add(a.base)
                out.pop(a.base, None)
                continue
            if a.base in written or a.base in mixed:
                continue
            p = ir.param(a.base)
            ctype = p.ctype if p is not None else ""
            if ctype not in ms_ctype_bytes():
                continue
            if a.kind != "load":
                continue
            if a.base in out:
                if out[a.base][0] != base:
                    if columns:
                        out.pop(a.base)  # read at two offsets: left to L1
                        mixed.add(a.base)
                        continue
                    return f"{a.base} is read along two different rows"
                out[a.base][2].append(a.node)
            else:
                out[a.base] = (base, ctype, [a.node])
    return out


_FLOAT_LIT = re.compile(r"^(\d+\.\d*|\.\d+|\d+)([eE][+-]?\d+)?$")


def _float_literals(ctx: RecipeContext) -> list[Any]:
    """Double literals to write as float, when the kernel declares and casts nothing ``double`` (accidental fp64)."""
    ir = ctx.ir
    if any("double" in p.type_text.split() for p in ctx.kernel.params):
        return []
    if any(n.type == "primitive_type" and ir.text(n) == "double" for n in walk(ir.body)):
        return []
    out = []
    for n in walk(ir.body):
        if n.type == "number_literal":
            t = ir.text(n)
            if _FLOAT_LIT.match(t) and ("." in t or "e" in t.lower()):
                out.append(n)
    return out


def _check_launch(ctx: RecipeContext, prog: RowProgram) -> str:
    """The original launch must map threads to rows as the analysis assumes (other axes of size one)."""
    block = ms.block_dims(ctx)
    if block is None:
        return "the block size is not known (spec launch or host launch site)"
    dims = dict(zip("xyz", block, strict=True))
    others = [a for a in "xyz" if a != prog.axis]
    if any(dims[a] != 1 for a in others):
        return f"the block has more than one thread along {'/'.join(a for a in others if dims[a] != 1)}"
    if prog.form == "block":
        for c in prog.loops:
            step = c.loop.step
            if step is not None and step.value is not None and step.value != dims[prog.axis]:
                return f"the loop over {c.var} strides by {step.value} but the block has {dims[prog.axis]} threads"
    if ctx.host_launched:
        if prog.form == "thread":
            if dims[prog.axis] % 32:
                return (
                    f"the host's block ({dims[prog.axis]} threads) is not a multiple of 32: no warp per row"
                )
            prog.host_block = dims[prog.axis]
        return ""
    launch = ctx.launch()
    if launch is None:
        return "the spec has no launch"
    for a, g in zip("xyz", [*launch.grid_dims(), 1, 1], strict=False):
        if a != prog.axis and str(g).strip() != "1":
            return f"the grid has more than one block along {a}"
    if prog.rows is None and prog.form == "thread":
        return "the number of rows is not bounds-checked (if (row < rows))"
    if prog.rows is not None and spec_expr(ctx, prog.rows) is None:
        return f"the row count {prog.rows} is not given by the spec's sizes (scalar args with a value)"
    if spec_expr(ctx, prog.length) is None and _main_length(ctx, prog) is None:
        return f"the row length {prog.length} is not given by the spec's sizes"
    return ""


def _main_length(ctx: RecipeContext, prog: RowProgram) -> int | None:
    """The row length of the spec's main shape."""
    e = spec_expr(ctx, prog.length)
    shapes = ctx.shapes()
    if e is None or not shapes:
        return None
    try:
        v = exprs.evaluate(e, shapes[0])
    except exprs.ExprError:
        return None
    return int(v) if isinstance(v, int | float) else None
