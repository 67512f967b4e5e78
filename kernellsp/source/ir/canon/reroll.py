"""``reroll``: a loop unrolled by hand, with its remainder loop, folded back into one loop.

::

    for (k = 0; k + 3 < n; k += 4) {          for (k = 0; k < n; k++) {
        s += x[k] * y[k];                          s += x[k] * y[k];
        s += x[k + 1] * y[k + 1];      ->      }
        s += x[k + 2] * y[k + 2];
        s += x[k + 3] * y[k + 3];
    }
    for (; k < n; k++) s += x[k] * y[k];

The fold is exact, not just equivalent up to rounding: the unrolled body must be ``U`` copies of
one group of statements, copy ``j`` equal to the first with the counter replaced by ``counter + j``
(compared on the syntax tree, indices as polynomials), in the same order as the rolled loop runs
them; the main loop must stop before a partial group (``k + U - 1 < n``) and the remainder loop
continue from there to ``n`` with the same group. Separate partial accumulators (``s0 += ...; s1 +=
...``) change the order of a float sum and are not folded.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from kernellsp.source.ir.canon.unit import Change, Edit, Unit, statements
from kernellsp.source.ir.poly import Poly

if TYPE_CHECKING:
    from tree_sitter import Node

    from kernellsp.source.ir.kernel import KernelIR
    from kernellsp.source.ir.records import Loop

NAME = "reroll"
SUMMARY = (
    "manual unrolling (U copies of a group, counter + j) plus its remainder loop folded back into one loop"
)


def run(unit: Unit) -> Change | None:
    from kernellsp.source.ir.kernel import kernel_ir

    ir = kernel_ir(unit.model, unit.fn)
    if ir is None:
        return None
    for lp in ir.loops:
        got = _unrolled(unit, ir, lp)
        if got is None:
            continue
        u, group = got
        tail = _next_statement(lp.node)
        tail_lp = next((x for x in ir.loops if tail is not None and x.node == tail), None)
        if tail_lp is None or not _is_remainder(unit, ir, lp, tail_lp, group, u):
            continue
        assert lp.var is not None
        init = lp.node.child_by_field_name("initializer")
        cond = tail.child_by_field_name("condition") if tail is not None else None
        if init is None or cond is None or tail is None:
            continue
        body = "\n".join(unit.text(s) for s in group)
        indent = " " * lp.node.start_point[1]
        inner = "\n".join(f"{indent}    {line.strip()}" for line in body.split("\n"))
        new = f"for ({unit.text(init)}; {unit.text(cond)}; {lp.var}++) {{\n{inner}\n{indent}}}"
        change = Change([Edit(lp.node.start_byte, tail.end_byte, new)])
        change.notes.append(
            f"the loop over {lp.var} unrolled {u}x with a remainder loop folded back into one loop"
        )
        return change
    return None


def _unrolled(unit: Unit, ir: KernelIR, lp: Loop) -> tuple[int, list[Node]] | None:
    """(U, the first group) when the loop steps by a constant U and its body is U shifted copies of one group."""
    if lp.kind != "for" or lp.var is None or lp.step is None or lp.step.value is None or lp.body is None:
        return None
    u = lp.step.value
    if u < 2 or u > 16 or lp.body.type != "compound_statement":
        return None
    stmts = statements(lp.body)
    if not stmts or len(stmts) % u:
        return None
    g = len(stmts) // u
    first = stmts[:g]
    for j in range(1, u):
        for a, b in zip(first, stmts[j * g : (j + 1) * g], strict=True):
            if not _shifted(unit, ir, a, b, lp.var, j):
                return None
    return u, first


def _shifted(unit: Unit, ir: KernelIR, a: Node, b: Node, var: str, j: int) -> bool:
    """Is ``b`` the tree of ``a`` with ``var`` replaced by ``var + j``?"""
    pa = ir.poly(a) if a.type not in ("expression_statement", "compound_statement", "declaration") else None
    if pa is not None and pa.depends_on({var}):
        pb = ir.poly(b)
        return pb is not None and pb == pa.subs(var, Poly.sym(var) + j)
    ka = [c for c in a.named_children if c.type != "comment"]
    kb = [c for c in b.named_children if c.type != "comment"]
    if a.type != b.type or len(ka) != len(kb):
        return False
    if not ka:
        return _norm(unit.text(a)) == _norm(unit.text(b)) and unit.text(a) != var
    if a.type in ("binary_expression", "assignment_expression", "update_expression", "unary_expression"):
        for f in ("operator",):
            oa, ob = a.child_by_field_name(f), b.child_by_field_name(f)
            if (oa is None) != (ob is None) or (
                oa is not None and ob is not None and unit.text(oa) != unit.text(ob)
            ):
                return False
    return all(_shifted(unit, ir, x, y, var, j) for x, y in zip(ka, kb, strict=True))


def _norm(text: str) -> str:
    return re.sub(r"\s+", "", text)


def _next_statement(n: Node) -> Node | None:
    nxt = n.next_named_sibling
    while nxt is not None and nxt.type == "comment":
        nxt = nxt.next_named_sibling
    return nxt


def _is_remainder(unit: Unit, ir: KernelIR, main: Loop, tail: Loop, group: list[Node], u: int) -> bool:
    """The tail continues the main loop's counter one by one to the bound, running the group."""
    assert main.var is not None
    if tail.var != main.var or tail.step != Poly.const(1) or tail.body is None:
        return False
    init = tail.node.child_by_field_name("initializer")
    if init is not None and _norm(unit.text(init)) not in ("", f"{main.var}={main.var}"):
        return False
    main_init = main.node.child_by_field_name("initializer")
    if main_init is not None and main_init.type == "declaration":
        return False  # the counter would not outlive the main loop
    bound = tail.bound()
    main_bound = main.bound()
    if bound is None or main_bound is None or main_bound != bound - (u - 1):
        return False
    tail_stmts = statements(tail.body) if tail.body.type == "compound_statement" else [tail.body]
    return len(tail_stmts) == len(group) and all(
        _shifted(unit, ir, a, b, main.var, 0) for a, b in zip(group, tail_stmts, strict=True)
    )
