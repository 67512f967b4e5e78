"""Index macros: a subscript ``base[MACRO(args)]`` through a one-line integer ``#define``."""

from __future__ import annotations

import re

from kernellsp.source.ir import Access, Poly
from kernellsp.source.ir.control import _strip_parens

_MACRO = re.compile(r"^[ \t]*#[ \t]*define[ \t]+([A-Za-z_]\w*)\(([^)]*)\)[ \t]+(.+?)[ \t]*$", re.M)
_TOKEN = re.compile(r"\s*(?:(\d+)[uUlL]*|([A-Za-z_]\w*)|(.))")


def _function_macros(text: str) -> dict[str, tuple[list[str], str]]:
    """One-line function-like macros of the file: name -> (parameters, body)."""
    return {
        m.group(1): ([p.strip() for p in m.group(2).split(",") if p.strip()], m.group(3))
        for m in _MACRO.finditer(text)
        if not m.group(3).endswith("\\")
    }


def _in_subscript_index(n: object) -> bool:
    p = n.parent  # type: ignore[attr-defined]
    while p is not None and p.type in (
        "parenthesized_expression",
        "binary_expression",
        "call_expression",
        "argument_list",
        "subscript_argument_list",
    ):
        if p.type == "subscript_argument_list":
            return True
        p = p.parent
    return False


def _macro_index(ir: object, a: Access, macros: dict[str, tuple[list[str], str]]) -> Poly | None:
    """The element index of ``a`` when it is ``base[MACRO(args)]`` with a one-line integer macro: the body's
    ``+ - *`` arithmetic over the arguments' polynomials (other names are parameters)."""
    from kernellsp.source.ir.expressions import _pointer_base, _subscript_parts

    if a.node.type != "subscript_expression":
        return None
    base, idx = _subscript_parts(ir, a.node)  # type: ignore[arg-type]
    if base is None or idx is None:
        return None
    idx = _strip_parens(ir, idx)  # type: ignore[arg-type]
    if idx.type != "call_expression":
        return None
    name = ir.text(idx.child_by_field_name("function"))  # type: ignore[attr-defined]
    if name not in macros:
        return None
    params, body = macros[name]
    args_node = idx.child_by_field_name("arguments")
    args = [c for c in args_node.named_children if c.type != "comment"] if args_node is not None else []
    if len(args) != len(params):
        return None
    values: dict[str, Poly] = {}
    for pname, arg in zip(params, args, strict=True):
        v = ir.poly(arg, divmod=True)  # type: ignore[attr-defined]
        if v is None:
            return None
        values[pname] = v
    got = _eval_int_expr(body, values)
    if got is None:
        return None
    pnames = {p.name for p in ir.params if p.is_pointer}  # type: ignore[attr-defined]
    param, off = _pointer_base(ir, base, pnames, 0)  # type: ignore[arg-type]
    if param is None or off is None:
        return None
    return off + got


def _int_tokens(text: str) -> list[tuple[str, str]]:
    """The tokens of an integer macro body: ``("num", "12")``, ``("name", "ld")``, ``("op", "*")``."""
    toks: list[tuple[str, str]] = []
    pos = 0
    while pos < len(text):
        m = _TOKEN.match(text, pos)
        if m is None or m.end() == pos:
            break
        pos = m.end()
        if m.group(1):
            toks.append(("num", m.group(1)))
        elif m.group(2):
            toks.append(("name", m.group(2)))
        elif m.group(3) and not m.group(3).isspace():
            toks.append(("op", m.group(3)))
    return toks


def _eval_int_expr(text: str, values: dict[str, Poly]) -> Poly | None:
    """``text`` (integers, names, ``+ - *``, parentheses) as a polynomial; names not in ``values`` are symbols."""
    toks = _int_tokens(text)
    i = 0

    def atom() -> Poly | None:
        nonlocal i
        if i >= len(toks):
            return None
        kind, val = toks[i]
        i += 1
        if kind == "num":
            return Poly.const(int(val))
        if kind == "name":
            return values.get(val, Poly.sym(val))
        if val == "(":
            v = add()
            if v is None or i >= len(toks) or toks[i] != ("op", ")"):
                return None
            i += 1
            return v
        if val == "-":
            v = atom()
            return -v if v is not None else None
        return None

    def mul() -> Poly | None:
        nonlocal i
        v = atom()
        while v is not None and i < len(toks) and toks[i] == ("op", "*"):
            i += 1
            r = atom()
            v = v * r if r is not None else None
        return v

    def add() -> Poly | None:
        nonlocal i
        v = mul()
        while v is not None and i < len(toks) and toks[i] in (("op", "+"), ("op", "-")):
            op = toks[i][1]
            i += 1
            r = mul()
            v = (v + r if op == "+" else v - r) if r is not None else None
        return v

    out = add()
    return out if i == len(toks) else None
