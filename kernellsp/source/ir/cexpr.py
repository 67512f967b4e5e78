"""C integer constant expressions: macro expansion and evaluation, the one evaluator of the source layer.

Launch configurations (``dim3 grid((n + TILE - 1) / TILE, m)``), ``#define`` and ``constexpr``
constants, template arguments and array extents are C expressions. They are evaluated here, over the
tree-sitter parse of the expression, with C's integer semantics: ``/`` and ``%`` truncate toward
zero, comparisons and ``!`` give 0 or 1, ``?:`` picks a branch, casts to integer types keep the
value, ``sizeof`` knows the scalar types. Names resolve from an environment of integers (or
``dim3``-like triples for ``.x``/``.y``/``.z``); object-like and function-like macros of the file are
expanded first. Anything else (a call, a float, an unknown name) makes the value unknown: ``None``,
never an exception.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import tree_sitter

    from kernellsp.source.model import SourceModel

#: An environment value: an integer, or the three components of a ``dim3``.
EnvValue = int | tuple[int, int, int]

_IDENT = re.compile(r"[A-Za-z_]\w*")
_INT_LIT = re.compile(r"^(0[xX][0-9a-fA-F]+|0[bB][01]+|\d+)([uUlL]*)$")
_SIZEOF = {
    "char": 1,
    "signed char": 1,
    "unsigned char": 1,
    "int8_t": 1,
    "uint8_t": 1,
    "short": 2,
    "unsigned short": 2,
    "int16_t": 2,
    "uint16_t": 2,
    "__half": 2,
    "half": 2,
    "__nv_bfloat16": 2,
    "int": 4,
    "unsigned": 4,
    "unsigned int": 4,
    "uint": 4,
    "ushort": 2,
    "uchar": 1,
    "ulong": 8,
    "int32_t": 4,
    "uint32_t": 4,
    "float": 4,
    "long": 8,
    "unsigned long": 8,
    "long long": 8,
    "unsigned long long": 8,
    "int64_t": 8,
    "uint64_t": 8,
    "size_t": 8,
    "double": 8,
    "float2": 8,
    "float4": 16,
    "int4": 16,
    "double2": 16,
}
_INTEGRAL_DECL = re.compile(
    r"^(?:(?:static|inline|constexpr|const|unsigned|signed|int|long|short|char|size_t|int32_t|"
    r"uint32_t|int64_t|uint64_t|uint|auto)\s*)+$"
)
_MIN_MAX = {"min": min, "max": max, "umin": min, "umax": max, "std::min": min, "std::max": max}


def int_literal(text: str) -> int | None:
    """The value of a C integer literal (``0x10``, ``256u``, ``1L``), or ``None``."""
    text = text.strip()
    if text.startswith("-"):
        v = int_literal(text[1:])
        return -v if v is not None else None
    m = _INT_LIT.match(text)
    if not m:
        return None
    body = m.group(1)
    if body[:2].lower() == "0x":
        return int(body, 16)
    if body[:2].lower() == "0b":
        return int(body[2:], 2)
    if len(body) > 1 and body.startswith("0"):
        return int(body, 8)
    return int(body)


def c_divmod(op: str, a: int, b: int) -> int | None:
    """C's ``a / b`` or ``a % b`` on integers: the quotient truncates toward zero (``None`` for ``b == 0``)."""
    if b == 0:
        return None
    q = abs(a) // abs(b)
    q = q if (a >= 0) == (b >= 0) else -q
    return q if op == "/" else a - q * b


def split_args(text: str) -> list[str]:
    """The top-level comma-separated arguments of ``text`` (the inside of a call's parentheses)."""
    out: list[str] = []
    depth = 0
    cur: list[str] = []
    for ch in text:
        if ch in "([{":
            depth += 1
        elif ch in ")]}":
            depth -= 1
        if ch == "," and depth == 0:
            out.append("".join(cur).strip())
            cur = []
            continue
        cur.append(ch)
    last = "".join(cur).strip()
    if last or out:
        out.append(last)
    return out


def _call_args_at(text: str, open_paren: int) -> tuple[list[str], int] | None:
    """Arguments of the call whose ``(`` is at ``open_paren``, and the index just past its ``)``."""
    depth = 0
    for i in range(open_paren, len(text)):
        ch = text[i]
        if ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
            if depth == 0:
                return split_args(text[open_paren + 1 : i]), i + 1
    return None


