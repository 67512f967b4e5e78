"""Source-level analysis of kernel bodies: the facts static rules reason about.

For each kernel this walks the tree-sitter body once and computes:

* **thread dependence** (taint): which local variables depend on ``threadIdx`` (and, separately,
  on any index: ``threadIdx`` or ``blockIdx``), through declarations, assignments and loads;
* **barriers under divergent control**: ``__syncthreads()`` inside a branch or loop whose
  condition depends on the thread, or after a thread-dependent early ``return``;
* **unguarded accesses**: subscripts of pointer parameters indexed by a thread-dependent value
  with no enclosing condition (``if``, loop condition, ``?:``, early return) over that value;
* **atomics on one address**: ``atomic*`` calls whose address does not depend on ``threadIdx``;
* **strided access**: the index's step per ``threadIdx.x`` (a numeric probe of the index
  expression with the kernel's local definitions substituted);
* **local arrays indexed at run time**, **double-precision literals and declarations**, and
  **read-only pointers** lacking ``const``/``__restrict__``.

Everything is best effort over partial code: unknown constructs make a detector stay silent, never
raise.
"""

from __future__ import annotations

import contextlib
import random
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from kernellsp.source import exprs
from kernellsp.source.model import Function, SourceModel

if TYPE_CHECKING:
    import tree_sitter

THREAD_BUILTINS = ("threadIdx",)
INDEX_BUILTINS = ("threadIdx", "blockIdx")
ATOMICS = re.compile(
    r"^(atomic(Add|Sub|Exch|Min|Max|Inc|Dec|CAS|And|Or|Xor)(_block|_system)?|__nv_atomic\w+)$"
)
BARRIERS = ("__syncthreads", "__syncthreads_count", "__syncthreads_and", "__syncthreads_or")
_DOUBLE_LITERAL = re.compile(r"^(\d+\.\d*|\.\d+|\d+\.?\d*[eE][+-]?\d+)$")
_CONTROL = (
    "if_statement",
    "for_statement",
    "while_statement",
    "do_statement",
    "switch_statement",
    "conditional_expression",
    "for_range_loop",
)


@dataclass
class LineFacts:
    """Per-line facts (0-based line) for one kernel; values feed the metric registry."""

    sync_divergent: int = 0
    sync_after_divergent_return: int = 0
    unguarded_accesses: list[str] = field(default_factory=list)
    atomic_same_address: list[str] = field(default_factory=list)
    atomic_in_loop: int = 0
    atomic_scope: str = "grid"
    strided: list[tuple[str, int, str]] = field(default_factory=list)  # (pointer, stride, depends-on)
    local_array_runtime_index: list[str] = field(default_factory=list)
    double_literals: int = 0
    double_decls: int = 0


@dataclass
class KernelFacts:
    """Facts about one kernel: per-line facts and kernel-wide ones."""

    name: str
    lines: dict[int, LineFacts] = field(default_factory=dict)
    readonly_unqualified: list[str] = field(default_factory=list)
    uses_double_params: bool = False
    local_arrays: list[str] = field(default_factory=list)
    shared_arrays: list[str] = field(default_factory=list)
    has_grid_stride_loop: bool = False

    def line(self, n: int) -> LineFacts:
        return self.lines.setdefault(n, LineFacts())


class _Ctx:
    def __init__(self, model: SourceModel, fn: Function, body: tree_sitter.Node) -> None:
        self.model = model
        self.fn = fn
        self.body = body
        self.data = model.text.encode("utf-8", errors="replace")
        self.pointers = {p.name for p in fn.params if p.is_pointer}
        self.params = {p.name for p in fn.params}
        self.thread_tainted: set[str] = set()
        self.index_tainted: set[str] = set()
        self.defs: dict[str, list[tree_sitter.Node]] = {}
        self.local_arrays: set[str] = set()
        self.shared_arrays: set[str] = set()

    def text(self, n: tree_sitter.Node | None) -> str:
        if n is None:
            return ""
        return self.data[n.start_byte : n.end_byte].decode("utf-8", errors="replace")


