"""What the row-reduction analysis finds: the loops over a row, the shared trees, the row program."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from kernellsp.source.ir import Accumulation, KernelIR, Loop, Poly

if TYPE_CHECKING:
    import tree_sitter


_NORMAL = {
    "unsigned": "unsigned int",
    "int32_t": "int",
    "uint32_t": "unsigned int",
    "int64_t": "long long",
    "uint64_t": "unsigned long long",
    "size_t": "unsigned long long",
    "long": "long long",
    "unsigned long": "unsigned long long",
}


@dataclass
class ColLoop:
    """A loop over the row's columns ``[start, length)`` (sequential or block-strided in the source)."""

    loop: Loop
    var: str
    var_type: str
    start: Poly
    accs: list[Accumulation]


@dataclass
class Tree:
    """A shared-memory tree that folds ``acc`` across the block: deleted, its ``P[0]`` reads become ``acc``."""

    array: str
    acc: str
    op: str
    statements: list[tree_sitter.Node]
    reads: list[tree_sitter.Node]


@dataclass
class RowProgram:
    """What :func:`match` found."""

    form: str  # "thread" (one thread per row) or "block" (one block per row)
    axis: str
    row_sym: str  # gid.x or blockIdx.x
    rows: Poly | None
    length: Poly
    loops: list[ColLoop]
    container: tree_sitter.Node
    trees: list[Tree]
    delete: list[tree_sitter.Node]
    #: Input rows read at ``base + j`` inside the loops: array -> (base, C element type, access nodes).
    rows_in: dict[str, tuple[Poly, str, list[tree_sitter.Node]]] = field(default_factory=dict)
    float_literals: list[tree_sitter.Node] = field(default_factory=list)
    #: Column vectors read at ``base + j`` with ``base`` the same for every row (``gamma[j]``), never written:
    #: cached in registers too with ``columns="registers"``, loaded with the row before the first pass.
    cols_in: dict[str, tuple[Poly, str, list[tree_sitter.Node]]] = field(default_factory=dict)
    #: Thread-per-row behind a host launcher: the host's block size.
    host_block: int | None = None


def _inside(node: Any, container: Any) -> bool:
    return container.start_byte <= node.start_byte and node.end_byte <= container.end_byte


def ms_ctype_bytes() -> dict[str, int]:
    from kernellsp.optimize.propose.recipes.base import CTYPE_BYTES

    return CTYPE_BYTES


def _acc_type(ir: KernelIR, var: str) -> str | None:
    v = ir.locals.get(var)
    if v is None:
        return None
    t = " ".join(w for w in v.ctype.split() if w != "const")
    t = _NORMAL.get(t, t)
    return t if t in ("float", "double", "int", "unsigned int", "long long", "unsigned long long") else None
