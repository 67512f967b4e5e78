"""Statement tests of the element-loop analysis: uniform statements, index declarations, exits."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

from kernellsp.source.ir import KernelIR, Poly, walk

if TYPE_CHECKING:
    import tree_sitter


def _is_uniform(ir: KernelIR, node: tree_sitter.Node) -> bool:
    """No thread/block indices, no index variables, no memory writes: the same value in every thread.

    ``blockDim``/``gridDim`` are uniform across the grid (``int stride = blockDim.x * gridDim.x;``).
    """
    if ir.uses_builtin(node, ("threadIdx", "blockIdx")):
        return False
    ids = ir.identifiers(node)
    if ids & set(ir.index_vars):
        return False
    if any(
        n.type in ("assignment_expression", "update_expression")
        for n in walk(node)
        if n.type != "declaration"
    ):
        return node.type == "declaration" and not any(
            n.type in ("assignment_expression", "update_expression") for n in walk(node)
        )
    written = ir.written()
    return not any(
        a.base in written
        for a in ir.global_accesses()
        if node.start_byte <= a.node.start_byte < node.end_byte
    )


def _index_decl(ir: KernelIR, node: tree_sitter.Node) -> bool:
    """A declaration of thread-index variables only (``int i = blockIdx.x * blockDim.x + threadIdx.x;``)."""
    if node.type != "declaration":
        return False
    names = [
        ir.text(d.child_by_field_name("declarator") or d) for d in node.children_by_field_name("declarator")
    ]
    names = [re.sub(r"[^\w].*$", "", n.lstrip("*& ")) for n in names]
    if not names:
        return False
    for name in names:
        var = ir.locals.get(name)
        if var is None or var.is_array or var.shared:
            return False
        if name in ir.index_vars:
            continue
        if any(lp.var == name and lp.grid_stride for lp in ir.loops):
            continue  # `int i = gid;` of a `while (i < n) { ...; i += stride; }` grid-stride loop
        if var.is_pointer and var.points_to is not None:
            continue  # `const float* p = src + start;`: resolved into accesses by the IR
        # `int len = min(chunk, n - start)`: a chunk-loop bound, resolved by the chunk analysis.
        if (
            var.value_node is not None
            and _min_call(ir, var.value_node) is not None
            and not any(
                n.type in ("subscript_expression", "pointer_expression") for n in walk(var.value_node)
            )
            and ir.identifiers(var.value_node) & set(ir.index_vars)
        ):
            continue
        return False
    return True


def _stmts(node: tree_sitter.Node) -> list[tree_sitter.Node]:
    if node.type == "compound_statement":
        return [c for c in node.named_children if c.type != "comment"]
    return [node]


def _exit_only(ir: KernelIR, s: tree_sitter.Node) -> bool:
    cons = s.child_by_field_name("consequence")
    kids = _stmts(cons) if cons is not None else []
    return len(kids) == 1 and kids[0].type == "return_statement" and kids[0].named_child_count == 0


def _depends_on_locals(ir: KernelIR, p: Poly) -> bool:
    """Does ``p`` mention a local that was not substituted (reassigned, loop variable)? A uniform local
    (``const auto n_div_2 = n / 2;``, the same for every thread) is as good as a parameter."""
    return any(s in ir.locals and s not in ir.uniform_locals() for s in p.symbols())


def _min_call(ir: KernelIR, n: Any) -> list[Any] | None:
    while n.type in ("parenthesized_expression",):
        n = n.named_children[0]
    if n.type != "call_expression" or ir.text(n.child_by_field_name("function")) not in (
        "min",
        "::min",
        "std::min",
        "umin",
        "llmin",
    ):
        return None
    args = n.child_by_field_name("arguments")
    kids = [c for c in args.named_children if c.type != "comment"] if args is not None else []
    return kids if len(kids) == 2 else None


def _has_access(ir: KernelIR, node: Any) -> bool:
    return any(node.start_byte <= a.node.start_byte < node.end_byte for a in ir.accesses)
