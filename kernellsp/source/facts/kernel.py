"""The facts of one kernel (:class:`KernelFacts`, per line :class:`LineFacts`) and the pass that computes them."""

from __future__ import annotations

import contextlib
import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from kernellsp.source.facts.body import (
    INDEX_BUILTINS,
    THREAD_BUILTINS,
    _closure,
    _collect_defs,
    _Ctx,
    _depends,
    _idents,
    _taint,
    _walk,
)
from kernellsp.source.facts.conditions import (
    _conditions_above,
    _early_returns_before,
    _in_loop,
    _one_thread_per_group,
)
from kernellsp.source.facts.stride import _stride
from kernellsp.source.model import Function, SourceModel

if TYPE_CHECKING:
    import tree_sitter

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


def _escaping_pointers(ctx: _Ctx, arg: tree_sitter.Node) -> set[str]:
    """Pointer parameters whose address an argument expression hands to the callee (``p``, ``p + i``,
    ``&p[i]``): the callee may write through them. A value loaded through one (``p[i]``, ``*p``) is not: in
    ``out[i] = sq(in[i])`` the callee gets a float, and ``in`` stays read-only."""

    def is_op(n: tree_sitter.Node, op: str) -> bool:
        return n.type == "pointer_expression" and ctx.text(n).lstrip().startswith(op)

    def loaded_at(ident: tree_sitter.Node) -> tree_sitter.Node | None:
        """The load (subscript or dereference) that turns the pointer into a value, if one does in ``arg``."""
        node = ident
        while node != arg and node.parent is not None:
            parent = node.parent
            if (
                parent.type == "subscript_expression" and parent.child_by_field_name("argument") == node
            ) or is_op(parent, "*"):
                return parent
            node = parent
        return None

    def under_address_of(load: tree_sitter.Node) -> bool:
        node: tree_sitter.Node | None = load
        while node is not None and node != arg.parent:
            if is_op(node, "&"):
                return True
            node = node.parent
        return False

    out: set[str] = set()
    for c in _walk(arg):
        if c.type == "identifier" and ctx.text(c) in ctx.pointers:
            load = loaded_at(c)
            if load is None or under_address_of(load):
                out.add(ctx.text(c))
    return out


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
        passed_to_calls |= _escaping_pointers(ctx, a) if not ATOMICS.match(fname) else set()
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
