"""A small, safe expression language for specs and rules.

Specs use it for sizes, element counts and launch shapes (``ceil_div(N, 256)``); rules use it for
their conditions (``spill_stores + spill_loads > 0 and registers >= 128``). Expressions are parsed
with :mod:`ast` and interpreted node by node over a whitelist: there is no ``eval``, no attribute
access, no subscripts, no comprehensions and no calls other than the functions listed in
:data:`FUNCTIONS`. Names resolve only from the mapping the caller passes in.
"""

from __future__ import annotations

import ast
import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

Value = int | float | bool | str | None


class ExprError(ValueError):
    """An expression that cannot be parsed or evaluated; the message says why."""


def _ceil_div(a: Value, b: Value) -> int:
    ia, ib = int(_num(a)), int(_num(b))
    if ib == 0:
        raise ExprError("ceil_div by zero")
    return -(-ia // ib)


def _num(v: Value) -> float | int:
    if isinstance(v, bool):
        return int(v)
    if isinstance(v, int | float):
        return v
    raise ExprError(f"expected a number, got {v!r}")


def _round_up(a: Value, b: Value) -> int:
    return _ceil_div(a, b) * int(_num(b))


FUNCTIONS: dict[str, Callable[..., Value]] = {
    "ceil_div": _ceil_div,
    "cdiv": _ceil_div,
    "round_up": _round_up,
    "min": lambda *a: min(_num(x) for x in a),
    "max": lambda *a: max(_num(x) for x in a),
    "abs": lambda a: abs(_num(a)),
    "int": lambda a: int(_num(a)),
    "float": lambda a: float(_num(a)),
    "log2": lambda a: math.log2(_num(a)),
    "ceil": lambda a: math.ceil(_num(a)),
    "floor": lambda a: math.floor(_num(a)),
    "sqrt": lambda a: math.sqrt(_num(a)),
    "pct": lambda a, b: 100.0 * _num(a) / _num(b) if _num(b) else 0.0,
    "defined": lambda a: a is not None,
}

_BINOPS: dict[type[ast.operator], Callable[[Any, Any], Any]] = {
    ast.Add: lambda a, b: a + b,
    ast.Sub: lambda a, b: a - b,
    ast.Mult: lambda a, b: a * b,
    ast.Div: lambda a, b: a / b,
    ast.FloorDiv: lambda a, b: a // b,
    ast.Mod: lambda a, b: a % b,
    ast.Pow: lambda a, b: a**b,
    ast.LShift: lambda a, b: a << b,
    ast.RShift: lambda a, b: a >> b,
    ast.BitAnd: lambda a, b: a & b,
    ast.BitOr: lambda a, b: a | b,
}

_CMPOPS: dict[type[ast.cmpop], Callable[[Any, Any], bool]] = {
    ast.Eq: lambda a, b: a == b,
    ast.NotEq: lambda a, b: a != b,
    ast.Lt: lambda a, b: a < b,
    ast.LtE: lambda a, b: a <= b,
    ast.Gt: lambda a, b: a > b,
    ast.GtE: lambda a, b: a >= b,
    ast.In: lambda a, b: a in b,
    ast.NotIn: lambda a, b: a not in b,
}


@dataclass(frozen=True)
class Expr:
    """A parsed expression; evaluate it with :meth:`evaluate` over a name mapping."""

    text: str
    tree: ast.expr

    @property
    def names(self) -> frozenset[str]:
        """Every free name the expression reads (function names excluded)."""
        out: set[str] = set()
        for node in ast.walk(self.tree):
            if isinstance(node, ast.Name) and node.id not in FUNCTIONS:
                out.add(node.id)
        return frozenset(out)

    def evaluate(self, names: Mapping[str, Value]) -> Value:
        """Evaluate over ``names``; an unknown name or a bad operation raises :class:`ExprError`."""
        try:
            return _eval(self.tree, names)
        except ExprError:
            raise
        except (ZeroDivisionError, OverflowError) as exc:
            raise ExprError(f"{self.text!r}: {exc}") from exc
        except TypeError as exc:
            raise ExprError(f"{self.text!r}: {exc}") from exc


_ALLOWED_NODES = (
    ast.Expression,
    ast.BoolOp,
    ast.BinOp,
    ast.UnaryOp,
    ast.Compare,
    ast.Call,
    ast.Name,
    ast.Constant,
    ast.IfExp,
    ast.Tuple,
    ast.List,
    ast.Load,
    ast.And,
    ast.Or,
    ast.Not,
    ast.USub,
    ast.UAdd,
    *_BINOPS.keys(),
    *_CMPOPS.keys(),
)


#: How a refused construct is named to the user (ast class names mean nothing to them).
_NODE_WORDS = {
    "Subscript": "indexing ('[...]')",
    "Lambda": "a lambda",
    "Attribute": "attribute access",
    "Starred": "unpacking ('*')",
    "Dict": "a dictionary",
    "Set": "a set",
    "ListComp": "a comprehension",
    "GeneratorExp": "a comprehension",
    "DictComp": "a comprehension",
    "SetComp": "a comprehension",
    "NamedExpr": "an assignment (':=')",
    "JoinedStr": "an f-string",
    "Await": "await",
    "Yield": "yield",
    "Slice": "a slice",
}


@lru_cache(maxsize=4096)
def parse(text: str) -> Expr:
    """Parse ``text``; anything outside the whitelist raises :class:`ExprError`.

    C-style operators ``&&``, ``||`` and ``!`` are accepted as ``and``, ``or`` and ``not`` so that
    expressions copied from CUDA source read naturally.
    """
    src = str(text).strip()
    if not src:
        raise ExprError("empty expression")
    py = src.replace("&&", " and ").replace("||", " or ")
    py = _replace_bang(py).strip()
    try:
        tree = ast.parse(py, mode="eval")
    except SyntaxError as exc:
        raise ExprError(f"cannot parse {src!r}: {exc.msg}") from None
    known = ", ".join(sorted(FUNCTIONS))
    for node in ast.walk(tree):
        if not isinstance(node, _ALLOWED_NODES):
            what = _NODE_WORDS.get(type(node).__name__, type(node).__name__)
            if isinstance(node, ast.Attribute):
                what = f"attribute access ('.{node.attr}')"
            raise ExprError(
                f"{src!r}: {what} is not allowed; an expression holds numbers, size names, arithmetic, "
                f"comparisons and the functions {known}"
            )
        if isinstance(node, ast.Call):
            if not isinstance(node.func, ast.Name):
                raise ExprError(
                    f"{src!r}: only the functions {known} can be called, not {ast.unparse(node.func)!r}"
                )
            if node.func.id not in FUNCTIONS:
                raise ExprError(f"{src!r}: unknown function {node.func.id!r} (known: {known})")
            if node.keywords:
                raise ExprError(f"{src!r}: keyword arguments are not allowed")
    return Expr(src, tree.body)


def _replace_bang(s: str) -> str:
    out = []
    for i, ch in enumerate(s):
        if ch == "!" and (i + 1 >= len(s) or s[i + 1] != "="):
            out.append(" not ")
        else:
            out.append(ch)
    return "".join(out)


def _eval(node: ast.expr, names: Mapping[str, Value]) -> Any:
    if isinstance(node, ast.Constant):
        if isinstance(node.value, int | float | str | bool) or node.value is None:
            return node.value
        raise ExprError(f"constant {node.value!r} is not allowed")
    if isinstance(node, ast.Name):
        return _eval_name(node, names)
    if isinstance(node, ast.BinOp):
        return _eval_binop(node, names)
    if isinstance(node, ast.UnaryOp):
        v = _eval(node.operand, names)
        if isinstance(node.op, ast.Not):
            return not v
        if v is None:
            return None
        return -v if isinstance(node.op, ast.USub) else +v
    if isinstance(node, ast.BoolOp):
        return _eval_boolop(node, names)
    if isinstance(node, ast.Compare):
        return _eval_compare(node, names)
    if isinstance(node, ast.IfExp):
        return _eval(node.body, names) if _eval(node.test, names) else _eval(node.orelse, names)
    if isinstance(node, ast.Tuple | ast.List):
        return tuple(_eval(e, names) for e in node.elts)
    if isinstance(node, ast.Call):
        assert isinstance(node.func, ast.Name)
        args = [_eval(a, names) for a in node.args]
        if node.func.id != "defined" and any(a is None for a in args):
            return None
        return FUNCTIONS[node.func.id](*args)
    raise ExprError(f"{type(node).__name__} is not allowed")


def _eval_name(node: ast.Name, names: Mapping[str, Value]) -> Any:
    if node.id in ("true", "True"):
        return True
    if node.id in ("false", "False"):
        return False
    if node.id not in names:
        raise ExprError(f"unknown name {node.id!r}")
    return names[node.id]


def _eval_binop(node: ast.BinOp, names: Mapping[str, Value]) -> Any:
    a, b = _eval(node.left, names), _eval(node.right, names)
    if a is None or b is None:
        return None
    if isinstance(node.op, ast.Pow) and abs(_num(b)) > 64:
        raise ExprError("exponent too large")
    if isinstance(node.op, ast.Div) and isinstance(a, int) and isinstance(b, int):
        # Sizes are integers; C semantics (truncation) is what a CUDA author expects.
        if b == 0:
            raise ExprError("division by zero")
        q = abs(a) // abs(b)
        return q if (a >= 0) == (b >= 0) else -q
    if isinstance(node.op, ast.Mod) and isinstance(a, int) and isinstance(b, int):
        # C semantics to match `/`: the remainder takes the dividend's sign, a == (a/b)*b + a%b.
        if b == 0:
            raise ExprError("modulo by zero")
        r = abs(a) % abs(b)
        return r if a >= 0 else -r
    return _BINOPS[type(node.op)](a, b)


def _eval_boolop(node: ast.BoolOp, names: Mapping[str, Value]) -> Any:
    """Python's ``and``/``or``: the first deciding operand, later operands not evaluated."""
    if isinstance(node.op, ast.And):
        result: Any = True
        for v in node.values:
            result = _eval(v, names)
            if not result:
                return result
        return result
    result = False
    for v in node.values:
        result = _eval(v, names)
        if result:
            return result
    return result


def _eval_compare(node: ast.Compare, names: Mapping[str, Value]) -> bool:
    """A chained comparison; false when a side has no value."""
    left = _eval(node.left, names)
    for op, comp in zip(node.ops, node.comparators, strict=True):
        right = _eval(comp, names)
        if left is None or right is None:
            return False
        if not _CMPOPS[type(op)](left, right):
            return False
        left = right
    return True


def evaluate(text: str | int | float, names: Mapping[str, Value]) -> Value:
    """Parse (cached) and evaluate; numbers pass through unchanged."""
    if isinstance(text, bool):
        return text
    if isinstance(text, int | float):
        return text
    return parse(text).evaluate(names)


def evaluate_int(text: str | int | float, names: Mapping[str, Value]) -> int:
    """Evaluate to an integer; a non-integral result raises :class:`ExprError`."""
    v = evaluate(text, names)
    if isinstance(v, bool) or v is None:
        raise ExprError(f"{text!r} is not a number")
    if isinstance(v, float):
        if not v.is_integer():
            raise ExprError(f"{text!r} = {v} is not an integer")
        return int(v)
    if isinstance(v, int):
        return v
    raise ExprError(f"{text!r} = {v!r} is not a number")
