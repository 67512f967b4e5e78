"""Code generation for matrix products: the tiled, register-blocked fp32 GEMM.

The matmul and matvec recipes bind a user's kernel to a :class:`GemmBinding` / :class:`GemvBinding`
(the user's own pointer and scalar names, index layouts, sizes as C expressions over the kernel's
parameters, the epilogue expression) and call :func:`gemm_body` / :func:`gemv_body` for the new
kernel. Nothing here reads source code: the functions are pure and testable on their own.

GEMM design (fp32 SIMT; the structure of the fastest hand-written CUDA-core SGEMMs):

* a block computes a ``BM x BN`` tile of C; its warps own ``WM x WN`` warp tiles; each thread owns
  ``(WMITER*4) x (WNITER*4)`` outputs held in registers, as ``WMITER x WNITER`` sub-tiles of 4x4
  so that every shared-memory fragment read is one 16-byte load and a warp's reads of one row
  fall into a single 128-byte line (conflict-free or broadcast);
* operands are staged through shared memory in ``BK``-deep slices stored k-major (``As[k][m]``,
  ``Bs[k][n]``), whatever the global layout: a K-contiguous operand (row-major A, column-major B)
  is transposed while being stored, with a 4-float row pad that keeps those scattered stores
  free of bank conflicts at BK = 8 (2-way at 16) while rows stay 16-byte aligned;
* two shared-memory stages with register prefetch: the next slice's global loads are issued
  before the current slice's FMAs and stored after them, so one ``__syncthreads`` per slice
  separates the stages and global latency hides behind ~BK*64 FMAs per thread;
* global loads and C stores are 16 bytes wide where the leading dimension is a multiple of 4
  and the base pointer is 16-byte aligned (checked at run time, once per block); otherwise, and
  for every element of a tile that crosses M, N or K, the code falls back to scalar predicated
  accesses with zero fill, so any size is correct (the fast path costs one uniform compare);
* each output accumulates ``acc += a * b`` over k = 0, 1, ..., K-1 in order starting from the
  user's own initial value, exactly as the naive loop does (nvcc contracts both to the same FFMA
  chain), so results match the naive kernel bit for bit unless flags change contraction;
* blocks are rasterised in groups of ``GROUP`` block rows so that consecutive blocks share A rows
  and B columns in L2.

The bandwidth-bound GEMV is in :mod:`._gemv_codegen`, over the same writer and helpers.
"""

from __future__ import annotations

from kernellsp.optimize.propose.recipes._gemm_model import (
    _W,
    VEC,
    GemmBinding,
    GemmTile,
    Layout,
    Operand,
    P,
    _expr,
    _pads,
    emit_tile_start,
    launch_bounds,
)

__all__ = [
    "VEC",
    "GemmBinding",
    "GemmTile",
    "Layout",
    "Operand",
    "P",
    "gemm_body",
    "gemm_launch",
    "launch_bounds",
]


