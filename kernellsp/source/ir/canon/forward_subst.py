"""``forward-subst``: single-assignment temporaries replaced by their values where they are used.

A local ``T x = e;`` that is never written again is substituted into its uses and its declaration
removed when doing so cannot change what the program computes:

* **index temporaries**: ``e`` is integer arithmetic without loads, calls or side effects, over
  names that are themselves never written (parameters, builtins, other single-assignment locals):
  every use sees the same value. ``int idx = row * N + col; out[idx] = in[idx];`` becomes
  ``out[row * N + col] = in[row * N + col];``;
* **value temporaries used once**: ``e`` has no side effects, the only use is in the same loop
  nest, and nothing between the declaration and the use writes memory, calls something that might,
  or waits at a barrier: ``float v = a[i]; b[i] = v * 2;`` becomes ``b[i] = a[i] * 2;``.

The value keeps ``x``'s type: it is cast to it unless it already has that type.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from kernellsp.source.ir.canon.unit import (
    TRUTH_OPERATORS,
    Change,
    Unit,
    declared_name,
    enclosing_loops,
    expr_type,
    has_side_effects,
    identifier_uses,
    norm_ctype,
    parenthesize,
    reads_memory,
    walk,
    writes_of,
)

if TYPE_CHECKING:
    from tree_sitter import Node

NAME = "forward-subst"
SUMMARY = "single-assignment temporaries (index arithmetic; values used once) substituted into their uses"

_INTEGRAL = frozenset(
    [
        "int",
        "unsigned",
        "signed",
        "long",
        "short",
        "size_t",
        "ptrdiff_t",
        "int32_t",
        "uint32_t",
        "int64_t",
        "uint64_t",
        "uint",
        "auto",
    ]
)


def run(unit: Unit) -> Change | None:
    for d in walk(unit.body):
        if d.type != "declaration" or d.parent is None or d.parent.type != "compound_statement":
            continue
        got = _candidate(unit, d)
        if got is None:
            continue
        name, ctype, value = got
        scope = d.parent
        uses = [u for u in identifier_uses(unit, scope, name) if u.start_byte > d.end_byte]
        if writes_of(unit, scope, name):
            continue
        if _coordinate(unit, value):
            continue  # a thread coordinate keeps its name: recipes bind to it (`row`, `col`, `i`)
        if _index_like(unit, value, ctype) or (len(uses) == 1 and _safe_single_use(unit, d, value, uses[0])):
            if any(_shadowed(unit, u, d) for u in uses):
                continue
            text = _typed_value(unit, value, ctype)
            change = Change()
            change.delete(unit.data, d)
            for u in uses:
                change.replace(u, parenthesize(text))
            change.notes.append(
                f"`{name}` = {' '.join(unit.text(value).split())} substituted ({len(uses)} use(s))"
            )
            return change
    return None


def _candidate(unit: Unit, d: Node) -> tuple[str, str, Node] | None:
    decls = d.children_by_field_name("declarator")
    if len(decls) != 1 or decls[0].type != "init_declarator":
        return None
    target = decls[0].child_by_field_name("declarator")
    value = decls[0].child_by_field_name("value")
    if (
        target is None
        or value is None
        or target.type != "identifier"
        or value.type in ("initializer_list", "argument_list")
    ):
        return None
    text = unit.text(d)
    if any(w in text.split("=")[0].split() for w in ("__shared__", "static", "volatile", "extern")):
        return None
    tnode = d.child_by_field_name("type")
    if tnode is None:
        return None
    ctype = norm_ctype(unit.text(tnode))
    if has_side_effects(unit, value):
        return None
    names = declared_name(d, unit.data)
    return names[0][0], ctype, value


def _coordinate(unit: Unit, value: Node) -> bool:
    """Is ``value`` one thread coordinate: ``threadIdx.a``, ``blockIdx.a``, or the global index of an axis, in any spelling?"""
    from kernellsp.source.ir.poly import THREAD_SYMBOLS, fold_gid

    ir = _poly_reader(unit)
    p = ir.poly(value) if ir is not None else None
    if p is None:
        return False
    p = fold_gid(p)
    return (
        len(p.terms) == 1
        and next(iter(p.terms)) in {(s,) for s in THREAD_SYMBOLS}
        and next(iter(p.terms.values())) == 1
    )


def _poly_reader(unit: Unit):  # type: ignore[no-untyped-def]
    from kernellsp.source.ir.kernel import kernel_ir

    return kernel_ir(unit.model, unit.fn)


def _index_like(unit: Unit, value: Node, ctype: str) -> bool:
    if not set(ctype.split()) <= _INTEGRAL or reads_memory(unit, value):
        return False
    ir = _poly_reader(unit)
    if ir is None:
        return False
    from kernellsp.source.ir.expressions import uniform_value

    if ir.poly(value) is None and uniform_value(ir, value):
        return False  # a uniform atom (`n / 2`): named, as uniform-atoms leaves it
    for n in walk(value):
        if n.type == "call_expression" or n.type in ("string_literal", "char_literal"):
            return False
        if (
            n.type == "number_literal"
            and any(c in unit.text(n) for c in ".eEfF")
            and not unit.text(n).lower().startswith("0x")
        ):
            return False
        if n.type == "identifier":
            p = n.parent
            if p is not None and p.type == "field_expression":
                continue
            if writes_of(unit, unit.body, unit.text(n)):
                return False  # its value at the use may differ from its value here
            ty = expr_type(unit, n)
            if ty is None or not set(ty.split()) <= _INTEGRAL:
                return False
    return True


def _safe_single_use(unit: Unit, d: Node, value: Node, use: Node) -> bool:
    """Nothing between the declaration and the use can change the value, and the use runs as often as the declaration."""
    block = d.parent
    if block is None or enclosing_loops(use, block):
        return False
    for n in walk(value):
        if n.type == "identifier" and writes_of(unit, unit.body, unit.text(n)):
            p = n.parent
            if p is not None and p.type == "field_expression":
                continue
            return False
    # Statements strictly between, and the use's own statement up to the use.
    stmt = use
    while stmt.parent is not None and stmt.parent != block:
        stmt = stmt.parent
    between = [
        s for s in block.named_children if d.end_byte <= s.start_byte and s.end_byte <= stmt.start_byte
    ]
    reads = reads_memory(unit, value)
    for s in between:
        if _writes_or_waits(unit, s, reads):
            return False
    if stmt.type not in ("expression_statement", "declaration", "return_statement", "if_statement"):
        return False  # a loop would evaluate it again and again
    # Under an `if` the value is computed only where it is used: never more often, never elsewhere.
    return not _writes_or_waits_before(unit, stmt, use, reads)


def _writes_or_waits(unit: Unit, n: Node, reads: bool) -> bool:
    for c in walk(n):
        if c.type in ("assignment_expression", "update_expression"):
            target = (
                c.child_by_field_name("left")
                if c.type == "assignment_expression"
                else c.child_by_field_name("argument")
            )
            if target is not None and target.type != "identifier" and reads:
                return True
        if c.type == "call_expression" and has_side_effects(unit, c):
            return True
    return False


def _writes_or_waits_before(unit: Unit, stmt: Node, use: Node, reads: bool) -> bool:
    """Does anything in ``stmt`` that runs before ``use`` write memory (when the value reads it) or wait?"""
    for c in walk(stmt):
        if c.start_byte >= use.start_byte:
            break
        if c.end_byte > use.start_byte:
            continue  # encloses the use: its own effect happens after the value is read
        if c.type == "call_expression" and has_side_effects(unit, c):
            return True
        if reads and c.type in ("assignment_expression", "update_expression"):
            target = (
                c.child_by_field_name("left")
                if c.type == "assignment_expression"
                else c.child_by_field_name("argument")
            )
            if target is not None and target.type != "identifier":
                return True
    return False


def _typed_value(unit: Unit, value: Node, ctype: str) -> str:
    text = unit.text(value)
    if ctype in ("auto", "const auto"):
        return text
    if (
        ctype == "bool"
        and value.type == "binary_expression"
        and unit.text(value.child_by_field_name("operator")) in TRUTH_OPERATORS
    ):
        return text  # a comparison is already a truth value
    ty = expr_type(unit, value)
    if ty is not None and norm_ctype(ty) == ctype:
        return text
    if value.type == "number_literal":
        return text if ctype in ("int",) and text.isdigit() else f"({ctype})({text})"
    if _index_like(unit, value, ctype) and ctype in (
        "int",
        "long",
        "long long",
        "size_t",
        "unsigned int",
        "unsigned",
    ):
        return f"({ctype})({text})"
    return f"({ctype})({text})"


def _shadowed(unit: Unit, use: Node, decl: Node) -> bool:
    """A use that refers to a nearer declaration of the same name."""
    name = unit.text(use)
    p = use.parent
    while p is not None and p != decl.parent:
        for c in p.named_children:
            if (
                c.type == "declaration"
                and c.start_byte < use.start_byte
                and any(n == name for n, _i, _v in declared_name(c, unit.data))
            ):
                return True
        p = p.parent
    return False
