"""Row-wise reductions and normalisations: a warp (or a block) per row, the row kept in registers.

Matches kernels that process a matrix row by row with loops over the row's columns: softmax,
log-softmax, layernorm, rmsnorm, row sum/max/mean and any mix of *reduction loops* (``acc += f(x[j])``,
``m = fmaxf(m, x[j])``, ``if (x[j] > m) m = x[j]``, several accumulators per loop) and *map loops*
(``y[j] = g(x[j], gamma[j], mean, ...)``) over the same row length. Two naive shapes are recognised:

* one thread per row: the row is the global thread index (``blockIdx * blockDim + threadIdx`` along
  any axis, any spelling) and each loop walks the row sequentially (uncoalesced: neighbouring
  threads read addresses a whole row apart);
* one block per row: the row is ``blockIdx`` and the loops stride by the block
  (``for (j = threadIdx.x; j < n; j += blockDim.x)``), each partial result folded by a shared-memory
  tree (``partial[tid] = s; __syncthreads(); for (...) if (...) partial[tid] += partial[tid + s]; ...
  partial[0]``), divergent or not.

The rewrite keeps the user's statements (their math, their precision, their guards) and changes
who runs them: the row's columns are dealt to the 32 lanes of a warp (``layout=warp``, for short
rows, several rows per block) or to all threads of a block (``layout=block``, for long rows); every
reduction loop is followed by a butterfly all-reduce (``__shfl_xor_sync``, then shared memory across
warps) with the accumulator's own operator, so every lane continues with the row's value and the
shared-memory trees disappear. When the row fits (``slots`` x threads x ``vec`` elements, chosen
from the spec's main shape), each input row is loaded once into registers with 16-byte vector
loads (after a run-time alignment check; scalar loads otherwise) and every later pass reads the
registers: softmax, layernorm and rmsnorm then move each input byte once and each output byte once,
whatever number of passes the source makes. Longer rows take a streaming path (coalesced, several
passes through L1/L2). Double literals in a kernel with no ``double`` anywhere (``1.0 / sum``,
``1e-5``) are written as float literals, so no fp64 instructions remain in the loop.

A host-launched kernel keeps the host's launch: with one thread per row, each warp of the host's
block runs the block's 32 rows of its own lanes one after the other (the block must be a multiple
of 32 threads); with one block per row, the host's block is the row's team.

Declines when a loop carries state other than associative accumulators (Welford updates, argmax
with an index), when loops run over different lengths or nest, when a loop reads another row or a
neighbour column, when an accumulator's type has no identity here (``__half``), when atomics or
other shared memory remain, or when the number of rows is unknown for a warp-per-row launch.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from kernellsp.optimize.propose.recipes import _memshape as ms
from kernellsp.optimize.propose.recipes._elementwise.launch import spec_expr
from kernellsp.optimize.propose.recipes.base import (
    Decline,
    Match,
    RecipeContext,
    RecipeError,
    Rewrite,
    replace_nodes,
    signature_text,
)
from kernellsp.source import exprs
from kernellsp.source import spec as specmod
from kernellsp.source.ir import THREAD_SYMBOLS, Accumulation, KernelIR, Loop, Poly, walk

if TYPE_CHECKING:
    import tree_sitter

NAME = "rowreduce-warp-block"
ARCHETYPE = "rowreduce"
RULES = ("KL404", "KL601", "KL401", "KL501", "KL510", "KL505")
PARAMS: dict[str, list[Any]] = {"layout": ["warp", "block"], "threads": [256, 128, 512, 1024], "vec": [4, 1]}

#: Bytes of one cached row per thread, at most (64 registers; beyond it the streaming path runs).
MAX_ROW_BYTES = 256

_FLOAT_LIT = re.compile(r"^(\d+\.\d*|\.\d+|\d+)([eE][+-]?\d+)?$")
_IDENTITY = {
    ("sum", "f"): "0.0f",
    ("sum", "d"): "0.0",
    ("sum", "i"): "0",
    ("prod", "f"): "1.0f",
    ("prod", "d"): "1.0",
    ("prod", "i"): "1",
    ("max", "f"): "-__int_as_float(0x7f800000)",
    ("max", "d"): "-__longlong_as_double(0x7ff0000000000000LL)",
    ("min", "f"): "__int_as_float(0x7f800000)",
    ("min", "d"): "__longlong_as_double(0x7ff0000000000000LL)",
    ("and", "i"): "~0",
    ("or", "i"): "0",
    ("xor", "i"): "0",
}
_INT_LIMITS = {
    "int": ("(-2147483647 - 1)", "2147483647"),
    "long long": ("(-9223372036854775807LL - 1)", "9223372036854775807LL"),
    "unsigned int": ("0u", "0xffffffffu"),
    "unsigned long long": ("0ull", "0xffffffffffffffffull"),
}
_TYPES = {
    "float": "f",
    "double": "d",
    "int": "i",
    "unsigned": "i",
    "unsigned int": "i",
    "long long": "i",
    "unsigned long long": "i",
    "int32_t": "i",
    "uint32_t": "i",
    "int64_t": "i",
    "uint64_t": "i",
    "size_t": "i",
    "long": "i",
    "unsigned long": "i",
}
_NORMAL = {
    "unsigned": "unsigned int",
    "int32_t": "int",
    "uint32_t": "unsigned int",
    "int64_t": "long long",
    "uint64_t": "unsigned long long",
    "size_t": "unsigned long long",
    "long": "long long",
    "unsigned long": "unsigned long long",
}


@dataclass
class ColLoop:
    """A loop over the row's columns ``[start, length)`` (sequential or block-strided in the source)."""

    loop: Loop
    var: str
    var_type: str
    start: Poly
    accs: list[Accumulation]


