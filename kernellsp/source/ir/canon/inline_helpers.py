"""``inline-helpers``: function-like macros and ``__device__`` helpers called by a kernel, inlined into it.

After this pass a kernel's computation is visible in its own body: an index computed by
``IDX(r, c, ld)`` or ``__device__ int idx(int r, int c) { return r * ld + c; }``, an activation in
``__device__ float gelu(float x) {...}``, a reference-out helper ``void load(float &v, ...)``.

* A function-like macro call is replaced by its expansion (a statement macro used as a statement is
  pasted as statements); an object-like macro whose replacement is an expression (not a constant:
  ``const-fold`` owns those, nor a type name) is expanded where it is used as a value.
* A helper whose body is one ``return e;`` becomes ``(e)`` with each parameter replaced by its
  argument (reference parameters by the argument lvalue); an argument that reads memory or is not a
  plain value is bound to a local first when the parameter is used more than once.
* A helper with more statements is inlined where it is called as a statement (``f(a);``), as an
  initializer (``T v = f(a);``) or in an assignment (``v = f(a);``), or hoisted in front of the
  statement that calls it when the call is evaluated unconditionally there; its locals are renamed
  away from the kernel's names, its parameters bound to the arguments. Helpers with a ``return``
  before their last statement (unless the call is the last thing the kernel does, where leaving the
  helper and leaving the kernel are the same), recursion, ``static`` locals (other than ``static __shared__``
  arrays, which are per block anyway) or ``goto`` are left alone.
* A template helper called with explicit arguments (``warp_reduce<32>(v)``) is instantiated first:
  each template parameter is replaced by its argument (or default) before inlining.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from kernellsp.source.ir.canon.unit import (
    Change,
    Unit,
    declared_name,
    expr_type,
    has_side_effects,
    identifier_uses,
    line_indent,
    norm_ctype,
    parenthesize,
    reads_memory,
    statements,
    walk,
    writes_of,
)
from kernellsp.source.ir.cexpr import expand_macros, file_constants, split_args

if TYPE_CHECKING:
    from tree_sitter import Node

    from kernellsp.source.model import Function

NAME = "inline-helpers"
SUMMARY = (
    "function-like macros and __device__ helpers (value-returning and reference-out) inlined into the kernel"
)

_MAX_HELPER_STATEMENTS = 80
_TYPE_WORDS = frozenset(
    [
        "float",
        "double",
        "int",
        "unsigned",
        "signed",
        "long",
        "short",
        "char",
        "bool",
        "void",
        "half",
        "__half",
        "__nv_bfloat16",
        "size_t",
        "float2",
        "float4",
        "int2",
        "int4",
        "uint32_t",
        "int32_t",
        "uint64_t",
        "int64_t",
        "uint8_t",
        "int8_t",
    ]
)


def run(unit: Unit) -> Change | None:
    change = Change()
    taken = _names_in(unit, unit.node)
    claimed: list[tuple[int, int]] = []
    for call in _calls(unit):
        if any(s <= call.start_byte < e for s, e in claimed):
            continue  # inside a call already rewritten this round
        fnode = call.child_by_field_name("function")
        fname = unit.text(fnode)
        targs: list[str] = []
        if fnode is not None and fnode.type == "template_function":
            # `warp_reduce_sum<WARP_SIZE>(v)`: a helper template with its arguments named at the call.
            fname = unit.text(fnode.child_by_field_name("name"))
            targs = split_args(unit.text(fnode.child_by_field_name("arguments")).strip()[1:-1])
        if fname in unit.model.macros:
            done = _expand_macro_call(unit, call, fname, change)
        else:
            helper = unit.helpers().get(fname)
            done = _inline_helper(unit, call, helper, change, taken, targs) if helper is not None else None
        if done is not None:
            claimed.append(done)
    for n in walk(unit.body):
        if n.type == "identifier" and not any(s <= n.start_byte < e for s, e in claimed):
            _expand_object_macro(unit, n, change)
    return change


def _calls(unit: Unit) -> list[Node]:
    """Call expressions of the body, outermost first."""
    return [
        n
        for n in walk(unit.body)
        if n.type == "call_expression" and n.child_by_field_name("function") is not None
    ]


def _names_in(unit: Unit, root: Node) -> set[str]:
    return {
        unit.text(n) for n in walk(root) if n.type in ("identifier", "field_identifier", "type_identifier")
    }


# -- macros ------------------------------------------------------------------------------------------


def _expand_macro_call(unit: Unit, call: Node, name: str, change: Change) -> tuple[int, int] | None:
    params, body = unit.model.macros[name]
    if "#" in body or not body.strip():
        return None
    expanded = expand_macros(unit.text(call), {}, unit.model.macros)
    if expanded == unit.text(call):
        return None
    stmt_like = ";" in body or body.lstrip().startswith(("{", "do", "if", "for", "while"))
    parent = call.parent
    if stmt_like:
        if parent is None or parent.type != "expression_statement":
            return None
        inner = expanded[1:-1] if expanded.startswith("(") and expanded.endswith(")") else expanded
        text = inner.strip()
        if not text.endswith((";", "}")):
            text += ";"
        change.replace(parent, text)
        change.notes.append(f"macro {name}(...) expanded as statements")
        return (parent.start_byte, parent.end_byte)
    change.replace(call, expanded)
    change.notes.append(f"macro {name}({', '.join(params)}) expanded")
    return (call.start_byte, call.end_byte)


def _expand_object_macro(unit: Unit, n: Node, change: Change) -> None:
    name = unit.text(n)
    value = unit.model.defines.get(name)
    if value is None or not value.strip() or "#" in value or ";" in value or "{" in value:
        return
    if name in file_constants(unit.model) or value.strip() in _TYPE_WORDS:
        return
    bare = re.fullmatch(r"[A-Za-z_]\w*(?:\s*\*)?", value.strip()) and value.strip() not in unit.model.defines
    if bare and not re.fullmatch(r"(threadIdx|blockIdx|blockDim|gridDim)\.[xyz]", value.strip()):
        return  # a bare name (a type, a function, another symbol): expanding it helps no reader
    p = n.parent
    if p is not None and p.type == "field_expression" and p.child_by_field_name("field") == n:
        return
    change.replace(n, parenthesize(expand_macros(value, unit.model.defines, unit.model.macros)))
    change.notes.append(f"macro {name} expanded")


# -- device helpers ----------------------------------------------------------------------------------


@dataclass
class _Helper:
    fn: Function
    node: Node
    body: Node
    stmts: list[Node]
    params: list[tuple[str, str, bool, bool]]  # name, declared type text, is_reference, is_pointer
    ret_type: str
    templated: bool
    #: Template parameter -> the argument it is instantiated with (its text replaces each use).
    tmap: dict[str, str] = field(default_factory=dict)


def _helper_shape(unit: Unit, fn: Function) -> _Helper | None:
    node = unit.function_node(fn)
    body = node.child_by_field_name("body") if node is not None else None
    if node is None or body is None or fn.name == unit.fn.name:
        return None
    stmts = statements(body)
    if len(stmts) > _MAX_HELPER_STATEMENTS:
        return None
    for n in walk(body):
        if n.type == "goto_statement" or (
            n.type == "storage_class_specifier"
            and unit.text(n) == "static"
            and not _shared_declaration(unit, n)
        ):
            return None
        if n.type == "call_expression" and unit.text(n.child_by_field_name("function")) == fn.name:
            return None  # recursion
    decl = node.child_by_field_name("declarator")
    while decl is not None and decl.type != "function_declarator":
        decl = decl.child_by_field_name("declarator")
    plist = decl.child_by_field_name("parameters") if decl is not None else None
    params: list[tuple[str, str, bool, bool]] = []
    if plist is not None:
        for p in plist.named_children:
            if p.type not in ("parameter_declaration", "optional_parameter_declaration"):
                continue
            got = _param(unit, p)
            if got is None:
                return None
            params.append(got)
    tnode = node.child_by_field_name("type")
    ret = unit.text(tnode)
    quals = " ".join(
        unit.text(c) for c in node.children if c.type == "type_qualifier" and unit.text(c) == "const"
    )
    ret = (quals + " " + ret).strip()
    dnode = node.child_by_field_name("declarator")
    if dnode is not None and dnode.type in ("pointer_declarator", "reference_declarator"):
        return None  # returns a pointer/reference: not a value
    tparams = set(
        re.findall(r"(?:typename|class|int|unsigned|size_t|bool)\s+([A-Za-z_]\w*)", fn.template_params or "")
    )
    templated = bool(tparams) and (
        any(t in re.findall(r"\w+", ret) for t in tparams)
        or any(t in re.findall(r"\w+", p[1]) for t in tparams for p in params)
    )
    return _Helper(fn, node, body, stmts, params, ret, templated)


def _param(unit: Unit, p: Node) -> tuple[str, str, bool, bool] | None:
    d = p.child_by_field_name("declarator")
    is_ref = is_ptr = False
    target = d
    while target is not None and target.type in (
        "pointer_declarator",
        "reference_declarator",
        "array_declarator",
    ):
        if target.type == "reference_declarator":
            is_ref = True
        else:
            is_ptr = True
        nxt = target.child_by_field_name("declarator")
        if nxt is None:
            nxt = next((c for c in target.named_children if c.type == "identifier"), None)
        target = nxt
    if target is None or target.type != "identifier":
        return None
    name = unit.text(target)
    full = unit.text(p)
    # The declared type: the parameter's text without its name (and without a reference mark).
    start, end = target.start_byte - p.start_byte, target.end_byte - p.start_byte
    type_text = (full[:start] + full[end:]).replace("&", " ").strip()
    type_text = re.sub(r"\s+", " ", type_text)
    return name, type_text, is_ref, is_ptr


def _template_params(fn: Function) -> list[tuple[str, str | None]]:
    """``(name, default)`` of each template parameter of a helper."""
    if not fn.template_params:
        return []
    out = []
    for p in split_args(fn.template_params.strip().strip("<>")):
        m = re.match(r"^(?:.*?)\b([A-Za-z_]\w*)\s*(?:=\s*(.+))?$", p.strip(), re.DOTALL)
        if m:
            out.append((m.group(1), m.group(2).strip() if m.group(2) else None))
    return out


def _instantiated(unit: Unit, h: _Helper, targs: list[str]) -> _Helper | None:
    """The helper with its template parameters bound to the call's arguments (or their defaults)."""
    params = _template_params(h.fn)
    if not params:
        return h
    tmap: dict[str, str] = {}
    for i, (name, default) in enumerate(params):
        value = targs[i] if i < len(targs) else default
        if value is None:
            return h if not targs else None  # deduced from the arguments: the untyped path below
        tmap[name] = value
    subst = dict(tmap)

    def fix(text: str) -> str:
        return re.sub(r"\b[A-Za-z_]\w*\b", lambda m: subst.get(m.group(0), m.group(0)), text)

    return _Helper(
        h.fn,
        h.node,
        h.body,
        h.stmts,
        [(n, fix(t), r, ptr) for n, t, r, ptr in h.params],
        fix(h.ret_type),
        False,
        tmap,
    )


