"""Code generation for matrix-vector products (the matvec recipe): bandwidth-bound fp32 GEMV.

GEMV design: one warp (or ``RPW`` warps) per output row when the reduction dimension is contiguous
(16-byte loads, shuffle reduction), a column-split block reduction in shared memory when the output
dimension is contiguous.

Like :mod:`._gemm_codegen`, nothing here reads source code: the matvec recipe binds a user's kernel to a
:class:`GemvBinding` and calls :func:`gemv_body`.
"""

from __future__ import annotations

from dataclasses import dataclass

from kernellsp.optimize.propose.recipes._gemm_model import _W, Layout, Operand, P, _expr, launch_bounds


@dataclass(frozen=True)
class GemvBinding:
    """``y[i] = epilogue(acc, y[i])``, ``acc = init + sum_j A[i,j] * x[j]`` for i < m, j < n.

    ``a.layout`` "row": ``A[i*ld + j]`` (the reduction runs along contiguous memory, a warp per row);
    "col": ``A[i + j*ld]`` (outputs are contiguous; the block splits j and reduces in shared memory).
    ``x_stride``/``y_stride`` are the element strides of x and y (C expressions, usually ``"1"``).
    """

    entry: str
    signature: str
    m: str
    n: str
    a: Operand
    x: str
    y: str
    x_stride: str = "1"
    y_stride: str = "1"
    epilogue: str = "{acc}"
    init: str = "0.0f"
    batch: str | None = None
    x_batch_stride: str = "0"
    y_batch_stride: str = "0"


@dataclass(frozen=True)
class GemvTile:
    """Row layout: ``warps`` warps per block, one row per warp, ``unroll`` 16-byte loads in flight per lane.

    Column layout: ``cols_per_block`` outputs per block, 4 per thread (16-byte loads along the
    contiguous output dimension), ``splits`` thread groups splitting the reduction dimension.
    """

    warps: int = 8
    unroll: int = 4
    cols_per_block: int = 32
    splits: int = 32

    @property
    def threads(self) -> int:
        return self.warps * 32


