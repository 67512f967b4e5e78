"""Locals and expressions of a kernel body: declarations, pointers into parameters, expressions as polynomials."""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

from kernellsp.source.ir.cexpr import c_divmod, int_literal
from kernellsp.source.ir.poly import AXES, BUILTINS, Poly, fold_gid
from kernellsp.source.ir.records import LocalVar

if TYPE_CHECKING:
    import tree_sitter

    from kernellsp.source.ir.kernel import KernelIR

_SIGNED_INT_TYPES = (
    "int",
    "long",
    "long long",
    "short",
    "signed",
    "long int",
    "int32_t",
    "int64_t",
    "ptrdiff_t",
    "char",
    "signed char",
)


def walk(n: tree_sitter.Node) -> Iterator[tree_sitter.Node]:
    """Pre-order walk of a subtree."""
    stack = [n]
    while stack:
        cur = stack.pop()
        yield cur
        stack.extend(reversed(cur.children))


def _element_ctype(base_type: str) -> str:
    words = [
        w
        for w in base_type.replace("*", " ").split()
        if w not in ("const", "volatile", "__restrict__", "__restrict", "restrict")
    ]
    return " ".join(words)


def _declared_names(
    ir: KernelIR, decl: tree_sitter.Node
) -> list[tuple[str, tree_sitter.Node, tree_sitter.Node | None, bool, bool]]:
    """(name, declarator node, value node, is_pointer, is_array) for each declarator of a declaration."""
    out = []
    for d in decl.children_by_field_name("declarator"):
        value = None
        target = d
        if d.type == "init_declarator":
            value = d.child_by_field_name("value")
            target = d.child_by_field_name("declarator") or d
        is_ptr = False
        is_arr = False
        while target is not None and target.type in (
            "pointer_declarator",
            "reference_declarator",
            "array_declarator",
        ):
            if target.type == "pointer_declarator":
                is_ptr = True
            if target.type == "array_declarator":
                is_arr = True
            nxt = target.child_by_field_name("declarator")
            if nxt is None:
                nxt = next((c for c in target.children if c.type == "identifier"), None)
            if nxt is None:
                break
            target = nxt
        if target is not None and target.type == "identifier":
            if value is not None and value.type == "initializer_list":
                value = None
            out.append((ir.text(target), d, value, is_ptr, is_arr))
    return out


def _collect_locals(ir: KernelIR) -> None:
    for n in walk(ir.body):
        if n.type == "declaration":
            _record_declaration(ir, n)
        elif n.type == "assignment_expression":
            left = n.child_by_field_name("left")
            if left is not None and left.type == "identifier" and ir.text(left) in ir.locals:
                ir.locals[ir.text(left)].assignments += 1
        elif n.type == "update_expression":
            arg = n.child_by_field_name("argument")
            if arg is not None and arg.type == "identifier" and ir.text(arg) in ir.locals:
                ir.locals[ir.text(arg)].assignments += 1
        elif n.type == "call_expression":
            _record_call(ir, n)
        elif n.type in ("return_statement", "break_statement", "continue_statement", "goto_statement"):
            ir.exits.append(n)
    # Local pointers into parameters: `T* p = x + off`, `&x[off]`, `x` (offset 0).
    pnames = {p.name for p in ir.params if p.is_pointer}
    for var in ir.locals.values():
        if not var.is_pointer or var.value_node is None or var.assignments:
            continue
        base, off = _pointer_base(ir, var.value_node, pnames, 0)
        if base is not None:
            var.points_to, var.offset = base, off


def _record_declaration(ir: KernelIR, n: tree_sitter.Node) -> None:
    """Each name a declaration introduces becomes a :class:`LocalVar` (a second declaration shadows it)."""
    head = ir.text(n).split("=")[0]
    shared = "__shared__" in head
    tnode = n.child_by_field_name("type")
    ctype = " ".join(ir.text(c) for c in n.children if c.type == "type_qualifier" and ir.text(c) == "const")
    ctype = (ctype + " " + ir.text(tnode)).strip()
    for name, _d, value, is_ptr, is_arr in _declared_names(ir, n):
        if name in ir.locals:
            ir.locals[name].shadowed = True
            continue
        var = LocalVar(name, ctype, n, value, is_pointer=is_ptr, is_array=is_arr, shared=shared)
        ir.locals[name] = var


