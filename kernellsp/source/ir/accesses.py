"""Memory accesses, atomics and accumulations of a kernel body."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Literal

from kernellsp.source.ir.control import _strip_parens
from kernellsp.source.ir.expressions import _element_ctype, _pointer_base, _subscript_parts, walk
from kernellsp.source.ir.poly import Poly
from kernellsp.source.ir.records import Access, Accumulation, Atomic

if TYPE_CHECKING:
    import tree_sitter

    from kernellsp.source.ir.kernel import KernelIR

_ATOMIC = re.compile(r"^atomic(Add|Sub|Exch|Min|Max|Inc|Dec|CAS|And|Or|Xor)(_block|_system)?$")
_ATOMIC_OP = {
    "Add": "sum",
    "Sub": "sum",
    "Max": "max",
    "Min": "min",
    "And": "and",
    "Or": "or",
    "Xor": "xor",
    "Exch": "exch",
    "Inc": "inc",
    "Dec": "dec",
    "CAS": "cas",
}
_MAX_FUNCS = ("fmaxf", "fmax", "max", "__hmax", "umax", "llmax", "::max", "std::max")
_MIN_FUNCS = ("fminf", "fmin", "min", "__hmin", "umin", "llmin", "::min", "std::min")


# -- accesses ----------------------------------------------------------------------------------------


def _collect_accesses(ir: KernelIR) -> None:
    pnames = {p.name for p in ir.params if p.is_pointer}
    atomic_targets: set[int] = set()
    for n in walk(ir.body):
        if n.type == "call_expression":
            fname = ir.text(n.child_by_field_name("function"))
            m = _ATOMIC.match(fname)
            if not m:
                continue
            args = n.child_by_field_name("arguments")
            argn = [c for c in args.named_children if c.type != "comment"] if args is not None else []
            if not argn:
                continue
            target = _atomic_target(ir, argn[0], pnames)
            if target is not None:
                for sub in walk(target.node):
                    if sub.type == "subscript_expression":
                        atomic_targets.add(sub.id)
                        break
                atomic_targets.add(target.node.id)
                target.stmt = _statement_of(ir, n)
                ir.accesses.append(target)
            value = argn[1] if len(argn) > 1 else None
            parent = n.parent
            used = parent is not None and parent.type not in ("expression_statement",)
            ir.atomics.append(
                Atomic(
                    fname,
                    _ATOMIC_OP[m.group(1)],
                    target,
                    ir.text(value),
                    value,
                    n,
                    ir.loops_of(n),
                    ir.guards_of(n),
                    used,
                )
            )
    for n in walk(ir.body):
        if n.id in atomic_targets:
            continue
        acc = None
        if n.type == "subscript_expression":
            acc = _subscript_access(ir, n, pnames)
        elif n.type == "pointer_expression" and ir.text(n.child_by_field_name("operator")) == "*":
            acc = _deref_access(ir, n, pnames)
        if acc is None:
            continue
        kind, op, stmt = _access_kind(ir, n)
        acc.kind, acc.op, acc.stmt = kind, op, stmt
        ir.accesses.append(acc)
    ir.accesses.sort(key=lambda a: a.node.start_byte)


def _statement_of(ir: KernelIR, n: tree_sitter.Node) -> tree_sitter.Node:
    cur = n
    while cur.parent is not None and cur.type not in (
        "expression_statement",
        "declaration",
        "return_statement",
    ):
        cur = cur.parent
    return cur


def _access_kind(
    ir: KernelIR, n: tree_sitter.Node
) -> tuple[Literal["load", "store", "update"], str | None, tree_sitter.Node | None]:
    parent = n.parent
    while parent is not None and parent.type == "parenthesized_expression":
        n, parent = parent, parent.parent
    if (
        parent is not None
        and parent.type == "assignment_expression"
        and parent.child_by_field_name("left") == n
    ):
        op = ir.text(parent.child_by_field_name("operator"))
        return ("store" if op == "=" else "update"), op, _statement_of(ir, parent)
    if parent is not None and parent.type == "update_expression":
        return "update", ir.text(parent.child_by_field_name("operator")), _statement_of(ir, parent)
    return "load", None, None


def _make_access(
    ir: KernelIR,
    node: tree_sitter.Node,
    base: str,
    space: Literal["global", "shared", "local"],
    index: Poly | None,
    index_text: str,
    ctype: str,
) -> Access:
    return Access(
        node,
        base,
        space,
        "load",
        index,
        index_text,
        ctype,
        ir.loops_of(node),
        ir.guards_of(node),
        node.start_point[0],
    )


def _subscript_access(ir: KernelIR, n: tree_sitter.Node, pnames: set[str]) -> Access | None:
    base, idx = _subscript_parts(ir, n)
    if base is None or idx is None:
        return None
    idx_poly = ir.poly(idx)
    if base.type == "identifier":
        name = ir.text(base)
        var = ir.locals.get(name)
        if var is not None and (var.is_array or var.shared) and not var.is_pointer:
            return _make_access(
                ir,
                n,
                name,
                "shared" if var.shared else "local",
                idx_poly,
                ir.text(idx),
                _element_ctype(var.ctype),
            )
        if var is not None and var.shared and var.is_pointer:
            return None
    if base.type == "subscript_expression":
        return None  # a[i][j] on a pointer-to-array: not modelled
    param, off = _pointer_base(ir, base, pnames, 0)
    if param is None:
        return None
    p = ir.param(param)
    index = off + idx_poly if off is not None and idx_poly is not None else None
    text = ir.text(idx) if off is None or off == Poly() else f"{off.c_text()} + {ir.text(idx)}"
    return _make_access(ir, n, param, "global", index, text, p.ctype if p else "")


def _deref_access(ir: KernelIR, n: tree_sitter.Node, pnames: set[str]) -> Access | None:
    arg = n.child_by_field_name("argument")
    if arg is None:
        return None
    param, off = _pointer_base(ir, arg, pnames, 0)
    if param is None:
        return None
    p = ir.param(param)
    return _make_access(
        ir, n, param, "global", off, off.c_text() if off is not None else ir.text(arg), p.ctype if p else ""
    )


def _atomic_target(ir: KernelIR, addr: tree_sitter.Node, pnames: set[str]) -> Access | None:
    a = _strip_parens(ir, addr)
    if a.type == "pointer_expression" and ir.text(a.child_by_field_name("operator")) == "&":
        inner = a.child_by_field_name("argument")
        if inner is not None:
            inner = _strip_parens(ir, inner)
        if inner is not None and inner.type == "subscript_expression":
            acc = _subscript_access(ir, inner, pnames)
            if acc is not None:
                acc.node = a
                acc.kind = "atomic"
                return acc
    param, off = _pointer_base(ir, a, pnames, 0)
    if param is not None:
        p = ir.param(param)
        acc = _make_access(
            ir, a, param, "global", off, off.c_text() if off is not None else ir.text(a), p.ctype if p else ""
        )
        acc.kind = "atomic"
        return acc
    if a.type == "identifier":
        var = ir.locals.get(ir.text(a))
        if var is not None and var.shared:
            acc = _make_access(ir, a, var.name, "shared", Poly(), "0", _element_ctype(var.ctype))
            acc.kind = "atomic"
            return acc
    return None


# -- accumulations -------------------------------------------------------------------------------------


def _call_parts(ir: KernelIR, n: tree_sitter.Node) -> tuple[str, list[tree_sitter.Node]] | None:
    n = _strip_parens(ir, n)
    if n.type != "call_expression":
        return None
    args = n.child_by_field_name("arguments")
    return ir.text(n.child_by_field_name("function")), [
        c for c in args.named_children if c.type != "comment"
    ] if args else []


def _collect_accumulations(ir: KernelIR) -> None:
    loop_vars = {lp.var for lp in ir.loops if lp.var is not None}
    scalars = {
        name
        for name, v in ir.locals.items()
        if not v.is_pointer and not v.is_array and not v.shared and name not in loop_vars
    }
    for n in walk(ir.body):
        if n.type == "assignment_expression":
            left = n.child_by_field_name("left")
            right = n.child_by_field_name("right")
            if left is None or right is None or left.type != "identifier" or ir.text(left) not in scalars:
                continue
            var = ir.text(left)
            op = ir.text(n.child_by_field_name("operator"))
            compound = {"+=": "sum", "-=": "sum", "*=": "prod", "&=": "and", "|=": "or", "^=": "xor"}
            if op in compound:
                ir.accumulations.append(
                    Accumulation(
                        var,
                        compound[op],  # type: ignore[arg-type]
                        ir.text(right),
                        right,
                        n,
                        ir.loops_of(n),
                        negated=op == "-=",
                    )
                )
                continue
            if op != "=":
                continue
            r = _strip_parens(ir, right)
            found = _binary_accumulation(ir, var, r)
            if found is not None:
                kind, value = found
                ir.accumulations.append(Accumulation(var, kind, ir.text(value), value, n, ir.loops_of(n)))  # type: ignore[arg-type]
        elif n.type == "if_statement":
            acc = _compare_select(ir, n, scalars)
            if acc is not None:
                ir.accumulations.append(acc)


def _binary_accumulation(ir: KernelIR, var: str, r: tree_sitter.Node) -> tuple[str, tree_sitter.Node] | None:
    if r.type == "binary_expression":
        bop = ir.text(r.child_by_field_name("operator"))
        a, b = r.child_by_field_name("left"), r.child_by_field_name("right")
        kinds = {"+": "sum", "*": "prod", "&": "and", "|": "or", "^": "xor"}
        if a is not None and b is not None and bop in kinds:
            if ir.text(_strip_parens(ir, a)) == var:
                return kinds[bop], b
            if ir.text(_strip_parens(ir, b)) == var:
                return kinds[bop], a
    call = _call_parts(ir, r)
    if call is not None and len(call[1]) == 2:
        fname, (a, b) = call
        kind = "max" if fname in _MAX_FUNCS else "min" if fname in _MIN_FUNCS else None
        if kind is not None:
            if ir.text(_strip_parens(ir, a)) == var:
                return kind, b
            if ir.text(_strip_parens(ir, b)) == var:
                return kind, a
    if r.type == "conditional_expression":
        cond = _strip_parens(ir, r.child_by_field_name("condition") or r)
        cons, alt = r.child_by_field_name("consequence"), r.child_by_field_name("alternative")
        if cond.type == "binary_expression" and cons is not None and alt is not None:
            cop = ir.text(cond.child_by_field_name("operator"))
            cl, cr = cond.child_by_field_name("left"), cond.child_by_field_name("right")
            texts = [ir.text(_strip_parens(ir, x)) for x in (cl, cr, cons, alt) if x is not None]
            if len(texts) == 4 and cop in ("<", "<=", ">", ">="):
                lt, rt, ct, at = texts
                # `v > acc ? v : acc` is max; `v < acc ? v : acc` is min (any side order).
                if {lt, rt} == {ct, at} and var in (lt, rt):
                    picks_left = ct == lt
                    greater = cop in (">", ">=")
                    kind = "max" if picks_left == greater else "min"
                    value = cl if rt == var else cr
                    assert value is not None
                    return kind, value
    return None


def _compare_select(ir: KernelIR, n: tree_sitter.Node, scalars: set[str]) -> Accumulation | None:
    """``if (v > best) { best = v; arg = i; }`` → max into ``best`` with companion ``arg = i``."""
    if n.child_by_field_name("alternative") is not None:
        return None
    cond = _strip_parens(ir, n.child_by_field_name("condition") or n)
    cons = n.child_by_field_name("consequence")
    if cond.type != "binary_expression" or cons is None:
        return None
    cop = ir.text(cond.child_by_field_name("operator"))
    cl, cr = cond.child_by_field_name("left"), cond.child_by_field_name("right")
    if cop not in ("<", "<=", ">", ">=") or cl is None or cr is None:
        return None
    stmts = (
        [cons]
        if cons.type != "compound_statement"
        else [c for c in cons.named_children if c.type != "comment"]
    )
    assigns: dict[str, tree_sitter.Node] = {}
    for s in stmts:
        if s.type != "expression_statement":
            return None
        e = next((c for c in s.named_children), None)
        if (
            e is None
            or e.type != "assignment_expression"
            or ir.text(e.child_by_field_name("operator")) != "="
        ):
            return None
        left, right = e.child_by_field_name("left"), e.child_by_field_name("right")
        if left is None or right is None or left.type != "identifier" or ir.text(left) not in scalars:
            return None
        assigns[ir.text(left)] = right
    lt, rt = ir.text(_strip_parens(ir, cl)), ir.text(_strip_parens(ir, cr))
    for var, other, var_on_left in ((rt, cl, False), (lt, cr, True)):
        if var in assigns and ir.text(_strip_parens(ir, assigns[var])) == ir.text(_strip_parens(ir, other)):
            greater_than_var = (cop in (">", ">=")) != var_on_left
            kind: Literal["max", "min"] = "max" if greater_than_var else "min"
            comps = {k: ir.text(v) for k, v in assigns.items() if k != var}
            return Accumulation(var, kind, ir.text(other), other, n, ir.loops_of(n), comps)
    return None
