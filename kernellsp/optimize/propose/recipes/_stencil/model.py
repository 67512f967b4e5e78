"""What the stencil analysis finds: the tiled inputs, the filters, the stencil; the tile's limits."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from kernellsp.source.ir import Poly

if TYPE_CHECKING:
    import tree_sitter


#: Static shared memory a tile may take (bytes): well under the 48 KiB static limit.
TILE_BYTES = 32 * 1024
#: Filter taps kept in registers in the specialised path, at most.
MAX_REG_TAPS = 64


@dataclass
class Read:
    """One read of a tiled input: ``offx``/``offy`` relative to the point (loop variables and parameters)."""

    node: tree_sitter.Node
    offx: Poly
    offy: Poly


@dataclass
class Tiled:
    """An input read around the point: its reads, pitch (2-D) and element count (kernel text)."""

    array: str
    ctype: str
    elem_bytes: int
    pitch: Poly | None
    reads: list[Read]
    count_c: str
    #: Halo polynomials (parameters only): the minima and maxima of the offsets per axis.
    min_x: list[Poly] = field(default_factory=list)
    max_x: list[Poly] = field(default_factory=list)
    min_y: list[Poly] = field(default_factory=list)
    max_y: list[Poly] = field(default_factory=list)


@dataclass
class Filter:
    """An input read at indices that do not depend on the point (the filter): kept in registers when small."""

    array: str
    ctype: str
    nodes: list[tree_sitter.Node]
    count_spec: str


@dataclass
class Stencil:
    """What :func:`match` found."""

    dims: int
    tiled: list[Tiled]
    #: Extents of the point coordinates (kernel parameters), for the launch of a __global__ entry.
    extent_x: Poly | None
    extent_y: Poly | None
    #: Parameters that size the filter loops (their main-shape values specialise a path).
    sizes: list[str]
    filters: list[Filter]
    #: Divmod atoms used by offsets: name -> C text.
    atoms: dict[str, str]
    host_block: tuple[int, int, int] | None = None