def _record_call(ir: KernelIR, n: tree_sitter.Node) -> None:
    """A called function's name, and the call itself when it is a barrier or a warp-level primitive."""
    f = n.child_by_field_name("function")
    name = ir.text(f)
    ir.calls.add(name)
    if name.startswith("__syncthreads") or name in (
        "__syncwarp",
        "__threadfence",
        "__threadfence_block",
    ):
        ir.barriers.append(n)
    elif (
        name.startswith("__shfl")
        or name.startswith("__reduce_")
        or name.replace(" ", "")
        in ("cg::reduce", "cooperative_groups::reduce", "cg::inclusive_scan", "cg::exclusive_scan")
        or name in ("__ballot_sync", "__any_sync", "__all_sync", "__match_any_sync")
    ):
        ir.warp_ops.append(n)


def _pointer_base(
    ir: KernelIR, n: tree_sitter.Node, pnames: set[str], depth: int
) -> tuple[str | None, Poly | None]:
    """``(param, element offset)`` of a pointer expression ``x``, ``x + off``, ``&x[off]``, ``(T*)x``."""
    if depth > 8:
        return None, None
    t = n.type
    if t == "identifier":
        name = ir.text(n)
        if name in pnames:
            return name, Poly()
        var = ir.locals.get(name)
        if var is not None and var.points_to is not None:
            return var.points_to, var.offset
        return None, None
    if t in ("parenthesized_expression",):
        inner = next((c for c in n.named_children), None)
        return _pointer_base(ir, inner, pnames, depth + 1) if inner is not None else (None, None)
    if t == "cast_expression":
        return _cast_pointer_base(ir, n, pnames, depth)
    if t == "binary_expression":
        return _sum_pointer_base(ir, n, pnames, depth)
    if t == "pointer_expression" and ir.text(n.child_by_field_name("operator")) == "&":
        return _address_pointer_base(ir, n, pnames, depth)
    return None, None


def _cast_pointer_base(
    ir: KernelIR, n: tree_sitter.Node, pnames: set[str], depth: int
) -> tuple[str | None, Poly | None]:
    """``(T*)x``: the base of ``x`` when ``T`` is the parameter's own element type."""
    # A cast to another element type changes the element size: offsets no longer line up.
    tn = n.child_by_field_name("type")
    val = n.child_by_field_name("value")
    base, off = _pointer_base(ir, val, pnames, depth + 1) if val is not None else (None, None)
    if base is not None:
        param = ir.param(base)
        if param is not None and tn is not None and _element_ctype(ir.text(tn)) == param.ctype:
            return base, off
    return None, None


def _sum_pointer_base(
    ir: KernelIR, n: tree_sitter.Node, pnames: set[str], depth: int
) -> tuple[str | None, Poly | None]:
    """``x + off``, ``x - off`` and ``off + x``."""
    op = ir.text(n.child_by_field_name("operator"))
    left, right = n.child_by_field_name("left"), n.child_by_field_name("right")
    if left is None or right is None or op not in ("+", "-"):
        return None, None
    base, off = _pointer_base(ir, left, pnames, depth + 1)
    if base is not None and off is not None:
        d = ir.poly(right)
        if d is None:
            return base, None
        return base, off + d if op == "+" else off - d
    if op == "+":
        base, off = _pointer_base(ir, right, pnames, depth + 1)
        if base is not None and off is not None:
            d = ir.poly(left)
            return base, (off + d) if d is not None else None
    return None, None


def _address_pointer_base(
    ir: KernelIR, n: tree_sitter.Node, pnames: set[str], depth: int
) -> tuple[str | None, Poly | None]:
    """``&x[off]``."""
    arg = n.child_by_field_name("argument")
    if arg is not None and arg.type == "subscript_expression":
        bnode, idx = _subscript_parts(ir, arg)
        if bnode is not None:
            b, off = _pointer_base(ir, bnode, pnames, depth + 1)
            if b is not None and off is not None:
                d = ir.poly(idx) if idx is not None else None
                return b, (off + d) if d is not None else None
    return None, None


def _subscript_parts(
    ir: KernelIR, n: tree_sitter.Node
) -> tuple[tree_sitter.Node | None, tree_sitter.Node | None]:
    base = n.child_by_field_name("argument")
    idx_list = n.child_by_field_name("indices")
    idx = (
        next((c for c in idx_list.named_children if c.type != "comment"), None)
        if idx_list is not None
        else None
    )
    return base, idx


