"""The loops over a row's columns and the shared-memory trees that fold their accumulators."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from kernellsp.optimize.propose.recipes._rowreduce.model import ColLoop, Tree, _inside
from kernellsp.source.ir import THREAD_SYMBOLS, KernelIR, Loop, Poly, walk

if TYPE_CHECKING:
    import tree_sitter


def _kernel_decline(ir: KernelIR) -> str:
    """Why the kernel as a whole is not rewritten row by row (atomics, warp primitives, while loops, gridDim)."""
    if ir.atomics:
        return "the kernel uses atomics: rows are not independent"
    if ir.warp_ops:
        return "the kernel already uses warp primitives"
    if any(lp.kind != "for" for lp in ir.loops):
        return "a while/do loop: only counted for-loops over the row's columns are rewritten"
    if "gridDim" in ir.identifiers(ir.body):
        return "the kernel reads gridDim (a grid-stride loop over rows)"
    return ""


def _row_loops(ir: KernelIR) -> tuple[str, str, list[ColLoop], list[Loop]] | str:
    """The loops over the row's columns (one form and axis, one length, one block of statements): the form,
    the axis, the loops and the other loops of the kernel."""
    col_loops, other = _column_loops(ir)
    if isinstance(col_loops, str):
        return col_loops
    if not col_loops:
        return "no loop over a row's columns (for j < n with every access at row * n + j)"
    form, axis = col_loops[0][1], col_loops[0][2]
    if any(f != form or a != axis for _, f, a in col_loops):
        return "the loops mix one-thread-per-row and one-block-per-row iteration"
    loops = [c for c, _, _ in col_loops]
    length = loops[0].loop.bound()
    assert length is not None
    if any(c.loop.bound() != length for c in loops):
        return "the loops run over different lengths"
    container = loops[0].loop.node.parent
    if container is None or any(c.loop.node.parent != container for c in loops):
        return "the loops over the row are not in one block of statements"
    return form, axis, loops, other


def _row_count(ir: KernelIR, loops: list[ColLoop], row_sym: str) -> Poly | None:
    """The number of rows, from the bound check guarding the loops (``None`` when there is none)."""
    guards = [c for g in ir.guards_of(loops[0].loop.node) for c in g.conds]
    rows = next((b for c in guards if (b := c.bounds_above(Poly.sym(row_sym))) is not None), None)
    if rows is not None and rows.depends_on(THREAD_SYMBOLS):
        rows = None
    return rows


def _head(ir: KernelIR, node: tree_sitter.Node) -> str:
    return " ".join(ir.text(node).split("{")[0].split())[:80]


def _column_loops(ir: KernelIR) -> tuple[list[tuple[ColLoop, str, str]] | str, list[Loop]]:
    """Loops over a row's columns (with their form and axis) and the other loops."""
    found: list[tuple[ColLoop, str, str]] = []
    other: list[Loop] = []
    for lp in ir.loops:
        if lp.var is None or lp.start is None or lp.step is None:
            other.append(lp)
            continue
        bound = lp.bound()
        if bound is None or bound.depends_on(THREAD_SYMBOLS):
            other.append(lp)
            continue
        form = axis = None
        start = lp.start
        if lp.step == Poly.const(1) and not start.depends_on(
            THREAD_SYMBOLS | {"blockDim.x", "blockDim.y", "blockDim.z"}
        ):
            form = "thread"
        else:
            for a in "xyz":
                t = Poly.sym(f"threadIdx.{a}")
                rest = start - t
                if (
                    start.coeff(f"threadIdx.{a}") == Poly.const(1)
                    and not rest.depends_on(THREAD_SYMBOLS)
                    and (lp.step == Poly.sym(f"blockDim.{a}") or lp.step.value is not None)
                ):
                    form, axis, start = "block", a, rest
        if form is None:
            other.append(lp)
            continue
        accs = [a for a in ir.accumulations if a.loops and a.loops[-1].node == lp.node]
        local = ir.locals.get(lp.var)
        var_type = lp.var_type or (local.ctype if local is not None else "int")
        found.append((ColLoop(lp, lp.var, var_type or "int", start, accs), form, axis or ""))
    # The axis of a thread-per-row kernel is the one its row index uses.
    for i, (c, form, _) in enumerate(found):
        if form == "thread":
            syms = {
                s
                for a in ir.global_accesses()
                if a.index is not None and c.loop in a.loops
                for s in a.index.symbols()
            }
            axes = sorted(s[4:] for s in syms if s.startswith("gid."))
            if len(axes) != 1:
                return (
                    "a loop's accesses do not index the row with one global thread index (gid.x, gid.y or "
                    "gid.z)"
                ), other
            found[i] = (c, form, axes[0])
    nested = [
        c
        for c, _, _ in found
        if any(
            o.node != c.loop.node
            and o.node.start_byte <= c.loop.node.start_byte
            and c.loop.node.end_byte <= o.node.end_byte
            for o in ir.loops
        )
    ]
    if nested:
        return f"the loop over {nested[0].var} is nested in another loop", other
    return found, other


