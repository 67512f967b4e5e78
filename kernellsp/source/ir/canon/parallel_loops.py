"""``parallel-loops``: loops that hand out work across the launch, written as the one item each thread gets.

``for (int row = blockIdx.x; row < rows; row += gridDim.x) {...}`` gives each block the rows
``blockIdx.x, blockIdx.x + gridDim.x, ...``; when the launch has at least ``rows`` blocks at every
declared shape, each block gets at most one row, and the loop is ``int row = blockIdx.x; if (row <
rows) {...}``: one row per block, the form the row recipes bind. Likewise a grid-stride loop
``for (i = gid; i < n; i += blockDim.x * gridDim.x)`` over a launch of at least ``n`` threads is
``if (i < n)``. A loop whose body ``break``s or ``continue``s, or whose bound the launch model cannot
evaluate at some shape, stays a loop.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from kernellsp.source.ir.canon.unit import Change, Unit, line_indent, walk
from kernellsp.source.ir.poly import Poly

if TYPE_CHECKING:
    from tree_sitter import Node

    from kernellsp.source.ir.kernel import KernelIR
    from kernellsp.source.ir.launch import KernelLaunch
    from kernellsp.source.ir.records import Loop

NAME = "parallel-loops"
SUMMARY = "block-stride row loops and grid-stride loops over a launch that covers them become one item per block/thread"


def run(unit: Unit) -> Change | None:
    from kernellsp.source.ir.kernel import kernel_ir

    launch = unit.launch
    ir = kernel_ir(unit.model, unit.fn)
    if launch is None or not launch.complete or not launch.shapes or ir is None:
        return None
    for lp in ir.loops:
        if lp.kind != "for" or lp.var is None or lp.start is None or lp.step is None or lp.depth != 0:
            continue
        got = _one_item(ir, lp, launch)
        if got is None or _exits_loop(lp.node):
            continue
        per, unit_name = got
        bound = lp.bound()
        if bound is None or not _covers(launch, bound, per):
            continue
        change = Change()
        indent = line_indent(unit.data, lp.node.start_byte)
        body = lp.body
        if body is None:
            continue
        body_text = unit.text(body)
        if body.type != "compound_statement":
            body_text = "{\n" + indent + "    " + body_text + "\n" + indent + "}"
        init = lp.node.child_by_field_name("initializer")
        cond = lp.node.child_by_field_name("condition")
        decl = (
            unit.text(init).rstrip(";") + ";"
            if init is not None and init.type == "declaration"
            else f"{unit.text(init)};"
        )
        if lp.node.parent == unit.body:
            # A statement of the kernel body (its counter's name is the body's own after ssa-locals).
            change.replace(lp.node, f"{decl}\n{indent}if ({unit.text(cond)}) {body_text}")
        else:
            change.replace(
                lp.node,
                f"{{\n{indent}    {decl}\n{indent}    if ({unit.text(cond)}) {_reindent(body_text, indent)}\n{indent}}}",
            )
        change.notes.append(
            f"`{unit.text(lp.node).splitlines()[0].strip()}`: the launch gives each {unit_name} at most one item"
        )
        return change
    return None


def _one_item(ir: KernelIR, lp: Loop, launch: KernelLaunch) -> tuple[str, str] | None:
    """(what covers the items: ``blocks``/``threads``, the word for one) when the loop strides over the launch."""
    assert lp.start is not None and lp.step is not None
    if lp.start == Poly.sym("blockIdx.x") and lp.step == Poly.sym("gridDim.x"):
        return "blocks", "block"
    if lp.grid_stride == "x":
        return "threads", "thread"
    return None


def _covers(launch: KernelLaunch, bound: Poly, per: str) -> bool:
    for s in launch.shapes:
        have = s.grid[0] if per == "blocks" else s.grid[0] * s.block[0]
        value = _value(bound, dict(s.params))
        if value is None or have < value:
            return False
    return True


def _value(p: Poly, env: dict[str, int]) -> int | None:
    total = 0
    for mono, c in p.terms.items():
        term = c
        for sym in mono:
            if sym not in env:
                return None
            term *= env[sym]
        total += term
    return total


def _exits_loop(loop: Node) -> bool:
    """A ``break`` or ``continue`` that belongs to this loop (not to a nested loop or switch)."""
    for n in walk(loop):
        if n.type in ("break_statement", "continue_statement"):
            p = n.parent
            while (
                p is not None
                and p != loop
                and p.type not in ("for_statement", "while_statement", "do_statement", "switch_statement")
            ):
                p = p.parent
            if p == loop:
                return True
    return False


def _reindent(text: str, indent: str) -> str:
    lines = text.split("\n")
    return "\n".join([lines[0], *(("    " + ln) if ln.strip() else ln for ln in lines[1:])])
