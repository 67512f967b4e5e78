"""``update-fold``: a local updated right after its declaration gets its final value there.

``int idx = blockIdx.x * blockDim.x + threadIdx.x; idx += 11;`` is one definition spelled in two
statements; the second makes ``idx`` look written twice, so ``forward-subst`` and the IR's index
polynomials give up on it. When the statement right after ``T x = e;`` (same block, comments aside)
is ``x op= f;``, ``x++``/``x--`` or ``x = g;`` and evaluating ``e`` again is not needed (the update
reads ``x`` once, or ``e`` is free of side effects and loads), the two become ``T x = (e) op (f);`` —
the value ``x`` holds after both, converted to ``T`` by the same initialisation.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from kernellsp.source.ir.canon.unit import (
    Change,
    Unit,
    declared_name,
    has_side_effects,
    identifier_uses,
    is_plain_declarator,
    parenthesize,
    reads_memory,
    walk,
)

if TYPE_CHECKING:
    from tree_sitter import Node

NAME = "update-fold"
SUMMARY = "T x = e; followed by x op= f; (or x++, x = g(x)) written as one declaration T x = e op f"

_COMPOUND = {"+=": "+", "-=": "-", "*=": "*", "/=": "/", "%=": "%", "<<=": "<<", ">>=": ">>"}
_COMPOUND |= {"&=": "&", "|=": "|", "^=": "^"}


def run(unit: Unit) -> Change | None:
    change = Change()
    done: set[int] = set()
    for decl in walk(unit.body):
        if decl.type != "declaration" or decl.parent is None or decl.parent.type != "compound_statement":
            continue
        if not is_plain_declarator(decl) or decl.start_byte in done:
            continue
        names = declared_name(decl, unit.data)
        if len(names) != 1 or names[0][2] is None:
            continue
        var, _ident, value = names[0]
        assert value is not None
        nxt = decl.next_named_sibling
        while nxt is not None and nxt.type == "comment":
            nxt = nxt.next_named_sibling
        if nxt is None or nxt.type != "expression_statement" or nxt.start_byte in done:
            continue
        folded = _folded(unit, var, value, nxt)
        if folded is None:
            continue
        change.replace(value, folded)
        change.delete(unit.data, nxt)
        done |= {decl.start_byte, nxt.start_byte}
        change.notes.append(f"{var}: `{unit.text(nxt).strip()}` folded into its declaration")
    return change


def _folded(unit: Unit, var: str, value: Node, stmt: Node) -> str | None:
    """The value ``var`` holds after ``stmt`` as one expression over ``value``, or None."""
    expr = next((c for c in stmt.named_children if c.type != "comment"), None)
    if expr is None:
        return None
    e = parenthesize(unit.text(value))
    if expr.type == "update_expression":
        arg = expr.child_by_field_name("argument")
        if arg is None or arg.type != "identifier" or unit.text(arg) != var:
            return None
        return f"{e} {'+' if '++' in unit.text(expr) else '-'} 1"
    if expr.type != "assignment_expression":
        return None
    left, right = expr.child_by_field_name("left"), expr.child_by_field_name("right")
    op = unit.text(expr.child_by_field_name("operator"))
    if left is None or right is None or left.type != "identifier" or unit.text(left) != var:
        return None
    if has_side_effects(unit, right):
        return None
    uses = identifier_uses(unit, right, var)
    if op in _COMPOUND:
        if uses:
            return None  # `x += x * 2`: x read twice; leave it
        return f"{e} {_COMPOUND[op]} {parenthesize(unit.text(right))}"
    if op != "=":
        return None
    if len(uses) != 1 and (has_side_effects(unit, value) or reads_memory(unit, value)):
        return None  # e would be evaluated (loaded, called) more than once, or not at all
    return _substituted(unit, right, var, e)


def _substituted(unit: Unit, root: Node, var: str, text: str) -> str:
    out = unit.data[root.start_byte : root.end_byte]
    for n in sorted(identifier_uses(unit, root, var), key=lambda n: n.start_byte, reverse=True):
        s, t = n.start_byte - root.start_byte, n.end_byte - root.start_byte
        out = out[:s] + text.encode() + out[t:]
    return out.decode("utf-8", errors="replace")
