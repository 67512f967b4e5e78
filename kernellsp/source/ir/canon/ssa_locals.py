"""``ssa-locals``: one declaration per name, each where its value is first given.

Four rewrites, one per run (the pipeline repeats until none applies):

* a scalar initialised with braces or parentheses (``size_t k{0U};``, ``int n(m);``) is written with ``=``;
* a declaration with several declarators (``float a, b = 0;``) is split, one per statement;
* a declaration without initializer whose first mention in its block is a plain assignment
  ``x = e;`` among the block's statements is sunk there: ``T x = e;``. A loop counter declared
  outside (``int i; ... for (i = 0; ...)``) whose value is never read after its loops becomes each
  loop's own ``for (int i = 0; ...)``;
* a name declared twice in one kernel (sibling blocks, two loops' counters, a shadowing inner
  declaration) keeps its first spelling; the later declaration and the uses in its scope become
  ``name_1`` (``_2``...). Every local then has exactly one declaration, so the IR substitutes it.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from kernellsp.source.ir.canon.unit import (
    Change,
    Edit,
    Unit,
    declared_name,
    identifier_uses,
    line_indent,
    statements,
    walk,
)

if TYPE_CHECKING:
    from tree_sitter import Node

NAME = "ssa-locals"
SUMMARY = (
    "declarations with = initialisers, split, sunk to their first assignment, loop counters made loop-local, "
    "duplicate names renamed"
)


def run(unit: Unit) -> Change | None:
    for step in (
        _plain_initializers,
        _split_declarations,
        _sink_declarations,
        _loop_counters,
        _loop_starts,
        _rename_duplicates,
    ):
        change = step(unit)
        if change:
            return change
    return None


_NOT_SCALAR = ("dim3", "float2", "float4", "int2", "int4", "half2", "__half2", "uint4", "double2", "struct")


def _plain_initializers(unit: Unit) -> Change | None:
    """``size_t i{0U};`` and ``int n(k * 2);`` of a scalar are ``size_t i = 0U;`` and ``int n = k * 2;``."""
    change = Change()
    for d in walk(unit.body):
        if d.type != "init_declarator" or d.parent is None or d.parent.type != "declaration":
            continue
        value = d.child_by_field_name("value")
        target = d.child_by_field_name("declarator")
        if value is None or target is None or value.type not in ("initializer_list", "argument_list"):
            continue
        tnode = d.parent.child_by_field_name("type")
        if tnode is None or any(w in unit.text(tnode) for w in _NOT_SCALAR) or target.type != "identifier":
            continue
        inner = [c for c in value.named_children if c.type != "comment"]
        if len(inner) != 1:
            continue
        change.replace(d, f"{unit.text(target)} = {unit.text(inner[0])}")
        change.notes.append(f"`{unit.text(d)}` written `{unit.text(target)} = {unit.text(inner[0])}`")
    return change or None


def _split_declarations(unit: Unit) -> Change | None:
    change = Change()
    for d in walk(unit.body):
        if d.type != "declaration" or d.parent is None or d.parent.type != "compound_statement":
            continue
        decls = d.children_by_field_name("declarator")
        if len(decls) < 2:
            continue
        head = unit.data[d.start_byte : decls[0].start_byte].decode("utf-8", errors="replace").rstrip()
        indent = line_indent(unit.data, d.start_byte)
        parts = [f"{head} {unit.text(x)};" for x in decls]
        change.replace(d, ("\n" + indent).join(parts))
        change.notes.append(f"`{' '.join(unit.text(d).split())}` split into {len(parts)} declarations")
        return change
    return None


def _declared_without_value(unit: Unit, d: Node) -> tuple[str, str] | None:
    """``(name, type head)`` of ``T x;`` (one plain scalar declarator, no initializer, not shared/static/array)."""
    decls = d.children_by_field_name("declarator")
    if len(decls) != 1 or decls[0].type != "identifier":
        return None
    text = unit.text(d)
    if re.search(r"\b(__shared__|static|extern|volatile)\b", text):
        return None
    head = unit.data[d.start_byte : decls[0].start_byte].decode("utf-8", errors="replace").strip()
    return unit.text(decls[0]), head


def _sink_declarations(unit: Unit) -> Change | None:
    """Every ``T x;`` sunk to its first assignment ``x = e;`` in its block, or moved into the nested
    block that holds all its uses (one change for all: each declaration edits its own places)."""
    change = Change()
    for block in walk(unit.body):
        if block.type != "compound_statement":
            continue
        stmts = statements(block)
        for i, d in enumerate(stmts):
            if d.type != "declaration":
                continue
            got = _declared_without_value(unit, d)
            if got is None:
                continue
            name, head = got
            later = stmts[i + 1 :]
            for k, st in enumerate(later):
                if not identifier_uses(unit, st, name):
                    continue
                assign = _plain_assignment(unit, st, name)
                if assign is None:
                    inner = (
                        _inner_block(unit, st, name)
                        if not any(identifier_uses(unit, s, name) for s in later[k + 1 :])
                        else None
                    )
                    if inner is None or any(s.start_byte == inner.start_byte + 1 for s in statements(inner)):
                        break  # (a statement glued to the `{` would take another insertion at the same byte)
                    # Every use is inside one nested block (no loop between): declared there, the next
                    # round sinks it to its first assignment.
                    change.delete(unit.data, d)
                    change.edits.append(Edit(inner.start_byte + 1, inner.start_byte + 1, f" {head} {name};"))
                    change.notes.append(f"`{head} {name};` moved into the block that uses it")
                    break
                change.delete(unit.data, d)
                change.edits.append(Edit(st.start_byte, st.start_byte, f"{head} "))
                change.notes.append(f"`{head} {name};` sunk to its first assignment")
                break
    return change or None


def _inner_block(unit: Unit, st: Node, name: str) -> Node | None:
    """The innermost ``{ }`` block under ``st`` holding every use of ``name``, with no loop between
    ``st`` and it (a declaration moved into a loop body would start each iteration anew)."""
    uses = identifier_uses(unit, st, name)
    if not uses:
        return None
    chains = []
    for u in uses:
        chain = []
        p = u.parent
        while p is not None and p != st:
            chain.append(p)
            p = p.parent
        chains.append(list(reversed(chain)))  # from st downwards
    common: Node | None = None
    for level in zip(*chains, strict=False):
        if any(n != level[0] for n in level[1:]):
            break
        if level[0].type in ("for_statement", "while_statement", "do_statement"):
            return None
        if level[0].type == "compound_statement":
            common = level[0]
    if st.type in ("for_statement", "while_statement", "do_statement"):
        return None
    return common


def _plain_assignment(unit: Unit, st: Node, name: str) -> Node | None:
    """``st`` is ``name = e;`` with ``e`` not reading ``name``."""
    if st.type != "expression_statement":
        return None
    e = next((c for c in st.named_children if c.type != "comment"), None)
    if e is None or e.type != "assignment_expression" or unit.text(e.child_by_field_name("operator")) != "=":
        return None
    left, right = e.child_by_field_name("left"), e.child_by_field_name("right")
    if left is None or right is None or left.type != "identifier" or unit.text(left) != name:
        return None
    if identifier_uses(unit, right, name):
        return None
    return e


def _loop_counters(unit: Unit) -> Change | None:
    """``int i; for (i = 0; ...) ...`` where ``i`` is read only inside loops that set it first."""
    for block in walk(unit.body):
        if block.type != "compound_statement":
            continue
        stmts = statements(block)
        for i, d in enumerate(stmts):
            if d.type != "declaration":
                continue
            got = _declared_without_value(unit, d)
            if got is None:
                continue
            name, head = got
            loops = []
            ok = True
            for st in stmts[i + 1 :]:
                if not identifier_uses(unit, st, name):
                    continue
                init = st.child_by_field_name("initializer") if st.type == "for_statement" else None
                if init is None or init.type != "assignment_expression":
                    ok = False
                    break
                left = init.child_by_field_name("left")
                right = init.child_by_field_name("right")
                if (
                    left is None
                    or unit.text(left) != name
                    or unit.text(init.child_by_field_name("operator")) != "="
                    or right is None
                    or identifier_uses(unit, right, name)
                ):
                    ok = False
                    break
                loops.append(init)
            if not ok or not loops:
                continue
            change = Change()
            change.delete(unit.data, d)
            for init in loops:
                change.edits.append(Edit(init.start_byte, init.start_byte, f"{head} "))
            change.notes.append(f"counter `{name}` declared by each of its {len(loops)} loop(s)")
            return change
    return None


def _loop_starts(unit: Unit) -> Change | None:
    """``int i = e; for (; i < n; i += s)`` where ``i`` is not read after the loop: ``for (int i = e; ...)``."""
    for block in walk(unit.body):
        if block.type != "compound_statement":
            continue
        stmts = statements(block)
        for i, d in enumerate(stmts[:-1]):
            loop = stmts[i + 1]
            if (
                d.type != "declaration"
                or loop.type != "for_statement"
                or loop.child_by_field_name("initializer") is not None
            ):
                continue
            decls = d.children_by_field_name("declarator")
            if len(decls) != 1 or decls[0].type != "init_declarator":
                continue
            target = decls[0].child_by_field_name("declarator")
            if (
                target is None
                or target.type != "identifier"
                or re.search(r"\b(__shared__|static)\b", unit.text(d))
            ):
                continue
            name = unit.text(target)
            if any(identifier_uses(unit, s, name) for s in stmts[i + 2 :]):
                continue
            head = unit.text(d).rstrip().rstrip(";")
            open_paren = loop.start_byte + unit.text(loop).index("(") + 1
            change = Change()
            change.delete(unit.data, d)
            change.edits.append(Edit(open_paren, open_paren, head))
            change.notes.append(f"`{head};` moved into the loop that counts with it")
            return change
    return None


def _scope_of(decl: Node) -> Node | None:
    """The node whose extent is the declaration's scope: its for statement, or its block."""
    p = decl.parent
    if p is not None and p.type == "for_statement":
        return p
    while p is not None and p.type != "compound_statement":
        p = p.parent
    return p