def gemm_body(b: GemmBinding, t: GemmTile, tile_loop: bool = False) -> str:
    """The complete definition of ``b.entry`` computing ``b``'s product with tile ``t``.

    The kernel runs on a 1-D grid of ``blockDim.x == t.threads`` threads, one block per output tile
    (:func:`gemm_launch`). With ``tile_loop`` the blocks loop over the tiles instead, so any grid is
    correct (for a launch the host code fixes); without it a block past the last tile does nothing.

    Raises ``ValueError`` naming the problem when ``t`` does not fit (see :meth:`GemmTile.problems`).
    """
    probs = t.problems(b.a.layout, b.b.layout)
    if probs:
        raise ValueError("; ".join(probs))
    pa, pb = _pads(b.a.layout, b.b.layout)
    nt = t.threads
    w = _W()
    sig = launch_bounds(b.signature, nt, t.min_blocks)
    w.level = 0
    w(sig)
    w("{")
    w.level = 1
    c_text = "C[i,j] = " + b.epilogue.format(acc="sum_k A[i,k]*B[k,j]", c="C[i,j]", i="i", j="j")
    w(
        f"// Matmul recipe (kernellsp): {c_text}; A {b.a.layout}-major, B {b.b.layout}-major, C {b.c.layout}-major."
    )
    w(
        f"// {t.bm}x{t.bn} block tile in {t.bk}-deep slices, {t.wm}x{t.wn} warp tiles, "
        f"{t.thread_rows}x{t.thread_cols} outputs per thread in registers,"
    )
    feed = (
        "two shared-memory stages with register prefetch" if t.stages == 0 else f"{t.stages} cp.async stages"
    )
    w(f"// {feed}, 16-byte accesses where aligned, predicated edges.")
    w(f"constexpr int {P}BM = {t.bm}, {P}BN = {t.bn}, {P}BK = {t.bk};")
    w(f"constexpr int {P}WM = {t.wm}, {P}WN = {t.wn}, {P}WMITER = {t.wmiter}, {P}WNITER = {t.wniter};")
    w(f"constexpr int {P}WSUBM = {P}WM / {P}WMITER, {P}WSUBN = {P}WN / {P}WNITER;")
    w(f"constexpr int {P}LANES_N = {P}WSUBN / 4;  // lanes across a warp sub-tile's columns")
    w(f"constexpr int {P}PA = {pa}, {P}PB = {pb};  // row pads of the transposed operands (bank conflicts)")
    ns = max(2, t.stages)
    w(f"__shared__ alignas(16) float {P}As[{ns}][{P}BK][{P}BM + {P}PA];")
    w(f"__shared__ alignas(16) float {P}Bs[{ns}][{P}BK][{P}BN + {P}PB];")
    w(f"const int {P}M = (int){_expr(b.m)};")
    w(f"const int {P}N = (int){_expr(b.n)};")
    w(f"const int {P}K = (int){_expr(b.k)};")
    for op in (b.a, b.b, b.c):
        w(f"const int {P}ld{_tag(op, b)} = (int){_expr(op.ld)};")
    w(f"const int {P}tid = threadIdx.x;")
    w(f"const int {P}warp = {P}tid / 32, {P}lane = {P}tid % 32;")
    w(f"const int {P}wm0 = ({P}warp / ({P}BN / {P}WN)) * {P}WM;")
    w(f"const int {P}wn0 = ({P}warp % ({P}BN / {P}WN)) * {P}WN;")
    w(f"const int {P}tm = ({P}lane / {P}LANES_N) * 4, {P}tn = ({P}lane % {P}LANES_N) * 4;")
    emit_tile_start(w, b.batch, t.group, tile_loop)
    zb = f"{P}z * " if b.batch is not None else None
    # Operand base pointers at this block's tile (64-bit offsets: M*K may exceed 2^31).
    a_t, b_t, c_t = (_tag(op, b) for op in (b.a, b.b, b.c))
    for op, tag in ((b.a, a_t), (b.b, b_t)):
        off = _expr(op.offset) if op.offset != "0" else ""
        parts = [
            p for p in (off, (zb + _expr(op.batch_stride)) if zb and op.batch_stride != "0" else "") if p
        ]
        base = f"{op.name}" + "".join(f" + {p}" for p in parts)
        w(f"const float* {P}{tag} = {base};")
    off = _expr(b.c.offset) if b.c.offset != "0" else ""
    parts = [p for p in (off, (zb + _expr(b.c.batch_stride)) if zb and b.c.batch_stride != "0" else "") if p]
    w(f"{_c_ptr_type(b)} {P}{c_t} = {b.c.name}" + "".join(f" + {p}" for p in parts) + ";")
    # 16-byte accesses need a 16-byte aligned base and a leading dimension that keeps rows aligned.
    for tag in (a_t, b_t, c_t):
        w(
            f"const bool {P}vec{tag} = ((reinterpret_cast<unsigned long long>({P}{tag}) & 15ull) == 0) && "
            f"({P}ld{tag} % 4 == 0);"
        )
    # Accumulators.
    rm, rn = t.thread_rows, t.thread_cols
    w(f"float {P}acc[{rm}][{rn}];")
    if "{i}" in b.init or "{j}" in b.init:
        # The user's accumulator starts at a per-output value (a bias): read it for outputs inside C only.
        w("#pragma unroll")
        w.open(f"for (int {P}r = 0; {P}r < {rm}; ++{P}r)")
        w("#pragma unroll")
        w.open(f"for (int {P}c = 0; {P}c < {rn}; ++{P}c)")
        w(f"const int {P}gi = {P}m0 + {P}wm0 + ({P}r / 4) * {P}WSUBM + {P}tm + {P}r % 4;")
        w(f"const int {P}gj = {P}n0 + {P}wn0 + ({P}c / 4) * {P}WSUBN + {P}tn + {P}c % 4;")
        init = b.init.format(i=f"{P}gi", j=f"{P}gj")
        w(f"{P}acc[{P}r][{P}c] = ({P}gi < {P}M && {P}gj < {P}N) ? ({init}) : 0.0f;")
        w.close()
        w.close()
    else:
        w("#pragma unroll")
        w.open(f"for (int {P}r = 0; {P}r < {rm}; ++{P}r)")
        w("#pragma unroll")
        w(f"for (int {P}c = 0; {P}c < {rn}; ++{P}c) {P}acc[{P}r][{P}c] = {b.init.format()};")
        w.close()
    w(f"const int {P}ntiles = ({P}K + {P}BK - 1) / {P}BK;")
    if t.stages == 0:
        _mainloop_regs(w, b, t, a_t, b_t)
    else:
        _mainloop_async(w, b, t, a_t, b_t)
    _emit_epilogue(w, b, t, c_t)
    if tile_loop:
        w("__syncthreads();  // the next tile reuses the shared stages")
    w.close()
    w.level = 0
    w("}")
    return w.text() + "\n"


