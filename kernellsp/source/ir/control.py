"""Control flow of a kernel body: conditions as conjuncts, loops and their induction variables, guards."""

from __future__ import annotations

from typing import TYPE_CHECKING, Literal

from kernellsp.source.ir.expressions import _declared_names, walk
from kernellsp.source.ir.poly import AXES, Poly
from kernellsp.source.ir.records import Cond, Guard, Loop

if TYPE_CHECKING:
    import tree_sitter

    from kernellsp.source.ir.kernel import KernelIR

_NEGATE = {"<": ">=", ">=": "<", "<=": ">", ">": "<=", "==": "!=", "!=": "=="}
_FLIP = {"<": ">", ">": "<", "<=": ">=", ">=": "<=", "==": "==", "!=": "!="}


def _strip_parens(ir: KernelIR, n: tree_sitter.Node) -> tree_sitter.Node:
    while n.type in ("parenthesized_expression", "condition_clause"):
        inner = next((c for c in n.named_children if c.type != "comment"), None)
        if inner is None:
            break
        n = inner
    return n


def conjuncts(ir: KernelIR, n: tree_sitter.Node | None, negate: bool = False) -> tuple[list[Cond], bool]:
    """Split a condition into comparisons (``a && b``; or ``!(a || b)`` when ``negate``); ``exact`` flag."""
    if n is None:
        return [], False
    n = _strip_parens(ir, n)
    if n.type == "binary_expression":
        op = ir.text(n.child_by_field_name("operator"))
        left, right = n.child_by_field_name("left"), n.child_by_field_name("right")
        if left is not None and right is not None:
            if (op == "&&" and not negate) or (op == "||" and negate):
                a, ea = conjuncts(ir, left, negate)
                b, eb = conjuncts(ir, right, negate)
                return a + b, ea and eb
            if op in _NEGATE:
                cop = _NEGATE[op] if negate else op
                lp, rp = ir.poly(left), ir.poly(right)
                text = ir.text(n)
                return [Cond(("!(" + text + ")") if negate else text, cop, lp, rp, n)], True
    if n.type == "unary_expression" and ir.text(n.child_by_field_name("operator")) == "!":
        arg = n.child_by_field_name("argument")
        return conjuncts(ir, arg, not negate)
    text = ir.text(n)
    return [Cond(("!(" + text + ")") if negate else text, None, None, None, n)], False


def _collect_loops(ir: KernelIR) -> None:
    for n in walk(ir.body):
        if n.type == "for_statement":
            ir.loops.append(_for_loop(ir, n))
        elif n.type in ("while_statement", "do_statement"):
            cond = n.child_by_field_name("condition")
            conds, _ = conjuncts(ir, cond) if cond is not None else ([], True)
            kind: Literal["while", "do"] = "while" if n.type == "while_statement" else "do"
            lp = Loop(
                n, kind, None, None, None, conds, None, n.child_by_field_name("body"), _loop_depth(ir, n)
            )
            lp.var = _while_induction(ir, lp)
            ir.loops.append(lp)
    # Starts and steps are polynomials only now that loop variables are known as symbols.
    for lp in ir.loops:
        if lp.kind == "for" and lp.var is not None:
            _resolve_for_loop(ir, lp, lp.var)
        elif lp.var is not None and lp.body is not None:
            _resolve_while_loop(ir, lp, lp.var, lp.body)
        if lp.var is not None and lp.start is not None and lp.step is not None:
            for a in AXES:
                if lp.start == Poly.sym(f"gid.{a}") and lp.step == Poly.sym(f"blockDim.{a}") * Poly.sym(
                    f"gridDim.{a}"
                ):
                    lp.grid_stride = a


def _loop_depth(ir: KernelIR, n: tree_sitter.Node) -> int:
    """How many loops of the body enclose ``n``."""
    d = 0
    p = n.parent
    while p is not None and p != ir.body:
        if p.type in ("for_statement", "while_statement", "do_statement"):
            d += 1
        p = p.parent
    return d


