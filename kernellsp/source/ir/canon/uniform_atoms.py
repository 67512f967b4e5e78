"""``uniform-atoms``: thread-invariant subexpressions that are no polynomial become named locals.

``a[row * (n / 2) + j]``, ``for (j = 0; j < min(k, K_MAX); ++j)``, ``if (col < (w + 3) / 4)``: the
index algebra of the IR is integer polynomials, so one ``n / 2`` makes the whole index opaque. The
value is the same for every thread, though, so it is hoisted to the top of the kernel as
``const auto n_div_2 = n / 2;`` and the IR reads that local as an opaque symbol, like a parameter:
the index is affine again. Hoisted are maximal subexpressions of subscripts, ``if`` and loop
conditions that read only parameters, ``blockDim``/``gridDim``, literals and uniform locals, through
arithmetic and pure calls (``min``, ``max``...), and that are not polynomials themselves.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import TYPE_CHECKING

from kernellsp.source.ir.canon.unit import TRUTH_OPERATORS, Change, Edit, Unit, walk

if TYPE_CHECKING:
    from tree_sitter import Node

    from kernellsp.source.ir.kernel import KernelIR

NAME = "uniform-atoms"
SUMMARY = "thread-invariant non-polynomial subexpressions (n / 2, min(a, b)) hoisted into named locals"


def run(unit: Unit) -> Change | None:
    from kernellsp.source.ir.expressions import uniform_value
    from kernellsp.source.ir.kernel import kernel_ir

    ir = kernel_ir(unit.model, unit.fn)
    if ir is None:
        return None
    roots: list[Node] = []
    for n in walk(unit.body):
        if n.type == "subscript_expression":
            idx = n.child_by_field_name("indices")
            if idx is not None:
                roots.extend(c for c in idx.named_children if c.type != "comment")
        elif n.type in ("if_statement", "while_statement") or n.type == "for_statement":
            cond = n.child_by_field_name("condition")
            if cond is not None:
                roots.append(cond)
    taken = {unit.text(n) for n in walk(unit.node) if n.type == "identifier"}
    hoisted: dict[str, tuple[str, str]] = {}  # whitespace-free text -> (local name, text)
    change = Change()
    for root in roots:
        if ir.poly(root) is not None:
            continue
        for atom in _atoms(ir, root, uniform_value):
            text = " ".join(unit.text(atom).split())
            key = re.sub(r"\s+", "", text)
            if key not in hoisted:
                hoisted[key] = (_fresh(_name_for(key), taken), text)
            change.replace(atom, hoisted[key][0])
    if not hoisted:
        return None
    first = next((c for c in unit.body.named_children if c.type != "comment"), None)
    at = first.start_byte if first is not None else unit.body.start_byte + 1
    indent = " " * (first.start_point[1] if first is not None else 4)
    lines = "".join(f"const auto {name} = {text};\n{indent}" for name, text in hoisted.values())
    change.insert(at, lines)
    change.notes.extend(f"`{text}` -> {name}" for name, text in hoisted.values())
    # Two atoms may nest in one root (a subscript inside a condition): keep the outer edits only.
    change.edits = _outermost(change.edits)
    return change


def _atoms(ir: KernelIR, root: Node, uniform: Callable[[KernelIR, Node], bool]) -> list[Node]:
    """Maximal uniform, non-polynomial subexpressions of ``root`` (not ``root`` itself when it is a plain name)."""
    out: list[Node] = []
    stack = [root]
    while stack:
        n = stack.pop()
        if n.type in ("identifier", "number_literal", "field_expression"):
            continue
        if n.type in (
            "binary_expression",
            "call_expression",
            "conditional_expression",
            "parenthesized_expression",
            "cast_expression",
        ):
            if _is_comparison(ir, n):
                stack.extend(n.named_children)
                continue
            if uniform(ir, n) and ir.poly(n) is None and _integral(ir, n):
                out.append(n)
                continue
        stack.extend(c for c in n.named_children if c.type != "comment")
    return out


def _is_comparison(ir: KernelIR, n: Node) -> bool:
    return n.type == "binary_expression" and ir.text(n.child_by_field_name("operator")) in TRUTH_OPERATORS


def _integral(ir: KernelIR, n: Node) -> bool:
    """No floating-point literal or cast: the atom is an integer value (an index, a bound)."""
    for c in walk(n):
        if (
            c.type == "number_literal"
            and re.search(r"[.eEfF]", ir.text(c))
            and not ir.text(c).lower().startswith("0x")
        ):
            return False
        if c.type == "cast_expression" and re.search(
            r"float|double|half", ir.text(c.child_by_field_name("type"))
        ):
            return False
    return True


def _name_for(text: str) -> str:
    words = {"/": "div", "%": "mod", "*": "mul", "+": "plus", "-": "minus", ">>": "shr", "<<": "shl"}
    out = text
    for sym, word in sorted(words.items(), key=lambda kv: -len(kv[0])):
        out = out.replace(sym, f"_{word}_")
    out = re.sub(r"\W+", "_", out).strip("_")
    out = re.sub(r"_+", "_", out)
    if not out or not re.match(r"[A-Za-z_]", out) or len(out) > 40:
        return "uniform"
    return out


def _fresh(name: str, taken: set[str]) -> str:
    cand = name
    i = 1
    while cand in taken:
        cand = f"{name}_{i}"
        i += 1
    taken.add(cand)
    return cand


def _outermost(edits: list[Edit]) -> list[Edit]:
    out: list[Edit] = []
    for e in sorted(edits, key=lambda e: (e.start, -e.end)):
        if out and e.start < out[-1].end and e.start != e.end:
            continue
        out.append(e)
    return out
