"""``launch-dims``: a block's extent spelled as a constant or a parameter, written ``blockDim``.

``blockIdx.x * TILE + threadIdx.x`` with ``TILE`` (a literal, a constant or a parameter such as
Inductor's ``XBLOCK``) equal to the block's extent along x at every declared shape is the global
thread index ``blockIdx.x * blockDim.x + threadIdx.x``; the IR folds only the latter. Only the
product with ``blockIdx`` is rewritten: ``i % XBLOCK`` elsewhere keeps its meaning whatever block a
rewrite launches.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from kernellsp.source.ir.canon.unit import Change, Unit, strip_parens, walk
from kernellsp.source.ir.cexpr import file_constants, int_literal

if TYPE_CHECKING:
    from tree_sitter import Node

NAME = "launch-dims"
SUMMARY = "blockIdx.a * C with C equal to the block's extent at every shape written blockIdx.a * blockDim.a"

_AXES = {"x": 0, "y": 1, "z": 2}


def run(unit: Unit) -> Change | None:
    launch = unit.launch
    if launch is None or not launch.complete or not launch.shapes:
        return None
    consts = file_constants(unit.model)
    change = Change()
    for n in walk(unit.body):
        if n.type != "binary_expression" or unit.text(n.child_by_field_name("operator")) != "*":
            continue
        left, right = n.child_by_field_name("left"), n.child_by_field_name("right")
        if left is None or right is None:
            continue
        for idx, other in ((left, right), (right, left)):
            axis = _block_index_axis(unit, idx)
            if axis is None:
                continue
            extents = [s.block[_AXES[axis]] for s in launch.shapes]
            if all(e == 1 for e in extents) or not _always(unit, other, extents, consts):
                continue
            change.replace(other, f"blockDim.{axis}")
            change.notes.append(f"`{unit.text(other)}` is blockDim.{axis} at every shape")
            break
    return change


def _block_index_axis(unit: Unit, n: Node) -> str | None:
    node = strip_parens(n)
    if node.type != "field_expression":
        return None
    arg, fld = node.child_by_field_name("argument"), node.child_by_field_name("field")
    if unit.text(arg) == "blockIdx" and unit.text(fld) in _AXES:
        return unit.text(fld)
    return None


def _always(unit: Unit, n: Node, extents: list[int], consts: dict[str, int]) -> bool:
    """Is ``n`` (a literal, a file constant or a scalar parameter) the block's extent at every shape?"""
    node = strip_parens(n)
    text = unit.text(node).strip()
    v = int_literal(text)
    if v is None and node.type == "identifier" and text in consts:
        v = consts[text]
    if v is not None:
        return all(e == v for e in extents)
    if node.type != "identifier":
        return False
    assert unit.launch is not None
    return all(s.params.get(text) == e for s, e in zip(unit.launch.shapes, extents, strict=True))
