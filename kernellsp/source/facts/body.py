"""The walk context of a kernel body: local definitions, arrays, and which names depend on the thread."""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

from kernellsp.source.model import Function, SourceModel

if TYPE_CHECKING:
    import tree_sitter

THREAD_BUILTINS = ("threadIdx",)
INDEX_BUILTINS = ("threadIdx", "blockIdx")


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
