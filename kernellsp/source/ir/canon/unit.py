"""What a canonicalisation pass sees (:class:`Unit`: one kernel of the current text) and returns (:class:`Change`).

A pass reads the kernel through tree-sitter nodes of the *current* text and answers with byte-range
edits of that text, all inside the kernel's definition, plus one short note per thing it changed.
The pipeline applies them, re-parses, and hands the next pass a fresh :class:`Unit`; a pass never
sees stale nodes. The helpers below are the vocabulary passes share: statements of a block,
identifier uses, what a subtree assigns, whether an expression is free of side effects.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from kernellsp.source.ir.launch import KernelLaunch

if TYPE_CHECKING:
    import tree_sitter

    from kernellsp.source.model import Function, SourceModel

Node = "tree_sitter.Node"

#: Math functions without side effects (a call to one may be duplicated, moved or dropped).
PURE_CALLS = frozenset(
    [
        "abs",
        "fabs",
        "fabsf",
        "sqrt",
        "sqrtf",
        "rsqrt",
        "rsqrtf",
        "cbrt",
        "cbrtf",
        "exp",
        "expf",
        "exp2",
        "exp2f",
        "exp10f",
        "expm1",
        "expm1f",
        "log",
        "logf",
        "log2",
        "log2f",
        "log10",
        "log10f",
        "log1p",
        "log1pf",
        "pow",
        "powf",
        "sin",
        "sinf",
        "cos",
        "cosf",
        "tan",
        "tanf",
        "sinh",
        "sinhf",
        "cosh",
        "coshf",
        "tanh",
        "tanhf",
        "asin",
        "asinf",
        "acos",
        "acosf",
        "atan",
        "atanf",
        "atan2",
        "atan2f",
        "erf",
        "erff",
        "erfc",
        "erfcf",
        "floor",
        "floorf",
        "ceil",
        "ceilf",
        "round",
        "roundf",
        "trunc",
        "truncf",
        "fmin",
        "fminf",
        "fmax",
        "fmaxf",
        "min",
        "max",
        "fma",
        "fmaf",
        "fdividef",
        "__fdividef",
        "__expf",
        "__logf",
        "__sinf",
        "__cosf",
        "__powf",
        "__fsqrt_rn",
        "__frcp_rn",
        "rintf",
        "rint",
        "lrintf",
        "copysignf",
        "signbit",
        "isnan",
        "isinf",
        "isfinite",
        "__isnanf",
        "__isinff",
        "hypotf",
        "hypot",
        "__float2half",
        "__half2float",
        "__float2bfloat16",
        "__bfloat162float",
        "__int2float_rn",
        "__float2int_rn",
        "__float2int_rz",
        "__float2uint_rn",
        "__ldg",
        "__saturatef",
        "__fmul_rn",
        "__fadd_rn",
        "__fmaf_rn",
        "__umul24",
        "__mul24",
        "__clz",
        "__popc",
        "__ffs",
        "__hadd",
        "__hmul",
        "__hsub",
        "__hdiv",
        "__hfma",
        "__hmax",
        "__hmin",
        "hexp",
        "hlog",
        "hsqrt",
        "__habs",
        "__hneg",
        "__hgt",
        "__hlt",
        "__hge",
        "__hle",
        "__heq",
        "float2half",
        "half2float",
        "static_cast",
        "reinterpret_cast",
        "const_cast",
    ]
)
#: Binary operators whose value is a truth value (0 or 1) whatever their operands' types.
TRUTH_OPERATORS = frozenset(("<", ">", "<=", ">=", "==", "!=", "&&", "||"))

_ASSIGN_OPS = ("=", "+=", "-=", "*=", "/=", "%=", "&=", "|=", "^=", "<<=", ">>=")


@dataclass(frozen=True)
class Edit:
    """Replace bytes ``[start, end)`` of the current text by ``text``."""

    start: int
    end: int
    text: str


@dataclass
class Change:
    """A pass's answer for one kernel: the edits and one note per thing changed (for ``--explain``)."""

    edits: list[Edit] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    def replace(self, node: tree_sitter.Node, text: str) -> None:
        self.edits.append(Edit(node.start_byte, node.end_byte, text))

    def insert(self, at: int, text: str) -> None:
        self.edits.append(Edit(at, at, text))

    def delete(self, data: bytes, node: tree_sitter.Node) -> None:
        """Remove a statement; when it stands on lines of its own, the lines go too (no blank line left)."""
        start, end = node.start_byte, node.end_byte
        line_start = data.rfind(b"\n", 0, start) + 1
        nl = data.find(b"\n", end)
        line_end = len(data) if nl < 0 else nl + 1
        if not data[line_start:start].strip() and not data[end:line_end].strip():
            start, end = line_start, line_end
        self.edits.append(Edit(start, end, ""))

    def __bool__(self) -> bool:
        return bool(self.edits)