def expand_macros(
    text: str,
    defines: Mapping[str, str],
    macros: Mapping[str, tuple[list[str], str]],
    depth: int = 8,
) -> str:
    """``text`` with the file's macros expanded, as the preprocessor would for these simple forms.

    Object-like macros become their replacement, function-like ones their replacement with each
    parameter replaced by the (parenthesised by the macro's author, or not) argument text; a macro is
    not expanded inside its own expansion. Macros using ``#`` or ``##`` are left alone: their
    expansion is not a plain substitution.
    """
    for _ in range(depth):
        out: list[str] = []
        i = 0
        changed = False
        while i < len(text):
            m = _IDENT.match(text, i)
            if m is None or (i > 0 and (text[i - 1].isalnum() or text[i - 1] in "_.")):
                # Not an identifier start (or a member name after `.`): copy one character.
                if m is not None:
                    out.append(m.group(0))
                    i = m.end()
                else:
                    out.append(text[i])
                    i += 1
                continue
            name = m.group(0)
            j = m.end()
            if name in macros and "#" not in macros[name][1]:
                k = j
                while k < len(text) and text[k] in " \t":
                    k += 1
                if k < len(text) and text[k] == "(":
                    got = _call_args_at(text, k)
                    if got is not None:
                        args, end = got
                        params, body = macros[name]
                        out.append("(" + substitute_params(body, params, args) + ")")
                        i = end
                        changed = True
                        continue
            if name in defines and defines[name].strip() and "#" not in defines[name]:
                out.append("(" + defines[name].strip() + ")")
                i = j
                changed = True
                continue
            out.append(name)
            i = j
        text = "".join(out)
        if not changed:
            break
    return text


def return_functions(model: SourceModel) -> dict[str, tuple[list[str], str]]:
    """Functions of the file whose body is one ``return e;`` (``divUp``, ``ceil_div``...), as macros."""
    cached: dict[str, tuple[list[str], str]] | None = getattr(model, "_return_functions", None)
    if cached is not None:
        return cached
    out: dict[str, tuple[list[str], str]] = {}
    for f in model.functions:
        if not f.has_body or f.body_span is None or f.kind == "global":
            continue
        body = model.text[f.body_span.start_byte : f.body_span.end_byte].strip()
        m = re.fullmatch(r"\{\s*return\s+(.*?);\s*\}", body, re.DOTALL)
        if m and ";" not in m.group(1):
            out[f.name] = ([p.name for p in f.params], m.group(1))
    setattr(model, "_return_functions", out)  # noqa: B010 - derived data cached beside the text
    return out


def substitute_params(body: str, params: list[str], args: list[str]) -> str:
    """A macro body (or expression) with each parameter identifier replaced by its argument's text."""
    names = dict(zip(params, args, strict=False))
    if "..." in params:
        i = params.index("...")
        names["__VA_ARGS__"] = ", ".join(args[i:])

    def one(m: re.Match[str]) -> str:
        start = m.start()
        if start > 0 and body[start - 1] == ".":
            return m.group(0)
        return names.get(m.group(0), m.group(0))

    return _IDENT.sub(one, body)


def parse_expression(text: str) -> tuple[tree_sitter.Node, bytes] | None:
    """The tree-sitter node of a C expression written as text (``None`` when it does not parse)."""
    from kernellsp.source.model import parse_source

    src = f"int __kl_expr_value = ({text});\n"
    model = parse_source(src)
    if model.tree is None or model.syntax_errors:
        return None
    root = model.tree.root_node
    decl = root.named_children[0] if root.named_children else None
    if decl is None or decl.type != "declaration":
        return None
    init = decl.child_by_field_name("declarator")
    value = init.child_by_field_name("value") if init is not None else None
    if value is None:
        return None
    return value, src.encode()


def evaluate_text(
    text: str,
    env: Mapping[str, EnvValue] | None = None,
    model: SourceModel | None = None,
) -> int | None:
    """The integer value of a C expression (macros of ``model`` expanded first), or ``None``."""
    if model is not None:
        text = expand_macros(text, model.defines, {**return_functions(model), **model.macros})
    got = parse_expression(text)
    if got is None:
        return None
    node, data = got
    return evaluate_node(node, data, env or {})


def evaluate_node(node: tree_sitter.Node, data: bytes, env: Mapping[str, EnvValue]) -> int | None:
    """The integer value of an expression node (names from ``env``), or ``None``."""
    try:
        return _eval(node, data, env, 0)
    except (ZeroDivisionError, OverflowError, RecursionError):
        return None


def _text(node: tree_sitter.Node | None, data: bytes) -> str:
    if node is None:
        return ""
    return data[node.start_byte : node.end_byte].decode("utf-8", errors="replace")


def _eval(n: tree_sitter.Node | None, data: bytes, env: Mapping[str, EnvValue], depth: int) -> int | None:
    if n is None or depth > 80:
        return None
    t = n.type
    if t == "number_literal":
        return int_literal(_text(n, data))
    if t in ("true", "false"):
        return 1 if t == "true" else 0
    if t == "identifier":
        v = env.get(_text(n, data))
        return v if isinstance(v, int) else None
    if t in ("parenthesized_expression", "condition_clause"):
        inner = next((c for c in n.named_children if c.type != "comment"), None)
        return _eval(inner, data, env, depth + 1) if inner is not None else None
    handler = _HANDLERS.get(t)
    return handler(n, data, env, depth) if handler is not None else None


