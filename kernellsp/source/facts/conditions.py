"""The conditions above a node: enclosing branches and loops, earlier early returns, one-thread branches."""

from __future__ import annotations

from typing import TYPE_CHECKING

from kernellsp.source.facts.body import THREAD_BUILTINS, _Ctx, _depends, _walk

if TYPE_CHECKING:
    import tree_sitter


def _conditions_above(ctx: _Ctx, node: tree_sitter.Node) -> list[tuple[tree_sitter.Node, str]]:
    """Conditions of the control statements enclosing ``node`` within the kernel body."""
    conds: list[tuple[tree_sitter.Node, str]] = []
    child = node
    parent = node.parent
    while parent is not None and parent.start_byte >= ctx.body.start_byte and parent != ctx.body.parent:
        if (
            parent.type in ("if_statement", "while_statement", "switch_statement")
            or parent.type == "do_statement"
            or parent.type == "for_statement"
            or parent.type == "conditional_expression"
        ):
            c = parent.child_by_field_name("condition")
            if c is not None and c != child:
                conds.append((c, parent.type))
        elif parent.type == "binary_expression" and ctx.text(parent).find("&&") >= 0:
            # `i < n && p[i] > 0`: the left operand guards the right one.
            left = parent.child_by_field_name("left")
            op = parent.child_by_field_name("operator")
            if left is not None and op is not None and ctx.text(op) in ("&&", "||") and child != left:
                conds.append((left, "and"))
        if parent == ctx.body:
            break
        child = parent
        parent = parent.parent
    return conds


def _early_returns_before(ctx: _Ctx, node: tree_sitter.Node) -> list[tree_sitter.Node]:
    """Conditions of ``if (...) return;`` statements that run before ``node`` in the kernel."""
    out: list[tree_sitter.Node] = []
    for n in _walk(ctx.body):
        if n.start_byte >= node.start_byte:
            break
        if n.type == "if_statement":
            cons = n.child_by_field_name("consequence")
            if (
                cons is not None
                and n.end_byte <= node.start_byte
                and any(c.type == "return_statement" for c in _walk(cons))
            ):
                cond = n.child_by_field_name("condition")
                if cond is not None:
                    out.append(cond)
    return out


def _strip_parens(ctx: _Ctx, n: tree_sitter.Node | None) -> tree_sitter.Node | None:
    while n is not None and n.type in ("parenthesized_expression", "condition_clause"):
        n = next((c for c in n.children if c.is_named), None)
    return n


def _conjuncts(ctx: _Ctx, n: tree_sitter.Node | None) -> list[tree_sitter.Node]:
    """The operands of a top-level ``&&`` chain (``a && (b && c)`` → a, b, c)."""
    n = _strip_parens(ctx, n)
    if n is None:
        return []
    op = n.child_by_field_name("operator") if n.type == "binary_expression" else None
    if op is not None and ctx.text(op) == "&&":
        return _conjuncts(ctx, n.child_by_field_name("left")) + _conjuncts(
            ctx, n.child_by_field_name("right")
        )
    return [n]


def _selects_one(ctx: _Ctx, cond: tree_sitter.Node, taken: bool) -> bool:
    """Does ``cond`` being ``taken`` (true) or not leave one thread of its group: ``tid == 0``, ``!lane`` when
    true; ``lane != 0``, ``tid > 0``, ``lane`` when false? The thread side must depend on threadIdx, the other
    side must not."""

    def thread(n: tree_sitter.Node | None) -> bool:
        return _depends(ctx, n, THREAD_BUILTINS, ctx.thread_tainted)

    parts = _conjuncts(ctx, cond) if taken else [_strip_parens(ctx, cond)]
    for c in parts:
        if c is None:
            continue
        if c.type == "unary_expression" and ctx.text(c).lstrip().startswith("!"):
            if taken and thread(c):
                return True
            continue
        if c.type != "binary_expression":
            # `if (lane) return;`: the threads that go on are those with lane == 0.
            if not taken and c.type in ("identifier", "field_expression") and thread(c):
                return True
            continue
        op_node = c.child_by_field_name("operator")
        op = ctx.text(op_node) if op_node is not None else ""
        left, right = c.child_by_field_name("left"), c.child_by_field_name("right")
        if thread(left) == thread(right):
            continue
        if (taken and op == "==") or (not taken and op in ("!=", ">", ">=", "<")):
            # `<` when false: `if (0 < tid) return;` (written the other way round).
            if op == "<" and not thread(right):
                continue
            if op in (">", ">=") and not thread(left):
                continue
            return True
    return False


def _one_thread_per_group(ctx: _Ctx, node: tree_sitter.Node) -> bool:
    """Is ``node`` reached by one thread of its block or warp: inside ``if (threadIdx.x == 0)`` (or ``lane == 0``,
    ``!tid``), in the ``else`` of ``if (tid != 0)``, or after ``if (lane != 0) return;``? An atomic there is the
    hierarchical reduction's last step, not every thread's."""
    child, parent = node, node.parent
    while parent is not None and parent != ctx.body.parent:
        if parent.type == "if_statement":
            cond = parent.child_by_field_name("condition")
            cons = parent.child_by_field_name("consequence")
            alt = parent.child_by_field_name("alternative")
            if cond is not None and child != cond:
                if cons is not None and child == cons and _selects_one(ctx, cond, True):
                    return True
                if alt is not None and child == alt and _selects_one(ctx, cond, False):
                    return True
        if parent == ctx.body:
            break
        child, parent = parent, parent.parent
    return any(_selects_one(ctx, c, False) for c in _early_returns_before(ctx, node))


def _in_loop(ctx: _Ctx, node: tree_sitter.Node) -> bool:
    p = node.parent
    while p is not None and p != ctx.body.parent:
        if p.type in ("for_statement", "while_statement", "do_statement", "for_range_loop"):
            return True
        p = p.parent
    return False