#: Casts spelled as calls that keep an integer index an integer.
_INT_CASTS = (
    "static_cast<int>",
    "static_cast<unsigned>",
    "static_cast<size_t>",
    "static_cast<long>",
    "static_cast<long long>",
    "static_cast<unsigned int>",
    "static_cast<int64_t>",
)


def _to_poly(ir: KernelIR, n: tree_sitter.Node, seen: frozenset[str], depth: int = 0) -> Poly | None:
    if depth > 60:
        return None
    t = n.type
    if t == "number_literal":
        v = int_literal(ir.text(n))
        return Poly.const(v) if v is not None else None
    if t == "identifier":
        return _identifier_poly(ir, n, seen, depth)
    if t == "field_expression":
        arg, fld = n.child_by_field_name("argument"), n.child_by_field_name("field")
        if arg is not None and fld is not None and ir.text(arg) in BUILTINS and ir.text(fld) in AXES:
            return Poly.sym(f"{ir.text(arg)}.{ir.text(fld)}")
        return None
    if t in ("parenthesized_expression", "condition_clause"):
        inner = next((c for c in n.named_children if c.type != "comment"), None)
        return _to_poly(ir, inner, seen, depth + 1) if inner is not None else None
    if t == "cast_expression":
        val = n.child_by_field_name("value")
        tn = n.child_by_field_name("type")
        if tn is not None and any(w in ir.text(tn) for w in ("float", "double", "half", "bfloat")):
            return None
        return _to_poly(ir, val, seen, depth + 1) if val is not None else None
    if t == "call_expression":
        return _call_poly(ir, n, seen, depth)
    if t == "binary_expression":
        return _binary_poly(ir, n, seen, depth)
    if t == "unary_expression":
        return _unary_poly(ir, n, seen, depth)
    return None


def _identifier_poly(ir: KernelIR, n: tree_sitter.Node, seen: frozenset[str], depth: int) -> Poly | None:
    """A local with one value is substituted; a ``#define`` constant is its value; any other name a symbol."""
    name = ir.text(n)
    var = ir.locals.get(name)
    if var is not None:
        if (
            var.assignments == 0
            and not var.shadowed
            and var.value_node is not None
            and not var.is_pointer
            and not var.is_array
            and name not in seen
            and not _is_loop_var(ir, name)
        ):
            got = _to_poly(ir, var.value_node, seen | {name}, depth + 1)
            if got is None and uniform_value(ir, var.value_node):
                # `const int half = n / 2;`: not a polynomial, but the same for every thread, so an
                # opaque symbol like a parameter (the uniform-atoms pass names such subexpressions).
                return Poly.sym(name)
            return got
        return Poly.sym(name)
    if name in ir.model.defines:
        v = _define_value(ir, name)
        return Poly.const(v) if v is not None else Poly.sym(name)
    return Poly.sym(name)


#: Calls whose value depends only on their arguments (a uniform argument list gives a uniform value).
_PURE_INT_CALLS = frozenset(
    (
        "min",
        "max",
        "umin",
        "umax",
        "abs",
        "__clz",
        "__popc",
        "__ffs",
        "ceil",
        "floor",
        "sqrt",
        "sqrtf",
        "log2",
        "log2f",
        "ceilf",
        "floorf",
        "rsqrtf",
    )
)


def uniform_value(ir: KernelIR, n: tree_sitter.Node) -> bool:
    """Is ``n`` the same for every thread of the launch: parameters (never written), ``blockDim``/``gridDim``,
    literals, other uniform locals, pure calls of those; no loads, no thread or block index?"""
    for c in walk(n):
        t = c.type
        if t in ("subscript_expression", "assignment_expression", "update_expression", "pointer_expression"):
            return False
        if t == "call_expression" and ir.text(c.child_by_field_name("function")) not in _PURE_INT_CALLS:
            return False
        if t == "field_expression":
            arg = ir.text(c.child_by_field_name("argument"))
            if arg not in ("blockDim", "gridDim"):
                return False
        if t == "identifier":
            p = c.parent
            if p is not None and (
                p.type == "field_expression"
                or (p.type == "call_expression" and p.child_by_field_name("function") == c)
            ):
                continue
            name = ir.text(c)
            var = ir.locals.get(name)
            if var is not None:
                if var.assignments or var.shadowed or var.value_node is None or _is_loop_var(ir, name):
                    return False
                if var.value_node is not n and not uniform_value(ir, var.value_node):
                    return False
                continue
            param = ir.param(name)
            if param is not None and param.is_pointer:
                return False
            if param is None and name not in ir.model.defines and name not in ("threadIdx", "blockIdx"):
                continue  # a file-scope constant or an enumerator
            if name in ("threadIdx", "blockIdx"):
                return False
    return True