def _simple_arg(unit: Unit, arg: Node) -> bool:
    """An argument that may be repeated freely: a name, a literal, a builtin coordinate, or arithmetic of those."""
    if has_side_effects(unit, arg) or reads_memory(unit, arg):
        return False
    return all(c.type != "call_expression" for c in walk(arg))


def _inline_helper(
    unit: Unit, call: Node, fn: Function, change: Change, taken: set[str], targs: list[str] | None = None
) -> tuple[int, int] | None:
    h = _helper_shape(unit, fn)
    if h is None:
        return None
    h = _instantiated(unit, h, targs or [])
    if h is None:
        return None
    if _has_static_shared(unit, h.body) and _calls_of(unit, fn.name) > 1:
        # Every call of the helper uses one and the same `static __shared__` array; inlined twice it would
        # become two arrays, and a value one call leaves there for the next would be lost.
        return None
    args_node = call.child_by_field_name("arguments")
    args = [c for c in args_node.named_children if c.type != "comment"] if args_node is not None else []
    if len(args) != len(h.params) or any(has_side_effects(unit, a) for a in args):
        return None
    if len(h.stmts) == 1 and h.stmts[0].type == "return_statement":
        done = _inline_expression(unit, call, h, args, change)
        if done is not None:
            return done
    return _inline_statements(unit, call, h, args, change, taken)


