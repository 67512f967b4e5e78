"""Integer polynomials over symbols: the index algebra of the kernel IR (see :mod:`kernellsp.source.ir`)."""

from __future__ import annotations

from collections.abc import Iterable

AXES = ("x", "y", "z")
BUILTINS = ("threadIdx", "blockIdx", "blockDim", "gridDim")
THREAD_SYMBOLS = frozenset(f"{b}.{a}" for b in ("threadIdx", "blockIdx", "gid") for a in AXES)

# --------------------------------------------------------------------------------------------------
# Polynomials over symbols with integer coefficients

Mono = tuple[str, ...]


class Poly:
    """An integer polynomial: a map from monomials (sorted symbol tuples) to coefficients.

    Symbols are thread builtins (``threadIdx.x``, ``blockIdx.x``, ``blockDim.x``, ``gridDim.x``,
    the folded ``gid.x``), parameter names, loop variables and other locals that could not be
    substituted. Immutable; ``+``, ``-``, ``*`` with Polys or ints.
    """

    __slots__ = ("terms",)

    def __init__(self, terms: dict[Mono, int] | None = None) -> None:
        self.terms: dict[Mono, int] = {m: c for m, c in (terms or {}).items() if c != 0}

    @classmethod
    def const(cls, v: int) -> Poly:
        return cls({(): v})

    @classmethod
    def sym(cls, name: str) -> Poly:
        return cls({(name,): 1})

    def __add__(self, other: Poly | int) -> Poly:
        o = other if isinstance(other, Poly) else Poly.const(other)
        out = dict(self.terms)
        for m, c in o.terms.items():
            out[m] = out.get(m, 0) + c
        return Poly(out)

    __radd__ = __add__

    def __neg__(self) -> Poly:
        return Poly({m: -c for m, c in self.terms.items()})

    def __sub__(self, other: Poly | int) -> Poly:
        return self + (-(other if isinstance(other, Poly) else Poly.const(other)))

    def __rsub__(self, other: int) -> Poly:
        return Poly.const(other) - self

    def __mul__(self, other: Poly | int) -> Poly:
        o = other if isinstance(other, Poly) else Poly.const(other)
        out: dict[Mono, int] = {}
        for m1, c1 in self.terms.items():
            for m2, c2 in o.terms.items():
                m = tuple(sorted(m1 + m2))
                out[m] = out.get(m, 0) + c1 * c2
        return Poly(out)

    __rmul__ = __mul__

    def __eq__(self, other: object) -> bool:
        if isinstance(other, int):
            other = Poly.const(other)
        return isinstance(other, Poly) and self.terms == other.terms

    def __hash__(self) -> int:
        return hash(frozenset(self.terms.items()))

    def __repr__(self) -> str:
        return f"Poly({self})"

    def __str__(self) -> str:
        if not self.terms:
            return "0"
        parts: list[str] = []
        for m, c in sorted(self.terms.items(), key=lambda t: (-len(t[0]), t[0])):
            body = "*".join(m)
            if not body:
                text = str(abs(c))
            elif abs(c) == 1:
                text = body
            else:
                text = f"{abs(c)}*{body}"
            if parts:
                parts.append(("- " if c < 0 else "+ ") + text)
            else:
                parts.append(("-" if c < 0 else "") + text)
        return " ".join(parts)

    @property
    def is_const(self) -> bool:
        return all(not m for m in self.terms)

    @property
    def value(self) -> int | None:
        """The constant value, or ``None`` when the polynomial has symbols."""
        return self.terms.get((), 0) if self.is_const else None

    def symbols(self) -> set[str]:
        return {s for m in self.terms for s in m}

    def depends_on(self, names: Iterable[str]) -> bool:
        ns = set(names)
        return any(s in ns for m in self.terms for s in m)

    def split(self, variables: Iterable[str]) -> tuple[dict[str, Poly], Poly] | None:
        """``({var: coefficient}, rest)`` when affine in ``variables`` (coefficients free of them), else ``None``."""
        vs = set(variables)
        coeffs: dict[str, dict[Mono, int]] = {}
        rest: dict[Mono, int] = {}
        for m, c in self.terms.items():
            hits = [s for s in m if s in vs]
            if len(hits) > 1:
                return None
            if not hits:
                rest[m] = c
                continue
            lst = list(m)
            lst.remove(hits[0])
            coeffs.setdefault(hits[0], {})[tuple(lst)] = c
        return {v: Poly(t) for v, t in coeffs.items()}, Poly(rest)

    def coeff(self, var: str) -> Poly:
        """The coefficient of ``var`` in its degree-one monomials (zero when it does not occur)."""
        out: dict[Mono, int] = {}
        for m, c in self.terms.items():
            if m.count(var) == 1:
                lst = list(m)
                lst.remove(var)
                out[tuple(lst)] = c
        return Poly(out)

    def without(self, variables: Iterable[str]) -> Poly:
        """The terms free of ``variables``."""
        vs = set(variables)
        return Poly({m: c for m, c in self.terms.items() if not any(s in vs for s in m)})

    def subs(self, name: str, value: Poly) -> Poly:
        out = Poly()
        for m, c in self.terms.items():
            term = Poly.const(c)
            for s in m:
                term = term * (value if s == name else Poly.sym(s))
            out = out + term
        return out

    def c_text(self, rename: dict[str, str] | None = None) -> str:
        """C source text of the polynomial (``gid.x`` spelled out unless ``rename`` maps it)."""
        rn = rename or {}
        if not self.terms:
            return "0"
        parts: list[str] = []
        for m, c in sorted(self.terms.items(), key=lambda t: (-len(t[0]), t[0])):
            factors = []
            for s in m:
                if s in rn:
                    factors.append(rn[s])
                elif s.startswith("gid."):
                    a = s[4:]
                    factors.append(f"(blockIdx.{a} * blockDim.{a} + threadIdx.{a})")
                else:
                    factors.append(s)
            body = " * ".join(factors)
            text = (f"{abs(c)} * {body}" if abs(c) != 1 else body) if body else str(abs(c))
            if parts:
                parts.append(("- " if c < 0 else "+ ") + text)
            else:
                parts.append(("-" if c < 0 else "") + text)
        return " ".join(parts)


def fold_gid(p: Poly) -> Poly:
    """Replace ``blockIdx.a*blockDim.a*R + threadIdx.a*R`` by ``gid.a*R`` (any common factor ``R``)."""
    terms = dict(p.terms)
    changed = True
    while changed:
        changed = False
        for m, c in list(terms.items()):
            for a in AXES:
                bi, bd, ti = f"blockIdx.{a}", f"blockDim.{a}", f"threadIdx.{a}"
                if bi in m and bd in m:
                    rest = list(m)
                    rest.remove(bi)
                    rest.remove(bd)
                    tm = tuple(sorted([*rest, ti]))
                    tc = terms.get(tm, 0)
                    if tc == 0 or (tc > 0) != (c > 0):
                        continue
                    k = min(abs(c), abs(tc)) * (1 if c > 0 else -1)
                    gm = tuple(sorted([*rest, f"gid.{a}"]))
                    terms[m] = c - k
                    terms[tm] = tc - k
                    terms[gm] = terms.get(gm, 0) + k
                    terms = {mm: cc for mm, cc in terms.items() if cc != 0}
                    changed = True
                    break
            if changed:
                break
    return Poly(terms)
