"""``structured-exits``: early exits become the condition around what they skip.

``if (i >= n) return;`` among the kernel body's statements becomes ``if (i < n) { <the rest> }``
(the kernel ends either way); ``if (c) continue;`` in a loop body becomes ``if (!c) { <the rest of
the iteration> }``. The negation is written out (comparisons flipped, De Morgan over ``&&``/``||``,
evaluation order kept), so the guard reads as the bounds it states. A ``return`` inside a nested
block is handled when that block ends the kernel (the guard's own block); elsewhere it also skips
code after the block and is left alone.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from kernellsp.source.ir.canon.unit import (
    Change,
    Edit,
    Unit,
    expr_type,
    line_indent,
    local_type,
    statements,
    strip_parens,
    walk,
)

if TYPE_CHECKING:
    from tree_sitter import Node

NAME = "structured-exits"
SUMMARY = "if (c) return; / if (c) continue; become if (!c) { rest } with the negation written out"

_FLIP = {"<": ">=", ">=": "<", ">": "<=", "<=": ">", "==": "!=", "!=": "=="}


def run(unit: Unit) -> Change | None:
    change = Change()
    for block in _tail_blocks(unit.body):
        if _structure(unit, block, "return_statement", change):
            return change
    for loop in walk(unit.body):
        if loop.type not in ("for_statement", "while_statement", "do_statement"):
            continue
        body = loop.child_by_field_name("body")
        if (
            body is not None
            and body.type == "compound_statement"
            and _structure(unit, body, "continue_statement", change)
        ):
            return change
    return change


def _tail_blocks(body: Node) -> list[Node]:
    """The body and the blocks that end it: a ``return`` in one of these skips exactly the rest of that block."""
    out = [body]
    block = body
    while True:
        stmts = statements(block)
        last = stmts[-1] if stmts else None
        if (
            last is not None
            and last.type == "if_statement"
            and last.child_by_field_name("alternative") is None
        ):
            last = last.child_by_field_name("consequence")
        if last is None or last.type != "compound_statement":
            return out
        out.append(last)
        block = last


def _exit_condition(unit: Unit, st: Node, exit_type: str) -> Node | None:
    """The condition of ``if (c) <exit>;`` (or ``if (c) { <exit>; }``) without an else."""
    if st.type != "if_statement" or st.child_by_field_name("alternative") is not None:
        return None
    then = st.child_by_field_name("consequence")
    if then is not None and then.type == "compound_statement":
        inner = statements(then)
        then = inner[0] if len(inner) == 1 else None
    if then is None or then.type != exit_type:
        return None
    if exit_type == "return_statement" and then.named_child_count:
        return None  # `return v;` in a kernel does not happen; a helper's value return is not an exit here
    return st.child_by_field_name("condition")


def _structure(unit: Unit, block: Node, exit_type: str, change: Change) -> bool:
    stmts = statements(block)
    for i, st in enumerate(stmts):
        cond = _exit_condition(unit, st, exit_type)
        if cond is None:
            continue
        rest = stmts[i + 1 :]
        negated = negate(unit, cond)
        if not rest:
            change.delete(unit.data, st)
            change.notes.append(f"`{_one_line(unit.text(st))}` at the end removed")
            return True
        indent = line_indent(unit.data, st.start_byte)
        inner_start = unit.data.rfind(b"\n", 0, rest[0].start_byte) + 1
        inner = unit.data[inner_start : rest[-1].end_byte].decode("utf-8", errors="replace")
        inner = "\n".join(("    " + line) if line.strip() else line for line in inner.split("\n"))
        change.edits.append(Edit(st.start_byte, rest[-1].end_byte, f"if ({negated}) {{\n{inner}\n{indent}}}"))
        change.notes.append(f"`{_one_line(unit.text(st))}` -> `if ({negated}) {{ ... }}`")
        return True
    return False


def _one_line(text: str) -> str:
    return " ".join(text.split())


def negate(unit: Unit, cond: Node) -> str:
    """C text of ``!cond``, with comparisons flipped and De Morgan applied (short-circuit order kept)."""
    n = strip_parens(cond)
    if n.type == "binary_expression":
        op = unit.text(n.child_by_field_name("operator"))
        left, right = n.child_by_field_name("left"), n.child_by_field_name("right")
        if left is not None and right is not None:
            if op in _FLIP and _integral(unit, left) and _integral(unit, right):
                # Flipping is exact on integers only: `!(x < y)` is not `x >= y` for a NaN.
                return f"{unit.text(left)} {_FLIP[op]} {unit.text(right)}"
            if op == "||":
                return f"{_wrap(negate(unit, left))} && {_wrap(negate(unit, right))}"
            if op == "&&":
                return f"{_wrap(negate(unit, left))} || {_wrap(negate(unit, right))}"
    if n.type == "unary_expression" and unit.text(n.child_by_field_name("operator")) == "!":
        arg = n.child_by_field_name("argument")
        if arg is not None:
            return unit.text(strip_parens(arg))
    return f"!({unit.text(n)})"


_FLOATY = ("float", "double", "half", "bfloat")


def _integral(unit: Unit, side: Node) -> bool:
    """Is every operand of ``side`` known to be an integer (names, elements, builtins, integer literals)?"""
    for n in walk(side):
        if n.type == "number_literal" and not re.fullmatch(r"(?:0[xX][0-9a-fA-F]+|\d+)[uUlL]*", unit.text(n)):
            return False
        if n.type == "call_expression":
            return False
        if n.type == "cast_expression" and any(
            f in unit.text(n.child_by_field_name("type")) for f in _FLOATY
        ):
            return False
        if n.type == "subscript_expression":
            ty = expr_type(unit, n)
            if ty is None or any(f in ty for f in _FLOATY):
                return False
        if n.type == "identifier":
            p = n.parent
            if p is not None and p.type == "field_expression":
                continue  # threadIdx.x and friends: unsigned
            if p is not None and p.type == "subscript_expression" and p.child_by_field_name("argument") == n:
                continue  # the array; its element is judged at the subscript
            ty = local_type(unit, unit.text(n), n.start_byte)
            if ty is None or "*" in ty or any(f in ty for f in _FLOATY):
                return False
    return True


def _wrap(text: str) -> str:
    """Parenthesise a disjunction or conjunction used as an operand."""
    return f"({text})" if ("&&" in text or "||" in text) else text
