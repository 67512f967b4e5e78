"""In-block reductions: the block's tree (in any spelling) replaced by warp shuffles, grid and block kept.

Kernels that reduce per block already (a shared-memory tree with interleaved or sequential
addressing, a warp-synchronous tail, a tree in global memory, shuffles with a per-warp stage,
``cg::reduce``) and write one value per block (``partial[blockIdx.x] = s[0]``, ``mean[row] = s[0] /
n``, ``dbias[c] = dbias[c] + s[0]``) or one atomic per block (or per thread) have a contract a
different grid would break: one value per original block. This recipe keeps the grid, the block and
every statement up to where each thread holds its share (the element loop, coarsening, grid-stride
loop as the user wrote it) and replaces what follows, the tree, by a warp-shuffle reduction with one
shared word per warp; thread 0 then runs the kernel's own write with the tree's result in place of
where the tree left it (``s[0]``, or the variable the shuffles reduced into).

It does not match the tree's syntax. It executes one block of the kernel on a small declared shape
with symbolic data (:mod:`kernellsp.source.ir.simt`), looks for the last statement after which some
per-thread value (a local, or the thread's own shared-memory slot) adds up over the block to what the
tree produces, and then *executes the rewrite too*: the candidate binds only when the rewritten
block writes exactly the same symbolic values as the original. Declines: blocks that are not whole
warps, blocks the simulation cannot follow, no statement where the threads' shares add up, a write
that needs names the tree declared, or a rewrite that does not reproduce the block's writes.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from typing import Any

from kernellsp.optimize.propose.recipes.base import (
    Decline,
    Match,
    RecipeContext,
    RecipeError,
    Rewrite,
    indent,
    signature_text,
)
from kernellsp.source.ir import kernel_ir, walk
from kernellsp.source.ir.simt import Abort, Block, BlockRun, Sym
from kernellsp.source.model import parse_source

NAME = "reduce-tree"
ARCHETYPE = "reduce"
RULES = ("KL403", "KL511", "KL508")
PARAMS: dict[str, list[Any]] = {"stage": ["shfl"]}

_SHFL_TYPES = {
    "float",
    "double",
    "int",
    "unsigned int",
    "unsigned",
    "long long",
    "unsigned long long",
    "long",
    "unsigned long",
}
_NARROW = {
    "unsigned char": "unsigned int",
    "char": "int",
    "signed char": "int",
    "short": "int",
    "unsigned short": "unsigned int",
    "uint8_t": "unsigned int",
    "int8_t": "int",
    "uint": "unsigned int",
    "size_t": "unsigned long long",
}


@dataclass(frozen=True)
class _Reduction:
    share: str  # the C text of a thread's share at the cut
    ctype: str  # the type the tree adds in


@dataclass(frozen=True)
class _Cut:
    at: int  # statements[:at] are kept
    reductions: tuple[_Reduction, ...]
    writes: tuple[str, ...]  # thread 0's statements after the tree, ``{0}``.. standing for the results


def match(ctx: RecipeContext) -> Match | Decline:
    ir = ctx.ir
    if (
        not ir.barriers
        and not ir.warp_ops
        and not ir.atomics
        and not any(v.shared for v in ir.locals.values())
    ):
        return Decline(
            "no block-level cooperation (barriers, shuffles, shared memory or atomics): nothing to reduce per block"
        )
    launch = ctx.launch_model
    # A grid the host derives from the device (multiprocessors x blocks per SM) is unknown before a run; the
    # rewrite keeps it whatever it is, so one block of a grid of 4 stands for the block's work.
    shapes = (launch.shapes or [replace(s, grid=(4, 1, 1)) for s in launch.unknown_grid]) if launch else []
    if not shapes:
        return Decline("the launch of the kernel is not known at the declared shapes")
    if any(s.block[1] != 1 or s.block[2] != 1 or s.block[0] % 32 for s in shapes):
        return Decline("the block is not a whole number of warps along x")
    if any(s.grid[1] != 1 or s.grid[2] != 1 for s in shapes):
        return Decline("a 2-D or 3-D grid")
    # The cheapest declared shapes first; a degenerate one (one element per block) says nothing of a tree,
    # so the next one is tried too.
    got: _Cut | str = "no declared shape"
    for shape in sorted(shapes, key=lambda s: (s.grid[0] * s.block[0], s.grid[0]))[:3]:
        sim: tuple[int, int, int, dict[str, int | float]] = (
            shape.block[0],
            shape.grid[0],
            shape.grid[0] // 2,
            dict(shape.params),
        )
        try:
            run = Block(ir, *sim).execute()
        except Abort as exc:
            got = f"one block could not be executed symbolically: {exc}"
            continue
        got = _cut(ctx, run, sim)
        if not isinstance(got, str):
            break
    if isinstance(got, str):
        return Decline(got)
    stmts = ir.statements()
    binding = {
        "kept": f"lines {stmts[0].start_point[0] + 1}-{stmts[got.at - 1].end_point[0] + 1}",
        "replaced": f"lines {stmts[got.at].start_point[0] + 1}-{stmts[-1].end_point[0] + 1}",
        "reduction": "; ".join(f"sum of {r.share} ({r.ctype}) over the block" for r in got.reductions),
        "write": " ".join(
            w.format(*(f"<sum {i + 1}>" for i in range(len(got.reductions)))) for w in got.writes
        ),
        "checked": "the rewritten block writes what the original writes (symbolic execution of one block)",
        "launch": "kept",
    }
    return Match(binding, got)


def _cut(ctx: RecipeContext, run: BlockRun, sim: tuple[Any, ...]) -> _Cut | str:
    ir = ctx.ir
    stmts = ir.statements()
    outputs = run.outputs()
    if not outputs:
        return "the block writes nothing to global memory"
    if any(kind not in ("store", "atomicAdd") for kind, _v in outputs.values()):
        return "the block writes with an atomic other than atomicAdd"
    writes = _write_statements(ctx, {name for name, _i in outputs})
    if writes is None:
        return "the block's global writes are not each one statement after its loads"
    if len(outputs) > len(writes):
        # The tree's rewrite writes one element per write statement (thread 0's); a block that writes more
        # (a scan, a per-thread map) cannot be one, whatever the cut: say so before executing any candidate.
        return (
            f"the block writes {len(outputs)} global elements with {len(writes)} write statement(s); a block "
            "reduction writes one element per statement"
        )
    # Loads in the write statements stay (they are kept as written: `dbias[c] = dbias[c] + s[0]`).
    first_write = min(k for k, _s in writes.values())
    last_load = max((k for k in run.loads_in if k < first_write), default=-1)
    for at in range(min(first_write, len(stmts) - 1), last_load, -1):
        if at == 0:
            break
        locs, shared, returned = run.snapshots[at - 1]
        if returned:
            continue
        for shares in _share_sets(ctx, stmts[:at], locs, shared, len(writes)):
            for cut in _rewrites(
                ctx, at, shares, [s for _k, s in sorted(writes.values(), key=lambda ks: ks[0])]
            ):
                if _same_writes(ctx, cut, sim, outputs):
                    return cut
    return "no statement after which the threads' values add up to what the block's tree reduces (checked by executing the rewrite)"


def _write_statements(ctx: RecipeContext, buffers: set[str]) -> dict[str, tuple[int, Any]] | None:
    """Per output buffer: (top-level statement index, the innermost statement holding its one write)."""
    stmts = ctx.ir.statements()
    out: dict[str, tuple[int, Any]] = {}
    for a in ctx.ir.accesses:
        if a.space != "global" or a.kind == "load" or a.base not in buffers:
            continue
        k = next((i for i, s in enumerate(stmts) if s.start_byte <= a.node.start_byte < s.end_byte), None)
        stmt = a.node
        while stmt.parent is not None and stmt.type != "expression_statement":
            stmt = stmt.parent
        if k is None or stmt.type != "expression_statement" or (a.base in out and out[a.base][1] != stmt):
            return None
        out[a.base] = (k, stmt)
    return out if set(out) == buffers else None


def _share_sets(
    ctx: RecipeContext,
    kept: list[Any],
    locs: list[dict[str, Any]],
    shared: dict[str, dict[int, Any]],
    outputs: int,
) -> list[list[_Reduction]]:
    """Candidate shares at the cut (one per output, in order of preference): locals and own shared slots
    whose values differ between threads and add up to a sum of several terms."""
    ir = ctx.ir
    top = {n for s in kept for n in _declared(ctx, s)}
    cands: list[_Reduction] = []
    for name in sorted(top):
        var = ir.locals.get(name)
        if var is None or var.is_pointer or var.is_array or var.shared:
            continue
        if _summable([d.get(name) for d in locs]):
            cands.append(_Reduction(name, _ctype(var.ctype)))
    for name, cells in sorted(shared.items()):
        var = ir.locals.get(name)
        if "@" in name or var is None or not var.shared:
            continue
        if _summable([cells.get(t) for t in range(len(locs))]):
            cands.append(_Reduction(f"{name}[threadIdx.x]", _ctype(var.ctype)))
    if outputs == 1:
        return [[c] for c in cands]
    return [cands[i : i + outputs] for i in range(len(cands) - outputs + 1)]


def _summable(vals: list[Any]) -> bool:
    if any(v is None or not isinstance(v, Sym | int | float) for v in vals):
        return False
    total = Sym()
    for v in vals:
        total = total.add(v if isinstance(v, Sym) else float(v))
    return len(total.terms) >= 2 and len({v for v in vals}) > 1


def _rewrites(ctx: RecipeContext, at: int, shares: list[_Reduction], writes: list[Any]) -> list[_Cut]:
    """The write statements with the tree's result spelled as the reduction: ``s[0]`` of a shared array,
    or a variable that holds the result (a shuffle's accumulator)."""
    ir = ctx.ir
    kept_names = {n for s in ir.statements()[:at] for n in _declared(ctx, s)}
    params = {p.name for p in ir.params}
    texts = [ir.text(w) for w in writes]
    out: list[_Cut] = []
    shared_arrays = sorted(n for n, v in ir.locals.items() if v.shared)
    # Each reduction's result as the write names it: the shared array's first slot, or the share's own
    # name (a register tree adds into the variable it started from).
    for spell in ("slot0", "name"):
        subst = []
        for k, r in enumerate(shares):
            base = r.share.split("[")[0]
            if spell == "slot0" and base in shared_arrays:
                # `s[0]`, or `s[tid]` in a write only thread 0 made: the re-execution below decides.
                subst.append((rf"\b{re.escape(base)}\s*\[[^\[\]]*\]", f"{{{k}}}"))
            elif spell == "name" and "[" not in r.share:
                subst.append((rf"\b{re.escape(base)}\b", f"{{{k}}}"))
            else:
                continue
        if len(subst) != len(shares):
            continue
        new = []
        for t in texts:
            t = t.replace("{", "{{").replace("}", "}}")
            for pat, rep in subst:
                t = re.sub(pat, rep, t)
            new.append(t)
        names = {n for t in new for n in re.findall(r"[A-Za-z_]\w*", re.sub(r"\{\d+\}", " ", t))}
        local = {n for n in names if n in ir.locals and n not in kept_names and n not in params}
        if local or not all("{" in t for t in new[:1]):
            continue
        out.append(_Cut(at, tuple(shares), tuple(new)))
    return out


def _same_writes(ctx: RecipeContext, cut: _Cut, sim: tuple[Any, ...], want: dict[Any, Any]) -> bool:
    """Execute the rewritten kernel's block and compare what it writes with the original's writes."""
    try:
        code = _code(ctx, cut)
    except RecipeError:
        return False
    from kernellsp.optimize.propose.base import ProposerError, splice_kernel

    try:
        text = splice_kernel(ctx.model.text, ctx.kernel.name, code)
    except ProposerError:
        return False
    model = parse_source(text, ctx.model.path)
    ir = kernel_ir(model, ctx.kernel.name)
    if ir is None:
        return False
    try:
        got = Block(ir, *sim).execute().outputs()
    except Abort:
        return False
    return got == want


def _declared(ctx: RecipeContext, s: Any) -> list[str]:
    if s.type != "declaration":
        return []
    out = []
    for n in walk(s):
        if (
            n.type == "identifier"
            and n.parent is not None
            and n.parent.type
            in (
                "init_declarator",
                "declaration",
                "array_declarator",
                "pointer_declarator",
            )
        ):
            if n.parent.type == "init_declarator" and n.parent.child_by_field_name("declarator") != n:
                continue
            out.append(ctx.ir.text(n))
    return out


def _ctype(ctype: str) -> str:
    words = [
        w
        for w in ctype.split()
        if w not in ("const", "volatile", "__shared__", "extern", "static", "register")
    ]
    return " ".join(words)


def points(ctx: RecipeContext, m: Match) -> list[dict[str, Any]]:
    return [{"stage": "shfl"}]


def generate(ctx: RecipeContext, m: Match, params: dict[str, Any]) -> Rewrite:
    return Rewrite(ctx.kernel.name, _code(ctx, m.data))


def _code(ctx: RecipeContext, cut: _Cut) -> str:
    stmts = ctx.ir.statements()
    start = ctx.ir.body.start_byte + 1
    kept = ctx.ir.data[start : stmts[cut.at - 1].end_byte].decode("utf-8", errors="replace").rstrip()
    parts = [_dedent(kept), ""]
    results = []
    for k, r in enumerate(cut.reductions):
        t = r.ctype if r.ctype in _SHFL_TYPES else _NARROW.get(r.ctype)
        if t is None:
            raise RecipeError(f"no warp shuffle adds {r.ctype}")
        v, w = f"kl_v{k}", f"kl_warp_sums{k}"
        results.append(v)
        parts.append(
            f"""// The block's sum of {r.share} (kernellsp recipe {NAME}): warp shuffles, one shared word per
// warp; grid and block are the kernel's, and thread 0 makes the kernel's own write below.
{t} {v} = ({t})({r.share});
#pragma unroll
for (int kl_o = 16; kl_o > 0; kl_o >>= 1) {v} += __shfl_down_sync(0xffffffffu, {v}, kl_o);
__shared__ {t} {w}[32];
__syncthreads();  // the kept statements may still read shared memory the sums reuse
if ((threadIdx.x & 31) == 0) {w}[threadIdx.x >> 5] = {v};
__syncthreads();
if (threadIdx.x < 32) {{
    {v} = threadIdx.x < (blockDim.x >> 5) ? {w}[threadIdx.x] : ({t})0;
#pragma unroll
    for (int kl_o = 16; kl_o > 0; kl_o >>= 1) {v} += __shfl_down_sync(0xffffffffu, {v}, kl_o);
}}"""
        )
    writes = "\n".join("    " + w.format(*results) for w in cut.writes)
    parts.append(f"if (threadIdx.x == 0) {{\n{writes}\n}}")
    body = "\n".join(parts)
    return f"{signature_text(ctx)}\n{{\n{indent(body, 4)}\n}}\n"


def _dedent(text: str) -> str:
    lines = text.split("\n")
    pads = [len(ln) - len(ln.lstrip()) for ln in lines if ln.strip()]
    pad = min(pads) if pads else 0
    return "\n".join(ln[pad:] if ln.strip() else "" for ln in lines)