def _for_loop(ir: KernelIR, n: tree_sitter.Node) -> Loop:
    """A ``for`` loop as first met: its variable from ``int i = a`` or ``i = a``, before loop variables are symbols."""
    var = var_type = None
    start = step = None
    init = n.child_by_field_name("initializer")
    if init is not None and init.type == "declaration":
        names = _declared_names(ir, init)
        if len(names) == 1:
            var = names[0][0]
            tnode = init.child_by_field_name("type")
            var_type = ir.text(tnode)
            start_node = names[0][2]
            start = ir.poly(start_node) if start_node is not None else None
    elif init is not None and init.type == "assignment_expression":
        left = init.child_by_field_name("left")
        if (
            left is not None
            and left.type == "identifier"
            and ir.text(init.child_by_field_name("operator")) == "="
        ):
            var = ir.text(left)
            start = ir.poly(init.child_by_field_name("right"))
    cond = n.child_by_field_name("condition")
    conds, _exact = conjuncts(ir, cond) if cond is not None else ([], True)
    update = n.child_by_field_name("update")
    if var is None and init is None and update is not None:
        # `for (; k < n; k++)`: a loop continuing a counter set before it (a remainder loop).
        target = (
            update.child_by_field_name("argument")
            if update.type == "update_expression"
            else update.child_by_field_name("left")
        )
        if target is not None and target.type == "identifier":
            var = ir.text(target)
    if var is not None and update is not None:
        step = _step_of(ir, update, var)
    return Loop(
        n, "for", var, var_type, start, conds, step, n.child_by_field_name("body"), _loop_depth(ir, n)
    )


def _resolve_for_loop(ir: KernelIR, lp: Loop, var: str) -> None:
    init = lp.node.child_by_field_name("initializer")
    if init is not None and init.type == "declaration":
        names = _declared_names(ir, init)
        if names and names[0][2] is not None:
            lp.start = ir.poly(names[0][2])
    elif init is not None:
        lp.start = ir.poly(init.child_by_field_name("right"))
    cond = lp.node.child_by_field_name("condition")
    lp.conds = conjuncts(ir, cond)[0] if cond is not None else []
    update = lp.node.child_by_field_name("update")
    lp.step = _step_of(ir, update, var) if update is not None else None


def _resolve_while_loop(ir: KernelIR, lp: Loop, var: str, body: tree_sitter.Node) -> None:
    local = ir.locals.get(var)
    lp.var_type = local.ctype if local is not None else None
    lp.start = ir.poly(local.value_node) if local is not None and local.value_node is not None else None
    upd = _induction_update(ir, body, var)
    lp.step = _step_of(ir, upd, var) if upd is not None else None
    cond = lp.node.child_by_field_name("condition")
    lp.conds = conjuncts(ir, cond)[0] if cond is not None else []


def _induction_update(ir: KernelIR, body: tree_sitter.Node, var: str) -> tree_sitter.Node | None:
    """The one top-level ``var += s`` / ``var = var + s`` / ``var++`` statement of a while loop's body."""
    stmts = (
        [c for c in body.named_children if c.type == "expression_statement"]
        if body.type == "compound_statement"
        else []
    )
    found = []
    for s in stmts:
        e = next((c for c in s.named_children if c.type != "comment"), None)
        if e is None:
            continue
        target = (
            e.child_by_field_name("left")
            if e.type == "assignment_expression"
            else (e.child_by_field_name("argument") if e.type == "update_expression" else None)
        )
        if target is not None and ir.text(target) == var:
            found.append(e)
    # Any other assignment to var inside the body (nested) makes it no simple induction variable.
    total = sum(
        1
        for n in walk(body)
        if n.type in ("assignment_expression", "update_expression")
        and ir.text(n.child_by_field_name("left") or n.child_by_field_name("argument")) == var
    )
    return found[0] if len(found) == 1 and total == 1 else None