def _inline_expression(
    unit: Unit, call: Node, h: _Helper, args: list[Node], change: Change
) -> tuple[int, int] | None:
    ret = next((c for c in h.stmts[0].named_children if c.type != "comment"), None)
    if ret is None:
        return None
    values: dict[str, str] = {}
    for (pname, _ptype, is_ref, _is_ptr), arg in zip(h.params, args, strict=True):
        uses = len(identifier_uses(unit, ret, pname))
        if writes_of(unit, ret, pname):
            return None
        if uses > 1 and not _simple_arg(unit, arg) and not is_ref:
            return None  # would evaluate a load or call twice: leave it (statement inlining binds it)
        values[pname] = _converted(unit, arg, _ptype, is_ref or _is_ptr or h.templated)
    text = _substituted(unit, ret, values, tmap=h.tmap)
    cast = h.ret_type if h.ret_type and not h.templated and h.ret_type not in ("auto", "void") else ""
    new = f"(({cast})({text}))" if cast and _needs_cast(unit, h, ret) else f"({text})"
    change.replace(call, new)
    change.notes.append(f"{h.fn.name}() inlined")
    return (call.start_byte, call.end_byte)


def _needs_cast(unit: Unit, h: _Helper, ret: Node) -> bool:
    """The return converts the value unless every parameter has the return type and the expression is plain arithmetic."""
    same = bool(h.params) and all(norm_ctype(p[1]) == norm_ctype(h.ret_type) for p in h.params)
    logical = any(
        n.type == "binary_expression" and unit.text(n.child_by_field_name("operator")) in _LOGICAL
        for n in walk(ret)
    )
    return not same or logical or any(n.type == "call_expression" for n in walk(ret))