@dataclass
class Tree:
    """A shared-memory tree that folds ``acc`` across the block: deleted, its ``P[0]`` reads become ``acc``."""

    array: str
    acc: str
    op: str
    statements: list[tree_sitter.Node]
    reads: list[tree_sitter.Node]


@dataclass
class RowProgram:
    """What :func:`match` found."""

    form: str  # "thread" (one thread per row) or "block" (one block per row)
    axis: str
    row_sym: str  # gid.x or blockIdx.x
    rows: Poly | None
    length: Poly
    loops: list[ColLoop]
    container: tree_sitter.Node
    trees: list[Tree]
    delete: list[tree_sitter.Node]
    #: Input rows read at ``base + j`` inside the loops: array -> (base, C element type, access nodes).
    rows_in: dict[str, tuple[Poly, str, list[tree_sitter.Node]]] = field(default_factory=dict)
    float_literals: list[tree_sitter.Node] = field(default_factory=list)
    #: Thread-per-row behind a host launcher: the host's block size.
    host_block: int | None = None


# --------------------------------------------------------------------------------------------------
# Matching


def match(ctx: RecipeContext) -> Match | Decline:
    ir = ctx.ir
    if ir.atomics:
        return Decline("the kernel uses atomics: rows are not independent")
    if ir.warp_ops:
        return Decline("the kernel already uses warp primitives")
    if any(lp.kind != "for" for lp in ir.loops):
        return Decline("a while/do loop: only counted for-loops over the row's columns are rewritten")
    if "gridDim" in ir.identifiers(ir.body):
        return Decline("the kernel reads gridDim (a grid-stride loop over rows)")
    col_loops, other = _column_loops(ir)
    if isinstance(col_loops, str):
        return Decline(col_loops)
    if not col_loops:
        return Decline("no loop over a row's columns (for j < n with every access at row * n + j)")
    form, axis = col_loops[0][1], col_loops[0][2]
    if any(f != form or a != axis for _, f, a in col_loops):
        return Decline("the loops mix one-thread-per-row and one-block-per-row iteration")
    loops = [c for c, _, _ in col_loops]
    length = loops[0].loop.bound()
    assert length is not None
    if any(c.loop.bound() != length for c in loops):
        return Decline("the loops run over different lengths")
    container = loops[0].loop.node.parent
    if container is None or any(c.loop.node.parent != container for c in loops):
        return Decline("the loops over the row are not in one block of statements")
    row_sym = f"gid.{axis}" if form == "thread" else f"blockIdx.{axis}"
    trees: list[Tree] = []
    delete: list[tree_sitter.Node] = []
    if form == "block":
        got = _trees(ir, loops, other)
        if isinstance(got, str):
            return Decline(got)
        trees, delete = got
    elif other:
        return Decline(f"a loop that is not over the row's columns: `{_head(ir, other[0].node)}`")
    shared_left = [v.name for v in ir.locals.values() if v.shared and v.name not in {t.array for t in trees}]
    if shared_left:
        return Decline(f"shared array {shared_left[0]} is used for something other than a row reduction tree")
    if ir.barriers and form == "thread":
        return Decline("barriers in a one-thread-per-row kernel")
    why = _check_builtins(ir, form, axis, loops, trees, delete)
    if why:
        return Decline(why)
    why = _check_loop_bodies(ir, loops, row_sym)
    if why:
        return Decline(why)
    rows_in = _row_inputs(ir, loops, row_sym)
    if isinstance(rows_in, str):
        return Decline(rows_in)
    guards = [c for g in ir.guards_of(loops[0].loop.node) for c in g.conds]
    rows = next((b for c in guards if (b := c.bounds_above(Poly.sym(row_sym))) is not None), None)
    if rows is not None and rows.depends_on(THREAD_SYMBOLS):
        rows = None
    for acc in (a for c in loops for a in c.accs):
        if _acc_type(ir, acc.var) is None:
            return Decline(
                f"accumulator {acc.var} has type {ir.locals[acc.var].ctype}: no identity for it here"
            )
    prog = RowProgram(
        form, axis, row_sym, rows, length, loops, container, trees, delete, rows_in, _float_literals(ctx)
    )
    why = _check_launch(ctx, prog)
    if why:
        return Decline(why)
    binding = {
        "form": "one thread per row" if form == "thread" else "one block per row",
        "row": f"{row_sym} < {rows}" if rows is not None else row_sym,
        "row length": str(length),
        "reductions": ", ".join(f"{a.var} ({a.op})" for c in loops for a in c.accs) or "none",
        "passes": str(len(loops)),
        "cached rows": ", ".join(f"{k} ({v[1]})" for k, v in rows_in.items()) or "none",
        "launch": "kept (host launcher)" if ctx.host_launched else "spec launch field",
    }
    if trees:
        binding["shared trees removed"] = ", ".join(t.array for t in trees)
    return Match(binding, prog)


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
        s = container_stmts[i]
        st = _shared_store(ir, s, shared)
        if st is None:
            i += 1
            continue
        array, value = st
        if value not in accs:
            return f"{array}[...] = {value}: the value folded by the shared tree is not a loop's accumulator"
        stmts = [s]
        j = i + 1
        while j < len(container_stmts) and _is_barrier(ir, container_stmts[j]):
            stmts.append(container_stmts[j])
            j += 1
        if j >= len(container_stmts) or container_stmts[j].type != "for_statement":
            return f"{array}[...] = {value} is not followed by a reduction tree loop"
        op = _tree_op(ir, container_stmts[j], array)
        if op is None:
            return f"the loop after {array}[...] = {value} is not a tree reduction of {array}"
        if op != accs[value]:
            return f"the tree folds {array} with {op} but {value} accumulates with {accs[value]}"
        stmts.append(container_stmts[j])
        used_loops.add(container_stmts[j].id)
        j += 1
        while j < len(container_stmts) and _is_barrier(ir, container_stmts[j]):
            stmts.append(container_stmts[j])
            j += 1
        # Reads of array[0] until the array is written again.
        end = container_stmts[j].end_byte if j < len(container_stmts) else None
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
        del end
        for r in reads:
            acc_node = next(a for a in ir.accesses if a.node == r)
            if acc_node.index != Poly():
                return f"{array} is read at {acc_node.index_text} after the tree, not at [0]"
        if _assigned_between(ir, value, s.end_byte, max((r.end_byte for r in reads), default=s.end_byte)):
            return f"{value} changes between the tree and the read of {array}[0]"
        trees.append(Tree(array, value, op, stmts, reads))
        delete += stmts
        i = j
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
    # Every remaining barrier only protected the trees: they go too.
    for b in ir.barriers:
        stmt = b.parent
        if (
            stmt is not None
            and stmt.type == "expression_statement"
            and not any(_inside(stmt, d) for d in delete)
        ):
            delete.append(stmt)
    for name in tree_arrays:
        delete.append(ir.locals[name].decl)
    return trees, delete


