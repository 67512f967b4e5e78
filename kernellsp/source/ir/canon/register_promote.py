"""``register-promote``: an accumulation into memory at a loop-invariant address becomes a register accumulator.

``for (k = 0; k < K; ++k) c[row * N + col] += a[row * K + k] * b[k * N + col];`` loads and stores
``c`` at the same address every iteration; only ``restrict`` would let the compiler keep it in a
register, and a product recipe looking for ``sum += a[..] * b[..]`` does not see the product at all.
When the loop touches ``c`` only through that one update, nothing else in the loop can reach
``c``'s buffer (every other pointer the loop accesses is another parameter, and the launch passes
distinct buffers: the spec allocates one per argument, a host launcher passes different names),
and the loop has no barrier, atomic or call with effects, the loop becomes
``T acc = c[i]; for (...) acc += ...; c[i] = acc;``, or ``T acc = v0;`` when the statement before
the loop stores ``v0`` to the same address.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from kernellsp.source.ir.canon.unit import Change, Unit, has_side_effects, line_indent, statements, walk

if TYPE_CHECKING:
    from tree_sitter import Node

    from kernellsp.source.ir.kernel import KernelIR
    from kernellsp.source.ir.records import Access, Loop

NAME = "register-promote"
SUMMARY = "c[i] += ... at a loop-invariant address inside a loop becomes a register accumulator stored once"


def run(unit: Unit) -> Change | None:
    from kernellsp.source.ir.kernel import kernel_ir

    ir = kernel_ir(unit.model, unit.fn)
    if ir is None or not _distinct_buffers(unit):
        return None
    for acc in ir.accesses:
        if (
            acc.space != "global"
            or acc.kind != "update"
            or acc.index is None
            or not acc.loops
            or acc.stmt is None
        ):
            continue
        loop = acc.loops[-1]
        got = _promotable(unit, ir, acc, loop)
        if got is None:
            continue
        return _rewrite(unit, ir, acc, loop, got)
    return None


def _distinct_buffers(unit: Unit) -> bool:
    """Every pointer parameter gets its own buffer: always under a spec; under a host launcher, different arguments."""
    sites = [s for s in unit.model.launch_sites if s.kernel == unit.fn.name]
    ptrs = [i for i, p in enumerate(unit.fn.params) if p.is_pointer]
    for s in sites:
        args = [re.sub(r"\s+", "", s.args[i]) for i in ptrs if i < len(s.args)]
        if len(set(args)) != len(args):
            return False
    return True


def _promotable(unit: Unit, ir: KernelIR, acc: Access, loop: Loop) -> str | None:
    """The update's operator (``+=``, ``-=``, ``*=``...) when promotion is exact, else ``None``."""
    assert acc.index is not None and acc.stmt is not None
    if loop.var is None or acc.index.depends_on({loop.var}):
        return None
    assigned = {
        unit.text(n.child_by_field_name("left")) for n in walk(loop.node) if n.type == "assignment_expression"
    }
    assigned |= {
        unit.text(n.child_by_field_name("argument")) for n in walk(loop.node) if n.type == "update_expression"
    }
    if acc.index.symbols() & assigned:
        return None
    direct = acc.stmt.parent is not None and acc.stmt.parent == loop.body
    braceless = loop.body is not None and loop.body.type != "compound_statement" and acc.stmt == loop.body
    if not (direct or braceless):
        return None  # conditional or nested deeper: not every iteration updates
    inside = [a for a in ir.accesses if loop.node.start_byte <= a.node.start_byte < loop.node.end_byte]
    if any(a.base == acc.base and a.node != acc.node for a in inside):
        return None
    if any(a.space == "global" and a.base != acc.base and ir.param(a.base) is None for a in inside):
        return None  # a pointer we cannot name: it might alias
    for n in walk(loop.node):
        if n.type == "call_expression" and has_side_effects(unit, n):
            return None
    expr = next((c for c in acc.stmt.named_children if c.type != "comment"), None)
    if expr is None or expr.type != "assignment_expression":
        return None
    op = unit.text(expr.child_by_field_name("operator"))
    if op in ("+=", "-=", "*=", "|=", "&=", "^="):
        return op
    if op == "=":
        right = expr.child_by_field_name("right")
        left = expr.child_by_field_name("left")
        if right is not None and left is not None and right.type == "binary_expression":
            rl = right.child_by_field_name("left")
            rop = unit.text(right.child_by_field_name("operator"))
            if rl is not None and _same(unit, rl, left) and rop in ("+", "-", "*"):
                return rop + "="
    return None


def _same(unit: Unit, a: Node, b: Node) -> bool:
    return re.sub(r"\s+", "", unit.text(a)) == re.sub(r"\s+", "", unit.text(b))


def _rewrite(unit: Unit, ir: KernelIR, acc: Access, loop: Loop, op: str) -> Change:
    assert acc.stmt is not None
    expr = next(c for c in acc.stmt.named_children if c.type != "comment")
    left = expr.child_by_field_name("left")
    right = expr.child_by_field_name("right")
    assert left is not None and right is not None
    target = unit.text(left)
    taken = {unit.text(n) for n in walk(unit.node) if n.type == "identifier"}
    name = f"{acc.base}_acc"
    k = 1
    while name in taken:
        name, k = f"{acc.base}_acc_{k}", k + 1
    if unit.text(expr.child_by_field_name("operator")) == "=":
        value = unit.text(right.child_by_field_name("right"))
    else:
        value = unit.text(right)
    change = Change()
    change.replace(acc.stmt, f"{name} {op} {value};")
    indent = line_indent(unit.data, loop.node.start_byte)
    prev = _statement_before(loop.node)
    init = f"{target}"
    if prev is not None and _stores_to(unit, prev, left):
        e = next(c for c in prev.named_children if c.type != "comment")
        init = unit.text(e.child_by_field_name("right"))
        change.delete(unit.data, prev)
    p = ir.param(acc.base)
    ctype = p.ctype if p is not None else "auto"
    change.insert(loop.node.start_byte, f"{ctype} {name} = {init};\n{indent}")
    change.insert(loop.node.end_byte, f"\n{indent}{target} = {name};")
    change.notes.append(f"`{target} {op} ...` in the loop over {loop.var} kept in register {name}")
    return change


def _statement_before(n: Node) -> Node | None:
    p = n.parent
    if p is None or p.type != "compound_statement":
        return None
    prev = None
    for c in statements(p):
        if c == n:
            return prev
        prev = c
    return None


def _stores_to(unit: Unit, st: Node, target: Node) -> bool:
    if st.type != "expression_statement":
        return False
    e = next((c for c in st.named_children if c.type != "comment"), None)
    if e is None or e.type != "assignment_expression" or unit.text(e.child_by_field_name("operator")) != "=":
        return False
    left, right = e.child_by_field_name("left"), e.child_by_field_name("right")
    return (
        left is not None
        and right is not None
        and _same(unit, left, target)
        and not any(c.type == "subscript_expression" for c in walk(right))
    )