def _while_induction(ir: KernelIR, lp: Loop) -> str | None:
    """``while (i < n) { ...; i += s; }``: the variable compared in the condition and stepped once in the body."""
    if lp.body is None:
        return None
    for c in lp.conds:
        if c.node is None:
            continue
        left = _strip_parens(ir, c.node.child_by_field_name("left") or c.node)
        if (
            left.type == "identifier"
            and ir.text(left) in ir.locals
            and _induction_update(ir, lp.body, ir.text(left)) is not None
        ):
            return ir.text(left)
    return None


def _step_of(ir: KernelIR, update: tree_sitter.Node, var: str) -> Poly | None:
    update = _strip_parens(ir, update)
    if update.type == "update_expression":
        arg = update.child_by_field_name("argument")
        if arg is not None and ir.text(arg) == var:
            return Poly.const(1 if "++" in ir.text(update) else -1)
        return None
    if update.type == "assignment_expression":
        left = update.child_by_field_name("left")
        op = ir.text(update.child_by_field_name("operator"))
        right = update.child_by_field_name("right")
        if left is None or right is None or ir.text(left) != var:
            return None
        r = ir.poly(right)
        if r is None:
            return None
        if op == "+=":
            return r
        if op == "-=":
            return -r
        if op == "=":
            d = r - Poly.sym(var)
            return None if d.depends_on([var]) else d
    return None


def _guards_of(ir: KernelIR, node: tree_sitter.Node) -> list[Guard]:
    """Guards of ``node`` from the outside in: enclosing branches and earlier early exits."""
    out: list[Guard] = []
    child = node
    parent = node.parent
    chain: list[tuple[tree_sitter.Node, tree_sitter.Node]] = []
    while parent is not None and child != ir.body:
        chain.append((parent, child))
        child, parent = parent, parent.parent
    for parent, child in reversed(chain):
        t = parent.type
        if t == "if_statement":
            cond = parent.child_by_field_name("condition")
            cons = parent.child_by_field_name("consequence")
            alt = parent.child_by_field_name("alternative")
            if cons is not None and child == cons:
                conds, exact = conjuncts(ir, cond)
                out.append(Guard("if", conds, parent, ir.text(cond), exact))
            elif alt is not None and child == alt:
                conds, exact = conjuncts(ir, cond, negate=True)
                out.append(Guard("else", conds, parent, ir.text(cond), exact))
        elif t == "conditional_expression":
            cond = parent.child_by_field_name("condition")
            if child == parent.child_by_field_name("consequence"):
                conds, exact = conjuncts(ir, cond)
                out.append(Guard("ternary", conds, parent, ir.text(cond), exact))
            elif child == parent.child_by_field_name("alternative"):
                conds, exact = conjuncts(ir, cond, negate=True)
                out.append(Guard("ternary", conds, parent, ir.text(cond), exact))
        elif t == "binary_expression" and ir.text(parent.child_by_field_name("operator")) == "&&":
            left = parent.child_by_field_name("left")
            if left is not None and child != left:
                conds, exact = conjuncts(ir, left)
                out.append(Guard("and", conds, parent, ir.text(left), exact))
        if t == "compound_statement":
            # Earlier siblings `if (c) return/break/continue;` guard what follows them.
            for sib in parent.named_children:
                if sib.start_byte >= child.start_byte:
                    break
                g = _exit_guard(ir, sib)
                if g is not None:
                    out.append(g)
    return out


def _exit_guard(ir: KernelIR, stmt: tree_sitter.Node) -> Guard | None:
    """``if (c) return;`` (or break/continue) as the guard ``!c`` for the code that follows."""
    if stmt.type != "if_statement" or stmt.child_by_field_name("alternative") is not None:
        return None
    cons = stmt.child_by_field_name("consequence")
    if cons is None:
        return None
    inner = cons
    if inner.type == "compound_statement":
        kids = [c for c in inner.named_children if c.type != "comment"]
        if len(kids) != 1:
            return None
        inner = kids[0]
    kinds = {"return_statement": "return", "break_statement": "break", "continue_statement": "continue"}
    if inner.type not in kinds:
        return None
    cond = stmt.child_by_field_name("condition")
    conds, exact = conjuncts(ir, cond, negate=True)
    return Guard(kinds[inner.type], conds, stmt, ir.text(cond), exact)
