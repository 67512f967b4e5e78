"""``digits``: ``/`` and ``%`` of one index written as the digits they are, and recombined where they add back up.

``(i / T) * T + i % T`` is ``i`` for integers in C (division truncates, ``%`` takes the sign of the
dividend: the identity holds for every sign), so a kernel that splits a flat index into a row and a
column and then re-forms the flat index (``row * C + col`` with ``row = i / C``, ``col = i % C``)
addresses element ``i``. After ``forward-subst`` has put the digits into the index, this pass
replaces each such sum by the index itself; the IR does the same on polynomials
(:meth:`kernellsp.source.ir.kernel.KernelIR.poly` with ``divmod=True`` recombines the atoms).
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from kernellsp.source.ir.canon.unit import Change, Unit, strip_parens, walk

if TYPE_CHECKING:
    from tree_sitter import Node

NAME = "digits"
SUMMARY = "(i / T) * T + i % T recombined to i (mixed-radix digits of one index)"


def run(unit: Unit) -> Change | None:
    change = Change()
    done: list[tuple[int, int]] = []
    for n in walk(unit.body):
        if n.type != "binary_expression" or unit.text(n.child_by_field_name("operator")) != "+":
            continue
        if any(s <= n.start_byte < e for s, e in done):
            continue
        terms = _sum_terms(unit, n)
        got = _recombine(unit, terms)
        if got is None:
            continue
        keep, whole = got
        new = " + ".join([*(unit.text(t) for t in keep), whole])
        change.replace(n, f"({new})" if keep else whole)
        change.notes.append(f"`{' '.join(unit.text(n).split())}` -> `{new}`")
        done.append((n.start_byte, n.end_byte))
    return change


def _sum_terms(unit: Unit, n: Node) -> list[Node]:
    """The terms of a ``+`` chain (parentheses looked through)."""
    n = strip_parens(n)
    if n.type == "binary_expression" and unit.text(n.child_by_field_name("operator")) == "+":
        left, right = n.child_by_field_name("left"), n.child_by_field_name("right")
        if left is not None and right is not None:
            return _sum_terms(unit, left) + _sum_terms(unit, right)
    return [n]


def _norm(unit: Unit, n: Node) -> str:
    return re.sub(r"\s+|[()]", "", unit.text(n))


def _split(unit: Unit, n: Node, op: str) -> tuple[str, str] | None:
    """``(a, b)`` texts of ``a op b`` (parentheses looked through)."""
    n = strip_parens(n)
    if n.type != "binary_expression" or unit.text(n.child_by_field_name("operator")) != op:
        return None
    left, right = n.child_by_field_name("left"), n.child_by_field_name("right")
    if left is None or right is None:
        return None
    return _norm(unit, left), _norm(unit, right)


def _recombine(unit: Unit, terms: list[Node]) -> tuple[list[Node], str] | None:
    """Terms left and the index, when the terms hold ``(x / T) * T`` and ``x % T`` for one ``x`` and ``T``."""
    for i, t in enumerate(terms):
        mod = _split(unit, t, "%")
        if mod is None:
            continue
        x, tt = mod
        for j, u in enumerate(terms):
            if j == i:
                continue
            prod = _mul_operands(unit, u)
            if prod is None:
                continue
            a, b = prod
            for div_side, t_side in ((a, b), (b, a)):
                d = _split(unit, div_side, "/")
                if d is not None and d == (x, tt) and _norm(unit, t_side) == tt:
                    keep = [w for k, w in enumerate(terms) if k not in (i, j)]
                    x_text = unit.text(strip_parens(t).child_by_field_name("left"))
                    return keep, f"({x_text})"
    return None


def _mul_operands(unit: Unit, n: Node) -> tuple[Node, Node] | None:
    n = strip_parens(n)
    if n.type != "binary_expression" or unit.text(n.child_by_field_name("operator")) != "*":
        return None
    left, right = n.child_by_field_name("left"), n.child_by_field_name("right")
    if left is None or right is None:
        return None
    return left, right