def _trees(ir: KernelIR, loops: list[ColLoop], other: list[Loop]) -> tuple[list[Tree], list[Any]] | str:
    """The shared-memory trees that fold a loop's accumulator across the block, and statements to delete."""
    shared = {v.name for v in ir.locals.values() if v.shared}
    accs = {a.var: a.op for c in loops for a in c.accs}
    trees: list[Tree] = []
    delete: list[Any] = []
    used_loops: set[int] = set()
    container_stmts = [s for s in loops[0].loop.node.parent.named_children if s.type != "comment"]  # type: ignore[union-attr]
    i = 0
    while i < len(container_stmts):
        st = _shared_store(ir, container_stmts[i], shared)
        if st is None:
            i += 1
            continue
        got = _tree_at(ir, container_stmts, i, st, shared, accs)
        if isinstance(got, str):
            return got
        tree, loop_id, i = got
        used_loops.add(loop_id)
        trees.append(tree)
        delete += tree.statements
    why = _tree_leftover_decline(ir, other, used_loops, trees, delete)
    if why:
        return why
    # Every remaining barrier only protected the trees: they go too.
    for b in ir.barriers:
        stmt = b.parent
        if (
            stmt is not None
            and stmt.type == "expression_statement"
            and not any(_inside(stmt, d) for d in delete)
        ):
            delete.append(stmt)
    for name in {t.array for t in trees}:
        delete.append(ir.locals[name].decl)
    return trees, delete


def _tree_at(
    ir: KernelIR,
    container_stmts: list[Any],
    i: int,
    st: tuple[str, str],
    shared: set[str],
    accs: Mapping[str, str],
) -> tuple[Tree, int, int] | str:
    """The tree that starts with the shared store ``container_stmts[i]`` (``st``: its array and value): the
    tree, its loop's node id and the index of the statement after it."""
    s = container_stmts[i]
    array, value = st
    if value not in accs:
        return f"{array}[...] = {value}: the value folded by the shared tree is not a loop's accumulator"
    stmts = [s]
    j = _after_barriers(ir, container_stmts, i + 1, stmts)
    if j >= len(container_stmts) or container_stmts[j].type != "for_statement":
        return f"{array}[...] = {value} is not followed by a reduction tree loop"
    op = _tree_op(ir, container_stmts[j], array)
    if op is None:
        return f"the loop after {array}[...] = {value} is not a tree reduction of {array}"
    if op != accs[value]:
        return f"the tree folds {array} with {op} but {value} accumulates with {accs[value]}"
    stmts.append(container_stmts[j])
    loop_id = container_stmts[j].id
    j = _after_barriers(ir, container_stmts, j + 1, stmts)
    # Reads of array[0] until the array is written again.
    nxt = next(
        (k for k in range(j, len(container_stmts)) if _shared_store(ir, container_stmts[k], shared)), None
    )
    stop = container_stmts[nxt].start_byte if nxt is not None else 1 << 62
    reads = [
        a.node
        for a in ir.accesses
        if a.space == "shared"
        and a.base == array
        and a.kind == "load"
        and container_stmts[j - 1].end_byte <= a.node.start_byte < stop
    ]
    for r in reads:
        acc_node = next(a for a in ir.accesses if a.node == r)
        if acc_node.index != Poly():
            return f"{array} is read at {acc_node.index_text} after the tree, not at [0]"
    if _assigned_between(ir, value, s.end_byte, max((r.end_byte for r in reads), default=s.end_byte)):
        return f"{value} changes between the tree and the read of {array}[0]"
    return Tree(array, value, op, stmts, reads), loop_id, j


