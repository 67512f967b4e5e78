"""``loop-form``: a counted ``while`` loop written as the ``for`` loop it is.

``int k = 0; while (k < K) { body; k++; }`` becomes ``for (int k = 0; k < K; k++) { body }`` when

* the declaration of the counter (one declarator, with a value) is the statement right before the
  ``while`` in the same block,
* the body's last statement is the counter's one update (``k++``, ``k += s``, ``k = k + s``) and
  nothing else in the body writes it,
* no ``continue`` leaves the loop's own iteration (in a ``while`` it skips the update, in a ``for``
  it runs it), and
* the counter is not read after the loop (a ``for`` scopes it to the loop).

Grid-stride loops (``while (i < n) { ...; i += blockDim.x * gridDim.x; }``) are counted loops too.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from kernellsp.source.ir.canon.unit import (
    Change,
    Edit,
    Unit,
    assigned_target,
    declared_name,
    identifier_uses,
    walk,
    writes_of,
)

if TYPE_CHECKING:
    from tree_sitter import Node

NAME = "loop-form"
SUMMARY = "a counted while loop (counter declared before it, updated last in its body) written as a for loop"

_LOOPS = ("for_statement", "while_statement", "do_statement")


def run(unit: Unit) -> Change | None:
    change = Change()
    claimed: list[tuple[int, int]] = []
    for w in walk(unit.body):
        if w.type != "while_statement" or any(s <= w.start_byte < e for s, e in claimed):
            continue  # a loop inside one rewritten this round: the next round sees it afresh
        got = _counted(unit, w)
        if got is None:
            continue
        decl, var, update = got
        claimed.append((decl.start_byte, w.end_byte))
        cond = w.child_by_field_name("condition")
        body = w.child_by_field_name("body")
        assert cond is not None and body is not None
        cond_text = unit.text(cond).strip()
        if cond_text.startswith("(") and cond_text.endswith(")"):
            cond_text = cond_text[1:-1].strip()
        step = next(c for c in update.named_children if c.type != "comment")
        # The body without its last statement (comments after it are kept).
        head = unit.data[body.start_byte : update.start_byte].decode("utf-8", errors="replace").rstrip()
        tail = unit.data[update.end_byte : body.end_byte].decode("utf-8", errors="replace")
        new_body = (
            head + "\n" + tail.lstrip("\n")
            if tail.strip() != "}"
            else head + "\n" + _indent_of(unit, w) + "}"
        )
        text = f"for ({unit.text(decl).strip()} {cond_text}; {unit.text(step)}) {new_body}"
        change.edits.append(Edit(decl.start_byte, w.end_byte, text))
        change.notes.append(f"while ({cond_text}) counting {var} is a for loop")
    return change


def _counted(unit: Unit, w: Node) -> tuple[Node, str, Node] | None:
    """(the counter's declaration, its name, the body's update statement) of a counted while loop."""
    block, body = w.parent, w.child_by_field_name("body")
    if (
        block is None
        or block.type != "compound_statement"
        or body is None
        or body.type != "compound_statement"
    ):
        return None
    decl = w.prev_named_sibling
    # Only a declaration right before the loop (a comment or an attached pragma between them: left alone).
    if decl is None or decl.type != "declaration":
        return None
    names = declared_name(decl, unit.data)
    if len(names) != 1 or names[0][2] is None:
        return None
    var = names[0][0]
    stmts = [c for c in body.named_children if c.type != "comment"]
    if not stmts or stmts[-1].type != "expression_statement":
        return None
    update = stmts[-1]
    expr = next((c for c in update.named_children if c.type != "comment"), None)
    target = assigned_target(expr) if expr is not None else None
    if target is None or target.type != "identifier" or unit.text(target) != var:
        return None
    if len(writes_of(unit, body, var)) != 1:
        return None
    cond = w.child_by_field_name("condition")
    if cond is None or not identifier_uses(unit, cond, var):
        return None
    if any(_continues_loop(c, w) for c in walk(body) if c.type == "continue_statement"):
        return None
    later = w.next_named_sibling
    while later is not None:
        if identifier_uses(unit, later, var):
            return None
        later = later.next_named_sibling
    return decl, var, update


def _continues_loop(cont: Node, loop: Node) -> bool:
    """Does this ``continue`` belong to ``loop`` (no loop between them)?"""
    p = cont.parent
    while p is not None and p != loop:
        if p.type in _LOOPS:
            return False
        p = p.parent
    return p == loop


def _indent_of(unit: Unit, n: Node) -> str:
    line_start = unit.data.rfind(b"\n", 0, n.start_byte) + 1
    prefix = unit.data[line_start : n.start_byte].decode("utf-8", errors="replace")
    return prefix if not prefix.strip() else ""
