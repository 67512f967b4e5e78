"""The strided-access probe: an index's step per ``threadIdx.x``, by evaluating it at random points."""

from __future__ import annotations

import random
import re
from typing import TYPE_CHECKING

from kernellsp.source import exprs
from kernellsp.source.facts.body import _Ctx

if TYPE_CHECKING:
    import tree_sitter


# --------------------------------------------------------------------------------------------------
# Strided-access probe: evaluate the index as a function of threadIdx.x.


class _NotLinear(Exception):
    pass


def _to_expr(ctx: _Ctx, n: tree_sitter.Node, depth: int = 0, seen: frozenset[str] = frozenset()) -> str:
    """C expression → kernellsp.source.exprs text, substituting single local definitions."""
    if depth > 40:
        raise _NotLinear
    t = n.type
    if t == "number_literal":
        txt = ctx.text(n).rstrip("uUlLfF")
        if txt.lower().startswith("0x"):
            return str(int(txt, 16))
        return txt
    if t == "identifier":
        return _identifier_expr(ctx, n, depth, seen)
    if t == "field_expression":
        arg = n.child_by_field_name("argument")
        fld = n.child_by_field_name("field")
        if arg is not None and fld is not None and arg.type == "identifier":
            return f"{ctx.text(arg)}_{ctx.text(fld)}"
        raise _NotLinear
    if t == "parenthesized_expression":
        inner = next((c for c in n.children if c.is_named), None)
        if inner is None:
            raise _NotLinear
        return "(" + _to_expr(ctx, inner, depth + 1, seen) + ")"
    if t == "cast_expression":
        value = n.child_by_field_name("value")
        if value is None:
            raise _NotLinear
        return _to_expr(ctx, value, depth + 1, seen)
    if t == "binary_expression":
        return _binary_expr(ctx, n, depth, seen)
    if t == "unary_expression":
        op = ctx.text(n.child_by_field_name("operator"))
        arg = n.child_by_field_name("argument")
        if op in ("-", "+") and arg is not None:
            return f"({op}{_to_expr(ctx, arg, depth + 1, seen)})"
    raise _NotLinear


def _identifier_expr(ctx: _Ctx, n: tree_sitter.Node, depth: int, seen: frozenset[str]) -> str:
    """A local with one definition is substituted, a numeric ``#define`` is its number, any other name stays."""
    name = ctx.text(n)
    defs = ctx.defs.get(name, [])
    if len(defs) == 1 and name not in seen:
        return "(" + _to_expr(ctx, defs[0], depth + 1, seen | {name}) + ")"
    if name in ctx.model.defines and re.fullmatch(r"\(?\s*-?\d+\s*\)?", ctx.model.defines[name] or ""):
        return ctx.model.defines[name].strip("() ")
    return name


def _binary_expr(ctx: _Ctx, n: tree_sitter.Node, depth: int, seen: frozenset[str]) -> str:
    op = ctx.text(n.child_by_field_name("operator"))
    if op not in ("+", "-", "*", "/", "%", "<<", ">>", "&", "|"):
        raise _NotLinear
    left = n.child_by_field_name("left")
    right = n.child_by_field_name("right")
    if left is None or right is None:
        raise _NotLinear
    pyop = "//" if op == "/" else op
    return f"({_to_expr(ctx, left, depth + 1, seen)} {pyop} {_to_expr(ctx, right, depth + 1, seen)})"


def _stride(ctx: _Ctx, index: tree_sitter.Node) -> tuple[int, str] | None:
    """Elements the index advances per ``threadIdx.x`` step, and the names that stride depends on."""
    try:
        text = _to_expr(ctx, index)
        expr = exprs.parse(text)
    except (_NotLinear, exprs.ExprError, ValueError):
        return None
    names = set(expr.names)
    if "threadIdx_x" not in names:
        return None
    rng = random.Random(1234)

    def assignment() -> dict[str, exprs.Value]:
        vals: dict[str, exprs.Value] = {}
        for nm in names:
            if nm.startswith("blockDim"):
                vals[nm] = 256 if nm.endswith("x") else 4
            elif nm.startswith("threadIdx"):
                vals[nm] = rng.randrange(0, 4)
            elif nm.startswith(("blockIdx", "gridDim")):
                vals[nm] = rng.randrange(1, 64)
            else:
                vals[nm] = rng.randrange(1000, 5000)
        return vals

    strides = []
    for _ in range(4):
        vals = assignment()
        try:
            a = expr.evaluate(vals)
            vals["threadIdx_x"] = int(vals["threadIdx_x"]) + 1  # type: ignore[arg-type]
            b = expr.evaluate(vals)
        except exprs.ExprError:
            return None
        if not isinstance(a, int) or not isinstance(b, int):
            return None
        strides.append(b - a)
    if len(set(strides)) != 1:
        # Depends on other variables: name them.
        deps = []
        base = assignment()
        for nm in sorted(names - {"threadIdx_x"}):
            v1 = dict(base)
            v2 = dict(base)
            v2[nm] = int(v2[nm]) + 17  # type: ignore[arg-type]
            try:
                d1 = int(expr.evaluate({**v1, "threadIdx_x": 1})) - int(  # type: ignore[arg-type]
                    expr.evaluate({**v1, "threadIdx_x": 0})  # type: ignore[arg-type]
                )
                d2 = int(expr.evaluate({**v2, "threadIdx_x": 1})) - int(  # type: ignore[arg-type]
                    expr.evaluate({**v2, "threadIdx_x": 0})  # type: ignore[arg-type]
                )
            except (exprs.ExprError, TypeError, ValueError):
                return None
            if d1 != d2:
                deps.append(nm.replace("_", "."))
        typical = max(strides, key=abs)
        return typical, ", ".join(deps)
    return strides[0], ""
