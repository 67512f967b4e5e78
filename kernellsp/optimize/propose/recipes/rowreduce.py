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
whatever number of passes the source makes. Column vectors that every row reads at the same column
(layernorm's ``gamma[j]``, ``beta[j]``: an offset of parameters only, never written) may be loaded into
registers with the row, before the first reduction (``columns=registers``), so their latency overlaps the
reductions instead of following them. Longer rows take a streaming path (coalesced, several
passes through L1/L2). Double literals in a kernel with no ``double`` anywhere (``1.0 / sum``,
``1e-5``) are written as float literals, so no fp64 instructions remain in the loop.

A host-launched kernel of one thread per row first gets a launch of its own: the launcher's grid
and block become the row count (in the launcher's own names) and a block per row (the only host
code a rewrite may change). It also keeps the host's launch as written: with one thread per row,
each warp of the host's block runs the block's 32 rows of its own lanes one after the other (the
block must be a multiple of 32 threads); with one block per row, the host's block is the row's team.

Declines when a loop carries state other than associative accumulators (Welford updates, argmax
with an index), when loops run over different lengths or nest, when a loop reads another row or a
neighbour column, when an accumulator's type has no identity here (``__half``), when atomics or
other shared memory remain, or when the number of rows is unknown for a warp-per-row launch.
"""

from __future__ import annotations

import re
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from kernellsp.optimize.propose.recipes import _memshape as ms
from kernellsp.optimize.propose.recipes._elementwise.launch import spec_expr
from kernellsp.optimize.propose.recipes._rowreduce.checks import (
    _check_builtins,
    _check_launch,
    _check_loop_bodies,
    _float_literals,
    _main_length,
    _row_inputs,
)
from kernellsp.optimize.propose.recipes._rowreduce.codegen import _Gen
from kernellsp.optimize.propose.recipes._rowreduce.loops import (
    _head,
    _kernel_decline,
    _row_count,
    _row_loops,
    _trees,
)
from kernellsp.optimize.propose.recipes._rowreduce.model import RowProgram, Tree, _acc_type, ms_ctype_bytes
from kernellsp.optimize.propose.recipes.base import (
    Decline,
    Match,
    RecipeContext,
    RecipeError,
    Rewrite,
)
from kernellsp.source import exprs
from kernellsp.source import spec as specmod

if TYPE_CHECKING:
    import tree_sitter

NAME = "rowreduce-warp-block"
ARCHETYPE = "rowreduce"
RULES = ("KL404", "KL601", "KL401", "KL501", "KL510", "KL505")
PARAMS: dict[str, list[Any]] = {
    "layout": ["warp", "block", "host", "relaunch"],
    "threads": [256, 128, 512, 1024],
    "vec": [4, 1],
    # Column vectors (layernorm's gamma and beta): read from L1/L2 where the source reads them, or loaded
    # into registers with the row before the first reduction (their latency then overlaps the reductions).
    "columns": ["l1", "registers"],
}

#: Bytes of one cached row per thread, at most (64 registers; beyond it the streaming path runs).
MAX_ROW_BYTES = 256


def match(ctx: RecipeContext) -> Match | Decline:
    ir = ctx.ir
    why = _kernel_decline(ir)
    if why:
        return Decline(why)
    found = _row_loops(ir)
    if isinstance(found, str):
        return Decline(found)
    form, axis, loops, other = found
    length = loops[0].loop.bound()
    assert length is not None
    container = loops[0].loop.node.parent
    assert container is not None  # _row_loops made sure
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
    rows = _row_count(ir, loops, row_sym)
    for acc in (a for c in loops for a in c.accs):
        if _acc_type(ir, acc.var) is None:
            return Decline(
                f"accumulator {acc.var} has type {ir.locals[acc.var].ctype}: no identity for it here"
            )
    cols_in = _row_inputs(ir, loops, row_sym, columns=True)
    prog = RowProgram(
        form,
        axis,
        row_sym,
        rows,
        length,
        loops,
        container,
        trees,
        delete,
        rows_in,
        _float_literals(ctx),
        {k: v for k, v in cols_in.items() if k not in rows_in} if isinstance(cols_in, dict) else {},
    )
    why = _check_launch(ctx, prog)
    if why:
        return Decline(why)
    return Match(_binding(ctx, prog), prog)


def _binding(ctx: RecipeContext, prog: RowProgram) -> dict[str, str]:
    """What ``--explain`` prints for a match."""
    loops, rows_in = prog.loops, prog.rows_in
    binding = {
        "form": "one thread per row" if prog.form == "thread" else "one block per row",
        "row": f"{prog.row_sym} < {prog.rows}" if prog.rows is not None else prog.row_sym,
        "row length": str(prog.length),
        "reductions": ", ".join(f"{a.var} ({a.op})" for c in loops for a in c.accs) or "none",
        "passes": str(len(loops)),
        "cached rows": ", ".join(f"{k} ({v[1]})" for k, v in rows_in.items()) or "none",
        "column vectors": ", ".join(f"{k} ({v[1]})" for k, v in prog.cols_in.items()) or "none",
        "launch": "kept (host launcher)" if ctx.host_launched else "spec launch field",
    }
    if ctx.host_launched and (rows := _host_rows(ctx, prog)) is not None:
        binding["launch"] = (
            f"a block per row through the launcher's launch (grid {rows}), or kept (host launcher)"
        )
    if prog.trees:
        binding["shared trees removed"] = ", ".join(t.array for t in prog.trees)
    return binding


def points(ctx: RecipeContext, m: Match) -> list[dict[str, Any]]:
    """Warp per row for short rows, a block per row for long ones; the spec's main row length decides."""
    prog: RowProgram = m.data
    if ctx.host_launched:
        pts = [{"layout": "host", "threads": 0, "vec": 1}, {"layout": "host", "threads": 0, "vec": 4}]
        if _host_rows(ctx, prog) is not None:
            # The host's grid of one thread per row leaves most of the GPU idle (16,384 rows of 128-thread blocks
            # run 512 warps): a block per row, through the launch's grid and block, comes first.
            n = _host_length(ctx, prog) or 1024
            pts.insert(0, {"layout": "relaunch", "threads": 256 if n > 1024 else 128, "vec": 1})
        return pts
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
    elif n <= 2048 and prog.cols_in:
        # Normalisations with column vectors (layernorm at 2048 columns on the H100: a block of 256 per row
        # 1.02x over a naive kernel already at 90% of copy; 512 threads 0.85x, a warp per row 0.73x). Smaller
        # blocks keep more rows in flight per SM, and gamma/beta loaded up front overlap the reductions.
        pts = [
            {"layout": "block", "threads": 128, "vec": 4, "columns": "registers"},
            {"layout": "block", "threads": 128, "vec": 1, "columns": "registers"},
            {"layout": "block", "threads": 256, "vec": 1, "columns": "registers"},
            {"layout": "block", "threads": 256, "vec": 1},
        ]
    elif n <= 2048:
        pts = [{"layout": "block", "threads": 256, "vec": 1}, {"layout": "block", "threads": 512, "vec": 1}]
        if can_warp:
            pts.insert(1, {"layout": "warp", "threads": 256, "vec": 1})
    else:
        pts = [{"layout": "block", "threads": t, "vec": 1} for t in (256, 512, 1024)]
    return pts[:4]


def _vec_elems(prog: RowProgram, vec: int) -> int:
    """Elements per vector load: ``vec`` 4-byte words' worth (16 bytes at vec=4) of the narrowest cached row."""
    sizes = [ms_ctype_bytes().get(ct, 4) for _, ct, _ in prog.rows_in.values()]
    size = min(sizes) if sizes else 4
    return max(1, vec * 4 // size)


def generate(ctx: RecipeContext, m: Match, params: dict[str, Any]) -> Rewrite:
    prog: RowProgram = m.data
    columns = str(params.get("columns", "l1"))
    if columns not in ("l1", "registers"):
        raise RecipeError("columns is l1 or registers")
    if columns == "registers" and prog.cols_in:
        prog = replace(prog, rows_in={**prog.rows_in, **prog.cols_in})
    layout = str(params.get("layout", "warp"))
    vec = int(params.get("vec", 4))
    if vec not in (1, 2, 4):
        raise RecipeError("vec is 1, 2 or 4 (4-byte words per vector load)")
    host_config = None
    if ctx.host_launched and layout == "relaunch":
        # A block per row under a launch of its own: the launcher's grid becomes the row count.
        rows = _host_rows(ctx, prog)
        if rows is None:
            raise RecipeError("the row count is not known in the launcher's terms")
        threads = int(params.get("threads", 256))
        layout = "block"
        host_config = (rows, str(threads))
    elif ctx.host_launched:
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
    return Rewrite(ctx.kernel.name, g.helpers() + code, launch, host_config=host_config)


def _host_rows(ctx: RecipeContext, prog: RowProgram) -> str | None:
    """The row count in the launcher's own terms (each kernel parameter replaced by the argument the launch
    passes for it), for a kernel of one thread per row with a bounds-checked row; ``None`` otherwise."""
    if prog.form != "thread" or prog.rows is None or ctx.launch_site is None:
        return None
    rename: dict[str, str] = {}
    for sym in prog.rows.symbols():
        arg = ctx.host_arg(sym)
        if arg is None or not re.fullmatch(r"[A-Za-z_]\w*|\d+", arg):
            return None
        rename[sym] = arg
    return prog.rows.c_text(rename)


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