@dataclass
class Unit:
    """One kernel definition of the current canonical text."""

    model: SourceModel
    fn: Function
    node: tree_sitter.Node
    body: tree_sitter.Node
    data: bytes
    launch: KernelLaunch | None
    #: The target architecture as ``__CUDA_ARCH__`` spells it (900 for sm_90).
    cuda_arch: int = 900

    def text(self, node: tree_sitter.Node | None) -> str:
        if node is None:
            return ""
        return self.data[node.start_byte : node.end_byte].decode("utf-8", errors="replace")

    def function_node(self, fn: Function) -> tree_sitter.Node | None:
        """The ``function_definition`` node of another function of the file."""
        return definition_node(self.model, fn)

    def helpers(self) -> dict[str, Function]:
        """``__device__`` (and ``__host__ __device__``) functions with a body, by name (unique names only)."""
        out: dict[str, Function] = {}
        seen: set[str] = set()
        for f in self.model.functions:
            if f.kind in ("device", "host_device") and f.has_body:
                if f.name in seen:
                    out.pop(f.name, None)
                    continue
                seen.add(f.name)
                out[f.name] = f
        return out

    def block_is_1d(self) -> bool:
        """The launch model says ``blockDim.y == blockDim.z == 1`` at every shape."""
        return self.launch is not None and self.launch.block_dim(1) == 1 and self.launch.block_dim(2) == 1

    def grid_is_1d(self) -> bool:
        if self.launch is None or not self.launch.complete or not self.launch.shapes:
            return False
        return all(s.grid[1] == 1 and s.grid[2] == 1 for s in self.launch.shapes)


def definition_node(model: SourceModel, fn: Function) -> tree_sitter.Node | None:
    """The ``function_definition`` node of ``fn`` in ``model``'s tree."""
    if model.tree is None:
        return None
    n = model.tree.root_node.descendant_for_byte_range(fn.span.start_byte, fn.span.end_byte)
    while n is not None and n.type != "function_definition":
        n = n.parent
    return n


def walk(n: tree_sitter.Node) -> Iterator[tree_sitter.Node]:
    """Pre-order walk of a subtree."""
    stack = [n]
    while stack:
        cur = stack.pop()
        yield cur
        stack.extend(reversed(cur.children))


def statements(block: tree_sitter.Node) -> list[tree_sitter.Node]:
    """The statements of a compound statement (comments, braces and masked pragmas excluded)."""
    return [c for c in block.named_children if c.type != "comment"]


def strip_parens(n: tree_sitter.Node) -> tree_sitter.Node:
    while n.type in ("parenthesized_expression", "condition_clause"):
        inner = next((c for c in n.named_children if c.type != "comment"), None)
        if inner is None:
            break
        n = inner
    return n


def identifier_uses(unit: Unit, root: tree_sitter.Node, name: str) -> list[tree_sitter.Node]:
    """Identifier nodes spelling ``name`` under ``root`` (not member names after ``.``/``->``)."""
    out = []
    for n in walk(root):
        if n.type == "identifier" and unit.text(n) == name:
            p = n.parent
            if p is not None and p.type == "field_expression" and p.child_by_field_name("field") == n:
                continue
            out.append(n)
    return out


def assigned_target(n: tree_sitter.Node) -> tree_sitter.Node | None:
    """The lvalue an assignment, increment or decrement writes (``None`` for other nodes)."""
    if n.type == "assignment_expression":
        return n.child_by_field_name("left")
    if n.type == "update_expression":
        return n.child_by_field_name("argument")
    return None