def _eval_cast(n: tree_sitter.Node, data: bytes, env: Mapping[str, EnvValue], depth: int) -> int | None:
    tn = n.child_by_field_name("type")
    if tn is not None and any(w in _text(tn, data) for w in ("float", "double", "half", "*")):
        return None
    val = n.child_by_field_name("value")
    return _eval(val, data, env, depth + 1) if val is not None else None


def _eval_unary(n: tree_sitter.Node, data: bytes, env: Mapping[str, EnvValue], depth: int) -> int | None:
    op = _text(n.child_by_field_name("operator"), data)
    a = _eval(n.child_by_field_name("argument"), data, env, depth + 1)
    if a is None:
        return None
    return {"-": -a, "+": a, "!": int(not a), "~": ~a}.get(op)


def _eval_conditional(
    n: tree_sitter.Node, data: bytes, env: Mapping[str, EnvValue], depth: int
) -> int | None:
    c = _eval(n.child_by_field_name("condition"), data, env, depth + 1)
    if c is None:
        return None
    branch = n.child_by_field_name("consequence" if c else "alternative")
    return _eval(branch, data, env, depth + 1) if branch is not None else None


def _eval_sizeof(n: tree_sitter.Node, data: bytes, env: Mapping[str, EnvValue], depth: int) -> int | None:
    tn = n.child_by_field_name("type") or n.child_by_field_name("value")
    if tn is None:
        return None
    # `sizeof(uint)` of a typedef name parses as the size of a parenthesised expression.
    name = _text(tn, data).strip().strip("()").replace("const", "")
    return _SIZEOF.get(" ".join(name.split()))


def _eval_field(n: tree_sitter.Node, data: bytes, env: Mapping[str, EnvValue], depth: int = 0) -> int | None:
    arg, fld = n.child_by_field_name("argument"), n.child_by_field_name("field")
    if arg is None or fld is None:
        return None
    v = env.get(_text(arg, data))
    axis = {"x": 0, "y": 1, "z": 2}.get(_text(fld, data))
    if isinstance(v, tuple) and axis is not None:
        return v[axis]
    return None


def _eval_binary(n: tree_sitter.Node, data: bytes, env: Mapping[str, EnvValue], depth: int) -> int | None:
    op = _text(n.child_by_field_name("operator"), data)
    a = _eval(n.child_by_field_name("left"), data, env, depth + 1)
    if a is None:
        return None
    # Short-circuit as C does: the other side may be unknown.
    if op == "&&" and not a:
        return 0
    if op == "||" and a:
        return 1
    b = _eval(n.child_by_field_name("right"), data, env, depth + 1)
    if b is None:
        return None
    if op in ("/", "%"):
        return c_divmod(op, a, b)
    ops = {
        "+": lambda: a + b,
        "-": lambda: a - b,
        "*": lambda: a * b,
        "<<": lambda: a << b if 0 <= b < 64 else None,
        ">>": lambda: a >> b if 0 <= b < 64 else None,
        "&": lambda: a & b,
        "|": lambda: a | b,
        "^": lambda: a ^ b,
        "<": lambda: int(a < b),
        "<=": lambda: int(a <= b),
        ">": lambda: int(a > b),
        ">=": lambda: int(a >= b),
        "==": lambda: int(a == b),
        "!=": lambda: int(a != b),
        "&&": lambda: int(bool(b)),
        "||": lambda: int(bool(b)),
    }
    f = ops.get(op)
    return f() if f is not None else None


def _eval_call(n: tree_sitter.Node, data: bytes, env: Mapping[str, EnvValue], depth: int) -> int | None:
    fname = _text(n.child_by_field_name("function"), data).replace(" ", "")
    args_node = n.child_by_field_name("arguments")
    args = [c for c in args_node.named_children if c.type != "comment"] if args_node is not None else []
    vals = [_eval(a, data, env, depth + 1) for a in args]
    if any(v is None for v in vals):
        return None
    ints = [v for v in vals if v is not None]
    if fname in _MIN_MAX and len(ints) == 2:
        return int(_MIN_MAX[fname](ints))
    if fname.startswith("static_cast<") and len(ints) == 1:
        return ints[0]
    if fname in ("__umul24", "__mul24") and len(ints) == 2:
        return ints[0] * ints[1]
    return None


_HANDLERS = {
    "field_expression": _eval_field,
    "cast_expression": _eval_cast,
    "binary_expression": _eval_binary,
    "unary_expression": _eval_unary,
    "conditional_expression": _eval_conditional,
    "sizeof_expression": _eval_sizeof,
    "call_expression": _eval_call,
}