def _rename_duplicates(unit: Unit) -> Change | None:
    seen: dict[str, int] = {p.name: 1 for p in unit.fn.params}
    first_decl: dict[str, Node] = {}
    taken = {unit.text(n) for n in walk(unit.node) if n.type == "identifier"}
    for d in walk(unit.body):
        if d.type != "declaration":
            continue
        for name, ident, _value in declared_name(d, unit.data):
            if name not in seen:
                seen[name] = 1
                first_decl.setdefault(name, d)
                continue
            if _sibling_counters(first_decl.get(name), d):
                continue  # `for (int j ...)` twice: disjoint scopes, and counters are never substituted
            scope = _scope_of(d)
            if scope is None:
                return None
            k = seen[name]
            while f"{name}_{k}" in taken:
                k += 1
            new = f"{name}_{k}"
            change = Change()
            change.replace(ident, new)
            for use in identifier_uses(unit, scope, name):
                if use.start_byte > ident.start_byte and _binds_to(unit, use, d):
                    change.replace(use, new)
            change.notes.append(f"second `{name}` renamed `{new}`")
            return change
    return None


def _sibling_counters(first: Node | None, second: Node) -> bool:
    """Two for-loop counter declarations of which neither loop contains the other."""
    if first is None or first.parent is None or second.parent is None:
        return False
    a, b = first.parent, second.parent
    if a.type != "for_statement" or b.type != "for_statement":
        return False
    nested = (a.start_byte <= b.start_byte and b.end_byte <= a.end_byte) or (
        b.start_byte <= a.start_byte and a.end_byte <= b.end_byte
    )
    return not nested


def _binds_to(unit: Unit, use: Node, decl: Node) -> bool:
    """Does ``use`` refer to ``decl`` (no nearer declaration of the same name between them)?"""
    name = unit.text(use)
    p = use.parent
    while p is not None:
        if p == decl.parent or p == decl:
            return True
        nearer = [
            c
            for c in p.named_children
            if c.type == "declaration" and c != decl and c.start_byte < use.start_byte
        ]
        if p.type == "for_statement":
            init = p.child_by_field_name("initializer")
            if init is not None and init != decl and init.type == "declaration":
                nearer.append(init)
        if any(n == name for c in nearer for n, _i, _v in declared_name(c, unit.data)):
            return False
        p = p.parent
    return False