def _mainloop_regs(w: _W, b: GemmBinding, t: GemmTile, a_t: str, b_t: str) -> None:
    """Two shared stages; the next slice goes global -> registers before the FMAs, registers -> shared after."""
    nt = t.threads
    la = t.bm * t.bk // VEC // nt
    lb_ = t.bn * t.bk // VEC // nt
    w(f"float4 {P}ra[{la}], {P}rb[{lb_}];")
    # Prologue: slice 0 into stage 0.
    _emit_load(w, "A", b.a, a_t, t, la, nt, "0")
    _emit_load(w, "B", b.b, b_t, t, lb_, nt, "0")
    _emit_store(w, "A", b.a, t, la, nt, "0")
    _emit_store(w, "B", b.b, t, lb_, nt, "0")
    w("__syncthreads();")
    w.open(f"for (int {P}t = 0; {P}t < {P}ntiles; ++{P}t)")
    w(f"const int {P}cur = {P}t & 1;")
    w(f"const bool {P}more = {P}t + 1 < {P}ntiles;")
    w.open(f"if ({P}more)")
    w("// The next slice's global loads are in flight during the FMAs below.")
    _emit_load(w, "A", b.a, a_t, t, la, nt, f"({P}t + 1) * {P}BK")
    _emit_load(w, "B", b.b, b_t, t, lb_, nt, f"({P}t + 1) * {P}BK")
    w.close()
    _emit_compute(w, t, f"{P}cur")
    w.open(f"if ({P}more)")
    _emit_store(w, "A", b.a, t, la, nt, f"{P}cur ^ 1")
    _emit_store(w, "B", b.b, t, lb_, nt, f"{P}cur ^ 1")
    w.close()
    w("__syncthreads();")
    w.close()