def _walk(n: tree_sitter.Node) -> Iterator[tree_sitter.Node]:
    stack = [n]
    while stack:
        cur = stack.pop()
        yield cur
        stack.extend(reversed(cur.children))


def _idents(ctx: _Ctx, n: tree_sitter.Node | None) -> set[str]:
    """Identifiers read by an expression (builtins like ``threadIdx`` included, fields excluded)."""
    out: set[str] = set()
    if n is None:
        return out
    for c in _walk(n):
        if c.type == "identifier":
            out.add(ctx.text(c))
    return out


def _assign_target(ctx: _Ctx, n: tree_sitter.Node | None) -> str | None:
    """The variable an assignment writes (``x``, ``x.y`` → ``x``); ``None`` for subscripts of memory."""
    if n is None:
        return None
    if n.type == "identifier":
        return ctx.text(n)
    if n.type == "field_expression":
        return _assign_target(ctx, n.child_by_field_name("argument"))
    return None


def _collect_defs(ctx: _Ctx) -> None:
    for n in _walk(ctx.body):
        if n.type == "declaration":
            is_shared = "__shared__" in ctx.text(n).split("[")[0]
            for d in n.children_by_field_name("declarator"):
                if d.type == "init_declarator":
                    name_node = d.child_by_field_name("declarator")
                    value = d.child_by_field_name("value")
                    # `float* p = ...` / `T& r = ...`: the name sits under pointer/reference declarators.
                    while name_node is not None and name_node.type in (
                        "pointer_declarator",
                        "reference_declarator",
                    ):
                        name_node = name_node.child_by_field_name("declarator") or next(
                            (c for c in name_node.children if c.type == "identifier"), None
                        )
                    if name_node is not None and name_node.type == "identifier" and value is not None:
                        ctx.defs.setdefault(ctx.text(name_node), []).append(value)
                    if name_node is not None and name_node.type == "array_declarator":
                        _add_array(ctx, name_node, is_shared)
                elif d.type == "array_declarator":
                    _add_array(ctx, d, is_shared)
        elif n.type == "assignment_expression":
            target = _assign_target(ctx, n.child_by_field_name("left"))
            right = n.child_by_field_name("right")
            if target and right is not None:
                ctx.defs.setdefault(target, []).append(right)
        elif n.type == "for_range_loop":
            pass


def _add_array(ctx: _Ctx, d: tree_sitter.Node, is_shared: bool) -> None:
    inner = d.child_by_field_name("declarator")
    while inner is not None and inner.type == "array_declarator":
        inner = inner.child_by_field_name("declarator")
    if inner is not None and inner.type == "identifier":
        (ctx.shared_arrays if is_shared else ctx.local_arrays).add(ctx.text(inner))


def _taint(ctx: _Ctx, seeds: tuple[str, ...]) -> set[str]:
    """Variables whose value depends on ``seeds`` (fixpoint over definitions; loads propagate)."""
    tainted: set[str] = set()
    changed = True
    while changed:
        changed = False
        for name, values in ctx.defs.items():
            if name in tainted:
                continue
            for v in values:
                ids = _idents(ctx, v)
                if ids & set(seeds) or ids & tainted:
                    tainted.add(name)
                    changed = True
                    break
    # Loop variables initialised from a tainted value are tainted too (grid-stride loops).
    return tainted


def _depends(ctx: _Ctx, n: tree_sitter.Node | None, seeds: tuple[str, ...], tainted: set[str]) -> bool:
    ids = _idents(ctx, n)
    return bool(ids & set(seeds) or ids & tainted)


def _closure(ctx: _Ctx, names: set[str], depth: int = 6) -> set[str]:
    """``names`` plus every variable they were computed from (through local definitions)."""
    out = set(names)
    frontier = set(names)
    for _ in range(depth):
        nxt: set[str] = set()
        for name in frontier:
            for v in ctx.defs.get(name, []):
                nxt |= _idents(ctx, v) - out
        if not nxt:
            break
        out |= nxt
        frontier = nxt
    return out