def _inside(node: Any, container: Any) -> bool:
    return container.start_byte <= node.start_byte and node.end_byte <= container.end_byte


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


def _check_builtins(
    ir: KernelIR, form: str, axis: str, loops: list[ColLoop], trees: list[Tree], delete: list[Any]
) -> str:
    """Builtins may appear only where the rewrite re-maps them: the row index (and, per block, the loops)."""
    loop_heads = [(c.loop.node, c.loop.body) for c in loops]
    for n in walk(ir.body):
        if n.type != "field_expression":
            continue
        text = "".join(ir.text(n).split())
        if not text.startswith(("threadIdx.", "blockIdx.", "blockDim.")):
            continue
        if any(_inside(n, d) for d in delete):
            continue
        in_head = any(
            _inside(n, lp) and not (body is not None and _inside(n, body)) for lp, body in loop_heads
        )
        kind, ax = text.split(".")
        if form == "block" and kind in ("threadIdx", "blockDim") and ax == axis and in_head:
            continue
        if form == "block" and kind == "threadIdx" and ax == axis and _is_tid_decl(ir, n):
            continue
        if form == "block" and kind == "blockIdx" and ax == axis:
            continue
        if form == "thread" and ax == axis:
            continue
        if ax != axis and kind in ("threadIdx", "blockIdx"):
            # Must be 0 in the original launch (checked with the spec) for the row mapping to hold.
            continue
        if ax != axis and kind == "blockDim":
            continue
        return f"{text} is used beyond the row index (line {n.start_point[0] + 1})"
    if form == "block":
        # A `tid` local may feed only the loops and the trees.
        for name, v in ir.locals.items():
            if name in {c.var for c in loops}:
                continue
            if v.value_node is not None and ir.text(v.value_node).replace(" ", "") == f"threadIdx.{axis}":
                for n in walk(ir.body):
                    if (
                        n.type == "identifier"
                        and ir.text(n) == name
                        and n.parent is not None
                        and n.parent != v.decl
                    ):
                        if any(_inside(n, d) for d in delete):
                            continue
                        if any(
                            _inside(n, lp) and not (body is not None and _inside(n, body))
                            for lp, body in loop_heads
                        ):
                            continue
                        if n.parent.type == "init_declarator":
                            continue
                        return f"{name} (threadIdx.{axis}) is used inside the row's computation (line {n.start_point[0] + 1})"
    return ""


def _is_tid_decl(ir: KernelIR, n: Any) -> bool:
    p = n.parent
    return p is not None and p.type == "init_declarator"