def writes_of(unit: Unit, root: tree_sitter.Node, name: str) -> list[tree_sitter.Node]:
    """Assignments, increments and address-takings (``&name``) of the local ``name`` under ``root``."""
    out = []
    for n in walk(root):
        target = assigned_target(n)
        if target is not None and target.type == "identifier" and unit.text(target) == name:
            out.append(n)
        elif n.type == "pointer_expression" and unit.text(n.child_by_field_name("operator")) == "&":
            arg = n.child_by_field_name("argument")
            if arg is not None and arg.type == "identifier" and unit.text(arg) == name:
                out.append(n)
    return out


def declared_name(
    decl: tree_sitter.Node, data: bytes
) -> list[tuple[str, tree_sitter.Node, tree_sitter.Node | None]]:
    """``(name, identifier node, initializer or None)`` for each declarator of a declaration."""
    out = []
    for d in decl.children_by_field_name("declarator"):
        value = None
        target: tree_sitter.Node | None = d
        if d.type == "init_declarator":
            value = d.child_by_field_name("value")
            target = d.child_by_field_name("declarator") or d
        while target is not None and target.type in (
            "pointer_declarator",
            "reference_declarator",
            "array_declarator",
        ):
            nxt = target.child_by_field_name("declarator")
            if nxt is None:
                nxt = next((c for c in target.children if c.type == "identifier"), None)
            target = nxt
        if target is not None and target.type == "identifier":
            out.append((data[target.start_byte : target.end_byte].decode(), target, value))
    return out


def is_plain_declarator(decl: tree_sitter.Node) -> bool:
    """A declaration of one scalar (no pointer, array, reference; not ``__shared__``/``static``/``extern``)."""
    ds = decl.children_by_field_name("declarator")
    if len(ds) != 1:
        return False
    d = ds[0]
    target = d.child_by_field_name("declarator") if d.type == "init_declarator" else d
    if target is None or target.type != "identifier":
        return False
    quals = {c.type for c in decl.children} | {
        c.text.decode() if c.text else "" for c in decl.children if c.type in ("storage_class_specifier",)
    }
    return not ({"storage_class_specifier"} & quals) and not any(
        c.type == "attribute_specifier" or (c.text or b"").startswith(b"__shared__") for c in decl.children
    )


def has_side_effects(unit: Unit, n: tree_sitter.Node) -> bool:
    """Does evaluating ``n`` write anything or call something that might (barriers, atomics, helpers)?"""
    for c in walk(n):
        if c.type in ("assignment_expression", "update_expression"):
            return True
        if c.type == "call_expression":
            name = unit.text(c.child_by_field_name("function")).replace(" ", "")
            base = name.split("<")[0]
            if base not in PURE_CALLS:
                return True
        if c.type in ("new_expression", "delete_expression", "gnu_asm_expression", "lambda_expression"):
            return True
    return False


def reads_memory(unit: Unit, n: tree_sitter.Node) -> bool:
    """Does ``n`` load from memory (subscripts, dereferences, member access through pointers)?"""
    for c in walk(n):
        if c.type == "subscript_expression":
            return True
        if c.type == "pointer_expression" and unit.text(c.child_by_field_name("operator")) == "*":
            return True
        if c.type == "field_expression" and unit.text(c.child_by_field_name("operator")) == "->":
            return True
        if c.type == "call_expression" and unit.text(c.child_by_field_name("function")) == "__ldg":
            return True
    return False


def enclosing_block(n: tree_sitter.Node) -> tree_sitter.Node | None:
    p = n.parent
    while p is not None and p.type != "compound_statement":
        p = p.parent
    return p


def enclosing_loops(n: tree_sitter.Node, stop: tree_sitter.Node) -> list[tree_sitter.Node]:
    """Loop statements between ``n`` and ``stop`` (innermost first)."""
    out = []
    p = n.parent
    while p is not None and p != stop:
        if p.type in ("for_statement", "while_statement", "do_statement"):
            out.append(p)
        p = p.parent
    return out


def line_indent(data: bytes, at: int) -> str:
    """The indentation of the line holding byte ``at``."""
    start = data.rfind(b"\n", 0, at) + 1
    m = re.match(rb"[ \t]*", data[start:at])
    return m.group(0).decode() if m else ""