def _after_barriers(ir: KernelIR, container_stmts: list[Any], j: int, stmts: list[Any]) -> int:
    """The index of the first statement from ``j`` on that is not ``__syncthreads()``; those go to ``stmts``."""
    while j < len(container_stmts) and _is_barrier(ir, container_stmts[j]):
        stmts.append(container_stmts[j])
        j += 1
    return j


def _tree_leftover_decline(
    ir: KernelIR, other: list[Loop], used_loops: set[int], trees: list[Tree], delete: list[Any]
) -> str:
    """A loop that is no tree, or a tree array used outside its tree."""
    leftover = [lp for lp in other if lp.node.id not in used_loops]
    if leftover:
        return f"a loop that is neither over the row's columns nor a reduction tree: `{_head(ir, leftover[0].node)}`"
    tree_arrays = {t.array for t in trees}
    for a in ir.accesses:
        if (
            a.space == "shared"
            and a.base in tree_arrays
            and not any(_inside(a.node, s) for s in delete)
            and not any(a.node == r for t in trees for r in t.reads)
        ):
            return f"{a.base} is used outside its reduction tree (line {a.line + 1})"
    return ""


def _is_barrier(ir: KernelIR, s: Any) -> bool:
    return s.type == "expression_statement" and ir.text(s).replace(" ", "").startswith("__syncthreads()")


def _shared_store(ir: KernelIR, s: Any, shared: set[str]) -> tuple[str, str] | None:
    """``P[tid] = v;`` with ``P`` shared and ``tid`` the thread index: ``(P, v)``."""
    if s.type != "expression_statement":
        return None
    e = next(iter(s.named_children), None)
    if e is None or e.type != "assignment_expression" or ir.text(e.child_by_field_name("operator")) != "=":
        return None
    left, right = e.child_by_field_name("left"), e.child_by_field_name("right")
    if left is None or right is None or left.type != "subscript_expression" or right.type != "identifier":
        return None
    base = left.child_by_field_name("argument")
    if base is None or ir.text(base) not in shared:
        return None
    acc = next((a for a in ir.accesses if a.node == left), None)
    if (
        acc is None
        or acc.index is None
        or acc.index.symbols() - {"threadIdx.x", "threadIdx.y", "threadIdx.z"}
    ):
        return None
    return ir.text(base), ir.text(right)


def _tree_op(ir: KernelIR, loop: Any, array: str) -> str | None:
    """The operator of a tree loop ``P[t] op= P[t + s]`` (sum/max/min), or ``None``."""
    body = loop.child_by_field_name("body")
    if body is None:
        return None
    ops = set()
    for n in walk(body):
        if n.type == "call_expression" and ir.text(n.child_by_field_name("function")).startswith(
            "__syncthreads"
        ):
            continue
        if (
            n.type == "subscript_expression"
            and n.parent is not None
            and n.parent.type == "assignment_expression"
        ):
            left = n.parent.child_by_field_name("left")
            if left != n:
                continue
            if ir.text(n.child_by_field_name("argument")) != array:
                return None
            e = n.parent
            op = ir.text(e.child_by_field_name("operator"))
            right = ir.text(e.child_by_field_name("right")).replace(" ", "")
            if op == "+=":
                ops.add("sum")
            elif op == "=" and right.startswith(("fmaxf(", "max(", "fmax(")):
                ops.add("max")
            elif op == "=" and right.startswith(("fminf(", "min(", "fmin(")):
                ops.add("min")
            elif op == "=" and "+" in right and right.count(array) == 2:
                ops.add("sum")
            else:
                return None
        if n.type in ("call_expression",) and ir.text(n.child_by_field_name("function")).startswith("atomic"):
            return None
    if any(a.space == "global" and _inside(a.node, body) for a in ir.accesses):
        return None
    return ops.pop() if len(ops) == 1 else None


def _assigned_between(ir: KernelIR, var: str, start: int, end: int) -> bool:
    for n in walk(ir.body):
        if not (start <= n.start_byte < end):
            continue
        if n.type == "assignment_expression":
            left = n.child_by_field_name("left")
            if left is not None and ir.text(left) == var:
                return True
        if n.type == "update_expression" and ir.text(n.child_by_field_name("argument")) == var:
            return True
    return False