def _check_loop_bodies(ir: KernelIR, loops: list[ColLoop], row_sym: str) -> str:
    """Loop bodies may update only their accumulators and loop-local names; no exits, barriers or calls with effects."""
    for c in loops:
        body = c.loop.body
        if body is None:
            return "a loop has no body"
        for acc in c.accs:
            if acc.companions:
                return f"{acc.var} is an arg-max/arg-min (it carries an index): not an associative reduction"
        acc_vars = {a.var for a in c.accs}
        for n in walk(body):
            if n.type in ("return_statement", "break_statement", "goto_statement"):
                return f"the loop over {c.var} exits early (line {n.start_point[0] + 1})"
            if n.type == "call_expression":
                fname = ir.text(n.child_by_field_name("function"))
                if fname.startswith(("__syncthreads", "atomic", "printf", "__sync")):
                    return f"{fname} inside the loop over {c.var}"
            target = None
            if n.type == "assignment_expression":
                target = n.child_by_field_name("left")
            elif n.type == "update_expression":
                target = n.child_by_field_name("argument")
            if target is None or target.type != "identifier":
                continue
            name = ir.text(target)
            var = ir.locals.get(name)
            if var is None or name == c.var:
                continue
            if _inside(var.decl, body):
                continue
            if name not in acc_vars:
                return (
                    f"{name} carries state from one column to the next (line {n.start_point[0] + 1}) and is not "
                    "an associative accumulator"
                )
        for acc in c.accs:
            if acc.value_node is not None and acc.var in ir.identifiers(acc.value_node):
                return f"the value added to {acc.var} depends on {acc.var}"
        # Every access inside must be at column `var` (coefficient one) or not depend on it.
        for a in ir.global_accesses():
            if c.loop not in a.loops:
                continue
            if a.index is None:
                return f"an index of {a.base} is not integer arithmetic (line {a.line + 1})"
            coef = a.index.coeff(c.var)
            if a.index.depends_on({c.var}) and coef != Poly.const(1):
                return f"{a.base} is read with stride {coef} along the loop over {c.var}, not along the row"
            if a.kind != "load" and not a.index.depends_on({c.var}):
                return f"{a.base} is written at one place from every column (line {a.line + 1})"
            if a.index.depends_on({c.var}):
                pitch = (a.index - Poly.sym(c.var)).coeff(row_sym)
                if a.kind != "load" and pitch == Poly():
                    return f"{a.base} is written at the same columns by every row (line {a.line + 1})"
                if pitch.value is not None and 0 < abs(pitch.value) < 32:
                    return (
                        f"{a.base}'s rows start {pitch.value} element(s) apart: overlapping windows (a stencil), "
                        "not rows"
                    )
        for a in ir.accesses:
            if a.space == "shared" and c.loop in a.loops:
                return "shared memory inside a loop over the row"
    return ""


def _row_inputs(
    ir: KernelIR, loops: list[ColLoop], row_sym: str
) -> dict[str, tuple[Poly, str, list[Any]]] | str:
    """Arrays read along the row (``base + j`` with ``base`` depending on the row) and never written."""
    written = ir.written()
    out: dict[str, tuple[Poly, str, list[Any]]] = {}
    for c in loops:
        for a in ir.global_accesses():
            if c.loop not in a.loops or a.index is None or not a.index.depends_on({c.var}):
                continue
            base = a.index - Poly.sym(c.var)
            if not base.depends_on({row_sym}):
                continue  # a column vector (gamma[j]): shared by every row, cached by L1
            if a.base in written:
                continue
            p = ir.param(a.base)
            ctype = p.ctype if p is not None else ""
            if ctype not in ms_ctype_bytes():
                continue
            if a.kind != "load":
                continue
            if a.base in out:
                if out[a.base][0] != base:
                    return f"{a.base} is read along two different rows"
                out[a.base][2].append(a.node)
            else:
                out[a.base] = (base, ctype, [a.node])
    return out


def ms_ctype_bytes() -> dict[str, int]:
    from kernellsp.optimize.propose.recipes.base import CTYPE_BYTES

    return CTYPE_BYTES


def _acc_type(ir: KernelIR, var: str) -> str | None:
    v = ir.locals.get(var)
    if v is None:
        return None
    t = " ".join(w for w in v.ctype.split() if w != "const")
    t = _NORMAL.get(t, t)
    return t if t in ("float", "double", "int", "unsigned int", "long long", "unsigned long long") else None


def _float_literals(ctx: RecipeContext) -> list[Any]:
    """Double literals to write as float, when the kernel declares and casts nothing ``double`` (accidental fp64)."""
    ir = ctx.ir
    if any("double" in p.type_text.split() for p in ctx.kernel.params):
        return []
    if any(n.type == "primitive_type" and ir.text(n) == "double" for n in walk(ir.body)):
        return []
    out = []
    for n in walk(ir.body):
        if n.type == "number_literal":
            t = ir.text(n)
            if _FLOAT_LIT.match(t) and ("." in t or "e" in t.lower()):
                out.append(n)
    return out