_LOGICAL = frozenset(("<", ">", "<=", ">=", "==", "!=", "&&", "||"))


def _converted(unit: Unit, arg: Node, ptype: str, keep: bool) -> str:
    """The argument as the parameter receives it: cast to the parameter's type unless already of it."""
    text = unit.text(arg)
    if keep or expr_type(unit, arg) == norm_ctype(ptype):
        return text
    return f"({norm_ctype(ptype)})({text})"


def _substituted(
    unit: Unit,
    root: Node,
    values: dict[str, str],
    renames: dict[str, str] | None = None,
    tmap: dict[str, str] | None = None,
) -> str:
    """``root``'s text with parameter uses replaced by argument texts, locals renamed and template
    parameters replaced by the arguments the call instantiates them with."""
    edits: list[tuple[int, int, str]] = []
    for n in walk(root):
        if tmap and n.type in ("identifier", "type_identifier") and unit.text(n) in tmap:
            p = n.parent
            if not (p is not None and p.type == "field_expression" and p.child_by_field_name("field") == n):
                value = tmap[unit.text(n)]
                edits.append(
                    (n.start_byte, n.end_byte, value if n.type == "type_identifier" else parenthesize(value))
                )
                continue
        if n.type != "identifier":
            continue
        p = n.parent
        if p is not None and p.type == "field_expression" and p.child_by_field_name("field") == n:
            continue
        name = unit.text(n)
        if name in values:
            edits.append((n.start_byte, n.end_byte, parenthesize(values[name])))
        elif renames and name in renames:
            edits.append((n.start_byte, n.end_byte, renames[name]))
    out = unit.data[root.start_byte : root.end_byte]
    for s, e, rep in sorted(edits, reverse=True):
        out = out[: s - root.start_byte] + rep.encode() + out[e - root.start_byte :]
    return out.decode("utf-8", errors="replace")


