"""``arch-select``: preprocessor conditionals on ``__CUDA_ARCH__`` inside a kernel, resolved for the target.

``#if __CUDA_ARCH__ >= 800 ... #else ... #endif`` in device code selects what the compiler sees
for one architecture; the kernel that runs on an sm_90 device is the selected branch. Conditionals
whose condition names anything but ``__CUDA_ARCH__``, ``defined(...)`` of it and integer literals are
left alone (they depend on the build).
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import TYPE_CHECKING

from kernellsp.source.ir.canon.unit import Change, Edit, Unit, walk
from kernellsp.source.ir.cexpr import evaluate_text

if TYPE_CHECKING:
    from tree_sitter import Node

NAME = "arch-select"
SUMMARY = "#if/#ifdef on __CUDA_ARCH__ inside a kernel resolved for the target architecture"

_ONLY_ARCH = re.compile(r"^(?:\s|__CUDA_ARCH__|defined|\d+[uUlL]*|[-+*/%<>=!&|()?:])*$")


def run(unit: Unit) -> Change | None:
    change = Change()
    for n in walk(unit.body):
        if n.type not in ("preproc_if", "preproc_ifdef"):
            continue
        if any(a.type in ("preproc_if", "preproc_ifdef") for a in _ancestors(n, unit.body)):
            continue
        chosen = _select(unit, n)
        if chosen is None:
            continue
        # From the start of the `#if` line to the end of the `#endif` line: the branch keeps its own lines.
        start = unit.data.rfind(b"\n", 0, n.start_byte) + 1
        end = n.end_byte
        if unit.data[end : end + 1] == b"\n":
            end += 1
        change.edits.append(Edit(start, end, chosen))
        change.notes.append(
            f"`{unit.text(n).splitlines()[0].strip()}` resolved for __CUDA_ARCH__ = {unit.cuda_arch}"
        )
    return change


def _ancestors(n: Node, stop: Node) -> Iterator[Node]:
    p = n.parent
    while p is not None and p != stop:
        yield p
        p = p.parent


def _select(unit: Unit, n: Node) -> str | None:
    """The text of the branch the target compiles (``""`` for none), or ``None`` when undecidable."""
    cur: Node | None = n
    while cur is not None:
        if cur.type == "preproc_else":
            return _branch_text(unit, cur)
        taken = _condition(unit, cur)
        if taken is None:
            return None
        if taken:
            return _branch_text(unit, cur)
        cur = cur.child_by_field_name("alternative")
    return ""


def _condition(unit: Unit, n: Node) -> bool | None:
    if n.type == "preproc_ifdef":
        name = unit.text(n.child_by_field_name("name"))
        if name != "__CUDA_ARCH__":
            return None
        return not unit.text(n).lstrip().startswith("#ifndef")
    cond = n.child_by_field_name("condition")
    text = unit.text(cond)
    if "__CUDA_ARCH__" not in text or not _ONLY_ARCH.match(text):
        return None
    text = re.sub(r"defined\s*\(\s*__CUDA_ARCH__\s*\)|defined\s+__CUDA_ARCH__", "1", text)
    v = evaluate_text(text, {"__CUDA_ARCH__": unit.cuda_arch})
    return None if v is None else bool(v)


def _branch_text(unit: Unit, n: Node) -> str:
    """The code of one branch: the node's children after its directive line, up to its alternative."""
    alt = n.child_by_field_name("alternative")
    kids = [c for c in n.named_children if c != alt and c.type not in ("preproc_directive",)]
    cond = n.child_by_field_name("condition") or n.child_by_field_name("name")
    kids = [c for c in kids if c != cond]
    if not kids:
        return ""
    start = unit.data.rfind(b"\n", 0, kids[0].start_byte) + 1
    return unit.data[start : kids[-1].end_byte].decode("utf-8", errors="replace") + "\n"