def _check_launch(ctx: RecipeContext, prog: RowProgram) -> str:
    """The original launch must map threads to rows as the analysis assumes (other axes of size one)."""
    block = ms.block_dims(ctx)
    if block is None:
        return "the block size is not known (spec launch or host launch site)"
    dims = dict(zip("xyz", block, strict=True))
    others = [a for a in "xyz" if a != prog.axis]
    if any(dims[a] != 1 for a in others):
        return f"the block has more than one thread along {'/'.join(a for a in others if dims[a] != 1)}"
    if prog.form == "block":
        for c in prog.loops:
            step = c.loop.step
            if step is not None and step.value is not None and step.value != dims[prog.axis]:
                return f"the loop over {c.var} strides by {step.value} but the block has {dims[prog.axis]} threads"
    if ctx.host_launched:
        if prog.form == "thread":
            if dims[prog.axis] % 32:
                return (
                    f"the host's block ({dims[prog.axis]} threads) is not a multiple of 32: no warp per row"
                )
            prog.host_block = dims[prog.axis]
        return ""
    launch = ctx.launch()
    if launch is None:
        return "the spec has no launch"
    for a, g in zip("xyz", [*launch.grid_dims(), 1, 1], strict=False):
        if a != prog.axis and str(g).strip() != "1":
            return f"the grid has more than one block along {a}"
    if prog.rows is None and prog.form == "thread":
        return "the number of rows is not bounds-checked (if (row < rows))"
    if prog.rows is not None and spec_expr(ctx, prog.rows) is None:
        return f"the row count {prog.rows} is not given by the spec's sizes (scalar args with a value)"
    if spec_expr(ctx, prog.length) is None and _main_length(ctx, prog) is None:
        return f"the row length {prog.length} is not given by the spec's sizes"
    return ""


# --------------------------------------------------------------------------------------------------
# Parameters


def _main_length(ctx: RecipeContext, prog: RowProgram) -> int | None:
    """The row length of the spec's main shape."""
    e = spec_expr(ctx, prog.length)
    shapes = ctx.shapes()
    if e is None or not shapes:
        return None
    try:
        v = exprs.evaluate(e, shapes[0])
    except exprs.ExprError:
        return None
    return int(v) if isinstance(v, int | float) else None