def _mainloop_async(w: _W, b: GemmBinding, t: GemmTile, a_t: str, b_t: str) -> None:
    """``stages`` shared stages filled by cp.async (zero-fill past the edges), STAGES-1 slices in flight."""
    st = t.stages
    w(f"// {st}-stage cp.async pipeline: slices t+1..t+{st - 1} are in flight while slice t is multiplied.")
    w("#pragma unroll")
    w.open(f"for (int {P}s = 0; {P}s < {st - 1}; ++{P}s)")
    w.open(f"if ({P}s < {P}ntiles)")
    _emit_async(w, "A", b.a, a_t, t, f"{P}s * {P}BK", f"{P}s")
    _emit_async(w, "B", b.b, b_t, t, f"{P}s * {P}BK", f"{P}s")
    w.close()
    w('asm volatile("cp.async.commit_group;\\n" ::: "memory");')
    w.close()
    w(f"int {P}rs = 0, {P}ws = {st - 1};")
    w.open(f"for (int {P}t = 0; {P}t < {P}ntiles; ++{P}t)")
    w(
        f'asm volatile("cp.async.wait_group {st - 2};\\n" ::: "memory");  // slice t has landed (this thread\'s copies)'
    )
    w("__syncthreads();  // ...and everyone's; the stage written below was last read in iteration t-1")
    w.open(f"if ({P}t + {st - 1} < {P}ntiles)")
    _emit_async(w, "A", b.a, a_t, t, f"({P}t + {st - 1}) * {P}BK", f"{P}ws")
    _emit_async(w, "B", b.b, b_t, t, f"({P}t + {st - 1}) * {P}BK", f"{P}ws")
    w.close()
    w('asm volatile("cp.async.commit_group;\\n" ::: "memory");')
    _emit_compute(w, t, f"{P}rs")
    w(f"{P}rs = {P}rs + 1 == {st} ? 0 : {P}rs + 1;")
    w(f"{P}ws = {P}ws + 1 == {st} ? 0 : {P}ws + 1;")
    w.close()
    w('asm volatile("cp.async.wait_group 0;\\n" ::: "memory");')
    w("__syncthreads();")


def _emit_compute(w: _W, t: GemmTile, stage: str) -> None:
    """The FMAs of one BK slice from shared stage ``stage``: 16-byte fragment loads, outer products."""
    rm, rn = t.thread_rows, t.thread_cols
    w("#pragma unroll")
    w.open(f"for (int {P}kk = 0; {P}kk < {P}BK; ++{P}kk)")
    w(f"float {P}fa[{rm}], {P}fb[{rn}];")
    w("#pragma unroll")
    w.open(f"for (int {P}i = 0; {P}i < {P}WMITER; ++{P}i)")
    w(
        f"const float4 {P}v = *reinterpret_cast<const float4*>(&{P}As[{stage}][{P}kk][{P}wm0 + {P}i * {P}WSUBM + {P}tm]);"
    )
    w(
        f"{P}fa[{P}i * 4 + 0] = {P}v.x; {P}fa[{P}i * 4 + 1] = {P}v.y; {P}fa[{P}i * 4 + 2] = {P}v.z; "
        f"{P}fa[{P}i * 4 + 3] = {P}v.w;"
    )
    w.close()
    w("#pragma unroll")
    w.open(f"for (int {P}j = 0; {P}j < {P}WNITER; ++{P}j)")
    w(
        f"const float4 {P}v = *reinterpret_cast<const float4*>(&{P}Bs[{stage}][{P}kk][{P}wn0 + {P}j * {P}WSUBN + {P}tn]);"
    )
    w(
        f"{P}fb[{P}j * 4 + 0] = {P}v.x; {P}fb[{P}j * 4 + 1] = {P}v.y; {P}fb[{P}j * 4 + 2] = {P}v.z; "
        f"{P}fb[{P}j * 4 + 3] = {P}v.w;"
    )
    w.close()
    w("#pragma unroll")
    w.open(f"for (int {P}r = 0; {P}r < {rm}; ++{P}r)")
    w("#pragma unroll")
    w(f"for (int {P}c = 0; {P}c < {rn}; ++{P}c) {P}acc[{P}r][{P}c] += {P}fa[{P}r] * {P}fb[{P}c];")
    w.close()
    w.close()