def _conditions_above(ctx: _Ctx, node: tree_sitter.Node) -> list[tuple[tree_sitter.Node, str]]:
    """Conditions of the control statements enclosing ``node`` within the kernel body."""
    conds: list[tuple[tree_sitter.Node, str]] = []
    child = node
    parent = node.parent
    while parent is not None and parent.start_byte >= ctx.body.start_byte and parent != ctx.body.parent:
        if (
            parent.type in ("if_statement", "while_statement", "switch_statement")
            or parent.type == "do_statement"
            or parent.type == "for_statement"
            or parent.type == "conditional_expression"
        ):
            c = parent.child_by_field_name("condition")
            if c is not None and c != child:
                conds.append((c, parent.type))
        elif parent.type == "binary_expression" and ctx.text(parent).find("&&") >= 0:
            # `i < n && p[i] > 0`: the left operand guards the right one.
            left = parent.child_by_field_name("left")
            op = parent.child_by_field_name("operator")
            if left is not None and op is not None and ctx.text(op) in ("&&", "||") and child != left:
                conds.append((left, "and"))
        if parent == ctx.body:
            break
        child = parent
        parent = parent.parent
    return conds


def _early_returns_before(ctx: _Ctx, node: tree_sitter.Node) -> list[tree_sitter.Node]:
    """Conditions of ``if (...) return;`` statements that run before ``node`` in the kernel."""
    out: list[tree_sitter.Node] = []
    for n in _walk(ctx.body):
        if n.start_byte >= node.start_byte:
            break
        if n.type == "if_statement":
            cons = n.child_by_field_name("consequence")
            if (
                cons is not None
                and n.end_byte <= node.start_byte
                and any(c.type == "return_statement" for c in _walk(cons))
            ):
                cond = n.child_by_field_name("condition")
                if cond is not None:
                    out.append(cond)
    return out


def _strip_parens(ctx: _Ctx, n: tree_sitter.Node | None) -> tree_sitter.Node | None:
    while n is not None and n.type in ("parenthesized_expression", "condition_clause"):
        n = next((c for c in n.children if c.is_named), None)
    return n


def _conjuncts(ctx: _Ctx, n: tree_sitter.Node | None) -> list[tree_sitter.Node]:
    """The operands of a top-level ``&&`` chain (``a && (b && c)`` → a, b, c)."""
    n = _strip_parens(ctx, n)
    if n is None:
        return []
    op = n.child_by_field_name("operator") if n.type == "binary_expression" else None
    if op is not None and ctx.text(op) == "&&":
        return _conjuncts(ctx, n.child_by_field_name("left")) + _conjuncts(
            ctx, n.child_by_field_name("right")
        )
    return [n]


def _selects_one(ctx: _Ctx, cond: tree_sitter.Node, taken: bool) -> bool:
    """Does ``cond`` being ``taken`` (true) or not leave one thread of its group: ``tid == 0``, ``!lane`` when
    true; ``lane != 0``, ``tid > 0``, ``lane`` when false? The thread side must depend on threadIdx, the other
    side must not."""

    def thread(n: tree_sitter.Node | None) -> bool:
        return _depends(ctx, n, THREAD_BUILTINS, ctx.thread_tainted)

    parts = _conjuncts(ctx, cond) if taken else [_strip_parens(ctx, cond)]
    for c in parts:
        if c is None:
            continue
        if c.type == "unary_expression" and ctx.text(c).lstrip().startswith("!"):
            if taken and thread(c):
                return True
            continue
        if c.type != "binary_expression":
            # `if (lane) return;`: the threads that go on are those with lane == 0.
            if not taken and c.type in ("identifier", "field_expression") and thread(c):
                return True
            continue
        op_node = c.child_by_field_name("operator")
        op = ctx.text(op_node) if op_node is not None else ""
        left, right = c.child_by_field_name("left"), c.child_by_field_name("right")
        if thread(left) == thread(right):
            continue
        if (taken and op == "==") or (not taken and op in ("!=", ">", ">=", "<")):
            # `<` when false: `if (0 < tid) return;` (written the other way round).
            if op == "<" and not thread(right):
                continue
            if op in (">", ">=") and not thread(left):
                continue
            return True
    return False


