"""Histograms and scatter-adds into few bins: shared-memory privatisation.

Matches element loops whose body adds into a data-dependent bin of one buffer
(``atomicAdd(&bins[data[i]], 1)``, ``atomicAdd(&counts[bin], 1u)`` after range checks, a computed
``data[i] % nbins``...). Every element's atomic then contends with the whole grid's in L2. The
rewrite gives each block a private copy of the bins in ``__shared__`` memory (zeroed, then a
barrier), runs the user's element body verbatim with its atomic redirected to the shared copy
(16-byte vector loads of the inputs, several items per thread), and after a barrier adds each
non-zero shared bin to the global bins with one atomic per bin per block. Integer adds commute, so
counts are exact; float weights are summed in another order (tolerance applies).

The shared copy has a compile-time size: the bins buffer's element count in the spec (main
shape). The rewrite never depends on that size for correctness: a bin index outside ``[0, size)``
(another shape, a user's out-of-range value) takes the original global atomic, exactly as before.

Declines: atomics other than add/sub, more than one bins buffer, the atomic's old value used,
bins that do not fit in 48 KB of shared memory, kernels that also write other outputs, partial-warp
blocks are fine (no shuffles here).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from kernellsp.optimize.propose.recipes import _elementwise as ew
from kernellsp.optimize.propose.recipes.base import (
    Decline,
    Match,
    RecipeContext,
    RecipeError,
    Rewrite,
    replace_nodes,
)
from kernellsp.source import exprs

NAME = "histogram-shared"
ARCHETYPE = "histogram"
RULES = ("KL403", "KL511", "KL505", "KL508")
PARAMS: dict[str, list[Any]] = {"items": [8, 16, 4], "copies": [1, 4], "block": [256, 512]}

_SHARED_BYTES = 48 * 1024
_ADD_TYPES = (
    "int",
    "unsigned int",
    "unsigned",
    "unsigned long long",
    "unsigned long long int",
    "float",
    "double",
)


@dataclass
class _Hist:
    el: ew.ElementLoop
    bins: str
    ctype: str
    nbins: int
    func: str


def match(ctx: RecipeContext) -> Match | Decline:
    ir = ctx.ir
    if not ir.atomics:
        return Decline("no atomic scatter into bins")
    el = ew.analyse(ctx, reduce="scatter")
    if isinstance(el, Decline):
        return el
    bases = {a.target.base for a in el.atomics if a.target is not None}
    funcs = {a.func for a in el.atomics}
    if len(bases) != 1:
        return Decline("the element body scatters into several buffers")
    if not funcs <= {"atomicAdd", "atomicSub"}:
        return Decline(f"{', '.join(sorted(funcs))}: only additive bins are privatised")
    bins = bases.pop()
    for a in el.atomics:
        if a.target is None or _index_node(ctx, a.target.node, bins) is None:
            return Decline(
                f"the atomic's address `{ir.text(a.target.node) if a.target else '?'}` is not "
                f"`&{bins}[index]` or `{bins} + index`"
            )
    ctype = ctx.ctype(bins)
    if ctype not in _ADD_TYPES:
        return Decline(f"{bins} holds {ctype}: no shared-memory atomicAdd for it")
    if not el.streams:
        return Decline("the elements read no input stream")
    nbins = _bin_count(ctx, bins)
    if nbins is None:
        return Decline(f"the spec gives no element count for {bins} (the size of the shared copy)")
    elem = ctx.elem_bytes(bins) or 4
    if nbins * elem > _SHARED_BYTES:
        return Decline(f"{nbins} bins of {elem} bytes do not fit in 48 KB of shared memory")
    if not ctx.host_launched:
        if ew.spec_expr(ctx, el.bound) is None:
            return Decline(f"the bound {el.bound_text} is not given by the spec's sizes")
        try:
            ew.check_coverage(ctx, el)
        except RecipeError as exc:
            return Decline(f"cannot prove the original launch covered every element: {exc}")
    binding = {
        "form": el.form,
        "bins": f"{bins} ({ctx.dtype(bins) or ctype}, {nbins} in shared memory)",
        "inputs": ", ".join(f"{s.param} ({ctx.dtype(s.param) or s.ctype})" for s in el.streams),
        "index": ", ".join(el.index_names),
        "bound": el.bound_text,
        "launch": "kept (host launcher)" if ctx.host_launched else "spec launch field",
    }
    return Match(binding, _Hist(el, bins, ctype, nbins, funcs.pop()))


def _index_node(ctx: RecipeContext, node: Any, bins: str) -> Any:
    """The index expression of ``&bins[idx]`` / ``&(bins[idx])`` / ``bins + idx``."""
    n = node
    while n.type == "parenthesized_expression":
        n = n.named_children[0]
    if n.type == "pointer_expression":
        arg = n.child_by_field_name("argument")
        while arg is not None and arg.type == "parenthesized_expression":
            arg = arg.named_children[0]
        if arg is not None and arg.type == "subscript_expression":
            base = arg.child_by_field_name("argument")
            idx = arg.child_by_field_name("indices")
            if base is not None and ctx.ir.text(base) == bins and idx is not None and idx.named_children:
                return idx.named_children[0]
    if n.type == "binary_expression" and ctx.ir.text(n.child_by_field_name("operator")) == "+":
        left, right = n.child_by_field_name("left"), n.child_by_field_name("right")
        if left is not None and ctx.ir.text(left) == bins:
            return right
    return None


def _bin_count(ctx: RecipeContext, bins: str) -> int | None:
    a = ctx.arg_spec(bins)
    if a is None or a.count is None or ctx.spec is None:
        return None
    try:
        return exprs.evaluate_int(a.count, ctx.spec.spec.resolved_sizes())
    except exprs.ExprError:
        return None


def points(ctx: RecipeContext, m: Match) -> list[dict[str, Any]]:
    h: _Hist = m.data
    elem = ctx.elem_bytes(h.bins) or 4
    copies = [1, 4] if h.nbins * elem * 4 <= _SHARED_BYTES else [1]
    if ctx.host_launched:
        return [{"copies": c} for c in copies]
    pts = [
        {"items": 8, "copies": 1, "block": 256},
        {"items": 16, "copies": copies[-1], "block": 256},
        {"items": 4, "copies": copies[-1], "block": 512},
        {"items": 16, "copies": 1, "block": 512},
    ]
    return pts


def generate(ctx: RecipeContext, m: Match, params: dict[str, Any]) -> Rewrite:
    h: _Hist = m.data
    el = h.el
    ir = ctx.ir
    copies = int(params.get("copies", 1))
    replace: dict[int, str] = {}
    for a in el.atomics:
        assert a.target is not None
        idx = _index_node(ctx, a.target.node, h.bins)
        idx_text = replace_nodes(ir, idx, el.replace)
        value = replace_nodes(ir, a.value_node, el.replace) if a.value_node is not None else "1"
        sign = "-" if a.func == "atomicSub" else ""
        replace[a.node.id] = f"kl_bin_add({idx_text}, {sign}static_cast<{h.ctype}>({value}))"
    prologue = [
        f"// Per-block private bins in shared memory ({copies} cop{'y' if copies == 1 else 'ies'}), zeroed before use.",
        f"constexpr int kl_NB = {h.nbins};",
        f"__shared__ {h.ctype} kl_bins[{copies}][kl_NB];",
        "const unsigned kl_t = threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z);",
        "const unsigned kl_block = blockDim.x * blockDim.y * blockDim.z;",
        "for (unsigned kl_b = kl_t; kl_b < kl_NB * " + str(copies) + "u; kl_b += kl_block) "
        f"kl_bins[kl_b / kl_NB][kl_b % kl_NB] = static_cast<{h.ctype}>(0);",
        "__syncthreads();",
        f"{h.ctype} (&kl_mine)[kl_NB] = kl_bins[{'(kl_t >> 5) % ' + str(copies) if copies > 1 else '0'}];",
        f"auto kl_bin_add = [&](const long long kl_k, const {h.ctype} kl_val) {{",
        "    // Bins outside the shared copy take the original global atomic.",
        "    if (kl_k >= 0 && kl_k < kl_NB) atomicAdd(&kl_mine[kl_k], kl_val);",
        f"    else atomicAdd(&{h.bins}[kl_k], kl_val);",
        "};",
    ]
    epilogue = "\n".join(
        [
            "// One global atomic per non-zero bin per block.",
            "__syncthreads();",
            "for (unsigned kl_b = kl_t; kl_b < kl_NB; kl_b += kl_block) {",
            f"    {h.ctype} kl_sum = static_cast<{h.ctype}>(0);",
            "    #pragma unroll",
            f"    for (int kl_c = 0; kl_c < {copies}; ++kl_c) kl_sum += kl_bins[kl_c][kl_b];",
            f"    if (kl_sum != static_cast<{h.ctype}>(0)) atomicAdd(&{h.bins}[kl_b], kl_sum);",
            "}",
        ]
    )
    red = ew.Reduction(
        None, "", None, replace, epilogue, items=int(params.get("items", 8)), prologue=prologue
    )
    gen_params = {"unroll": 1 if ctx.host_launched else 2, "block": params.get("block", 0)}
    if ctx.host_launched:
        gen_params.pop("block")
    return ew.generate(
        ctx,
        el,
        gen_params,
        "histogram: per-block bins privatised in shared memory, one global "
        "atomic per non-zero bin per block (was one per element)",
        red,
    )
