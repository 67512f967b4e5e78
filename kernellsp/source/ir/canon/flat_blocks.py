"""``flat-blocks``: a bare brace block inside a block is opened into it.

``{ int k = 0; for (...) {...} }`` written as a statement of its own (to scope a counter, or left
over from a macro or another pass) hides the loop one level down, where recipes that read a block's
statements in order do not see it. The braces go when no name the inner block declares is declared
or used elsewhere in the enclosing block (nor is a parameter of the kernel or the variable of the
``for`` loop whose body the enclosing block is: C++ forbids redeclaring those there).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from kernellsp.source.ir.canon.unit import Change, Edit, Unit, declared_name, walk

if TYPE_CHECKING:
    from tree_sitter import Node

NAME = "flat-blocks"
SUMMARY = "a bare { ... } block inside a block opened into it when the names it declares clash with nothing"


def run(unit: Unit) -> Change | None:
    change = Change()
    done: list[tuple[int, int]] = []
    for block in walk(unit.body):
        if block.type != "compound_statement" or block == unit.body:
            continue
        outer = block.parent
        if outer is None or outer.type != "compound_statement":
            continue
        if any(s <= block.start_byte < e for s, e in done):
            continue  # inside a block opened this round: the next round sees it afresh
        names = _declared_here(unit, block)
        if names & _names_around(unit, block, outer):
            continue
        open_brace, close_brace = block.children[0], block.children[-1]
        change.edits.append(Edit(open_brace.start_byte, open_brace.end_byte, ""))
        change.edits.append(Edit(close_brace.start_byte, close_brace.end_byte, ""))
        done.append((block.start_byte, block.end_byte))
        change.notes.append(f"the block at line {block.start_point[0] + 1} opened")
    return change


def _declared_here(unit: Unit, block: Node) -> set[str]:
    """Names the block's own statements declare (not those of blocks nested in it)."""
    out: set[str] = set()
    for s in block.named_children:
        if s.type == "declaration":
            out |= {name for name, _n, _v in declared_name(s, unit.data)}
    return out


def _names_around(unit: Unit, block: Node, outer: Node) -> set[str]:
    """Every identifier of the enclosing block outside ``block``, the kernel's parameters, and the
    variables of a ``for`` loop whose body the enclosing block is."""
    out: set[str] = set()
    for s in outer.named_children:
        if s == block:
            continue
        out |= {unit.text(n) for n in walk(s) if n.type == "identifier"}
    if outer == unit.body:
        out |= {p.name for p in unit.fn.params}
    loop = outer.parent
    if loop is not None and loop.type == "for_statement":
        init = loop.child_by_field_name("initializer")
        if init is not None:
            out |= {unit.text(n) for n in walk(init) if n.type == "identifier"}
    return out