def _one_thread_per_group(ctx: _Ctx, node: tree_sitter.Node) -> bool:
    """Is ``node`` reached by one thread of its block or warp: inside ``if (threadIdx.x == 0)`` (or ``lane == 0``,
    ``!tid``), in the ``else`` of ``if (tid != 0)``, or after ``if (lane != 0) return;``? An atomic there is the
    hierarchical reduction's last step, not every thread's."""
    child, parent = node, node.parent
    while parent is not None and parent != ctx.body.parent:
        if parent.type == "if_statement":
            cond = parent.child_by_field_name("condition")
            cons = parent.child_by_field_name("consequence")
            alt = parent.child_by_field_name("alternative")
            if cond is not None and child != cond:
                if cons is not None and child == cons and _selects_one(ctx, cond, True):
                    return True
                if alt is not None and child == alt and _selects_one(ctx, cond, False):
                    return True
        if parent == ctx.body:
            break
        child, parent = parent, parent.parent
    return any(_selects_one(ctx, c, False) for c in _early_returns_before(ctx, node))


def _in_loop(ctx: _Ctx, node: tree_sitter.Node) -> bool:
    p = node.parent
    while p is not None and p != ctx.body.parent:
        if p.type in ("for_statement", "while_statement", "do_statement", "for_range_loop"):
            return True
        p = p.parent
    return False


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


# --------------------------------------------------------------------------------------------------


def analyse_kernel(model: SourceModel, fn: Function) -> KernelFacts:
    """Compute :class:`KernelFacts` for one kernel definition."""
    facts = KernelFacts(name=fn.name)
    if model.tree is None or fn.body_span is None:
        return facts
    body = model.tree.root_node.descendant_for_byte_range(fn.body_span.start_byte, fn.body_span.end_byte)
    if body is None:
        return facts
    while body is not None and body.type != "compound_statement":
        body = body.parent
    if body is None:
        return facts
    ctx = _Ctx(model, fn, body)
    with contextlib.suppress(RecursionError):
        _analyse(ctx, facts)
    return facts


def _analyse(ctx: _Ctx, facts: KernelFacts) -> None:
    fn = ctx.fn
    _collect_defs(ctx)
    ctx.thread_tainted = _taint(ctx, THREAD_BUILTINS)
    ctx.index_tainted = _taint(ctx, INDEX_BUILTINS)
    facts.local_arrays = sorted(ctx.local_arrays)
    facts.shared_arrays = sorted(ctx.shared_arrays)
    facts.uses_double_params = any("double" in p.base_type for p in fn.params)
    written: set[str] = set()
    passed_to_calls: set[str] = set()

    for n in _walk(ctx.body):
        line = n.start_point[0]
        t = n.type
        if t == "call_expression":
            _call_facts(ctx, facts, n, line, written, passed_to_calls)
        elif t in ("assignment_expression", "update_expression"):
            _written_pointers(ctx, n, written)
        elif t == "subscript_expression":
            _subscript_facts(ctx, facts, n, line)
        elif t == "number_literal":
            txt = ctx.text(n)
            if _DOUBLE_LITERAL.match(txt) and not txt.lower().endswith(("f", "l")):
                facts.line(line).double_literals += 1
        elif t == "primitive_type" and ctx.text(n) == "double":
            facts.line(line).double_decls += 1
        elif t == "for_statement":
            update = n.child_by_field_name("update")
            if update is not None and "gridDim" in ctx.text(update):
                facts.has_grid_stride_loop = True

    for p in fn.params:
        if (
            p.is_pointer
            and p.name not in written
            and p.name not in passed_to_calls
            and not (p.is_const and p.is_restrict)
            and _reads(ctx, p.name)
        ):
            facts.readonly_unqualified.append(p.name)