def _emit_async(w: _W, which: str, op: Operand, tag: str, t: GemmTile, k0: str, stage: str) -> None:
    """cp.async one operand's BK slice into shared stage ``stage``; out-of-range elements are zero-filled.

    A K-contiguous operand is transposed on the way (4-byte copies); the other moves in 16-byte
    copies when aligned (a partial vector at the edge copies its valid bytes, cp.async zero-fills
    the rest), else in 4-byte copies. An out-of-range source is replaced by the operand's base
    pointer with a source size of 0: nothing is read from it.
    """
    nt = t.threads
    rows = t.bm if which == "A" else t.bn
    outer0 = f"{P}m0" if which == "A" else f"{P}n0"
    outer_n = f"{P}M" if which == "A" else f"{P}N"
    along_k = (which == "A" and op.layout == "row") or (which == "B" and op.layout == "col")
    arr = f"{P}As" if which == "A" else f"{P}Bs"
    ld = f"{P}ld{tag}"
    ptr = f"{P}{tag}"
    cp4 = (
        'asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;\\n" :: '
        '"r"((unsigned)__cvta_generic_to_shared({dst})), "l"({src}), "r"({n}));'
    )
    cp16 = (
        'asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\\n" :: '
        '"r"((unsigned)__cvta_generic_to_shared({dst})), "l"({src}), "r"({n}));'
    )
    w("#pragma unroll")
    if along_k:
        per = rows * t.bk // nt
        w.open(f"for (int {P}l = 0; {P}l < {per}; ++{P}l)")
        w(f"const int {P}e = {P}tid + {P}l * {nt};")
        w(f"const int {P}o = {P}e / {P}BK, {P}kq = {P}e % {P}BK;")
        w(f"const int {P}go = {outer0} + {P}o, {P}gk = {k0} + {P}kq;")
        w(f"const bool {P}ok = {P}go < {outer_n} && {P}gk < {P}K;")
        w(f"const float* {P}src = {P}ok ? {ptr} + (long long){P}go * {ld} + {P}gk : {ptr};")
        w(cp4.format(dst=f"&{arr}[{stage}][{P}kq][{P}o]", src=f"{P}src", n=f"{P}ok ? 4 : 0"))
        w.close()
        return
    per = rows * t.bk // VEC // nt
    w.open(f"for (int {P}l = 0; {P}l < {per}; ++{P}l)")
    w(f"const int {P}v = {P}tid + {P}l * {nt};")
    w(f"const int {P}kq = {P}v / ({rows} / 4), {P}o = ({P}v % ({rows} / 4)) * 4;")
    w(f"const int {P}go = {outer0} + {P}o, {P}gk = {k0} + {P}kq;")
    w.open(f"if ({P}vec{tag})")
    w(f"const int {P}n = {P}gk < {P}K ? max(0, min(4, {outer_n} - {P}go)) : 0;")
    w(f"const float* {P}src = {P}n > 0 ? {ptr} + (long long){P}gk * {ld} + {P}go : {ptr};")
    w(cp16.format(dst=f"&{arr}[{stage}][{P}kq][{P}o]", src=f"{P}src", n=f"{P}n * 4"))
    w.close()
    w.open("else")
    w("#pragma unroll")
    w.open(f"for (int {P}q = 0; {P}q < 4; ++{P}q)")
    w(f"const bool {P}ok = {P}gk < {P}K && {P}go + {P}q < {outer_n};")
    w(f"const float* {P}src = {P}ok ? {ptr} + (long long){P}gk * {ld} + {P}go + {P}q : {ptr};")
    w(cp4.format(dst=f"&{arr}[{stage}][{P}kq][{P}o + {P}q]", src=f"{P}src", n=f"{P}ok ? 4 : 0"))
    w.close()
    w.close()
    w.close()


def _tag(op: Operand, b: GemmBinding) -> str:
    return "A" if op is b.a else ("B" if op is b.b else "C")


def _c_ptr_type(b: GemmBinding) -> str:
    return "float*"