def _call_poly(ir: KernelIR, n: tree_sitter.Node, seen: frozenset[str], depth: int) -> Poly | None:
    """``__umul24(a, b)``/``__mul24(a, b)`` and integer ``static_cast``s; any other call is no polynomial."""
    fname = ir.text(n.child_by_field_name("function"))
    args = n.child_by_field_name("arguments")
    argn = [c for c in args.named_children if c.type != "comment"] if args is not None else []
    if fname in ("__umul24", "__mul24", "__umul64hi") and len(argn) == 2 and fname != "__umul64hi":
        a, b = _to_poly(ir, argn[0], seen, depth + 1), _to_poly(ir, argn[1], seen, depth + 1)
        return a * b if a is not None and b is not None else None
    if fname in _INT_CASTS and len(argn) == 1:
        return _to_poly(ir, argn[0], seen, depth + 1)
    return None


def _binary_poly(ir: KernelIR, n: tree_sitter.Node, seen: frozenset[str], depth: int) -> Poly | None:
    op = ir.text(n.child_by_field_name("operator"))
    left, right = n.child_by_field_name("left"), n.child_by_field_name("right")
    if left is None or right is None:
        return None
    a = _to_poly(ir, left, seen, depth + 1)
    b = _to_poly(ir, right, seen, depth + 1)
    if a is None or b is None:
        return None
    if op == "+":
        return a + b
    if op == "-":
        return a - b
    if op == "*":
        return a * b
    if op == "<<" and b.value is not None and 0 <= b.value < 63:
        return a * (1 << b.value)
    if op in ("/", "%") and ir._divmod_atoms and (a.value is None or b.value is None) and b != 0:
        num, den = fold_gid(a), fold_gid(b)
        name = f"{'div' if op == '/' else 'mod'}({num}|{den})"
        ir.divmods.setdefault(name, (op, num, den))
        return Poly.sym(name)
    if op in ("/", ">>", "%") and a.value is not None and b.value is not None and b.value != 0:
        return Poly.const(_fold_int_op(op, a.value, b.value))
    return None


def _fold_int_op(op: str, av: int, bv: int) -> int:
    """``av / bv``, ``av >> bv`` or ``av % bv`` with C's truncation toward zero (``bv`` is not 0)."""
    if op == ">>":
        return av >> bv
    got = c_divmod(op, av, bv)
    assert got is not None
    return got


def _unary_poly(ir: KernelIR, n: tree_sitter.Node, seen: frozenset[str], depth: int) -> Poly | None:
    op = ir.text(n.child_by_field_name("operator"))
    arg = n.child_by_field_name("argument")
    a = _to_poly(ir, arg, seen, depth + 1) if arg is not None else None
    if a is None:
        return None
    if op == "-":
        return -a
    if op == "+":
        return a
    return None


def _define_value(ir: KernelIR, name: str) -> int | None:
    """A ``#define`` constant's value, expressions of earlier constants included (``(2 * RADIUS + 1)``)."""
    from kernellsp.source.ir.cexpr import file_constants

    return file_constants(ir.model).get(name)


def _is_loop_var(ir: KernelIR, name: str) -> bool:
    return any(lp.var == name for lp in ir.loops)


def signed_ctype(ctype: str) -> bool:
    """Is this C integer type signed (``int``, ``long``...) rather than unsigned (``unsigned``, ``size_t``)?"""
    words = ctype.replace("const", "").split()
    if any(w in ("unsigned", "size_t", "uint32_t", "uint64_t", "uint", "uint8_t", "uint16_t") for w in words):
        return False
    return " ".join(words) in _SIGNED_INT_TYPES or any(w in ("int", "long", "short") for w in words)
