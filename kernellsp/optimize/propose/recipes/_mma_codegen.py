"""Code generation for 16-bit matrix products on tensor cores: WMMA fragments, fp32 accumulation.

The matmul-tensorcore recipe binds a user's f16 or bf16 product (the same :class:`GemmBinding` as the
fp32 generator) and calls :func:`mma_body`. Nothing here reads source code.

Design (``nvcuda::wmma`` 16x16x16 fragments, sm_80+ for bf16 and cp.async):

* a block computes a ``BM x BN`` tile of C with ``(BM/WM) x (BN/WN)`` warps; a warp owns
  ``(WM/16) x (WN/16)`` accumulator fragments (fp32);
* operands are staged through shared memory in ``BK``-deep slices **in their global layout** (a
  row-major A as ``[m][k]``, a column-major one as ``[k][m]``; likewise B), so every global read
  is a 16-byte ``cp.async`` of 8 consecutive elements, and the fragment loads say which layout
  they read (``row_major``/``col_major``); rows are padded by 8 elements (16 bytes) against bank
  conflicts, which keeps every fragment pointer 32-byte aligned as ``load_matrix_sync`` needs;
* two shared stages: slice t+1 is in flight (``cp.async``) while slice t is multiplied;
* edges and misalignment: a 16-byte chunk that is entirely inside the matrix and aligned (base
  pointer 16-byte aligned, leading dimension a multiple of 8) is one ``cp.async``; any other chunk
  is read element by element with zero fill, so any M, N, K and any leading dimension is correct;
* the epilogue stores each accumulator fragment to a per-warp staging tile in shared memory and
  writes it through the user's own output expression, element by element, bounds-checked. A
  per-output initial value (a bias) is added to the sum there.

Accuracy: the products of 16-bit inputs are exact in fp32 and the sums are fp32, but the order of
the sums differs from the naive loop's, so results differ from it in the last bits (not bit for
bit, unlike the fp32 generator); the verification's tolerance and oracle decide.
"""

from __future__ import annotations

from dataclasses import dataclass

from kernellsp.optimize.propose.recipes._gemm_model import (
    _W,
    GemmBinding,
    Operand,
    P,
    _expr,
    emit_tile_start,
    launch_bounds,
)

#: The element types the generator takes, by the C type the user's pointers hold -> WMMA's type name.
MMA_TYPES: dict[str, str] = {
    "__half": "__half",
    "half": "__half",
    "__nv_bfloat16": "__nv_bfloat16",
    "nv_bfloat16": "__nv_bfloat16",
}

#: Elements per 16-byte chunk (16-bit types).
CHUNK = 8
#: Row pad of the shared tiles, in elements: 16 bytes keeps fragment pointers 32-byte aligned.
PAD = 8


