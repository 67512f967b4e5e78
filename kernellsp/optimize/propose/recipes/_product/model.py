"""What the product analysis finds: the product, its terms, and the calls its expressions may make."""

from __future__ import annotations

from dataclasses import dataclass, field

from kernellsp.optimize.propose.recipes import _memshape as ms
from kernellsp.source.ir import Access, Loop, Poly
from kernellsp.source.ir.canon.unit import PURE_CALLS as IR_PURE_CALLS

#: Calls allowed in the output expression and the initial value: the IR's pure functions (math,
#: conversions such as ``__float2half``), one list for every reader.
PURE_CALLS = IR_PURE_CALLS


@dataclass
class Term:
    """One global read in the product, the output expression or the initial value."""

    access: Access
    #: Index over coordinates ``@n``, ``k``, the batch variable and parameters.
    index: Poly


@dataclass
class Product:
    """A dot-product-per-output kernel, as :func:`analyse` found it."""

    acc: str
    acc_ctype: str
    loop: Loop
    k: str
    kbound: Poly
    #: The two factors of ``acc += X * Y`` in the order written.
    factors: tuple[Term, Term]
    store: Term
    #: Coordinates of the thread's point (from the guards) plus a batch loop's, if any.
    coords: list[ms.Coord]
    #: An outer loop over batch items (``for (b = 0; b < B; ++b)`` around init, loop and store).
    batch_loop: Loop | None
    #: User text templates: the output expression (``{acc}``, ``{c}``, ``{@n}`` coordinates) and the init.
    epilogue: str
    init: str
    #: Reads inside the epilogue/init other than the output's own old value: (placeholder text, term).
    extras: list[tuple[str, Term]] = field(default_factory=list)
    #: How each factor is converted before the product (``__half2float``, ``(float)``...); None: a plain read.
    converts: tuple[str | None, str | None] = (None, None)

    def conversion_decline(self, recipe: str) -> str | None:
        """Why ``recipe``, which takes plain fp32 loads, declines converted factors (None when both are plain)."""
        for f, conv in zip(self.factors, self.converts, strict=True):
            if conv is not None:
                return (
                    f"the factor `{conv}({f.access.base}[..])` converts its load: the {recipe} recipe takes plain "
                    "fp32 loads `x[..] * y[..]`"
                )
        return None

    def coord(self, name: str) -> ms.Coord:
        return next(c for c in self.coords if c.name == name)

    def moves(self, t: Term, name: str) -> bool:
        """Does ``t``'s index move with coordinate (or variable) ``name``?"""
        return t.index.coeff(name) != Poly()


def is_batch(p: Product, c: ms.Coord) -> bool:
    """Is ``c`` a batch coordinate by origin: the outer batch loop's variable or the grid's z axis?"""
    if p.batch_loop is not None and c.name == p.batch_loop.var:
        return True
    return c.pivot in ("blockIdx.z", "gid.z")