def _fresh(name: str, taken: set[str]) -> str:
    if name not in taken:
        taken.add(name)
        return name
    i = 1
    while f"{name}_{i}" in taken:
        i += 1
    taken.add(f"{name}_{i}")
    return f"{name}_{i}"


def _call_context(unit: Unit, call: Node) -> tuple[str, Node] | None:
    """How the call is used: ``stmt`` (``f(a);``), ``init`` (``T v = f(a);``), ``assign`` (``v = f(a);``) or
    ``hoist`` (inside a larger statement, evaluated unconditionally), with the statement node."""
    p = call.parent
    if p is None:
        return None
    if p.type == "expression_statement":
        return "stmt", p
    if p.type == "init_declarator" and p.parent is not None and p.parent.type == "declaration":
        decl = p.parent
        if (
            len(decl.children_by_field_name("declarator")) == 1
            and decl.parent is not None
            and decl.parent.type == "compound_statement"
        ):
            return "init", decl
        return None
    if p.type == "assignment_expression" and p.child_by_field_name("right") == call:
        gp = p.parent
        if (
            gp is not None
            and gp.type == "expression_statement"
            and gp.parent is not None
            and gp.parent.type == "compound_statement"
        ):
            return "assign", gp
    # Hoisting: the statement holding the call must evaluate it exactly once, unconditionally.
    cur = call
    while cur.parent is not None and cur.parent.type not in (
        "expression_statement",
        "declaration",
        "return_statement",
    ):
        par = cur.parent
        if par.type in (
            "conditional_expression",
            "for_statement",
            "while_statement",
            "do_statement",
            "if_statement",
            "condition_clause",
        ):
            return None
        if (
            par.type == "binary_expression"
            and unit.text(par.child_by_field_name("operator")) in ("&&", "||")
            and par.child_by_field_name("right") == cur
        ):
            return None  # evaluated only when the left operand allows
        if par.type in ("lambda_expression", "compound_statement"):
            return None
        cur = par
    stmt = cur.parent
    if stmt is None or stmt.parent is None or stmt.parent.type != "compound_statement":
        return None
    return "hoist", stmt


