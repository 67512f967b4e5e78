"""Generation: the element body as a lambda, a 16-byte vector loop, a scalar tail and path."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from kernellsp.optimize.propose.recipes._elementwise.body import _bytes
from kernellsp.optimize.propose.recipes._elementwise.launch import new_launch
from kernellsp.optimize.propose.recipes._elementwise.model import ElementLoop
from kernellsp.optimize.propose.recipes.base import (
    RecipeContext,
    RecipeError,
    Rewrite,
    indent,
    replace_nodes,
    signature_text,
)
from kernellsp.source.ir import Poly


def elements_per_vector(ctx: RecipeContext, el: ElementLoop) -> int:
    """Elements per thread step: 16 bytes of the narrowest stream (times its stride)."""
    widths = []
    for s in el.streams:
        b = _bytes(ctx, s)
        if b is None:
            raise RecipeError(f"unknown element size of {s.param}")
        widths.append(b * s.stride)
    return max(1, 16 // min(widths))


@dataclass
class Reduction:
    """How :func:`generate` turns the element loop into a reduction: each element's body yields a value
    (``kl_acc``, starting at ``identity``; ``replace`` rewrites the body's atomics into ``kl_acc`` updates),
    each thread combines its elements' values in registers (``kl_total``), and ``epilogue`` combines the
    threads' totals and publishes them (warp shuffles, shared memory, one atomic per block)."""

    #: ``None``: the body updates the user's own accumulators (captured by reference) and returns nothing.
    acc_type: str | None
    identity: str
    combine: Any  # Callable[[str, str], str]: C expression combining two values
    replace: dict[int, str]
    epilogue: str
    #: Elements per thread of the new launch, in vectors (``grid = ceil_div(n, block * E * items)``).
    items: int = 1
    #: Statements before the loop (after the prelude) and the threads' mapping: ``(tid, threads)``.
    prologue: list[str] = field(default_factory=list)
    threads: tuple[str, str] | None = None


def generate(
    ctx: RecipeContext, el: ElementLoop, params: dict[str, Any], what: str, reduction: Reduction | None = None
) -> Rewrite:
    """The rewritten kernel for an element loop (see the module docstring); ``what`` heads its comment."""
    ir = ctx.ir
    unroll = int(params.get("unroll", 1))
    E = elements_per_vector(ctx, el)
    for s in el.streams:
        b = _bytes(ctx, s)
        assert b is not None
        if (E * s.stride * b) % 16:
            raise RecipeError(f"{s.param}: {E} elements are not a whole number of 16-byte vectors")
    lines: list[str] = []
    add = lines.append
    # Not "// kernellsp ...": a comment whose first word is kernellsp is read as a launch spec.
    add(f"// Rewritten by a kernellsp recipe: {what}.")
    for p in el.prelude:
        add(ir.text(p))
    lines += _thread_mapping(ctx, el, params, E, reduction)
    lines += _element_count(ctx, el)
    red = reduction
    lines += _element_lambda(ctx, el, red)
    lines += _scalar_path(el, red)
    lines += _vector_path(el, E, unroll, red)
    if red:
        add(red.epilogue)
    code = signature_text(ctx) + "\n{\n" + indent("\n".join(lines), 4) + "\n}\n"
    launch = None
    if not ctx.host_launched:
        launch = new_launch(ctx, el, E * (red.items if red else unroll), params)
    return Rewrite(ctx.kernel.name, code, launch)


def _thread_mapping(
    ctx: RecipeContext, el: ElementLoop, params: dict[str, Any], E: int, reduction: Reduction | None
) -> list[str]:
    """``kl_tid`` and ``kl_threads``: this thread's rank and the number of threads of the loops."""
    lines: list[str] = []
    add = lines.append
    one_d = _one_d(ctx)
    spread = (
        bool(params.get("spread"))
        and ctx.host_launched
        and one_d
        and reduction is None
        and el.form == "guard"
    )
    if spread:
        # The host's launch gives one thread per element and vectors need 1/E of them: every E-th block
        # works (E times as much), so working and idle blocks interleave on the SMs instead of the idle
        # ones trailing at the end.
        add(f"if (blockIdx.x % {E} != 0) return;")
        add(f"const long long kl_tid = static_cast<long long>(blockIdx.x / {E}) * blockDim.x + threadIdx.x;")
        add(f"const long long kl_threads = static_cast<long long>((gridDim.x + {E - 1}) / {E}) * blockDim.x;")
    elif reduction is not None and reduction.threads is not None:
        add(f"const long long kl_tid = {reduction.threads[0]};")
        add(f"const long long kl_threads = {reduction.threads[1]};")
    elif one_d:
        add("const long long kl_tid = static_cast<long long>(blockIdx.x) * blockDim.x + threadIdx.x;")
        add("const long long kl_threads = static_cast<long long>(gridDim.x) * blockDim.x;")
    else:
        add(
            "const long long kl_threads = static_cast<long long>(gridDim.x) * gridDim.y * gridDim.z * blockDim.x * "
            "blockDim.y * blockDim.z;"
        )
        add(
            "const long long kl_tid = ((static_cast<long long>(blockIdx.z) * gridDim.y + blockIdx.y) * gridDim.x + "
            "blockIdx.x) * (blockDim.x * blockDim.y * blockDim.z) + (threadIdx.z * blockDim.y + threadIdx.y) * blockDim.x + "
            "threadIdx.x;"
        )
    return lines


def _element_count(ctx: RecipeContext, el: ElementLoop) -> list[str]:
    """``kl_n``: the number of elements the rewrite processes (what the original reached)."""
    n_expr = _ll(el.bound)
    if el.form == "chunk" and el.chunk is not None:
        # Thread t of the original handled [t*C, (t+1)*C): together [0, threads*C) of the launch it ran with.
        if ctx.host_launched:
            return [f"const long long kl_n = min({n_expr}, kl_threads * ({_ll(el.chunk)}));"]
        return [
            f"const long long kl_n = {n_expr};  // the spec's launch covered every element (checked per shape)"
        ]
    if ctx.host_launched and el.form == "guard":
        # One element per thread: the original reached [0, min(n, threads)) under the launch it keeps.
        return [f"const long long kl_n = min({n_expr}, static_cast<long long>(gridDim.x) * blockDim.x);"]
    return [f"const long long kl_n = {n_expr};"]


def _element_lambda(ctx: RecipeContext, el: ElementLoop, red: Reduction | None) -> list[str]:
    """The reduction's prologue and ``kl_element``: the user's body over the element index and its operands."""
    ir = ctx.ir
    lines: list[str] = []
    add = lines.append
    # The element body, once, as a lambda over the element index and its stream operands.
    args = ["const long long kl_i"]
    for s in el.streams:
        for o in sorted(s.reads | s.writes):
            if o in s.writes:
                args.append(f"{s.ctype}& {s.slot(o)}")
            else:
                args.append(f"const {s.ctype} {s.slot(o)}")
    returns = red is not None and red.acc_type is not None
    for line in red.prologue if red else []:
        add(line)
    add(f"auto kl_element = [&]({', '.join(args)})" + (f" -> {red.acc_type} {{" if red and returns else " {"))
    if red and returns:
        add(f"    {red.acc_type} kl_acc = {red.identity};")
    for r in el.redefine:
        add("    " + r)
    for stmt in el.body:
        add(indent(_dedent(replace_nodes(ir, stmt, {**el.replace, **(red.replace if red else {})})), 4))
    if red and returns:
        add("    return kl_acc;")
    add("};")
    if red and returns:
        add(f"{red.acc_type} kl_total = {red.identity};")
    return lines


def _scalar_path(el: ElementLoop, red: Reduction | None) -> list[str]:
    """``kl_scalar``: one element with plain loads and stores (the tail, unaligned pointers)."""
    lines: list[str] = []
    add = lines.append
    # Scalar path: one element with plain loads and stores (tail, unaligned pointers).
    add("auto kl_scalar = [&](const long long kl_e) {")
    call = ["kl_e"]
    for s in el.streams:
        for o in sorted(s.reads | s.writes):
            idx = f"kl_e * {s.stride} + {o}" if s.stride > 1 else "kl_e"
            if o in s.reads or (o in s.writes and s.conditional_write):
                add(f"    {s.ctype} {s.slot(o)} = {s.param}[{idx}];")
            else:
                add(f"    {s.ctype} {s.slot(o)};")
            call.append(s.slot(o))
    if red and red.acc_type is not None:
        add(f"    kl_total = {red.combine('kl_total', 'kl_element(' + ', '.join(call) + ')')};")
    else:
        add(f"    kl_element({', '.join(call)});")
    for s in el.streams:
        for o in sorted(s.writes):
            idx = f"kl_e * {s.stride} + {o}" if s.stride > 1 else "kl_e"
            add(f"    {s.param}[{idx}] = {s.slot(o)};")
    add("};")
    return lines


def _vector_path(el: ElementLoop, E: int, unroll: int, red: Reduction | None) -> list[str]:
    """The grid-stride loop over 16-byte vectors when every pointer is aligned, scalar elements otherwise."""
    lines: list[str] = []
    add = lines.append
    # Vector path: E elements per step, 16-byte loads/stores.
    ptrs = " | ".join(f"reinterpret_cast<unsigned long long>({s.param})" for s in el.streams)
    add(f"constexpr int kl_E = {E};  // elements per 16-byte vector of the narrowest stream")
    add(f"const bool kl_aligned = (({ptrs}) & 15ull) == 0;")
    add("if (kl_aligned) {")
    add("    const long long kl_nvec = kl_n / kl_E;")
    vec_body = _vector_step(el, unroll, red)
    add("    long long kl_v = kl_tid;")
    if unroll > 1:
        add(f"    for (; kl_v + {unroll - 1} * kl_threads < kl_nvec; kl_v += {unroll} * kl_threads) {{")
        add(indent(vec_body, 8))
        add("    }")
    add("    for (; kl_v < kl_nvec; kl_v += kl_threads) {")
    add(indent(_vector_step(el, 1, red), 8))
    add("    }")
    add(
        "    for (long long kl_e = kl_nvec * kl_E + kl_tid; kl_e < kl_n; kl_e += kl_threads) kl_scalar(kl_e);"
    )
    add("} else {")
    add("    for (long long kl_e = kl_tid; kl_e < kl_n; kl_e += kl_threads) kl_scalar(kl_e);")
    add("}")
    return lines


def _vector_step(el: ElementLoop, unroll: int, red: Reduction | None = None) -> str:
    """Load ``unroll`` vectors of every loaded stream, apply the element lambda, store the outputs."""
    out: list[str] = []
    add = out.append
    u_idx = "[kl_u]" if unroll > 1 else ""
    for s in el.streams:
        dims = f"[{unroll}]" if unroll > 1 else ""
        add(f"alignas(16) {s.ctype} kl_{s.param}_r{dims}[{_times('kl_E', s.stride)}];")
    if unroll > 1:
        add("#pragma unroll")
        add(f"for (int kl_u = 0; kl_u < {unroll}; ++kl_u) {{")
    pad = "    " if unroll > 1 else ""
    v = "(kl_v + kl_u * kl_threads)" if unroll > 1 else "kl_v"
    for s in el.streams:
        if s.loaded:
            add(f"{pad}{{")
            add(
                f"{pad}    const uint4* kl_src = reinterpret_cast<const uint4*>({s.param} + {_times(v + ' * kl_E', s.stride)});"
            )
            add(f"{pad}    uint4* kl_dst = reinterpret_cast<uint4*>(kl_{s.param}_r{u_idx});")
            add(f"{pad}    #pragma unroll")
            add(
                f"{pad}    for (int kl_w = 0; kl_w < int(sizeof(kl_{s.param}_r{u_idx}) / 16); ++kl_w) kl_dst[kl_w] = kl_src[kl_w];"
            )
            add(f"{pad}}}")
    if unroll > 1:
        add("}")
        add("#pragma unroll")
        add(f"for (int kl_u = 0; kl_u < {unroll}; ++kl_u) {{")
    add(f"{pad}#pragma unroll")
    add(f"{pad}for (int kl_k = 0; kl_k < kl_E; ++kl_k) {{")
    call = [f"{v} * kl_E + kl_k"]
    for s in el.streams:
        for o in sorted(s.reads | s.writes):
            call.append(f"kl_{s.param}_r{u_idx}[{_times('kl_k', s.stride, o)}]")
    if red and red.acc_type is not None:
        add(f"{pad}    kl_total = {red.combine('kl_total', 'kl_element(' + ', '.join(call) + ')')};")
    else:
        add(f"{pad}    kl_element({', '.join(call)});")
    add(f"{pad}}}")
    for s in el.streams:
        if s.writes:
            add(f"{pad}{{")
            add(
                f"{pad}    uint4* kl_out = reinterpret_cast<uint4*>({s.param} + {_times(v + ' * kl_E', s.stride)});"
            )
            add(f"{pad}    const uint4* kl_reg = reinterpret_cast<const uint4*>(kl_{s.param}_r{u_idx});")
            add(f"{pad}    #pragma unroll")
            add(
                f"{pad}    for (int kl_w = 0; kl_w < int(sizeof(kl_{s.param}_r{u_idx}) / 16); ++kl_w) kl_out[kl_w] = kl_reg[kl_w];"
            )
            add(f"{pad}}}")
    if unroll > 1:
        add("}")
    return "\n".join(out)


def _times(base: str, stride: int, offset: int = 0) -> str:
    """``base * stride + offset`` without the ``* 1`` and ``+ 0`` noise."""
    out = base if stride == 1 else f"{base} * {stride}"
    return f"{out} + {offset}" if offset else out


def _dedent(text: str) -> str:
    lines = text.split("\n")
    if len(lines) == 1:
        return text
    rest = [ln for ln in lines[1:] if ln.strip()]
    cut = min((len(ln) - len(ln.lstrip()) for ln in rest), default=0)
    # The first line was cut at the node start; the rest keep the source indentation.
    base = max(0, cut - 4) if lines[-1].strip().startswith("}") else cut
    return "\n".join([lines[0]] + [ln[base:] if len(ln) >= base else ln.lstrip() for ln in lines[1:]])


def _ll(p: Poly) -> str:
    """C text of a uniform polynomial computed in 64-bit (each factor cast first)."""
    rename = {s: f"static_cast<long long>({s})" for s in p.symbols()}
    return p.c_text(rename) if p.symbols() else p.c_text()


def _one_d(ctx: RecipeContext) -> bool:
    if ctx.host_launched:
        return ctx.block_is_1d() and ctx.grid_is_1d()
    return True  # a __global__ entry gets a 1-D launch