def _emit_load(w: _W, which: str, op: Operand, tag: str, t: GemmTile, per: int, nt: int, k0: str) -> None:
    """Global -> registers for one operand's BK slice starting at ``k0``, zero-filled outside the matrix."""
    # Logical coordinates: A is (row m, depth k), B is (depth k, col n). "outer" is m or n.
    outer0 = f"{P}m0" if which == "A" else f"{P}n0"
    outer_n = f"{P}M" if which == "A" else f"{P}N"
    rows = t.bm if which == "A" else t.bn
    # Contiguous along k (row-major A / column-major B): vectors run along k.
    along_k = (which == "A" and op.layout == "row") or (which == "B" and op.layout == "col")
    ld = f"{P}ld{tag}"
    ptr = f"{P}{tag}"
    w("#pragma unroll")
    w.open(f"for (int {P}l = 0; {P}l < {per}; ++{P}l)")
    w(f"const int {P}v = {P}tid + {P}l * {nt};")
    if along_k:
        w(f"const int {P}o = {P}v / ({P}BK / 4), {P}kq = ({P}v % ({P}BK / 4)) * 4;")
        w(f"const int {P}go = {outer0} + {P}o, {P}gk = {k0} + {P}kq;")
        w(f"const float* {P}p = {ptr} + (long long){P}go * {ld} + {P}gk;")
        w(
            f"if ({P}vec{tag} && {P}go < {outer_n} && {P}gk + 3 < {P}K) {P}r{tag.lower()}[{P}l] = "
            f"*reinterpret_cast<const float4*>({P}p);"
        )
        w.open("else")
        w(f"const bool {P}in = {P}go < {outer_n};")
        comps = "xyzw"
        for q in range(4):
            w(f"{P}r{tag.lower()}[{P}l].{comps[q]} = ({P}in && {P}gk + {q} < {P}K) ? {P}p[{q}] : 0.0f;")
        w.close()
    else:
        w(f"const int {P}kq = {P}v / ({rows} / 4), {P}o = ({P}v % ({rows} / 4)) * 4;")
        w(f"const int {P}go = {outer0} + {P}o, {P}gk = {k0} + {P}kq;")
        w(f"const float* {P}p = {ptr} + (long long){P}gk * {ld} + {P}go;")
        w(
            f"if ({P}vec{tag} && {P}gk < {P}K && {P}go + 3 < {outer_n}) {P}r{tag.lower()}[{P}l] = "
            f"*reinterpret_cast<const float4*>({P}p);"
        )
        w.open("else")
        w(f"const bool {P}in = {P}gk < {P}K;")
        comps = "xyzw"
        for q in range(4):
            w(f"{P}r{tag.lower()}[{P}l].{comps[q]} = ({P}in && {P}go + {q} < {outer_n}) ? {P}p[{q}] : 0.0f;")
        w.close()
    w.close()


def _emit_store(w: _W, which: str, op: Operand, t: GemmTile, per: int, nt: int, buf: str) -> None:
    """Registers -> the k-major shared stage ``buf``."""
    rows = t.bm if which == "A" else t.bn
    along_k = (which == "A" and op.layout == "row") or (which == "B" and op.layout == "col")
    arr = f"{P}As" if which == "A" else f"{P}Bs"
    reg = f"{P}r{which.lower()}"
    w("#pragma unroll")
    w.open(f"for (int {P}l = 0; {P}l < {per}; ++{P}l)")
    w(f"const int {P}v = {P}tid + {P}l * {nt};")
    if along_k:
        w(f"const int {P}o = {P}v / ({P}BK / 4), {P}kq = ({P}v % ({P}BK / 4)) * 4;")
        w(f"{arr}[{buf}][{P}kq + 0][{P}o] = {reg}[{P}l].x;")
        w(f"{arr}[{buf}][{P}kq + 1][{P}o] = {reg}[{P}l].y;")
        w(f"{arr}[{buf}][{P}kq + 2][{P}o] = {reg}[{P}l].z;")
        w(f"{arr}[{buf}][{P}kq + 3][{P}o] = {reg}[{P}l].w;")
    else:
        w(f"const int {P}kq = {P}v / ({rows} / 4), {P}o = ({P}v % ({rows} / 4)) * 4;")
        w(f"*reinterpret_cast<float4*>(&{arr}[{buf}][{P}kq][{P}o]) = {reg}[{P}l];")
    w.close()