def parenthesize(text: str) -> str:
    """``text`` wrapped in parentheses unless it is already one primary expression."""
    t = text.strip()
    if re.fullmatch(r"[A-Za-z_][\w.]*|\d+[uUlLfF]*|\d*\.\d+(?:[eE][-+]?\d+)?[fF]?", t):
        return t
    if t.startswith("(") and t.endswith(")") and _balanced(t[1:-1]):
        return t
    return f"({t})"


def _balanced(t: str) -> bool:
    depth = 0
    for ch in t:
        if ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
            if depth < 0:
                return False
    return depth == 0


def substitute_identifiers(unit: Unit, root: tree_sitter.Node, values: dict[str, str]) -> str:
    """The text of ``root`` with identifier uses of the keys replaced by their (parenthesised) values."""
    edits: list[tuple[int, int, str]] = []
    for name, value in values.items():
        for n in identifier_uses(unit, root, name):
            edits.append((n.start_byte, n.end_byte, parenthesize(value)))
    out = unit.data[root.start_byte : root.end_byte]
    for s, e, rep in sorted(edits, reverse=True):
        out = out[: s - root.start_byte] + rep.encode() + out[e - root.start_byte :]
    return out.decode("utf-8", errors="replace")


def is_assign_op(op: str) -> bool:
    return op in _ASSIGN_OPS


def norm_ctype(ctype: str) -> str:
    """A C type without qualifiers that do not change values (``const``, ``volatile``, restrict, ``register``)."""
    return " ".join(
        w
        for w in ctype.replace("*", " * ").split()
        if w not in ("const", "volatile", "__restrict__", "__restrict", "register")
    ).replace(" *", "*")


def local_type(unit: Unit, name: str, before: int | None = None) -> str | None:
    """The declared type of a kernel parameter or local (the last declaration before ``before``)."""
    for p in unit.fn.params:
        if p.name == name:
            return norm_ctype(p.type_text.rsplit(name, 1)[0]) if p.is_pointer else norm_ctype(p.base_type)
    found = None
    for d in walk(unit.body):
        if d.type != "declaration" or (before is not None and d.start_byte >= before):
            continue
        for n, ident, _v in declared_name(d, unit.data):
            if n == name:
                tn = d.child_by_field_name("type")
                found = norm_ctype(unit.text(tn)) if tn is not None else None
                if ident.parent is not None and ident.parent.type in (
                    "pointer_declarator",
                    "array_declarator",
                ):
                    found = None
    return found


_BUILTIN_COORD = re.compile(r"^(threadIdx|blockIdx|blockDim|gridDim)\.[xyz]$")


def expr_type(unit: Unit, n: tree_sitter.Node) -> str | None:
    """The C type of a simple expression (a name, an element of a pointer parameter, a builtin, a literal), else ``None``."""
    n = strip_parens(n)
    text = unit.text(n)
    if n.type == "identifier":
        return local_type(unit, text, n.start_byte)
    if n.type == "field_expression" and _BUILTIN_COORD.match(text.replace(" ", "")):
        return "unsigned int"
    if n.type == "subscript_expression":
        base = n.child_by_field_name("argument")
        for p in unit.fn.params:
            if base is not None and p.name == unit.text(base) and p.is_pointer:
                return norm_ctype(p.base_type.replace("*", " "))
        return None
    if n.type == "cast_expression":
        tn = n.child_by_field_name("type")
        return norm_ctype(unit.text(tn)) if tn is not None else None
    if n.type == "binary_expression":
        op = unit.text(n.child_by_field_name("operator"))
        left, right = n.child_by_field_name("left"), n.child_by_field_name("right")
        if op in ("+", "-", "*", "/", "%", "&", "|", "^") and left is not None and right is not None:
            lt, rt = expr_type(unit, left), expr_type(unit, right)
            if lt is not None and (lt == rt or (rt == "int" and right.type == "number_literal")):
                return lt
            if rt is not None and lt == "int" and left.type == "number_literal":
                return rt
        return None
    if n.type == "number_literal":
        if re.fullmatch(r"[\d.]+(?:[eE][-+]?\d+)?[fF]", text):
            return "float"
        if re.fullmatch(r"\d+", text):
            return "int"
    return None