def _vec_elems(prog: RowProgram, vec: int) -> int:
    """Elements per vector load: ``vec`` 4-byte words' worth (16 bytes at vec=4) of the narrowest cached row."""
    sizes = [ms_ctype_bytes().get(ct, 4) for _, ct, _ in prog.rows_in.values()]
    size = min(sizes) if sizes else 4
    return max(1, vec * 4 // size)


def points(ctx: RecipeContext, m: Match) -> list[dict[str, Any]]:
    """Warp per row for short rows, a block per row for long ones; the spec's main row length decides."""
    prog: RowProgram = m.data
    if ctx.host_launched:
        return [{"layout": "host", "threads": 0, "vec": 1}, {"layout": "host", "threads": 0, "vec": 4}]
    n = _main_length(ctx, prog) or 1024
    can_warp = prog.rows is not None
    # vec=1: lane-interleaved columns, so every load and store instruction covers 128 contiguous bytes;
    # vec=4: 16-byte loads per lane (fewer instructions, but each store instruction is 4-way strided).
    if n <= 1024 and can_warp:
        pts = [
            {"layout": "warp", "threads": 256, "vec": 1},
            {"layout": "block", "threads": 128, "vec": 1},
            {"layout": "warp", "threads": 256, "vec": 4},
        ]
    elif n <= 2048:
        pts = [{"layout": "block", "threads": 256, "vec": 1}, {"layout": "block", "threads": 512, "vec": 1}]
        if can_warp:
            pts.insert(1, {"layout": "warp", "threads": 256, "vec": 1})
    else:
        pts = [{"layout": "block", "threads": t, "vec": 1} for t in (256, 512, 1024)]
    return pts[:4]


# --------------------------------------------------------------------------------------------------
# Generation


def generate(ctx: RecipeContext, m: Match, params: dict[str, Any]) -> Rewrite:
    prog: RowProgram = m.data
    layout = str(params.get("layout", "warp"))
    vec = int(params.get("vec", 4))
    if vec not in (1, 2, 4):
        raise RecipeError("vec is 1, 2 or 4 (4-byte words per vector load)")
    if ctx.host_launched:
        layout = "warp" if prog.form == "thread" else "block"
        host = prog.host_block if prog.form == "thread" else (ms.block_dims(ctx) or (0, 0, 0))[0]
        if host is None:
            raise RecipeError("the host's block size is unknown")
        threads = host
    else:
        threads = int(params.get("threads", 256))
    if layout not in ("warp", "block") or threads % 32 or not 32 <= threads <= 1024:
        raise RecipeError(f"layout {layout} with {threads} threads is not a launch this recipe makes")
    if layout == "warp" and prog.rows is None and not ctx.host_launched:
        raise RecipeError("a warp per row needs the row count")
    tpr = 32 if layout == "warp" else threads
    velems = _vec_elems(prog, vec)
    n_main = _main_length(ctx, prog) if not ctx.host_launched else _host_length(ctx, prog)
    slots = -(-(n_main or tpr * velems) // (tpr * velems))
    widest = max((ms_ctype_bytes().get(ct, 4) for _, ct, _ in prog.rows_in.values()), default=4)
    cache = bool(prog.rows_in) and slots * velems * widest * len(prog.rows_in) <= MAX_ROW_BYTES
    g = _Gen(ctx, prog, layout, tpr, velems, slots if cache else 0)
    code = g.kernel(threads)  # first: it records which all-reduce helpers the code calls
    launch = None
    if not ctx.host_launched:
        rows_spec = spec_expr(ctx, prog.rows) if prog.rows is not None else None
        if layout == "warp":
            assert rows_spec is not None
            launch = specmod.LaunchSpec(grid=f"ceil_div({rows_spec}, {threads // 32})", block=threads)
        else:
            grid = rows_spec if rows_spec is not None else _orig_grid(ctx, prog)
            launch = specmod.LaunchSpec(grid=grid, block=threads)
    return Rewrite(ctx.kernel.name, g.helpers() + code, launch)


def _host_length(ctx: RecipeContext, prog: RowProgram) -> int | None:
    e = spec_expr(ctx, prog.length)
    shapes = ctx.shapes()
    if e is None or not shapes:
        return None
    try:
        v = exprs.evaluate(e, shapes[0])
    except exprs.ExprError:
        return None
    return int(v) if isinstance(v, int | float) else None


def _orig_grid(ctx: RecipeContext, prog: RowProgram) -> str:
    launch = ctx.launch()
    if launch is None:
        raise RecipeError("no launch")
    dims = launch.grid_dims()
    return str(dims["xyz".index(prog.axis)]) if len(dims) > "xyz".index(prog.axis) else "1"


class _Gen:
    """Writes the kernel for one parameter point."""

    def __init__(self, ctx: RecipeContext, prog: RowProgram, layout: str, tpr: int, velems: int, slots: int):
        self.ctx, self.ir, self.prog = ctx, ctx.ir, prog
        self.layout, self.tpr, self.velems, self.slots = layout, tpr, velems, slots
        self.needed: set[tuple[str, str]] = set()

    # -- pieces -------------------------------------------------------------------------------------
    def helpers(self) -> str:
        return "\n".join(_helper_code(op, t, self.layout == "block") for op, t in sorted(self.needed))

    def _virtual(self) -> dict[int, str]:
        """Builtins of the row mapping -> the lambda's virtual thread coordinates; other axes -> 0/1."""
        out: dict[int, str] = {}
        ax = self.prog.axis
        for n in walk(self.ir.body):
            if n.type != "field_expression":
                continue
            text = "".join(self.ir.text(n).split())
            if not text.startswith(("threadIdx.", "blockIdx.", "blockDim.")):
                continue
            kind, a = text.split(".")
            if a == ax:
                out[n.id] = {"threadIdx": "kl_vtid", "blockIdx": "kl_vbid", "blockDim": "kl_vbdim"}[kind]
            else:
                out[n.id] = "1" if kind == "blockDim" else "0"
        return out

    def _common(self) -> dict[int, str]:
        rep = self._virtual()
        for lit in self.prog.float_literals:
            rep[lit.id] = self.ir.text(lit) + "f"
        for t in self.prog.trees:
            for r in t.reads:
                rep[r.id] = t.acc
        for d in self.prog.delete:
            rep[d.id] = ""
        return rep

    def _acc_combine(self, acc: Accumulation) -> tuple[str, str]:
        """(code before the loop, code after it) for one accumulator."""
        t = _acc_type(self.ir, acc.var)
        assert t is not None
        kind = _TYPES.get(t, "i")
        ident = _IDENTITY.get((acc.op, kind))
        if kind == "i" and acc.op in ("max", "min"):
            lo, hi = _INT_LIMITS[t]
            ident = lo if acc.op == "max" else hi
        if ident is None:
            raise RecipeError(f"no identity for {acc.op} over {t}")
        init = f"kl_init_{acc.var}"
        before = f"const {t} {init} = {acc.var};\n{acc.var} = ({t})({ident});\n"
        level = "warp" if self.layout == "warp" else "block"
        self.needed.add((acc.op, t))
        after = (
            f"{{\n    const {t} kl_all = {_helper_name(level, acc.op, t)}({acc.var});\n"
            f"    {acc.var} = {_OPS[acc.op].format(a=init, b='kl_all')};\n}}\n"
        )
        return before, after

    def _loop(self, c: ColLoop, mode: str, common: dict[int, str]) -> str:
        assert c.loop.body is not None
        rep = dict(common)
        if mode == "cached":
            for arr, (_, _, nodes) in self.prog.rows_in.items():
                for n in nodes:
                    rep[n.id] = f"kl_row_{arr}[kl_s * {self.velems} + kl_v]"
        body = _dedent(replace_nodes(self.ir, c.loop.body, rep))
        start = c.start.c_text(_rename(self.prog))
        length = self.prog.length.c_text(_rename(self.prog))
        vt = " ".join(w for w in c.var_type.split() if w != "const") or "int"
        skip = "" if c.start == Poly() else f"if ({c.var} < ({start})) continue;\n"
        if mode == "cached":
            inner = (
                f"#pragma unroll\nfor (int kl_s = 0; kl_s < {self.slots}; ++kl_s) {{\n"
                f"    #pragma unroll\n    for (int kl_v = 0; kl_v < {self.velems}; ++kl_v) {{\n"
                f"        const {vt} {c.var} = ({vt})(kl_s * {self.tpr * self.velems} + kl_lane * {self.velems} + kl_v);\n"
                f"        if ({c.var} >= ({length})) continue;\n"
                + _indent(skip, 8)
                + _indent(body, 8)
                + "\n    }\n}\n"
            )
        else:
            inner = (
                f"for ({vt} {c.var} = ({vt})kl_lane; {c.var} < ({length}); {c.var} += {self.tpr}) {{\n"
                + _indent(skip, 4)
                + _indent(body, 4)
                + "\n}\n"
            )
        before = after = ""
        for acc in c.accs:
            b, a = self._acc_combine(acc)
            before += b
            after += a
        return "{\n" + _indent(before + inner + after, 4) + "}"

    def _fill(self) -> str:
        """Load each cached input row into registers (16-byte vectors when aligned)."""
        out = []
        length = self.prog.length.c_text(_rename(self.prog))
        for arr, (base, ctype, _) in self.prog.rows_in.items():
            size = ms_ctype_bytes()[ctype]
            vbytes = size * self.velems
            vtype = {16: "uint4", 8: "uint2", 4: "unsigned int"}.get(vbytes)
            base_c = ms.wide(base, _rename(self.prog))
            out.append(f"{ctype} kl_row_{arr}[{self.slots * self.velems}];")
            out.append(f"const {ctype}* kl_src_{arr} = {arr} + ({base_c});")
            vec_load = ""
            if vtype is not None and self.velems > 1:
                out.append(
                    f"const bool kl_al_{arr} = (reinterpret_cast<unsigned long long>(kl_src_{arr}) & {vbytes - 1}) == 0;"
                )
                vec_load = (
                    f"    if (kl_al_{arr} && kl_j0 + {self.velems} <= (long long)({length})) {{\n"
                    f"        const {vtype} kl_pk = __ldg(reinterpret_cast<const {vtype}*>(kl_src_{arr} + kl_j0));\n"
                    f"        memcpy(&kl_row_{arr}[kl_s * {self.velems}], &kl_pk, {vbytes});\n"
                    "        continue;\n    }\n"
                )
            out.append(
                f"#pragma unroll\nfor (int kl_s = 0; kl_s < {self.slots}; ++kl_s) {{\n"
                f"    const long long kl_j0 = (long long)kl_s * {self.tpr * self.velems} + kl_lane * {self.velems};\n"
                + vec_load
                + f"    #pragma unroll\n    for (int kl_v = 0; kl_v < {self.velems}; ++kl_v) {{\n"
                f"        kl_row_{arr}[kl_s * {self.velems} + kl_v] = kl_j0 + kl_v < (long long)({length}) ? "
                f"kl_src_{arr}[kl_j0 + kl_v] : {ctype}();\n    }}\n}}"
            )
        return "\n".join(out) + "\n"

    def _row_body(self) -> str:
        """The user's body with the loops re-dealt (and, when rows fit, a cached and a streaming variant)."""
        ir, prog = self.ir, self.prog
        common = self._common()
        stmts = [s for s in prog.container.named_children if s.type != "comment"]
        first = next(i for i, s in enumerate(stmts) if s == prog.loops[0].loop.node)
        rest = stmts[first:]
        loop_ids = {c.loop.node.id: c for c in prog.loops}

        def render(mode: str) -> str:
            rep = dict(common)
            for c in prog.loops:
                rep[c.loop.node.id] = self._loop(c, mode, common)
            parts = []
            for s in rest:
                if s.id in rep:
                    parts.append(rep[s.id])
                else:
                    parts.append(_dedent(replace_nodes(ir, s, rep)))
            return "\n".join(p for p in parts if p.strip())

        del loop_ids
        if self.slots:
            length = prog.length.c_text(_rename(prog))
            cap = self.slots * self.tpr * self.velems
            dispatch = (
                f"if ((long long)({length}) <= {cap}) {{\n"
                + _indent(self._fill() + render("cached"), 4)
                + "\n} else {\n"
                + _indent(render("stream"), 4)
                + "\n}"
            )
        else:
            dispatch = render("stream")
        rep = dict(common)
        rep[rest[0].id] = dispatch
        for s in rest[1:]:
            rep[s.id] = ""
        return _dedent(replace_nodes(ir, ir.body, rep))

    def kernel(self, threads: int) -> str:
        prog = self.prog
        body = self._row_body()
        lb = (
            ""
            if self.ctx.kernel.launch_bounds or self.ctx.host_launched
            else f"__launch_bounds__({threads}) "
        )
        sig = signature_text(self.ctx)
        if lb:
            sig = sig.replace("__global__", f"__global__ {lb.strip()}", 1)
        if self.layout == "warp":
            if self.ctx.host_launched:
                driver = (
                    "    // Each warp runs the rows of its 32 lanes' original threads, one after the other.\n"
                    "    for (int kl_k = 0; kl_k < 32; ++kl_k) {\n"
                    "        kl_row_program((long long)(threadIdx.x >> 5) * 32 + kl_k, (long long)blockIdx.x, "
                    "(long long)blockDim.x);\n    }\n"
                )
            elif prog.form == "thread":
                driver = f"    kl_row_program((long long)(threadIdx.x >> 5), (long long)blockIdx.x, {threads // 32}LL);\n"
            else:
                driver = f"    kl_row_program(0LL, (long long)blockIdx.x * {threads // 32} + (threadIdx.x >> 5), 1LL);\n"
            lane = "    const int kl_lane = threadIdx.x & 31;\n"
        else:
            driver = "    kl_row_program(0LL, (long long)blockIdx.x, 1LL);\n"
            lane = "    const int kl_lane = threadIdx.x;\n"
        what = ("a warp per row" if self.layout == "warp" else f"a block of {threads} threads per row") + (
            f", the row kept in registers ({self.slots} x {self.velems} elements per thread) when it fits"
            if self.slots
            else ""
        )
        return (
            f"{sig}\n{{\n    // Row-wise rewrite (kernellsp recipe {NAME}): {what}; every reduction loop ends in a\n"
            "    // butterfly all-reduce with its own operator. The user's statements run inside kl_row_program\n"
            "    // with the row's thread coordinates re-mapped (kl_vtid/kl_vbid/kl_vbdim).\n"
            f"{lane}"
            "    auto kl_row_program = [&](long long kl_vtid, long long kl_vbid, long long kl_vbdim) {\n"
            f"{_indent(body, 8)}\n    }};\n{driver}}}\n"
        )


def _rename(prog: RowProgram) -> dict[str, str]:
    ax = prog.axis
    return {
        f"gid.{ax}": "(kl_vbid * kl_vbdim + kl_vtid)",
        f"blockIdx.{ax}": "kl_vbid",
        f"threadIdx.{ax}": "kl_vtid",
        f"blockDim.{ax}": "kl_vbdim",
    }


def _dedent(text: str) -> str:
    """Text of a node cut from the source: its first line has no indentation, the others the source's."""
    lines = text.split("\n")
    rest = [ln for ln in lines[1:] if ln.strip()]
    cut = min((len(ln) - len(ln.lstrip()) for ln in rest), default=0)
    last = lines[-1].strip()
    if len(lines) > 1 and last in ("}", "};"):
        cut = min(cut, len(lines[-1]) - len(lines[-1].lstrip()))
    return "\n".join([lines[0]] + [ln[cut:] if ln.strip() else "" for ln in lines[1:]])


def _indent(text: str, n: int) -> str:
    pad = " " * n
    return "\n".join(pad + line if line.strip() else "" for line in text.rstrip("\n").split("\n"))


_OPS = {
    "sum": "{a} + {b}",
    "prod": "{a} * {b}",
    "max": "({b} > {a} ? {b} : {a})",
    "min": "({b} < {a} ? {b} : {a})",
    "and": "{a} & {b}",
    "or": "{a} | {b}",
    "xor": "{a} ^ {b}",
}


def _helper_name(level: str, op: str, t: str) -> str:
    return f"kl_{level}_{op}_{t.replace(' ', '_')}"


def _helper_code(op: str, t: str, block: bool) -> str:
    """``__device__`` all-reduce helpers for one operator and type (warp butterfly; block through shared)."""
    e = _OPS[op]
    warp = _helper_name("warp", op, t)
    out = (
        f"// Every lane of the warp gets the {op} over the warp (butterfly: no broadcast needed).\n"
        f"__device__ __forceinline__ {t} {warp}({t} v)\n{{\n    #pragma unroll\n"
        f"    for (int o = 16; o > 0; o >>= 1) {{\n        const {t} w = __shfl_xor_sync(0xffffffffu, v, o);\n"
        f"        v = {e.format(a='v', b='w')};\n    }}\n    return v;\n}}\n"
    )
    if block:
        out += (
            f"\n// Every thread of the block gets the {op} over the block: one partial per warp in shared memory.\n"
            f"__device__ __forceinline__ {t} {_helper_name('block', op, t)}({t} v)\n{{\n"
            f"    __shared__ {t} kl_part[32];\n    v = {warp}(v);\n"
            "    __syncthreads();  // the previous reduction's reads of kl_part are done\n"
            "    if ((threadIdx.x & 31) == 0) kl_part[threadIdx.x >> 5] = v;\n    __syncthreads();\n"
            "    v = kl_part[0];\n"
            "    for (int i = 1; i < (int)((blockDim.x + 31) >> 5); ++i) {\n"
            f"        const {t} w = kl_part[i];\n        v = {e.format(a='v', b='w')};\n    }}\n"
            "    return v;\n}\n"
        )
    return out