def _call_facts(
    ctx: _Ctx,
    facts: KernelFacts,
    n: tree_sitter.Node,
    line: int,
    written: set[str],
    passed_to_calls: set[str],
) -> None:
    """A call: the pointers it is passed, a divergent barrier, an atomic on one address."""
    fname = ctx.text(n.child_by_field_name("function"))
    args = n.child_by_field_name("arguments")
    arg_nodes = [c for c in args.children if c.is_named] if args is not None else []
    for a in arg_nodes:
        passed_to_calls |= _idents(ctx, a) & ctx.pointers if not ATOMICS.match(fname) else set()
    if fname in BARRIERS:
        conds = _conditions_above(ctx, n)
        if any(_depends(ctx, c, THREAD_BUILTINS, ctx.thread_tainted) for c, _ in conds):
            facts.line(line).sync_divergent += 1
        elif any(
            _depends(ctx, c, THREAD_BUILTINS, ctx.thread_tainted) for c in _early_returns_before(ctx, n)
        ):
            facts.line(line).sync_after_divergent_return += 1
    elif ATOMICS.match(fname) and arg_nodes:
        _atomic_facts(ctx, facts, n, line, arg_nodes[0], written)


def _atomic_facts(
    ctx: _Ctx, facts: KernelFacts, n: tree_sitter.Node, line: int, addr: tree_sitter.Node, written: set[str]
) -> None:
    """An atomic writes its pointer; every thread of the grid (or block) on one global address is contention."""
    ids = _idents(ctx, addr)
    base_ptr = next(iter(ids & ctx.pointers), None) or next(
        (i for i in ids if i in ctx.defs and _closure(ctx, {i}) & ctx.pointers), None
    )
    is_shared = bool(ids & ctx.shared_arrays)
    if base_ptr is not None:
        written.add(base_ptr)
    if (
        base_ptr is not None
        and not is_shared
        and not _depends(ctx, addr, THREAD_BUILTINS, ctx.thread_tainted)
        and not _one_thread_per_group(ctx, n)
    ):
        facts.line(line).atomic_same_address.append(ctx.text(addr))
        # An address that depends on blockIdx is shared by one block, otherwise by the grid.
        if _depends(ctx, addr, INDEX_BUILTINS, ctx.index_tainted):
            facts.line(line).atomic_scope = "block"
        if _in_loop(ctx, n):
            facts.line(line).atomic_in_loop += 1


def _written_pointers(ctx: _Ctx, n: tree_sitter.Node, written: set[str]) -> None:
    """The pointers an assignment or an update writes through (``x[i] = ``, ``*p += ``, ``s.x[i]++``)."""
    target = (
        n.child_by_field_name("left")
        if n.type == "assignment_expression"
        else n.child_by_field_name("argument")
    )
    while target is not None and target.type in (
        "subscript_expression",
        "pointer_expression",
        "field_expression",
        "parenthesized_expression",
    ):
        inner = target.child_by_field_name("argument")
        if inner is None:
            inner = next((c for c in target.children if c.is_named), None)
        if target.type in ("subscript_expression", "pointer_expression") and inner is not None:
            written |= _idents(ctx, inner) & ctx.pointers
            # Writes through a local pointer derived from a parameter write the parameter.
            for nm in _idents(ctx, inner):
                written |= _closure(ctx, {nm}) & ctx.pointers
        target = inner


