"""``launch-guards``: the bounds a launch implies, written as the guard they are.

Textbook kernels often have no bounds check: the grid covers the data exactly (``N`` a multiple of
the block), or one block of ``N`` threads does the work (``c[threadIdx.x] = a[threadIdx.x] + ...``).
The launch model knows, for every declared shape, how many threads run along each axis; when that
count equals a scalar parameter's value at every shape (``grid.x * block.x == width``), the axis's
global index ranges over exactly ``[0, width)`` and ``if (x < width)`` is always true: this pass
writes it around the kernel's work. With a one-block launch along an axis, ``threadIdx`` is the
global index there and is written so. A recipe then meets the guarded form it knows, and its
rewrite, which may launch differently, keeps the bound.

Kernels that share data between threads (``__syncthreads``, ``__shared__``) or already bound an axis
are left alone, as are axes whose extent no parameter states.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from kernellsp.source.ir.canon.unit import Change, Edit, Unit, line_indent, reads_memory, statements, walk

if TYPE_CHECKING:
    from kernellsp.source.ir.kernel import KernelIR

NAME = "launch-guards"
SUMMARY = (
    "bounds implied by the launch (grid covers the data exactly; one block) written as an explicit guard"
)

_AXES = ("x", "y", "z")


def run(unit: Unit) -> Change | None:
    from kernellsp.source.ir.kernel import kernel_ir

    launch = unit.launch
    ir = kernel_ir(unit.model, unit.fn)
    if launch is None or not launch.complete or not launch.shapes or ir is None:
        return None
    if ir.barriers or ir.warp_ops or ir.atomics or any(v.shared for v in ir.locals.values()):
        return None
    if any(lp.grid_stride for lp in ir.loops) or ir.exits:
        return None
    change = Change()
    conds: list[str] = []
    for ai, a in enumerate(_AXES):
        used_gid = _used(ir, f"gid.{a}")
        used_tid = _used(ir, f"threadIdx.{a}") and not used_gid
        if not (used_gid or used_tid) or _bounded(ir, a):
            continue
        if used_tid and not all(s.grid[ai] == 1 for s in launch.shapes):
            continue
        extents = launch.covers_exactly(ai)
        params = launch.params_equal_to(extents or [])
        if not params:
            continue
        if used_tid:
            # One block along this axis: the thread index is the global index.
            for n in walk(unit.body):
                if n.type == "field_expression" and unit.text(n).replace(" ", "") == f"threadIdx.{a}":
                    change.replace(n, f"(blockIdx.{a} * blockDim.{a} + threadIdx.{a})")
            change.notes.append(f"one block along {a}: threadIdx.{a} is the global index")
        coord = next((v for v, axis in ir.gid_vars.items() if axis == a), None)
        conds.append(f"{coord or f'(blockIdx.{a} * blockDim.{a} + threadIdx.{a})'} < {params[0]}")
        change.notes.append(
            f"the launch covers {a} exactly: {params[0]} threads at every shape (guard `{conds[-1]}` made explicit)"
        )
    if not conds:
        return None
    stmts = statements(unit.body)
    k = 0
    while k < len(stmts) and stmts[k].type == "declaration" and not reads_memory(unit, stmts[k]):
        k += 1
    rest = stmts[k:]
    if not rest:
        return None
    indent = line_indent(unit.data, rest[0].start_byte)
    start = unit.data.rfind(b"\n", 0, rest[0].start_byte) + 1
    inner = unit.data[start : rest[-1].end_byte].decode("utf-8", errors="replace")
    # Thread-index rewrites inside the wrapped statements are applied to the wrapped text itself.
    inner_edits = [e for e in change.edits if start <= e.start and e.end <= rest[-1].end_byte]
    outer_edits = [e for e in change.edits if e not in inner_edits]
    for e in sorted(inner_edits, key=lambda e: e.start, reverse=True):
        rel_s = len(unit.data[start : e.start].decode("utf-8", errors="replace"))
        rel_e = len(unit.data[start : e.end].decode("utf-8", errors="replace"))
        inner = inner[:rel_s] + e.text + inner[rel_e:]
    inner = "\n".join(("    " + line) if line.strip() else line for line in inner.split("\n"))
    change.edits = [
        *outer_edits,
        Edit(start, rest[-1].end_byte, f"{indent}if ({' && '.join(conds)}) {{\n{inner}\n{indent}}}"),
    ]
    return change


def _used(ir: KernelIR, sym: str) -> bool:
    return any(a.index is not None and a.index.depends_on({sym}) for a in ir.global_accesses())


def _bounded(ir: KernelIR, axis: str) -> bool:
    """Does any guard or loop condition already mention the axis's thread coordinates?"""
    syms = {f"gid.{axis}", f"threadIdx.{axis}", f"blockIdx.{axis}"}
    for acc in ir.accesses:
        for g in acc.guards:
            for c in g.conds:
                if c.lhs is None or c.rhs is None or c.lhs.depends_on(syms) or c.rhs.depends_on(syms):
                    return True
    return any(
        c.lhs is None or c.lhs.depends_on(syms) or (c.rhs is not None and c.rhs.depends_on(syms))
        for lp in ir.loops
        for c in lp.conds
    )