def gemv_launch(t: GemvTile, layout: Layout, m_spec: str, batch_spec: str | None) -> dict[str, object]:
    """The spec ``launch`` for :func:`gemv_body`'s kernel."""
    if layout == "row":
        grid: list[object] = [f"min(ceil_div({m_spec}, {t.warps}), 65535)"]
        block = t.threads
    else:
        grid = [f"min(ceil_div({m_spec}, {t.cols_per_block}), 65535)"]
        block = (t.cols_per_block // 4) * t.splits
    if batch_spec is not None:
        grid += [1, f"min({batch_spec}, 65535)"]
    return {"grid": grid, "block": block}


def gemv_problems(t: GemvTile, layout: Layout) -> list[str]:
    out = []
    if layout == "row":
        if not 1 <= t.warps <= 32:
            out.append(f"{t.warps} warps per block is out of range")
        if t.unroll not in (1, 2, 4, 8):
            out.append(f"unroll {t.unroll} is not 1, 2, 4 or 8")
    else:
        if t.cols_per_block not in (32, 64, 128, 256):
            # 8 lanes x 16 bytes is one 128-byte line per reduction step: fewer would waste sectors.
            out.append(f"{t.cols_per_block} outputs per block is not 32, 64, 128 or 256")
        threads = (t.cols_per_block // 4) * t.splits
        if threads > 1024 or t.splits < 1:
            out.append(f"{threads} threads per block exceed 1024")
    return out


def gemv_body(b: GemvBinding, t: GemvTile) -> str:
    """The complete definition of ``b.entry`` computing ``b``'s matrix-vector product.

    The reduction order differs from the naive loop (a tree of partial sums), so the result matches
    it within fp32 rounding of a K-term sum, not bit for bit; the spec's tolerance decides.
    """
    probs = gemv_problems(t, b.a.layout)
    if probs:
        raise ValueError("; ".join(probs))
    threads = t.threads if b.a.layout == "row" else (t.cols_per_block // 4) * t.splits
    w = _W()
    w.level = 0
    # Enough resident blocks for 32 warps per SM: a streaming kernel needs loads in flight, not registers.
    w(launch_bounds(b.signature, threads, 0))
    w("{")
    w.level = 1
    w(f"const int {P}M = (int){_expr(b.m)};")
    w(f"const int {P}N = (int){_expr(b.n)};")
    w(f"const long long {P}lda = (long long){_expr(b.a.ld)};")
    w(f"const long long {P}xs = (long long){_expr(b.x_stride)}, {P}ys = (long long){_expr(b.y_stride)};")
    if b.batch is not None:
        w(f"const int {P}nbatch = (int){_expr(b.batch)};")
        w.open(f"for (int {P}z = (int)blockIdx.z; {P}z < {P}nbatch; {P}z += (int)gridDim.z)")
        zb = f"(long long){P}z * "
    else:
        zb = None

    def based(name: str, offset: str, bstride: str, const: bool) -> None:
        parts = [
            p
            for p in (
                (_expr(offset) if offset != "0" else ""),
                (zb + _expr(bstride)) if zb and bstride != "0" else "",
            )
            if p
        ]
        q = "const float*" if const else "float*"
        w(
            f"{q} {P}{name} = {getattr(b, name) if name != 'a' else b.a.name}"
            + "".join(f" + {p}" for p in parts)
            + ";"
        )

    based("a", b.a.offset, b.a.batch_stride, True)
    based("x", "0", b.x_batch_stride, True)
    based("y", "0", b.y_batch_stride, False)
    if b.a.layout == "row":
        _gemv_rows(w, b, t)
    else:
        _gemv_cols(w, b, t)
    if b.batch is not None:
        w.close()
    w.level = 0
    w("}")
    return w.text() + "\n"


def _gemv_rows(w: _W, b: GemvBinding, t: GemvTile) -> None:
    w(
        "// Matvec recipe (kernellsp, row-major A): one warp per output row, 16-byte loads of the row and of x,"
    )
    w(f"// {t.unroll} loads in flight per lane, a shuffle reduction, the user's epilogue on lane 0.")
    w(f"const int {P}lane = threadIdx.x % 32;")
    w(
        f"const bool {P}vec = ((reinterpret_cast<unsigned long long>({P}a) & 15ull) == 0) && ({P}lda % 4 == 0) && "
        f"((reinterpret_cast<unsigned long long>({P}x) & 15ull) == 0) && ({P}xs == 1);"
    )
    w.open(
        f"for (int {P}row = (int)(blockIdx.x * {t.warps} + threadIdx.x / 32); {P}row < {P}M; "
        f"{P}row += (int)gridDim.x * {t.warps})"
    )
    w(f"const float* {P}ar = {P}a + (long long){P}row * {P}lda;")
    w(f"float {P}s = 0.0f;")
    w.open(f"if ({P}vec)")
    w(f"const int {P}n4 = {P}N / 4;")
    w(f"const float4* {P}a4 = reinterpret_cast<const float4*>({P}ar);")
    w(f"const float4* {P}x4 = reinterpret_cast<const float4*>({P}x);")
    w(f"int {P}q = {P}lane;")
    w(f"for (; {P}q + {(t.unroll - 1) * 32} < {P}n4; {P}q += {t.unroll * 32})")
    w.open("")
    w(f"float4 {P}va[{t.unroll}], {P}vx[{t.unroll}];")
    w("#pragma unroll")
    w(
        f"for (int {P}u = 0; {P}u < {t.unroll}; ++{P}u) {{ {P}va[{P}u] = __ldg({P}a4 + {P}q + {P}u * 32); "
        f"{P}vx[{P}u] = __ldg({P}x4 + {P}q + {P}u * 32); }}"
    )
    w("#pragma unroll")
    w(
        f"for (int {P}u = 0; {P}u < {t.unroll}; ++{P}u) {P}s += {P}va[{P}u].x * {P}vx[{P}u].x + "
        f"{P}va[{P}u].y * {P}vx[{P}u].y + {P}va[{P}u].z * {P}vx[{P}u].z + {P}va[{P}u].w * {P}vx[{P}u].w;"
    )
    w.close()
    w(
        f"for (; {P}q < {P}n4; {P}q += 32) {{ const float4 {P}va = __ldg({P}a4 + {P}q), {P}vx = __ldg({P}x4 + {P}q); "
        f"{P}s += {P}va.x * {P}vx.x + {P}va.y * {P}vx.y + {P}va.z * {P}vx.z + {P}va.w * {P}vx.w; }}"
    )
    w(f"for (int {P}j = {P}n4 * 4 + {P}lane; {P}j < {P}N; {P}j += 32) {P}s += {P}ar[{P}j] * {P}x[{P}j];")
    w.close()
    w(
        f"else for (int {P}j = {P}lane; {P}j < {P}N; {P}j += 32) {P}s += {P}ar[{P}j] * {P}x[(long long){P}j * {P}xs];"
    )
    w("#pragma unroll")
    w(f"for (int {P}o = 16; {P}o > 0; {P}o >>= 1) {P}s += __shfl_xor_sync(0xffffffffu, {P}s, {P}o);")
    w.open(f"if ({P}lane == 0)")
    w(f"const float {P}acc = ({b.init.format(i=f'{P}row')}) + {P}s;")
    w(f"float* {P}py = {P}y + (long long){P}row * {P}ys;")
    w(f"*{P}py = {b.epilogue.format(acc=f'{P}acc', c=f'(*{P}py)', i=f'{P}row')};")
    w.close()
    w.close()


def _gemv_cols(w: _W, b: GemvBinding, t: GemvTile) -> None:
    cols = t.cols_per_block
    lanes = cols // 4
    w(
        "// Matvec recipe (kernellsp, column-major A): each thread owns 4 consecutive outputs (16-byte loads along"
    )
    w(
        f"// the contiguous dimension), {t.splits} thread groups split the reduction, partial sums meet in shared memory."
    )
    w(f"__shared__ float4 {P}part[{t.splits}][{lanes}];")
    w(f"const int {P}c = threadIdx.x % {lanes}, {P}g = threadIdx.x / {lanes};")
    w(
        f"const bool {P}vec = ((reinterpret_cast<unsigned long long>({P}a) & 15ull) == 0) && ({P}lda % 4 == 0);"
    )
    w.open(f"for (int {P}i0 = (int)blockIdx.x * {cols}; {P}i0 < {P}M; {P}i0 += (int)gridDim.x * {cols})")
    w(f"const int {P}i = {P}i0 + {P}c * 4;")
    w(f"float4 {P}s = make_float4(0.0f, 0.0f, 0.0f, 0.0f);")
    w.open(f"if ({P}vec && {P}i + 3 < {P}M)")
    u = t.unroll
    w(f"int {P}j = {P}g;")
    w.open(f"for (; {P}j + {(u - 1) * t.splits} < {P}N; {P}j += {u * t.splits})")
    w(f"float4 {P}v[{u}];")
    w(f"float {P}xv[{u}];")
    w("#pragma unroll")
    w.open(f"for (int {P}u = 0; {P}u < {u}; ++{P}u)")
    w(f"const long long {P}jj = {P}j + {P}u * {t.splits};")
    w(f"{P}v[{P}u] = __ldg(reinterpret_cast<const float4*>({P}a + {P}jj * {P}lda + {P}i));")
    w(f"{P}xv[{P}u] = __ldg({P}x + {P}jj * {P}xs);")
    w.close()
    w("#pragma unroll")
    w(
        f"for (int {P}u = 0; {P}u < {u}; ++{P}u) {{ {P}s.x += {P}v[{P}u].x * {P}xv[{P}u]; {P}s.y += {P}v[{P}u].y * "
        f"{P}xv[{P}u]; {P}s.z += {P}v[{P}u].z * {P}xv[{P}u]; {P}s.w += {P}v[{P}u].w * {P}xv[{P}u]; }}"
    )
    w.close()
    w.open(f"for (; {P}j < {P}N; {P}j += {t.splits})")
    w(f"const float4 {P}v = __ldg(reinterpret_cast<const float4*>({P}a + (long long){P}j * {P}lda + {P}i));")
    w(f"const float {P}xv = __ldg({P}x + (long long){P}j * {P}xs);")
    w(
        f"{P}s.x += {P}v.x * {P}xv; {P}s.y += {P}v.y * {P}xv; {P}s.z += {P}v.z * {P}xv; {P}s.w += {P}v.w * {P}xv;"
    )
    w.close()
    w.close()
    w.open(f"else if ({P}i < {P}M)")
    w.open(f"for (int {P}j = {P}g; {P}j < {P}N; {P}j += {t.splits})")
    w(f"const float* {P}p = {P}a + (long long){P}j * {P}lda + {P}i;")
    w(f"const float {P}xv = {P}x[(long long){P}j * {P}xs];")
    w(f"{P}s.x += {P}p[0] * {P}xv;")
    w(f"if ({P}i + 1 < {P}M) {P}s.y += {P}p[1] * {P}xv;")
    w(f"if ({P}i + 2 < {P}M) {P}s.z += {P}p[2] * {P}xv;")
    w(f"if ({P}i + 3 < {P}M) {P}s.w += {P}p[3] * {P}xv;")
    w.close()
    w.close()
    w(f"{P}part[{P}g][{P}c] = {P}s;")
    w("__syncthreads();")
    w.open(f"if ({P}g == 0)")
    w(f"float4 {P}t = {P}part[0][{P}c];")
    w("#pragma unroll 4")
    w(
        f"for (int {P}h = 1; {P}h < {t.splits}; ++{P}h) {{ const float4 {P}u = {P}part[{P}h][{P}c]; "
        f"{P}t.x += {P}u.x; {P}t.y += {P}u.y; {P}t.z += {P}u.z; {P}t.w += {P}u.w; }}"
    )
    # One block per component (no array indexed in a loop: that could put it in local memory).
    for q, comp in enumerate("xyzw"):
        row = f"({P}i + {q})"
        w.open(f"if ({row} < {P}M)")
        w(f"const float {P}acc = ({b.init.format(i=row)}) + {P}t.{comp};")
        w(f"float* {P}py = {P}y + (long long){row} * {P}ys;")
        w(f"*{P}py = {b.epilogue.format(acc=f'{P}acc', c=f'(*{P}py)', i=row)};")
        w.close()
    w.close()
    w("__syncthreads();  // part[] is reused by the next block-stride iteration")
    w.close()
