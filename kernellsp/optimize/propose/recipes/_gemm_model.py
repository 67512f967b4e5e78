"""What the matrix-product generators work from: the binding of a user's product (:class:`Operand`,
:class:`GemmBinding`), the tile being generated (:class:`GemmTile`), and the small C writer and helpers
that :mod:`._gemm_codegen` and :mod:`._gemv_codegen` share."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

Layout = Literal["row", "col"]

#: Prefix of every generated local, so that the user's names (which the epilogue uses) never clash.
P = "kl_"

VEC = 4  # floats per 16-byte access; fragments are 4 x 4 sub-tiles


@dataclass(frozen=True)
class Operand:
    """One matrix operand as the kernel addresses it.

    For A (``M x K``) ``layout="row"`` means ``A[i*ld + k]`` (k contiguous), ``"col"`` means
    ``A[i + k*ld]``; likewise for B (``K x N``: row = ``B[k*ld + j]``) and C (``M x N``).
    ``ld`` is a C expression over the kernel's parameters, ``offset`` a constant element offset and
    ``batch_stride`` the elements between consecutive batch items (C expressions, ``"0"`` if none).
    """

    name: str
    layout: Layout
    ld: str
    offset: str = "0"
    batch_stride: str = "0"


@dataclass(frozen=True)
class GemmBinding:
    """What the user's kernel computes: ``C[i,j] = epilogue(acc, C[i,j])``, ``acc = init + sum_k A[i,k]*B[k,j]``.

    ``signature`` is the kernel's declaration up to its body (as the user wrote it). ``m``, ``n``,
    ``k`` and ``batch`` are C expressions over the parameters. ``epilogue`` is a C expression in
    which ``{acc}`` stands for the accumulated sum and ``{c}`` for the old value of the output
    element (e.g. ``"alpha * {acc} + beta * {c}"``, or ``"{acc}"``); ``init`` is the accumulator's
    initial value expression (``"0.0f"``).
    """

    entry: str
    signature: str
    m: str
    n: str
    k: str
    a: Operand
    b: Operand
    c: Operand
    epilogue: str = "{acc}"
    init: str = "0.0f"
    batch: str | None = None
    ctype: str = "float"


@dataclass(frozen=True)
class GemmTile:
    """Tile parameters of the generated GEMM (see the module docstring)."""

    bm: int = 128
    bn: int = 128
    bk: int = 8
    wm: int = 64
    wn: int = 32
    wmiter: int = 2
    wniter: int = 2
    min_blocks: int = 2
    group: int = 8
    #: 0: two shared stages fed through registers; n >= 2: n stages fed by cp.async (sm_80+).
    stages: int = 0

    @property
    def warps(self) -> int:
        return (self.bm // self.wm) * (self.bn // self.wn)

    @property
    def threads(self) -> int:
        return self.warps * 32

    @property
    def thread_rows(self) -> int:
        return self.wmiter * VEC

    @property
    def thread_cols(self) -> int:
        return self.wniter * VEC

    def smem_bytes(self, a_layout: Layout = "row", b_layout: Layout = "row") -> int:
        pa, pb = _pads(a_layout, b_layout)
        return max(2, self.stages) * self.bk * ((self.bm + pa) + (self.bn + pb)) * 4

    def problems(self, a_layout: Layout = "row", b_layout: Layout = "row") -> list[str]:
        """Why these parameters cannot generate a kernel (empty when they can)."""
        out: list[str] = []
        if self.bm % self.wm or self.bn % self.wn:
            out.append(f"block tile {self.bm}x{self.bn} is not a multiple of warp tile {self.wm}x{self.wn}")
            return out
        if self.wm % self.thread_rows or self.wn % self.thread_cols:
            out.append(f"warp tile {self.wm}x{self.wn} is not a multiple of the thread sub-tiles")
            return out
        lanes = (self.wm // self.thread_rows) * (self.wn // self.thread_cols)
        if lanes != 32:
            out.append(
                f"warp tile {self.wm}x{self.wn} with {self.thread_rows}x{self.thread_cols} outputs per "
                f"thread needs {lanes} lanes, not 32"
            )
        if self.bk % VEC:
            out.append(f"BK={self.bk} is not a multiple of 4")
        if self.threads > 1024:
            out.append(f"{self.threads} threads per block exceed 1024")
        for what, rows in (("A", self.bm), ("B", self.bn)):
            if (rows * self.bk // VEC) % self.threads:
                out.append(
                    f"the {what} slice ({rows}x{self.bk}) does not split into 16-byte loads evenly over "
                    f"{self.threads} threads"
                )
        if self.smem_bytes(a_layout, b_layout) > 48 * 1024:
            out.append(f"{self.smem_bytes(a_layout, b_layout)} bytes of static shared memory exceed 48 KB")
        if self.group < 1:
            out.append("GROUP must be at least 1")
        if self.stages == 1 or self.stages < 0 or self.stages > 8:
            out.append(f"stages={self.stages}: use 0 (register prefetch) or 2..8 cp.async stages")
        return out


def _pads(a_layout: Layout, b_layout: Layout) -> tuple[int, int]:
    # A row-major and B column-major are transposed into shared memory (scattered 4-byte stores):
    # pad those rows by 4 floats. The others are stored with 16-byte vectors, conflict-free unpadded.
    return (4 if a_layout == "row" else 0), (4 if b_layout == "col" else 0)


def launch_bounds(signature: str, threads: int, min_blocks: int) -> str:
    """``signature`` with ``__launch_bounds__(threads, min_blocks)`` (replacing an existing one)."""
    import re

    lb = f"__launch_bounds__({threads}, {min_blocks})" if min_blocks > 0 else f"__launch_bounds__({threads})"
    if "__launch_bounds__" in signature:
        return re.sub(r"__launch_bounds__\s*\([^)]*\)", lb, signature, count=1)
    return re.sub(r"\b__global__\b", f"__global__ {lb}", signature, count=1)


def _expr(e: str) -> str:
    return f"({e})"


class _W:
    """An indenting line writer."""

    def __init__(self) -> None:
        self.lines: list[str] = []
        self.level = 1

    def __call__(self, line: str = "") -> None:
        self.lines.append(("    " * self.level + line) if line else "")

    def open(self, line: str) -> None:
        self(line + " {")
        self.level += 1

    def close(self, tail: str = "") -> None:
        self.level -= 1
        self("}" + tail)

    def text(self) -> str:
        return "\n".join(self.lines)


def emit_tile_start(w: _W, batch: str | None, group: int, tile_loop: bool) -> None:
    """Open the block's loop (or guard) over output tiles and set ``m0``/``n0`` (and the batch item ``z``).

    One linear tile index over (batch, block row, block column), whatever the grid: a launch with one block
    per tile maps 1:1, a smaller (host-given) grid loops (``tile_loop``), surplus blocks exit at once. Tiles
    are rasterised in groups of ``group`` block rows so that consecutive blocks share A rows and B columns
    in L2. Needs ``M``, ``N``, ``BM``, ``BN`` (prefixed) declared; the caller closes the block."""
    w(f"const int {P}npm = ({P}M + {P}BM - 1) / {P}BM, {P}npn = ({P}N + {P}BN - 1) / {P}BN;")
    w(f"const int {P}per_item = {P}npm * {P}npn;")
    nb = f" * (int){_expr(batch)}" if batch is not None else ""
    w(f"const int {P}ntotal = {P}per_item{nb};")
    if tile_loop:
        w.open(f"for (int {P}tile = blockIdx.x; {P}tile < {P}ntotal; {P}tile += gridDim.x)")
    else:
        w(f"const int {P}tile = blockIdx.x;")
        w.open(f"if ({P}tile < {P}ntotal)")
    w("// Grouped rasterisation: consecutive tiles walk GROUP block rows before moving right (L2 reuse).")
    w(f"const int {P}pid = {P}tile % {P}per_item;")
    if batch is not None:
        w(f"const long long {P}z = {P}tile / {P}per_item;")
    w(f"const int {P}in_group = {group} * {P}npn;")
    w(f"const int {P}first_m = ({P}pid / {P}in_group) * {group};")
    w(f"const int {P}group_m = min({P}npm - {P}first_m, {group});")
    w(f"const int {P}m0 = ({P}first_m + ({P}pid % {P}in_group) % {P}group_m) * {P}BM;")
    w(f"const int {P}n0 = (({P}pid % {P}in_group) / {P}group_m) * {P}BN;")