def _inline_statements(
    unit: Unit, call: Node, h: _Helper, args: list[Node], change: Change, taken: set[str]
) -> tuple[int, int] | None:
    ctx = _call_context(unit, call)
    if ctx is None:
        return None
    how, stmt = ctx
    last = h.stmts[-1]
    returns = [n for n in walk(h.body) if n.type == "return_statement"]
    early = [r for r in returns if r != last]
    if early and not (
        how == "stmt" and all(not r.named_children for r in early) and _ends_the_kernel(unit, stmt)
    ):
        # An early return leaves the helper only; inlined it would leave the kernel. That is the
        # same thing only where nothing of the kernel follows the call (structured-exits then
        # turns the returns into conditions).
        return None
    result = (
        next((c for c in last.named_children if c.type != "comment"), None)
        if last.type == "return_statement"
        else None
    )
    if how != "stmt" and result is None:
        return None
    if how in ("hoist",) and (h.templated or h.ret_type in ("void", "auto", "")):
        return None
    body_stmts = h.stmts[:-1] if last.type == "return_statement" else h.stmts
    locals_ = {
        name for d in walk(h.body) if d.type == "declaration" for name, _n, _v in declared_name(d, unit.data)
    }
    renames = {name: _fresh(name, taken) for name in sorted(locals_)}
    values: dict[str, str] = {}
    lines: list[str] = []
    for (pname, ptype, is_ref, _is_ptr), arg in zip(h.params, args, strict=True):
        written = bool(writes_of(unit, h.body, pname))
        if is_ref:
            if arg.type not in (
                "identifier",
                "subscript_expression",
                "field_expression",
                "pointer_expression",
            ):
                return None
            values[pname] = unit.text(arg)
        elif not written and (
            arg.type in ("identifier", "number_literal")
            or (_simple_arg(unit, arg) and len(identifier_uses(unit, h.body, pname)) <= 1)
        ):
            values[pname] = unit.text(arg)
        else:
            local = _fresh(pname, taken)
            t = "auto" if h.templated else ptype
            lines.append(f"{t} {local} = {unit.text(arg)};")
            renames[pname] = local
    for s in body_stmts:
        lines.append(_substituted(unit, s, values, renames, h.tmap))
    res_text = _substituted(unit, result, values, renames, h.tmap) if result is not None else None
    indent = line_indent(unit.data, stmt.start_byte)
    if how == "stmt":
        if result is not None and has_side_effects(unit, result):
            lines.append(f"{res_text};")
        text = ("\n" + indent).join(lines) if lines else ";"
        parent = stmt.parent
        if len(lines) > 1 and (parent is None or parent.type != "compound_statement"):
            text = "{\n" + indent + "    " + ("\n" + indent + "    ").join(lines) + "\n" + indent + "}"
        change.replace(stmt, text)
    elif how in ("init", "assign"):
        # `T v = f(a);` / `v = f(a);`: the statement stays, the call becomes the helper's result.
        stmt_text = unit.text(stmt)
        call_rel = call.start_byte - stmt.start_byte
        head = stmt_text[:call_rel]
        tail = stmt_text[call_rel + (call.end_byte - call.start_byte) :]
        change.replace(stmt, ("\n" + indent).join([*lines, f"{head}({res_text}){tail}"]))
    else:
        rname = _fresh(f"{h.fn.name}_result", taken)
        lines.append(f"{h.ret_type} {rname} = {res_text};")
        stmt_text = unit.text(stmt)
        call_rel = call.start_byte - stmt.start_byte
        head = stmt_text[:call_rel]
        tail = stmt_text[call_rel + (call.end_byte - call.start_byte) :]
        change.replace(stmt, ("\n" + indent).join([*lines, f"{head}{rname}{tail}"]))
    change.notes.append(f"{h.fn.name}() inlined ({len(h.stmts)} statements)")
    return (stmt.start_byte, stmt.end_byte)


def _ends_the_kernel(unit: Unit, stmt: Node) -> bool:
    """Nothing of the kernel runs after ``stmt``: it is the last statement of its block, of each
    enclosing block and branch, and no loop encloses it."""
    cur = stmt
    while cur != unit.body:
        parent = cur.parent
        if parent is None:
            return False
        if parent.type == "compound_statement":
            later = cur.next_named_sibling
            while later is not None and later.type == "comment":
                later = later.next_named_sibling
            if later is not None:
                return False
        elif parent.type not in ("if_statement", "else_clause"):
            return False
        cur = parent
    return True


def _has_static_shared(unit: Unit, body: Node) -> bool:
    return any(
        n.type == "storage_class_specifier" and unit.text(n) == "static" and _shared_declaration(unit, n)
        for n in walk(body)
    )


def _calls_of(unit: Unit, name: str) -> int:
    """Calls of ``name`` in the kernel body (``name(...)`` or ``name<...>(...)``)."""
    count = 0
    for n in walk(unit.body):
        if n.type != "call_expression":
            continue
        f = n.child_by_field_name("function")
        if f is not None and f.type == "template_function":
            f = f.child_by_field_name("name")
        count += unit.text(f) == name
    return count


def _shared_declaration(unit: Unit, specifier: Node) -> bool:
    """``static __shared__ T buf[N]``: shared memory is per block whatever the storage class says, so
    the declaration means the same in the kernel body; a plain ``static`` local keeps state across
    calls and is not inlined."""
    decl = specifier.parent
    return decl is not None and decl.type == "declaration" and "__shared__" in unit.text(decl)