def dim3_of(node: tree_sitter.Node, data: bytes, env: Mapping[str, EnvValue]) -> tuple[int, int, int] | None:
    """A launch dimension: an integer expression, ``dim3(x[, y[, z]])``/``dim3{...}`` or a dim3 name."""
    while node.type == "parenthesized_expression" and node.named_child_count == 1:
        node = node.named_children[0]
    t = node.type
    if t == "identifier":
        v = env.get(_text(node, data))
        if isinstance(v, tuple):
            return v
        return (v, 1, 1) if isinstance(v, int) else None
    if t in ("call_expression", "compound_literal_expression", "initializer_list"):
        fn = node.child_by_field_name("function") or node.child_by_field_name("type")
        if t != "initializer_list" and (fn is None or _text(fn, data).strip() != "dim3"):
            v = _eval(node, data, env, 0)
            return (v, 1, 1) if v is not None else None
        holder = node.child_by_field_name("arguments") or node.child_by_field_name("value") or node
        parts = [c for c in holder.named_children if c.type != "comment"]
        vals = [_eval(p, data, env, 0) for p in parts]
        if not vals or len(vals) > 3 or any(v is None for v in vals):
            return None
        full = [v for v in vals if v is not None] + [1] * (3 - len(vals))
        return (full[0], full[1], full[2])
    v = evaluate_node(node, data, env)
    return (v, 1, 1) if v is not None else None


def file_constants(model: SourceModel) -> dict[str, int]:
    """Integer constants of the file, in source order: constant ``#define``s, ``const``/``constexpr`` integers, enumerators."""
    cached: dict[str, int] | None = getattr(model, "_file_constants", None)
    if cached is not None:
        return cached
    env: dict[str, EnvValue] = {}
    out: dict[str, int] = {}
    for name, value in model.defines.items():
        v = evaluate_text(value, env, model) if value.strip() else None
        if v is not None:
            env[name] = v
            out[name] = v
    if model.tree is not None:
        data = model.text.encode("utf-8", errors="replace")
        _scan_constants_scope(model.tree.root_node, data, env, out)
    setattr(model, "_file_constants", out)  # noqa: B010 - derived data cached beside the text
    return out


def _scan_constants_scope(
    scope: tree_sitter.Node, data: bytes, env: dict[str, EnvValue], out: dict[str, int]
) -> None:
    for n in scope.named_children:
        if n.type == "namespace_definition":
            body = n.child_by_field_name("body")
            if body is not None:
                _scan_constants_scope(body, data, env, out)
        elif n.type == "declaration":
            _scan_declaration(n, data, env, out)
        elif n.type == "enum_specifier" and n.child_by_field_name("name") is None:
            _scan_enum(n, data, env, out)
        elif n.type == "type_definition":
            continue


def _scan_declaration(
    n: tree_sitter.Node, data: bytes, env: dict[str, EnvValue], out: dict[str, int]
) -> None:
    head = data[n.start_byte : n.end_byte].decode("utf-8", errors="replace").split("=")[0]
    if "__constant__" in head or "__device__" in head or "__shared__" in head or "extern" in head:
        return
    words = [
        data[c.start_byte : c.end_byte].decode()
        for c in n.children
        if c.type
        in (
            "type_qualifier",
            "storage_class_specifier",
            "primitive_type",
            "sized_type_specifier",
            "type_identifier",
        )
    ]
    if not words or not ({"const", "constexpr"} & set(" ".join(words).split())):
        return
    if not _INTEGRAL_DECL.match(" ".join(words)):
        return
    for name, value in _declarators(n, data):
        if value is None:
            continue
        v = evaluate_node(value, data, env)
        if v is not None:
            env[name] = v
            out[name] = v


def _scan_enum(n: tree_sitter.Node, data: bytes, env: dict[str, EnvValue], out: dict[str, int]) -> None:
    body = n.child_by_field_name("body")
    if body is None:
        return
    nxt = 0
    for e in body.named_children:
        if e.type != "enumerator":
            continue
        name_node, value = e.child_by_field_name("name"), e.child_by_field_name("value")
        if name_node is None:
            continue
        v = evaluate_node(value, data, env) if value is not None else nxt
        if v is None:
            return
        name = data[name_node.start_byte : name_node.end_byte].decode()
        env[name] = v
        out[name] = v
        nxt = v + 1


def _declarators(decl: tree_sitter.Node, data: bytes) -> list[tuple[str, tree_sitter.Node]]:
    """``(name, initializer)`` of each initialised plain declarator of a declaration."""
    out = []
    for d in decl.children_by_field_name("declarator"):
        if d.type != "init_declarator":
            continue
        target, value = d.child_by_field_name("declarator"), d.child_by_field_name("value")
        if target is not None and value is not None and target.type == "identifier":
            out.append((data[target.start_byte : target.end_byte].decode(), value))
    return out