@dataclass(frozen=True)
class MmaTile:
    """Block tile ``bm x bn``, slice depth ``bk``, warp tile ``wm x wn`` (multiples of 16)."""

    bm: int = 128
    bn: int = 128
    bk: int = 32
    wm: int = 64
    wn: int = 32
    min_blocks: int = 2
    group: int = 8

    @property
    def warps(self) -> int:
        return (self.bm // self.wm) * (self.bn // self.wn)

    @property
    def threads(self) -> int:
        return self.warps * 32

    def smem_bytes(self, a: Operand, b: Operand) -> int:
        sa = self.bm * (self.bk + PAD) if a.layout == "row" else self.bk * (self.bm + PAD)
        sb = self.bk * (self.bn + PAD) if b.layout == "row" else self.bn * (self.bk + PAD)
        return 2 * (sa + sb) * 2 + self.warps * 16 * 16 * 4

    def problems(self, a: Operand, b: Operand) -> list[str]:
        """Why these parameters cannot generate a kernel (empty when they can)."""
        out: list[str] = []
        for what, v in (("BM", self.bm), ("BN", self.bn), ("BK", self.bk), ("WM", self.wm), ("WN", self.wn)):
            if v % 16:
                out.append(f"{what}={v} is not a multiple of 16 (the fragment size)")
        if out:
            return out
        if self.bm % self.wm or self.bn % self.wn:
            out.append(f"block tile {self.bm}x{self.bn} is not a multiple of warp tile {self.wm}x{self.wn}")
        if self.threads > 1024:
            out.append(f"{self.threads} threads per block exceed 1024")
        for what, rows in (("A", self.bm), ("B", self.bn)):
            if (rows * self.bk // CHUNK) % self.threads:
                out.append(
                    f"the {what} slice ({rows}x{self.bk}) does not split into 16-byte chunks evenly over "
                    f"{self.threads} threads"
                )
        if self.smem_bytes(a, b) > 48 * 1024:
            out.append(f"{self.smem_bytes(a, b)} bytes of static shared memory exceed 48 KB")
        return out


def mma_body(b: GemmBinding, t: MmaTile, elem: str, tile_loop: bool = False) -> str:
    """The complete definition of ``b.entry`` computing ``b``'s product on tensor cores with tile ``t``.

    ``elem`` is the WMMA element type (``__half`` or ``__nv_bfloat16``). The kernel runs on a 1-D grid
    of ``t.threads``-thread blocks, one per output tile (:func:`mma_launch`); with ``tile_loop`` the
    blocks loop over the tiles (a grid the host fixes). Raises ``ValueError`` when ``t`` does not fit.
    """
    probs = t.problems(b.a, b.b)
    if probs:
        raise ValueError("; ".join(probs))
    w = _W()
    w.level = 0
    w(launch_bounds(b.signature, t.threads, t.min_blocks))
    w("{")
    w.level = 1
    c_text = "C[i,j] = " + b.epilogue.format(acc="sum_k A[i,k]*B[k,j]", c="C[i,j]", i="i", j="j")
    w(
        f"// Tensor-core matmul recipe (kernellsp): {c_text}; {elem} A ({b.a.layout}-major) and B ({b.b.layout}-major),"
    )
    w(f"// fp32 accumulation in WMMA 16x16x16 fragments; {t.bm}x{t.bn} block tile in {t.bk}-deep slices,")
    w(f"// {t.wm}x{t.wn} warp tiles, two cp.async shared stages, predicated edges.")
    w(f"using {P}T = {elem};")
    w(f"constexpr int {P}BM = {t.bm}, {P}BN = {t.bn}, {P}BK = {t.bk}, {P}WM = {t.wm}, {P}WN = {t.wn};")
    w(f"constexpr int {P}FM = {P}WM / 16, {P}FN = {P}WN / 16, {P}NT = {t.threads};")
    a_rows, a_cols = ("BM", "BK") if b.a.layout == "row" else ("BK", "BM")
    b_rows, b_cols = ("BK", "BN") if b.b.layout == "row" else ("BN", "BK")
    w(f"__shared__ alignas(128) {P}T {P}As[2][{P}{a_rows}][{P}{a_cols} + {PAD}];")
    w(f"__shared__ alignas(128) {P}T {P}Bs[2][{P}{b_rows}][{P}{b_cols} + {PAD}];")
    w(f"__shared__ alignas(128) float {P}Cs[{t.warps}][16 * 16];")
    w(f"const int {P}M = (int){_expr(b.m)};")
    w(f"const int {P}N = (int){_expr(b.n)};")
    w(f"const int {P}K = (int){_expr(b.k)};")
    for tag, op in (("A", b.a), ("B", b.b), ("C", b.c)):
        w(f"const long long {P}ld{tag} = (long long){_expr(op.ld)};")
    w(f"const int {P}warp = threadIdx.x / 32, {P}lane = threadIdx.x % 32;")
    w(
        f"const int {P}wm0 = ({P}warp / ({P}BN / {P}WN)) * {P}WM, {P}wn0 = ({P}warp % ({P}BN / {P}WN)) * {P}WN;"
    )
    emit_tile_start(w, b.batch, t.group, tile_loop)
    for tag, op in (("A", b.a), ("B", b.b)):
        w(f"const {P}T* {P}{tag} = {_base(op, b)};")
        w(
            f"const bool {P}vec{tag} = ((reinterpret_cast<unsigned long long>({P}{tag}) & 15ull) == 0) && "
            f"({P}ld{tag} % {CHUNK} == 0);"
        )
    w(f"auto* {P}C = {_base(b.c, b, cast=False)};")
    _emit_copy_fn(w, "A", b.a)
    _emit_copy_fn(w, "B", b.b)
    w(f"nvcuda::wmma::fragment<nvcuda::wmma::accumulator, 16, 16, 16, float> {P}acc[{P}FM][{P}FN];")
    w("#pragma unroll")
    w.open(f"for (int {P}i = 0; {P}i < {P}FM; ++{P}i)")
    w("#pragma unroll")
    w(f"for (int {P}j = 0; {P}j < {P}FN; ++{P}j) nvcuda::wmma::fill_fragment({P}acc[{P}i][{P}j], 0.0f);")
    w.close()
    w(f"const int {P}ntiles = ({P}K + {P}BK - 1) / {P}BK;")
    w(f"{P}load_A(0, 0);")
    w(f"{P}load_B(0, 0);")
    w('asm volatile("cp.async.commit_group;\\n" ::: "memory");')
    w.open(f"for (int {P}t = 0; {P}t < {P}ntiles; ++{P}t)")
    w(f"const int {P}s = {P}t & 1;")
    w.open(f"if ({P}t + 1 < {P}ntiles)")
    w(f"{P}load_A({P}s ^ 1, ({P}t + 1) * {P}BK);")
    w(f"{P}load_B({P}s ^ 1, ({P}t + 1) * {P}BK);")
    w.close()
    w('asm volatile("cp.async.commit_group;\\n" ::: "memory");')
    w(
        'asm volatile("cp.async.wait_group 1;\\n" ::: "memory");  // slice t has landed (this thread\'s copies)'
    )
    w("__syncthreads();  // ...and everyone's")
    _emit_mma(w, b)
    w("__syncthreads();  // the stage just read is the one the next iteration's copies write")
    w.close()
    w('asm volatile("cp.async.wait_group 0;\\n" ::: "memory");')
    _emit_epilogue(w, b)
    if tile_loop:
        w("__syncthreads();  // the next tile reuses the shared stages")
    w.close()
    w.level = 0
    w("}")
    return w.text() + "\n"


def _base(op: Operand, b: GemmBinding, cast: bool = True) -> str:
    """The operand's pointer at this batch item (offset and batch stride applied; 64-bit offsets)."""
    parts = [_expr(op.offset)] if op.offset != "0" else []
    if b.batch is not None and op.batch_stride != "0":
        parts.append(f"{P}z * {_expr(op.batch_stride)}")
    ptr = op.name if not cast else f"reinterpret_cast<const {P}T*>({op.name})"
    return ptr + "".join(f" + {p}" for p in parts)


def _emit_copy_fn(w: _W, which: str, op: Operand) -> None:
    """A lambda copying one operand's ``BK`` slice at depth ``k0`` into shared stage ``s``: 16-byte cp.async
    for whole aligned chunks inside the matrix, element by element with zero fill otherwise."""
    # Logical coordinates: A is (m, k), B is (k, n). The shared tile keeps the global layout: its rows run
    # along the operand's strided dimension, its columns along the contiguous one.
    outer, outer_n, outer0 = ("m", f"{P}M", f"{P}m0") if which == "A" else ("n", f"{P}N", f"{P}n0")
    k_contiguous = (which == "A" and op.layout == "row") or (which == "B" and op.layout == "col")
    if k_contiguous:
        rows, cols = f"{P}B{outer.upper()}", f"{P}BK"
        row_n, row0, col_n, col0 = outer_n, outer0, f"{P}K", f"{P}k0"
    else:
        rows, cols = f"{P}BK", f"{P}B{outer.upper()}"
        row_n, row0, col_n, col0 = f"{P}K", f"{P}k0", outer_n, outer0
    arr, ptr, ld, vec = f"{P}{which}s", f"{P}{which}", f"{P}ld{which}", f"{P}vec{which}"
    w.open(f"auto {P}load_{which} = [&](int {P}st, int {P}k0)")
    w(f"constexpr int {P}CPR = {cols} / {CHUNK};  // 16-byte chunks per shared row")
    w("#pragma unroll")
    w.open(f"for (int {P}it = 0; {P}it < {rows} * {P}CPR / {P}NT; ++{P}it)")
    w(f"const int {P}c = threadIdx.x + {P}it * {P}NT;")
    w(f"const int {P}r = {P}c / {P}CPR, {P}q = ({P}c % {P}CPR) * {CHUNK};")
    w(f"const int {P}gr = {row0} + {P}r, {P}gc = {col0} + {P}q;")
    w(f"{P}T* {P}dst = &{arr}[{P}st][{P}r][{P}q];")
    w(f"const {P}T* {P}src = {ptr} + (long long){P}gr * {ld} + {P}gc;")
    w.open(f"if ({vec} && {P}gr < {row_n} && {P}gc + {CHUNK} <= {col_n})")
    w(
        'asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\\n" :: '
        f'"r"((unsigned)__cvta_generic_to_shared({P}dst)), "l"({P}src));'
    )
    w.close()
    w.open("else")
    w("#pragma unroll")
    w(
        f"for (int {P}e = 0; {P}e < {CHUNK}; ++{P}e) {P}dst[{P}e] = ({P}gr < {row_n} && {P}gc + {P}e < {col_n}) "
        f"? {P}src[{P}e] : {P}T(0.0f);"
    )
    w.close()
    w.close()
    w.level -= 1
    w("};")


def _emit_mma(w: _W, b: GemmBinding) -> None:
    """The fragment loads and tensor-core products of one slice from shared stage ``s``."""
    a_lay = "row_major" if b.a.layout == "row" else "col_major"
    b_lay = "row_major" if b.b.layout == "row" else "col_major"
    if b.a.layout == "row":
        a_ptr, a_ld = f"&{P}As[{P}s][{P}wm0 + {P}i * 16][{P}kk]", f"{P}BK + {PAD}"
    else:
        a_ptr, a_ld = f"&{P}As[{P}s][{P}kk][{P}wm0 + {P}i * 16]", f"{P}BM + {PAD}"
    if b.b.layout == "row":
        b_ptr, b_ld = f"&{P}Bs[{P}s][{P}kk][{P}wn0 + {P}j * 16]", f"{P}BN + {PAD}"
    else:
        b_ptr, b_ld = f"&{P}Bs[{P}s][{P}wn0 + {P}j * 16][{P}kk]", f"{P}BK + {PAD}"
    w("#pragma unroll")
    w.open(f"for (int {P}kk = 0; {P}kk < {P}BK; {P}kk += 16)")
    w(
        f"nvcuda::wmma::fragment<nvcuda::wmma::matrix_a, 16, 16, 16, {P}T, nvcuda::wmma::{a_lay}> {P}fa[{P}FM];"
    )
    w(
        f"nvcuda::wmma::fragment<nvcuda::wmma::matrix_b, 16, 16, 16, {P}T, nvcuda::wmma::{b_lay}> {P}fb[{P}FN];"
    )
    w("#pragma unroll")
    w(
        f"for (int {P}i = 0; {P}i < {P}FM; ++{P}i) nvcuda::wmma::load_matrix_sync({P}fa[{P}i], {a_ptr}, {a_ld});"
    )
    w("#pragma unroll")
    w(
        f"for (int {P}j = 0; {P}j < {P}FN; ++{P}j) nvcuda::wmma::load_matrix_sync({P}fb[{P}j], {b_ptr}, {b_ld});"
    )
    w("#pragma unroll")
    w.open(f"for (int {P}i = 0; {P}i < {P}FM; ++{P}i)")
    w("#pragma unroll")
    w(
        f"for (int {P}j = 0; {P}j < {P}FN; ++{P}j) "
        f"nvcuda::wmma::mma_sync({P}acc[{P}i][{P}j], {P}fa[{P}i], {P}fb[{P}j], {P}acc[{P}i][{P}j]);"
    )
    w.close()
    w.close()


def _emit_epilogue(w: _W, b: GemmBinding) -> None:
    """Each fragment through the warp's staging tile, then the user's output expression per element."""
    init = b.init.format(i=f"{P}gi", j=f"{P}gj")
    zero = b.init.strip().lower() in ("0", "0.0", "0.0f", "0.f", "0f", "0.")
    w("// Epilogue: fragments through the warp's staging tile, then the user's own output expression.")
    w(f"float* {P}stage = {P}Cs[{P}warp];")
    w("#pragma unroll")
    w.open(f"for (int {P}i = 0; {P}i < {P}FM; ++{P}i)")
    w("#pragma unroll")
    w.open(f"for (int {P}j = 0; {P}j < {P}FN; ++{P}j)")
    w(f"nvcuda::wmma::store_matrix_sync({P}stage, {P}acc[{P}i][{P}j], 16, nvcuda::wmma::mem_row_major);")
    w("__syncwarp();")
    w("#pragma unroll")
    w.open(f"for (int {P}e = {P}lane; {P}e < 256; {P}e += 32)")
    # Consecutive lanes take consecutive elements along C's contiguous dimension.
    if b.c.layout == "row":
        w(f"const int {P}r = {P}e / 16, {P}cc = {P}e % 16;")
    else:
        w(f"const int {P}r = {P}e % 16, {P}cc = {P}e / 16;")
    w(f"const int {P}gi = {P}m0 + {P}wm0 + {P}i * 16 + {P}r, {P}gj = {P}n0 + {P}wn0 + {P}j * 16 + {P}cc;")
    w(f"if ({P}gi >= {P}M || {P}gj >= {P}N) continue;")
    idx = (
        f"(long long){P}gi * {P}ldC + {P}gj" if b.c.layout == "row" else f"(long long){P}gj * {P}ldC + {P}gi"
    )
    w(f"auto* {P}p = {P}C + {idx};")
    acc = f"{P}stage[{P}r * 16 + {P}cc]"
    if not zero:
        acc = f"(({init}) + {acc})"
    w(f"*{P}p = {b.epilogue.format(acc=acc, c=f'(*{P}p)', i=f'{P}gi', j=f'{P}gj')};")
    w.close()
    w("__syncwarp();  // the staging tile is rewritten by the next fragment")
    w.close()
    w.close()


def mma_launch(t: MmaTile, m_spec: str, n_spec: str, batch_spec: str | None) -> dict[str, object]:
    """The spec ``launch`` table for tile ``t``: one block per output tile (1-D grid)."""
    tiles = f"ceil_div({m_spec}, {t.bm}) * ceil_div({n_spec}, {t.bn})"
    if batch_spec is not None:
        tiles = f"{tiles} * ({batch_spec})"
    return {"grid": tiles, "block": t.threads}