def _subscript_facts(ctx: _Ctx, facts: KernelFacts, n: tree_sitter.Node, line: int) -> None:
    """``x[i]`` on a pointer parameter (guards, stride) or on a local array (a runtime index)."""
    base = n.child_by_field_name("argument")
    idx_list = n.child_by_field_name("indices")
    idx = next((c for c in idx_list.children if c.is_named), None) if idx_list is not None else None
    base_name = ctx.text(base) if base is not None and base.type == "identifier" else None
    if base_name is None or idx is None:
        return
    if base_name in ctx.pointers:
        _check_access(ctx, facts, n, base_name, idx, line)
    elif base_name in ctx.local_arrays:
        ids = _idents(ctx, idx)
        consts = set(ctx.model.defines)
        if ids - consts and not (n.parent is not None and n.parent.type == "array_declarator"):
            # A loop counter of a loop with constant bounds may be unrolled into registers;
            # the rule confirms with ptxas' stack frame / SASS local traffic.
            facts.line(line).local_array_runtime_index.append(ctx.text(n))


def _reads(ctx: _Ctx, name: str) -> bool:
    return any(n.type == "identifier" and ctx.text(n) == name for n in _walk(ctx.body))


def _check_access(
    ctx: _Ctx, facts: KernelFacts, n: tree_sitter.Node, base: str, idx: tree_sitter.Node, line: int
) -> None:
    if not _depends(ctx, idx, INDEX_BUILTINS, ctx.index_tainted):
        return
    idx_vars = _closure(ctx, _idents(ctx, idx))
    guard_ids: set[str] = set()
    for c, _kind in _conditions_above(ctx, n):
        guard_ids |= _closure(ctx, _idents(ctx, c))
    for c in _early_returns_before(ctx, n):
        guard_ids |= _closure(ctx, _idents(ctx, c))
    # A guard on any variable the index is computed from counts (row < M guards A[row*K + k]).
    relevant = (idx_vars & guard_ids) - {"blockDim", "gridDim"}
    if not relevant:
        facts.line(line).unguarded_accesses.append(ctx.text(n))
    st = _stride(ctx, idx)
    if st is not None and abs(st[0]) > 1:
        facts.line(line).strided.append((base, st[0], st[1]))


def analyse(model: SourceModel) -> dict[str, KernelFacts]:
    """Facts for every kernel with a body, by name (the first definition wins for overloads)."""
    out: dict[str, KernelFacts] = {}
    for fn in model.kernels:
        if fn.name not in out:
            out[fn.name] = analyse_kernel(model, fn)
    return out


def as_line_metrics(lf: LineFacts) -> dict[str, Any]:
    """Flatten line facts into named metrics (see :mod:`kernellsp.rules.registry`)."""
    strided = max(lf.strided, key=lambda s: abs(s[1]), default=None)
    return {
        "sync_in_divergent_branch": lf.sync_divergent,
        "sync_after_divergent_return": lf.sync_after_divergent_return,
        "unguarded_accesses": len(lf.unguarded_accesses),
        "unguarded_access_text": ", ".join(lf.unguarded_accesses[:3]),
        "atomic_same_address": len(lf.atomic_same_address),
        "atomic_target": lf.atomic_same_address[0] if lf.atomic_same_address else "",
        "atomic_scope": (
            "every thread of a block" if lf.atomic_scope == "block" else "every thread of the grid"
        )
        if lf.atomic_same_address
        else "",
        "atomic_in_loop": lf.atomic_in_loop,
        "strided_access": 1 if strided else 0,
        "access_stride": abs(strided[1]) if strided else 0,
        "strided_pointer": strided[0] if strided else "",
        "stride_depends_on": (strided[2] or "constants") if strided else "",
        # Human form of the stride: the names it scales with, or the constant itself.
        "stride_text": (f"`{strided[2]}`" if strided[2] else str(abs(strided[1]))) if strided else "",
        "local_array_runtime_index": len(lf.local_array_runtime_index),
        "local_array_access": lf.local_array_runtime_index[0] if lf.local_array_runtime_index else "",
        "double_literals": lf.double_literals,
        "double_decls": lf.double_decls,
    }
