"""Global reductions: registers, warp shuffles, shared memory, one atomic per block.

Two naive shapes are recognised and rewritten:

* **per-element atomics into one address** (``if (i < n) atomicAdd(out, x[i] * y[i]);``, also
  ``atomicMax``/``atomicMin``/``atomicSub``, grid-stride loops, early returns, conditional updates):
  every thread accumulates its elements in registers (16-byte vector loads, the kernel's own
  element body kept verbatim with its atomic turned into a register update), the block combines the
  threads' values with ``__shfl_down_sync`` and one shared-memory slot per warp, and one thread per
  block issues the original atomic with the block's value. The output contract is unchanged: the
  original adds (or maxes...) every element into ``*out`` with atomics, so it is an accumulate into an
  inout buffer, and so is the rewrite. Accumulation stays in the atomic's own type (the kernel's
  precision): only the association order of a float sum changes.
* **one thread loops over everything** (``if (threadIdx.x != 0 || blockIdx.x != 0) return; for (i = 0;
  i < n; i++) { sum += x[i]; / if (x[i] > best) { best = x[i]; best_i = i; } } *out = ...;``): one
  block of 1024 threads scans the data with vector loads (each thread in increasing order, so its
  running argmax keeps the first index), the threads' states are combined in shared memory (sums
  added, maxima/minima compared, ties of an argmax broken by the smaller index, which is what the
  sequential loop returns), and thread 0 runs the kernel's own statements after the loop. Only a
  ``__global__`` entry can get the block (its spec's launch); sums start from the user's initial
  value once.

Declines: atomics whose return value is used, atomics on per-element addresses (scatters: the
histogram recipe), float max/min atomics, kernels that write other outputs too, partial-warp
blocks under a host launcher's fixed launch, single-thread loops that start past element 0 with a
sum (the initial element would count twice), and a per-block partials array (its contract is one
value per original block, which a different grid would change).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from kernellsp.optimize.propose.recipes import _elementwise as ew
from kernellsp.optimize.propose.recipes._elementwise.body import _finish
from kernellsp.optimize.propose.recipes._elementwise.codegen import _dedent
from kernellsp.optimize.propose.recipes._elementwise.forms import _rhs_text
from kernellsp.optimize.propose.recipes._elementwise.statements import _depends_on_locals
from kernellsp.optimize.propose.recipes.base import (
    Decline,
    Match,
    RecipeContext,
    RecipeError,
    Rewrite,
    indent,
    replace_nodes,
)
from kernellsp.source import spec as specmod
from kernellsp.source.ir import THREAD_SYMBOLS, Accumulation, KernelIR, Loop, Poly, conjuncts, walk

NAME = "reduce-block"
ARCHETYPE = "reduce"
RULES = ("KL403", "KL511", "KL501", "KL505", "KL508")
PARAMS: dict[str, list[Any]] = {"items": [8, 16, 4], "unroll": [2, 4], "block": [256, 512]}

_INT_TYPES = {
    "int": ("(-2147483647 - 1)", "2147483647"),
    "unsigned int": ("0u", "0xffffffffu"),
    "unsigned": ("0u", "0xffffffffu"),
    "long long": ("(-9223372036854775807LL - 1)", "9223372036854775807LL"),
    "long long int": ("(-9223372036854775807LL - 1)", "9223372036854775807LL"),
    "unsigned long long": ("0ull", "0xffffffffffffffffull"),
    "unsigned long long int": ("0ull", "0xffffffffffffffffull"),
}
_FLOAT_TYPES = {
    "float": ("__int_as_float(0xff800000)", "__int_as_float(0x7f800000)"),
    "double": ("__longlong_as_double(0xfff0000000000000ll)", "__longlong_as_double(0x7ff0000000000000ll)"),
}


@dataclass
class _Atomic:
    el: ew.ElementLoop
    func: str
    op: str
    acc_type: str
    target: str


@dataclass
class _Serial:
    el: ew.ElementLoop
    accs: list[Accumulation]
    pre: list[Any]
    post: list[Any]
    loop_var: str
    types: dict[str, str]


def _identity(op: str, ctype: str) -> str | None:
    if op == "sum":
        return f"static_cast<{ctype}>(0)"
    lo_hi = _INT_TYPES.get(ctype) or _FLOAT_TYPES.get(ctype)
    if lo_hi is None:
        return None
    return lo_hi[0] if op == "max" else lo_hi[1]


def _combine(op: str, ctype: str) -> Any:
    if op == "sum":
        return lambda a, b: f"{a} + {b}"
    if ctype == "float":
        return lambda a, b: f"{'fmaxf' if op == 'max' else 'fminf'}({a}, {b})"
    if ctype == "double":
        return lambda a, b: f"{'fmax' if op == 'max' else 'fmin'}({a}, {b})"
    return lambda a, b: f"{op}({a}, {b})"


def match(ctx: RecipeContext) -> Match | Decline:
    ir = ctx.ir
    if ir.atomics:
        return _match_atomic(ctx)
    if ir.barriers or any(v.shared for v in ir.locals.values()):
        return Decline(
            "the kernel already reduces through shared memory per block; writing one value per original "
            "block is its contract, which a different grid would change"
        )
    return _match_serial(ctx)


def _match_atomic(ctx: RecipeContext) -> Match | Decline:
    el = ew.analyse(ctx, reduce="atomic")
    if isinstance(el, Decline):
        return el
    if not el.atomics:
        return Decline("no atomic combines the elements into one address")
    funcs = {a.func for a in el.atomics}
    targets = {(a.target.base, str(a.target.index)) for a in el.atomics if a.target is not None}
    if len(funcs) != 1 or len(targets) != 1:
        return Decline("the element body updates several addresses or with several atomics")
    at = el.atomics[0]
    assert at.target is not None and at.target.index is not None
    if at.op not in ("sum", "max", "min"):
        return Decline(f"{at.func} is not a sum, max or min")
    acc_type = ctx.ctype(at.target.base)
    if at.op != "sum" and acc_type not in _INT_TYPES:
        return Decline(f"{at.func} on {acc_type}: only integer max/min atomics are combined")
    if acc_type not in _INT_TYPES and acc_type not in _FLOAT_TYPES:
        return Decline(f"the accumulator type {acc_type} has no warp shuffle")
    if not el.streams:
        return Decline("the elements read no input stream")
    if ctx.host_launched:
        bt = ctx.block_threads()
        if bt is None or bt % 32:
            return Decline(
                "the host launcher's block size is unknown or not a multiple of 32 (warp shuffles need "
                "full warps)"
            )
    else:
        if ew.spec_expr(ctx, el.bound) is None:
            return Decline(f"the bound {el.bound_text} is not given by the spec's sizes")
        try:
            ew.check_coverage(ctx, el)
        except RecipeError as exc:
            return Decline(f"cannot prove the original launch covered every element: {exc}")
    target = f"&{at.target.base}[{at.target.index.c_text()}]"
    binding = {
        "form": f"{el.form} + {at.func}",
        "output": f"{target[1:]} ({ctx.dtype(at.target.base) or acc_type}, "
        f"{ctx.direction(at.target.base) or '?'})",
        "op": at.op,
        "value": at.value_text,
        "inputs": ", ".join(f"{s.param} ({ctx.dtype(s.param) or s.ctype})" for s in el.streams),
        "index": ", ".join(el.index_names),
        "bound": el.bound_text,
        "launch": "kept (host launcher)" if ctx.host_launched else "spec launch field",
    }
    return Match(binding, _Atomic(el, at.func, at.op, acc_type, target))


def _block_combine_atomic(a: _Atomic, ident: str, comb: Any) -> str:
    shfl = "\n".join(
        [
            "#pragma unroll",
            "for (int kl_o = 16; kl_o > 0; kl_o >>= 1)",
            f"    kl_total = {comb('kl_total', '__shfl_down_sync(0xffffffffu, kl_total, kl_o)')};",
        ]
    )
    return "\n".join(
        [
            "// One value per block: warp shuffles, one shared slot per warp, one atomic per block.",
            "{",
            "    const unsigned kl_t = threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z);",
            "    const unsigned kl_lane = kl_t & 31u, kl_warp = kl_t >> 5;",
            indent(shfl, 4),
            f"    __shared__ {a.acc_type} kl_warp_total[32];",
            "    if (kl_lane == 0) kl_warp_total[kl_warp] = kl_total;",
            "    __syncthreads();",
            "    if (kl_warp == 0) {",
            "        const unsigned kl_warps = (blockDim.x * blockDim.y * blockDim.z + 31u) >> 5;",
            f"        kl_total = kl_lane < kl_warps ? kl_warp_total[kl_lane] : {ident};",
            indent(shfl, 8),
            f"        if (kl_lane == 0) {a.func}({a.target}, kl_total);",
            "    }",
            "}",
        ]
    )


def _generate_atomic(ctx: RecipeContext, a: _Atomic, params: dict[str, Any]) -> Rewrite:
    el = a.el
    ident = _identity(a.op, a.acc_type)
    if ident is None:
        raise RecipeError(f"no identity for {a.op} over {a.acc_type}")
    comb = _combine(a.op, a.acc_type)
    replace: dict[int, str] = {}
    for at in el.atomics:
        value = replace_nodes(ctx.ir, at.value_node, el.replace) if at.value_node is not None else "1"
        replace[at.node.id] = f"(kl_acc = {comb('kl_acc', '(' + value + ')')})"
    red = ew.Reduction(
        a.acc_type,
        ident,
        comb,
        replace,
        _block_combine_atomic(a, ident, comb),
        items=int(params.get("items", 8)),
    )
    params = {**params}
    if ctx.host_launched:
        params.pop("block", None)
    what = f"reduction: {a.op} in registers, warp shuffles, one {a.func} per block (was one per element)"
    return ew.generate(ctx, el, params, what, red)


# --------------------------------------------------------------------------------------------------
# One thread loops over everything


def _single_thread_guard(ctx: RecipeContext) -> tuple[list[Any], str] | str:
    """The statements one thread runs, when the kernel lets exactly one thread work; else the reason."""
    ir = ctx.ir
    stmts = ir.statements()
    if not stmts:
        return "the kernel is empty"
    first = stmts[0]
    if first.type != "if_statement":
        return "not a single-thread kernel (no `if (threadIdx.x != 0 ...) return;` or `if (threadIdx.x == 0 ...)`)"
    cons = first.child_by_field_name("consequence")
    body = (
        [c for c in cons.named_children if c.type != "comment"]
        if cons is not None and cons.type == "compound_statement"
        else [cons]
    )
    cond = first.child_by_field_name("condition")
    if (
        len(body) == 1
        and body[0] is not None
        and body[0].type == "return_statement"
        and first.child_by_field_name("alternative") is None
    ):
        conds, exact = conjuncts(ir, cond, negate=True)
        region = stmts[1:]
    elif len(stmts) == 1 and first.child_by_field_name("alternative") is None:
        conds, exact = conjuncts(ir, cond)
        region = [b for b in body if b is not None]
    else:
        return "not a single-thread kernel"
    if not exact:
        return "the single-thread guard is not a conjunction of `threadIdx.x == 0`-style tests"
    axes = set()
    for c in conds:
        if (
            c.op != "=="
            or c.lhs is None
            or c.rhs != Poly()
            or not c.lhs.symbols() <= THREAD_SYMBOLS
            or len(c.lhs.terms) != 1
        ):
            return f"the guard `{c.text}` is not a `threadIdx/blockIdx == 0` test"
        axes |= c.lhs.symbols()
    if "threadIdx.x" not in axes:
        return "the guard does not pick one thread of the block"
    if "blockIdx.x" not in axes:
        # Thread 0 of every block runs the loop: one writer only when the grid has one block.
        launch = ctx.launch()
        if ctx.host_launched or launch is None or any(str(d).strip() != "1" for d in launch.grid_dims()):
            return "thread 0 of every block runs the loop (not one thread overall)"
    return region, "ok"


def _match_serial(ctx: RecipeContext) -> Match | Decline:
    ir = ctx.ir
    got = _single_thread_guard(ctx)
    if isinstance(got, str):
        return Decline(got)
    region, _ = got
    loops = [s for s in region if s.type == "for_statement"]
    if len(loops) != 1:
        return Decline("the single thread does not run exactly one loop over the data")
    loop_node = loops[0]
    lp = next(x for x in ir.loops if x.node == loop_node)
    if ctx.host_launched:
        return Decline(
            "one thread loops over everything, but the host launcher's launch (one thread) cannot change"
        )
    if lp.var is None or lp.step != Poly.const(1) or lp.start is None or lp.start.value not in (0, 1):
        return Decline("the loop is not `for (i = 0; i < n; i++)`")
    bound = lp.bound()
    if bound is None or bound.depends_on(THREAD_SYMBOLS) or _depends_on_locals(ir, bound):
        return Decline("the loop bound is not a uniform `i < n`")
    pre = region[: region.index(loop_node)]
    post = region[region.index(loop_node) + 1 :]
    if any(n.type in ("for_statement", "while_statement", "do_statement") for s in post for n in walk(s)):
        return Decline("more loops follow the reduction loop")
    accs = [a for a in ir.accumulations if a.loops and a.loops[-1].node == loop_node]
    if not accs:
        return Decline("the loop accumulates nothing (`acc += x[i]`, `fmaxf`, `if (x[i] > best) {...}`)")
    names = {a.var for a in accs} | {c for a in accs for c in a.companions}
    types = _serial_types(ir, accs, pre, lp)
    if isinstance(types, Decline):
        return types
    body = (
        [c for c in lp.body.named_children if c.type != "comment"]
        if lp.body is not None and lp.body.type == "compound_statement"
        else [lp.body]
    )
    el = _finish(
        ctx,
        "grid-stride",
        [],
        body,
        Poly.sym(lp.var),
        bound,
        _rhs_text(ir, lp.conds[0], Poly.sym(lp.var)),
        lead=[lp.var],
        loop_var=lp.var,
        reduce="atomic",
        accumulators=frozenset(names),
        outside_writes=True,
    )
    if isinstance(el, Decline):
        return el
    if any(s.writes for s in el.streams):
        return Decline("the loop writes memory")
    for s in pre:
        if any(a.kind != "load" for a in ir.accesses if s.start_byte <= a.node.start_byte < s.end_byte):
            return Decline("statements before the loop write memory")
    if ew.spec_expr(ctx, bound) is None:
        return Decline(f"the bound {bound} is not given by the spec's sizes")
    binding = {
        "form": "single thread",
        "accumulators": ", ".join(
            f"{a.var} ({a.op}{', ' + ', '.join(a.companions) if a.companions else ''})" for a in accs
        ),
        "inputs": ", ".join(f"{s.param} ({ctx.dtype(s.param) or s.ctype})" for s in el.streams),
        "index": lp.var,
        "bound": el.bound_text,
        "launch": "spec launch field (one block)",
    }
    return Match(binding, _Serial(el, accs, pre, post, lp.var, types))


def _serial_types(
    ir: KernelIR, accs: list[Accumulation], pre: list[Any], lp: Loop
) -> dict[str, str] | Decline:
    """The C type of every accumulator and index companion of the serial loop (declared before it, of a
    type and an operator the block tree combines), or why one does not fit."""
    assert lp.start is not None and lp.var is not None  # _match_serial made sure
    types: dict[str, str] = {}
    for a in accs:
        var = ir.locals.get(a.var)
        if var is None or not any(var.decl == s for s in pre):
            return Decline(f"the accumulator {a.var} is not declared before the loop")
        t = var.ctype.replace("const ", "").strip()
        if t not in _INT_TYPES and t not in _FLOAT_TYPES:
            return Decline(f"the accumulator {a.var} has type {t}")
        types[a.var] = t
        if a.op not in ("sum", "max", "min"):
            return Decline(f"{a.var} accumulates with {a.op}")
        if a.negated:
            return Decline(f"{a.var} subtracts its elements")
        if a.op == "sum" and lp.start.value != 0:
            return Decline(
                "the loop starts at element 1 with a sum: spreading it would count the initial value twice"
            )
        for comp, value in a.companions.items():
            if value.strip() != lp.var:
                return Decline(f"{comp} records {value}, not the element index {lp.var}")
            cvar = ir.locals.get(comp)
            if cvar is None or not any(cvar.decl == s for s in pre):
                return Decline(f"{comp} is not declared before the loop")
            types[comp] = cvar.ctype.replace("const ", "").strip()
    return types


def _generate_serial(ctx: RecipeContext, sm: _Serial, params: dict[str, Any]) -> Rewrite:
    ir = ctx.ir
    block = 1024
    prologue = [ir.text(s) for s in sm.pre]
    sums = [a.var for a in sm.accs if a.op == "sum"]
    if sums:
        prologue.append("// Each sum starts from its initial value in one thread only.")
        prologue.append(
            "if (threadIdx.x != 0) { "
            + " ".join(f"{v} = static_cast<{sm.types[v]}>(0);" for v in sums)
            + " }"
        )
    # Combine the threads' states in shared memory: a tree over the block (a power of two).
    state = [a.var for a in sm.accs] + [c for a in sm.accs for c in a.companions]
    lines = [
        "// Combine the threads' states: a shared-memory tree (sums add, max/min compare, ties keep the",
        "// smaller index as the sequential loop does).",
    ]
    for v in state:
        lines.append(f"__shared__ {sm.types[v]} kl_s_{v}[{block}];")
        lines.append(f"kl_s_{v}[threadIdx.x] = {v};")
    lines.append("__syncthreads();")
    lines.append("for (unsigned kl_w = blockDim.x / 2; kl_w > 0; kl_w >>= 1) {")
    lines.append("    if (threadIdx.x < kl_w) {")
    for a in sm.accs:
        o = f"kl_s_{a.var}[threadIdx.x + kl_w]"
        if a.op == "sum":
            lines.append(f"        {a.var} += {o};")
        elif a.companions:
            comp = next(iter(a.companions))
            better = ">" if a.op == "max" else "<"
            oc = f"kl_s_{comp}[threadIdx.x + kl_w]"
            lines.append(f"        if ({o} {better} {a.var} || ({o} == {a.var} && {oc} < {comp})) {{")
            for c in a.companions:
                lines.append(f"            {c} = kl_s_{c}[threadIdx.x + kl_w];")
            lines.append(f"            {a.var} = {o};")
            lines.append("        }")
        else:
            value_text = _combine_text(a, sm.types[a.var])
            lines.append(f"        {a.var} = {value_text(a.var, o)};")
    for v in state:
        lines.append(f"        kl_s_{v}[threadIdx.x] = {v};")
    lines.append("    }")
    lines.append("    __syncthreads();")
    lines.append("}")
    lines.append("if (threadIdx.x == 0) {")
    for v in state:
        lines.append(f"    {v} = kl_s_{v}[0];")
    for s in sm.post:
        lines.append(indent(_dedent(ir.text(s)), 4))
    lines.append("}")
    red = ew.Reduction(
        None,
        "",
        None,
        {},
        "\n".join(lines),
        items=1,
        prologue=prologue,
        threads=("threadIdx.x", "blockDim.x"),
    )
    rw = ew.generate(
        ctx,
        sm.el,
        {"unroll": int(params.get("unroll", 2))},
        "reduction spread over one block of 1024 "
        "threads (was one thread): vector loads, per-thread state, shared-memory combine",
        red,
    )
    rw.launch = specmod.LaunchSpec(grid=1, block=block)
    return rw


def _combine_text(a: Accumulation, ctype: str) -> Any:
    """How the sequential loop itself combined values: ``fmaxf`` stays ``fmaxf``, a ``?:`` or ``if`` compare stays one."""
    if a.value_node is not None and a.node.type == "assignment_expression":
        right = a.node.child_by_field_name("right")
        if right is not None and right.type == "call_expression":
            fname = right.child_by_field_name("function")
            if fname is not None:
                f = fname.text.decode() if fname.text else a.op
                return lambda x, y: f"{f}({x}, {y})"
    better = ">" if a.op == "max" else "<"
    return lambda x, y: f"({y} {better} {x} ? {y} : {x})"


def points(ctx: RecipeContext, m: Match) -> list[dict[str, Any]]:
    if isinstance(m.data, _Serial):
        return [{"unroll": 2}, {"unroll": 4}]
    if ctx.host_launched:
        return [{"unroll": 2}, {"unroll": 4}]
    return [
        {"items": 8, "unroll": 2, "block": 256},
        {"items": 16, "unroll": 4, "block": 256},
        {"items": 4, "unroll": 2, "block": 512},
        {"items": 32, "unroll": 4, "block": 512},
    ]


def generate(ctx: RecipeContext, m: Match, params: dict[str, Any]) -> Rewrite:
    if isinstance(m.data, _Serial):
        return _generate_serial(ctx, m.data, params)
    return _generate_atomic(ctx, m.data, params)