def _emit_epilogue(w: _W, b: GemmBinding, t: GemmTile, c_t: str) -> None:
    """Write the thread's outputs through the user's epilogue; 16-byte stores along C's contiguous dimension."""
    ld = f"{P}ld{c_t}"
    ptr = f"{P}{c_t}"
    uses_c = "{c}" in b.epilogue
    comps = "xyzw"
    w("// Epilogue: the user's own output expression, element by element.")
    w("#pragma unroll")
    w.open(f"for (int {P}i = 0; {P}i < {P}WMITER; ++{P}i)")
    w("#pragma unroll")
    w.open(f"for (int {P}j = 0; {P}j < {P}WNITER; ++{P}j)")
    w(f"const int {P}gi = {P}m0 + {P}wm0 + {P}i * {P}WSUBM + {P}tm;")
    w(f"const int {P}gj = {P}n0 + {P}wn0 + {P}j * {P}WSUBN + {P}tn;")
    if b.c.layout == "row":
        # Each of the 4 rows holds 4 consecutive columns: one float4 per row.
        w("#pragma unroll")
        w.open(f"for (int {P}r = 0; {P}r < 4; ++{P}r)")
        w(f"const int {P}row = {P}gi + {P}r;")
        w(f"if ({P}row >= {P}M) continue;")
        w(f"float* {P}p = {ptr} + (long long){P}row * {ld} + {P}gj;")
        accs = [f"{P}acc[{P}i * 4 + {P}r][{P}j * 4 + {q}]" for q in range(4)]
        ij = [(f"{P}row", f"({P}gj + {q})") for q in range(4)]
        inner_n, inner = f"{P}N", f"{P}gj"
    else:
        w("#pragma unroll")
        w.open(f"for (int {P}r = 0; {P}r < 4; ++{P}r)")
        w(f"const int {P}col = {P}gj + {P}r;")
        w(f"if ({P}col >= {P}N) continue;")
        w(f"float* {P}p = {ptr} + (long long){P}col * {ld} + {P}gi;")
        accs = [f"{P}acc[{P}i * 4 + {q}][{P}j * 4 + {P}r]" for q in range(4)]
        ij = [(f"({P}gi + {q})", f"{P}col") for q in range(4)]
        inner_n, inner = f"{P}M", f"{P}gi"
    w.open(f"if ({P}vec{c_t} && {inner} + 3 < {inner_n})")
    if uses_c:
        w(f"const float4 {P}old = *reinterpret_cast<const float4*>({P}p);")
    w(f"float4 {P}out;")
    for q in range(4):
        expr = b.epilogue.format(acc=accs[q], c=f"{P}old.{comps[q]}", i=ij[q][0], j=ij[q][1])
        w(f"{P}out.{comps[q]} = {expr};")
    w(f"*reinterpret_cast<float4*>({P}p) = {P}out;")
    w.close()
    w.open("else")
    for q in range(4):
        expr = b.epilogue.format(acc=accs[q], c=f"{P}p[{q}]", i=ij[q][0], j=ij[q][1])
        w(f"if ({inner} + {q} < {inner_n}) {P}p[{q}] = {expr};")
    w.close()
    w.close()
    w.close()
    w.close()


# --------------------------------------------------------------------------------------------------
# Launch


def gemm_launch(t: GemmTile, m_spec: str, n_spec: str, batch_spec: str | None) -> dict[str, object]:
    """The spec ``launch`` table for tile ``t``: one block per output tile (1-D grid), M, N, batch as spec
    expressions."""
    tiles = f"ceil_div({m_spec}, {t.bm}) * ceil_div({n_spec}, {t.bn})"
    if batch_spec is not None:
        tiles = f"{tiles} * ({batch_spec})"
    return {"grid": tiles, "block": t.threads}
