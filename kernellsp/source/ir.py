"""A small kernel IR: what a kernel computes per thread, in terms recipes can match on.

Built from the tree-sitter source model (:mod:`kernellsp.source.model`), one :class:`KernelIR` per
kernel definition, it records

* **index mapping**: every local variable whose value depends on ``threadIdx``/``blockIdx``, as a
  polynomial in thread symbols, loop variables and parameters (:class:`Poly`). The global thread
  index ``blockIdx.a*blockDim.a + threadIdx.a`` folds into one symbol ``gid.a`` whatever its
  spelling (either order, intermediate locals, casts, ``__umul24``, ``int``/``unsigned``/``size_t``/
  ``long``/``const`` declarations); :attr:`KernelIR.gid_vars` names the locals equal to it;
* **guards** (:class:`Guard`): ``if (i < n) {...}``, ``if (i >= n) return;`` (stored as the condition
  under which the code after it runs, here ``i < n``), ``break``/``continue`` exits, ``&&``/``?:``
  operands; each condition split into comparable conjuncts (:class:`Cond`);
* **loops** (:class:`Loop`): variable, start, bound conjuncts, step; grid-stride loops flagged;
* **global accesses** (:class:`Access`): every load, store, read-modify-write and atomic target of a
  pointer parameter (through local pointers ``p = x + off`` and ``&x[i]`` too), its index as a
  :class:`Poly` when the index is a polynomial (e.g. ``row*N + col``), the loops and guards around it;
  ``__shared__`` and local arrays are recorded with ``space`` set accordingly;
* **accumulations** (:class:`Accumulation`): ``acc += v``, ``acc = acc + v``, ``acc = fmaxf(acc, v)``,
  ``acc = v > acc ? v : acc``, ``if (v > best) { best = v; arg = i; }`` (an argmax);
* **atomics** (:class:`Atomic`): ``atomicAdd/Max/Min/...`` with their target access and value.

Why a hand-written polynomial rather than sympy: the IR is built on every ``kernellsp check`` of
every kernel, so it must cost microseconds, not sympy's ~0.5 s import; and the only algebra needed
is +, -, * and constant shifts on integer polynomials, plus "which monomials contain these symbols"
(affine in the thread/loop symbols with coefficients that are products of parameters). That is a
dict from monomials to integers; :meth:`Poly.split` returns the affine view.

Example (``samples/saxpy_strided.cu``)::

    ir = kernel_ir(model, "saxpy_strided")
    ir.gid_vars                       # {'t': 'x'}          (int t = blockIdx.x * blockDim.x + threadIdx.x)
    str(ir.loops[0])                  # 'for k = 0; k < chunk; k += 1'
    st = ir.stores()[0]               # st.base == 'y', st.kind == 'store'
    st.index                          # Poly(chunk*gid.x + k)  (int i = start + k; y[i] = ...)
    st.index.split(["gid.x", "k"])    # ({'gid.x': Poly(chunk), 'k': Poly(1)}, Poly(0))
    [str(c) for g in st.guards for c in g.conds]   # ['chunk*gid.x + k < n']
    st.guards[0].conds[0].bounds_above(st.index)   # Poly(n): the element bound

Recipes reach the IR through ``RecipeContext.ir`` (``kernellsp.optimize.propose.recipes.base``);
``ir.text(node)`` gives any node's source, ``ir.poly(node)`` any expression as a polynomial.

Everything is best effort over partial code: what cannot be analysed is ``None`` (an index that is
not a polynomial) or simply absent, never an exception; recipes decline when what they need is
missing. :func:`kernel_ir` caches per model, so recipes, explain and the rules share one build.
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Literal

from kernellsp.source.model import Function, SourceModel

if TYPE_CHECKING:
    import tree_sitter

Node = "tree_sitter.Node"
AXES = ("x", "y", "z")
BUILTINS = ("threadIdx", "blockIdx", "blockDim", "gridDim")
THREAD_SYMBOLS = frozenset(f"{b}.{a}" for b in ("threadIdx", "blockIdx", "gid") for a in AXES)
_ATOMIC = re.compile(r"^atomic(Add|Sub|Exch|Min|Max|Inc|Dec|CAS|And|Or|Xor)(_block|_system)?$")
_ATOMIC_OP = {
    "Add": "sum",
    "Sub": "sum",
    "Max": "max",
    "Min": "min",
    "And": "and",
    "Or": "or",
    "Xor": "xor",
    "Exch": "exch",
    "Inc": "inc",
    "Dec": "dec",
    "CAS": "cas",
}
_MAX_FUNCS = ("fmaxf", "fmax", "max", "__hmax", "umax", "llmax", "::max", "std::max")
_MIN_FUNCS = ("fminf", "fmin", "min", "__hmin", "umin", "llmin", "::min", "std::min")
_NEGATE = {"<": ">=", ">=": "<", "<=": ">", ">": "<=", "==": "!=", "!=": "=="}
_FLIP = {"<": ">", ">": "<", "<=": ">=", ">=": "<=", "==": "==", "!=": "!="}
_INT_LIT = re.compile(r"^(0[xX][0-9a-fA-F]+|0[bB][01]+|\d+)([uUlL]*)$")
_SIGNED_INT_TYPES = (
    "int",
    "long",
    "long long",
    "short",
    "signed",
    "long int",
    "int32_t",
    "int64_t",
    "ptrdiff_t",
    "char",
    "signed char",
)

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


# --------------------------------------------------------------------------------------------------
# IR records


@dataclass
class Cond:
    """One comparison ``lhs op rhs`` (a conjunct of a guard); ``lhs``/``rhs`` are ``None`` when not polynomials."""

    text: str
    op: str | None
    lhs: Poly | None
    rhs: Poly | None
    node: tree_sitter.Node | None = None

    def __str__(self) -> str:
        if self.op and self.lhs is not None and self.rhs is not None:
            return f"{self.lhs} {self.op} {self.rhs}"
        return self.text

    def upper_bound(self, var: Poly) -> tuple[Poly, bool] | None:
        """``(B, inclusive)`` when this condition says ``var < B`` (or ``<=``), whichever side ``var`` is on."""
        if self.op is None or self.lhs is None or self.rhs is None:
            return None
        if self.lhs == var and self.op in ("<", "<="):
            return self.rhs, self.op == "<="
        if self.rhs == var and self.op in (">", ">="):
            return self.lhs, self.op == ">="
        return None

    def bounds_above(self, var: Poly) -> Poly | None:
        """The exclusive upper bound ``B`` when this condition is equivalent to ``var < B`` (integers).

        ``var`` may be a sum (``chunk*gid.x + k``): ``k < n - chunk*gid.x`` bounds it by ``n``. ``B`` is
        free of thread symbols and of ``var``'s own stand-alone symbols; the caller checks the rest.
        """
        if self.op not in ("<", "<=", ">", ">=") or self.lhs is None or self.rhs is None:
            return None
        d = self.lhs - self.rhs if self.op in ("<", "<=") else self.rhs - self.lhs
        inclusive = self.op in ("<=", ">=")
        rest = d - var  # d = var + rest < 0  <=>  var < -rest
        own = {m[0] for m in var.terms if len(m) == 1}
        if rest.depends_on(THREAD_SYMBOLS | own):
            return None
        bound = -rest
        return bound + 1 if inclusive else bound


@dataclass
class Guard:
    """A condition that must hold for the guarded code to run.

    ``kind`` says where it came from: ``if`` (the code is in the then-branch), ``else`` (the code is
    in the else-branch: ``conds`` are the negation), ``return``/``break``/``continue`` (an earlier
    ``if (c) return;``: ``conds`` are the negation of ``c``), ``and`` (right operand of ``&&``) or
    ``ternary``. ``exact`` is false when the condition could not be written as a conjunction
    (``a && b`` negated); ``conds`` then holds what could be said.
    """

    kind: str
    conds: list[Cond]
    node: tree_sitter.Node
    text: str
    exact: bool = True


@dataclass
class Loop:
    """A ``for``/``while``/``do`` loop; ``var``/``start``/``step`` are set for counted loops."""

    node: tree_sitter.Node
    kind: Literal["for", "while", "do"]
    var: str | None
    var_type: str | None
    start: Poly | None
    conds: list[Cond]
    step: Poly | None
    body: tree_sitter.Node | None
    depth: int
    #: Axis of a grid-stride loop (start ``gid.a``, step ``blockDim.a*gridDim.a``), else ``None``.
    grid_stride: str | None = None

    def bound(self) -> Poly | None:
        """The exclusive upper bound of ``var`` when the condition is one ``var < B`` (or ``<=``)."""
        if self.var is None or len(self.conds) != 1:
            return None
        return self.conds[0].bounds_above(Poly.sym(self.var))

    def __str__(self) -> str:
        conds = " && ".join(str(c) for c in self.conds)
        return f"for {self.var} = {self.start}; {conds}; {self.var} += {self.step}"


@dataclass
class Access:
    """One memory access ``base[index]`` (or ``*ptr``, or an atomic's target)."""

    node: tree_sitter.Node
    #: The pointer parameter accessed (through local pointers too), or the array's name.
    base: str
    space: Literal["global", "shared", "local"]
    kind: Literal["load", "store", "update", "atomic"]
    #: Element index into ``base`` (pointer offsets included) when it is a polynomial.
    index: Poly | None
    index_text: str
    ctype: str
    loops: list[Loop]
    guards: list[Guard]
    line: int
    #: Assignment operator for stores/updates (``=``, ``+=``...).
    op: str | None = None
    #: The statement node holding the store (for recipes that rewrite it).
    stmt: tree_sitter.Node | None = None


@dataclass
class Accumulation:
    """A reduction step into a local scalar: ``var = var <op> value``."""

    var: str
    op: Literal["sum", "prod", "max", "min", "and", "or", "xor"]
    value_text: str
    value_node: tree_sitter.Node | None
    node: tree_sitter.Node
    loops: list[Loop]
    #: For an argmax/argmin ``if (v > best) { best = v; arg = i; }``: ``{arg: "i"}``.
    companions: dict[str, str] = field(default_factory=dict)
    #: ``acc -= v``: the value is subtracted.
    negated: bool = False


@dataclass
class Atomic:
    """An ``atomic*`` call."""

    func: str
    op: str
    target: Access | None
    value_text: str
    value_node: tree_sitter.Node | None
    node: tree_sitter.Node
    loops: list[Loop]
    guards: list[Guard]
    #: The call's value is used (``old = atomicAdd(...)``), so the order of updates is observable.
    result_used: bool = False


@dataclass
class LocalVar:
    """A local variable of the kernel body."""

    name: str
    ctype: str
    decl: tree_sitter.Node
    value_node: tree_sitter.Node | None
    #: Assignments after the declaration (loop variables and accumulators have some).
    assignments: int = 0
    is_pointer: bool = False
    is_array: bool = False
    shared: bool = False
    #: For ``T* p = param + off`` / ``&param[off]``: the parameter and the element offset.
    points_to: str | None = None
    offset: Poly | None = None
    #: Declared more than once (in different scopes): never substituted.
    shadowed: bool = False


@dataclass
class ParamInfo:
    """A parameter with its element C type (pointee for pointers, without const)."""

    name: str
    position: int
    ctype: str
    is_pointer: bool
    is_const: bool
    is_restrict: bool
    type_text: str


@dataclass
class KernelIR:
    """The IR of one kernel definition; see the module docstring."""

    name: str
    fn: Function
    model: SourceModel
    body: tree_sitter.Node
    data: bytes
    params: list[ParamInfo]
    locals: dict[str, LocalVar] = field(default_factory=dict)
    #: Locals whose value depends on the thread/block index, as polynomials (``gid`` folded).
    index_vars: dict[str, Poly] = field(default_factory=dict)
    #: Locals equal to the global thread index ``gid.a`` exactly: name -> axis.
    gid_vars: dict[str, str] = field(default_factory=dict)
    loops: list[Loop] = field(default_factory=list)
    accesses: list[Access] = field(default_factory=list)
    accumulations: list[Accumulation] = field(default_factory=list)
    atomics: list[Atomic] = field(default_factory=list)
    #: ``__syncthreads``-style barriers and warp-level primitives found in the body.
    barriers: list[tree_sitter.Node] = field(default_factory=list)
    warp_ops: list[tree_sitter.Node] = field(default_factory=list)
    #: ``return``/``break``/``continue``/``goto`` statements.
    exits: list[tree_sitter.Node] = field(default_factory=list)
    #: Names of every function called in the body.
    calls: set[str] = field(default_factory=set)
    #: Integer ``/`` and ``%`` met by :meth:`poly` with ``divmod=True``: symbol -> (op, numerator, denominator).
    divmods: dict[str, tuple[str, Poly, Poly]] = field(default_factory=dict)
    _divmod_atoms: bool = False

    # -- helpers for recipes ----------------------------------------------------------------------

    def text(self, node: tree_sitter.Node | None) -> str:
        if node is None:
            return ""
        return self.data[node.start_byte : node.end_byte].decode("utf-8", errors="replace")

    def param(self, name: str) -> ParamInfo | None:
        return next((p for p in self.params if p.name == name), None)

    @property
    def pointer_params(self) -> list[ParamInfo]:
        return [p for p in self.params if p.is_pointer]

    def global_accesses(self, base: str | None = None) -> list[Access]:
        return [a for a in self.accesses if a.space == "global" and (base is None or a.base == base)]

    def loads(self, base: str | None = None) -> list[Access]:
        return [a for a in self.global_accesses(base) if a.kind == "load"]

    def stores(self, base: str | None = None) -> list[Access]:
        return [a for a in self.global_accesses(base) if a.kind in ("store", "update")]

    def written(self) -> set[str]:
        """Pointer parameters the kernel writes (stores, updates, atomics)."""
        return {a.base for a in self.global_accesses() if a.kind != "load"}

    def statements(self) -> list[tree_sitter.Node]:
        """The top-level statements of the body, comments excluded."""
        return [c for c in self.body.named_children if c.type != "comment"]

    def poly(self, node: tree_sitter.Node | None, divmod: bool = False) -> Poly | None:
        """The expression as a polynomial (locals substituted, ``gid`` folded), or ``None``.

        With ``divmod``, an integer ``n / d`` or ``n % d`` that does not fold to a constant becomes an
        atom: a symbol ``div(n|d)`` / ``mod(n|d)`` recorded in :attr:`divmods` with its operands, so a
        row and column recovered from a 1-D index (``i / C``, ``i % C``) can be recognised as the two
        digits of ``i``. Off by default: a recipe that does not look for atoms would take them for
        parameters.
        """
        if node is None:
            return None
        self._divmod_atoms = divmod
        try:
            p = _to_poly(self, node, frozenset())
        finally:
            self._divmod_atoms = False
        return fold_gid(p) if p is not None else None

    def guards_of(self, node: tree_sitter.Node) -> list[Guard]:
        return _guards_of(self, node)

    def loops_of(self, node: tree_sitter.Node) -> list[Loop]:
        """Loops enclosing ``node``, outermost first."""
        out = [
            lp
            for lp in self.loops
            if lp.node.start_byte <= node.start_byte and node.end_byte <= lp.node.end_byte and lp.node != node
        ]
        return sorted(out, key=lambda lp: lp.depth)

    def uses_builtin(self, node: tree_sitter.Node, builtins: Iterable[str] = BUILTINS) -> bool:
        """Does ``node`` read ``threadIdx``/``blockIdx``/... directly?"""
        names = set(builtins)
        return any(n.type == "identifier" and self.text(n) in names for n in walk(node))

    def identifiers(self, node: tree_sitter.Node) -> set[str]:
        return {self.text(n) for n in walk(node) if n.type == "identifier"}

    def summary(self) -> dict[str, object]:
        """A compact description for ``--explain`` and debugging."""
        return {
            "gid_vars": dict(self.gid_vars),
            "index_vars": {k: str(v) for k, v in self.index_vars.items()},
            "loops": [str(lp) for lp in self.loops],
            "accesses": [
                f"{a.kind} {a.base}[{a.index if a.index is not None else a.index_text}]"
                for a in self.accesses
            ],
            "accumulations": [f"{a.var} {a.op}= {a.value_text}" for a in self.accumulations],
            "atomics": [
                f"{a.func}({a.target.base if a.target else '?'}, {a.value_text})" for a in self.atomics
            ],
        }


# --------------------------------------------------------------------------------------------------
# Building


def walk(n: tree_sitter.Node) -> Iterator[tree_sitter.Node]:
    """Pre-order walk of a subtree."""
    stack = [n]
    while stack:
        cur = stack.pop()
        yield cur
        stack.extend(reversed(cur.children))


def kernel_ir(model: SourceModel, fn: Function | str) -> KernelIR | None:
    """The IR of a kernel (or ``__device__`` function) with a body; cached per model. ``None`` without a body."""
    f = model.function(fn) if isinstance(fn, str) else fn
    if f is None or f.body_span is None or model.tree is None:
        return None
    # Cached on the model itself: it lives exactly as long as the text it describes.
    per: dict[str, KernelIR | None] | None = getattr(model, "_kernel_ir_cache", None)
    if per is None:
        per = {}
        setattr(model, "_kernel_ir_cache", per)  # noqa: B010 - not a declared field of the dataclass
    key = f"{f.name}@{f.span.start_byte}"
    if key not in per:
        per[key] = None
        with contextlib.suppress(RecursionError):
            per[key] = _build(model, f)
    return per[key]


def _build(model: SourceModel, fn: Function) -> KernelIR | None:
    assert model.tree is not None and fn.body_span is not None
    body = model.tree.root_node.descendant_for_byte_range(fn.body_span.start_byte, fn.body_span.end_byte)
    while body is not None and body.type != "compound_statement":
        body = body.parent
    if body is None:
        return None
    data = model.text.encode("utf-8", errors="replace")
    params = [
        ParamInfo(
            p.name, i, _element_ctype(p.base_type), p.is_pointer, p.is_const, p.is_restrict, p.type_text
        )
        for i, p in enumerate(fn.params)
    ]
    ir = KernelIR(fn.name, fn, model, body, data, params)
    _collect_locals(ir)
    _collect_loops(ir)
    for name, var in ir.locals.items():
        if var.is_pointer or var.is_array or var.value_node is None:
            continue
        p = ir.poly(var.value_node) if var.assignments == 0 and not var.shadowed else None
        if p is not None and p.depends_on(THREAD_SYMBOLS | {f"blockDim.{a}" for a in AXES}):
            if p.depends_on(THREAD_SYMBOLS):
                ir.index_vars[name] = p
            for a in AXES:
                if p == Poly.sym(f"gid.{a}"):
                    ir.gid_vars[name] = a
    _collect_accesses(ir)
    _collect_accumulations(ir)
    return ir


def _element_ctype(base_type: str) -> str:
    words = [
        w
        for w in base_type.replace("*", " ").split()
        if w not in ("const", "volatile", "__restrict__", "__restrict", "restrict")
    ]
    return " ".join(words)


def _declared_names(
    ir: KernelIR, decl: tree_sitter.Node
) -> list[tuple[str, tree_sitter.Node, tree_sitter.Node | None, bool, bool]]:
    """(name, declarator node, value node, is_pointer, is_array) for each declarator of a declaration."""
    out = []
    for d in decl.children_by_field_name("declarator"):
        value = None
        target = d
        if d.type == "init_declarator":
            value = d.child_by_field_name("value")
            target = d.child_by_field_name("declarator") or d
        is_ptr = False
        is_arr = False
        while target is not None and target.type in (
            "pointer_declarator",
            "reference_declarator",
            "array_declarator",
        ):
            if target.type == "pointer_declarator":
                is_ptr = True
            if target.type == "array_declarator":
                is_arr = True
            nxt = target.child_by_field_name("declarator")
            if nxt is None:
                nxt = next((c for c in target.children if c.type == "identifier"), None)
            if nxt is None:
                break
            target = nxt
        if target is not None and target.type == "identifier":
            if value is not None and value.type == "initializer_list":
                value = None
            out.append((ir.text(target), d, value, is_ptr, is_arr))
    return out


def _collect_locals(ir: KernelIR) -> None:
    for n in walk(ir.body):
        if n.type == "declaration":
            head = ir.text(n).split("=")[0]
            shared = "__shared__" in head
            tnode = n.child_by_field_name("type")
            ctype = " ".join(
                ir.text(c) for c in n.children if c.type == "type_qualifier" and ir.text(c) == "const"
            )
            ctype = (ctype + " " + ir.text(tnode)).strip()
            for name, _d, value, is_ptr, is_arr in _declared_names(ir, n):
                if name in ir.locals:
                    ir.locals[name].shadowed = True
                    continue
                var = LocalVar(name, ctype, n, value, is_pointer=is_ptr, is_array=is_arr, shared=shared)
                ir.locals[name] = var
        elif n.type == "assignment_expression":
            left = n.child_by_field_name("left")
            if left is not None and left.type == "identifier" and ir.text(left) in ir.locals:
                ir.locals[ir.text(left)].assignments += 1
        elif n.type == "update_expression":
            arg = n.child_by_field_name("argument")
            if arg is not None and arg.type == "identifier" and ir.text(arg) in ir.locals:
                ir.locals[ir.text(arg)].assignments += 1
        elif n.type == "call_expression":
            f = n.child_by_field_name("function")
            name = ir.text(f)
            ir.calls.add(name)
            if name.startswith("__syncthreads") or name in (
                "__syncwarp",
                "__threadfence",
                "__threadfence_block",
            ):
                ir.barriers.append(n)
            elif (
                name.startswith("__shfl")
                or name.startswith("__reduce_")
                or name in ("__ballot_sync", "__any_sync", "__all_sync", "__match_any_sync")
            ):
                ir.warp_ops.append(n)
        elif n.type in ("return_statement", "break_statement", "continue_statement", "goto_statement"):
            ir.exits.append(n)
    # Local pointers into parameters: `T* p = x + off`, `&x[off]`, `x` (offset 0).
    pnames = {p.name for p in ir.params if p.is_pointer}
    for var in ir.locals.values():
        if not var.is_pointer or var.value_node is None or var.assignments:
            continue
        base, off = _pointer_base(ir, var.value_node, pnames, 0)
        if base is not None:
            var.points_to, var.offset = base, off


def _pointer_base(
    ir: KernelIR, n: tree_sitter.Node, pnames: set[str], depth: int
) -> tuple[str | None, Poly | None]:
    """``(param, element offset)`` of a pointer expression ``x``, ``x + off``, ``&x[off]``, ``(T*)x``."""
    if depth > 8:
        return None, None
    t = n.type
    if t == "identifier":
        name = ir.text(n)
        if name in pnames:
            return name, Poly()
        var = ir.locals.get(name)
        if var is not None and var.points_to is not None:
            return var.points_to, var.offset
        return None, None
    if t in ("parenthesized_expression",):
        inner = next((c for c in n.named_children), None)
        return _pointer_base(ir, inner, pnames, depth + 1) if inner is not None else (None, None)
    if t == "cast_expression":
        # A cast to another element type changes the element size: offsets no longer line up.
        tn = n.child_by_field_name("type")
        val = n.child_by_field_name("value")
        base, off = _pointer_base(ir, val, pnames, depth + 1) if val is not None else (None, None)
        if base is not None:
            param = ir.param(base)
            if param is not None and tn is not None and _element_ctype(ir.text(tn)) == param.ctype:
                return base, off
        return None, None
    if t == "binary_expression":
        op = ir.text(n.child_by_field_name("operator"))
        left, right = n.child_by_field_name("left"), n.child_by_field_name("right")
        if left is None or right is None or op not in ("+", "-"):
            return None, None
        base, off = _pointer_base(ir, left, pnames, depth + 1)
        if base is not None and off is not None:
            d = ir.poly(right)
            if d is None:
                return base, None
            return base, off + d if op == "+" else off - d
        if op == "+":
            base, off = _pointer_base(ir, right, pnames, depth + 1)
            if base is not None and off is not None:
                d = ir.poly(left)
                return base, (off + d) if d is not None else None
        return None, None
    if t == "pointer_expression" and ir.text(n.child_by_field_name("operator")) == "&":
        arg = n.child_by_field_name("argument")
        if arg is not None and arg.type == "subscript_expression":
            bnode, idx = _subscript_parts(ir, arg)
            if bnode is not None:
                b, off = _pointer_base(ir, bnode, pnames, depth + 1)
                if b is not None and off is not None:
                    d = ir.poly(idx) if idx is not None else None
                    return b, (off + d) if d is not None else None
    return None, None


def _subscript_parts(
    ir: KernelIR, n: tree_sitter.Node
) -> tuple[tree_sitter.Node | None, tree_sitter.Node | None]:
    base = n.child_by_field_name("argument")
    idx_list = n.child_by_field_name("indices")
    idx = (
        next((c for c in idx_list.named_children if c.type != "comment"), None)
        if idx_list is not None
        else None
    )
    return base, idx


def _int_literal(text: str) -> int | None:
    m = _INT_LIT.match(text.strip())
    if not m:
        return None
    body = m.group(1)
    if body[:2].lower() == "0x":
        return int(body, 16)
    if body[:2].lower() == "0b":
        return int(body[2:], 2)
    if len(body) > 1 and body.startswith("0"):
        return int(body, 8)
    return int(body)


def _to_poly(ir: KernelIR, n: tree_sitter.Node, seen: frozenset[str], depth: int = 0) -> Poly | None:
    if depth > 60:
        return None
    t = n.type
    if t == "number_literal":
        v = _int_literal(ir.text(n))
        return Poly.const(v) if v is not None else None
    if t == "identifier":
        name = ir.text(n)
        var = ir.locals.get(name)
        if var is not None:
            if (
                var.assignments == 0
                and not var.shadowed
                and var.value_node is not None
                and not var.is_pointer
                and not var.is_array
                and name not in seen
                and not _is_loop_var(ir, name)
            ):
                return _to_poly(ir, var.value_node, seen | {name}, depth + 1)
            return Poly.sym(name)
        if name in ir.model.defines:
            v = _define_value(ir, name)
            return Poly.const(v) if v is not None else Poly.sym(name)
        return Poly.sym(name)
    if t == "field_expression":
        arg, fld = n.child_by_field_name("argument"), n.child_by_field_name("field")
        if arg is not None and fld is not None and ir.text(arg) in BUILTINS and ir.text(fld) in AXES:
            return Poly.sym(f"{ir.text(arg)}.{ir.text(fld)}")
        return None
    if t in ("parenthesized_expression", "condition_clause"):
        inner = next((c for c in n.named_children if c.type != "comment"), None)
        return _to_poly(ir, inner, seen, depth + 1) if inner is not None else None
    if t == "cast_expression":
        val = n.child_by_field_name("value")
        tn = n.child_by_field_name("type")
        if tn is not None and any(w in ir.text(tn) for w in ("float", "double", "half", "bfloat")):
            return None
        return _to_poly(ir, val, seen, depth + 1) if val is not None else None
    if t == "call_expression":
        fname = ir.text(n.child_by_field_name("function"))
        args = n.child_by_field_name("arguments")
        argn = [c for c in args.named_children if c.type != "comment"] if args is not None else []
        if fname in ("__umul24", "__mul24", "__umul64hi") and len(argn) == 2 and fname != "__umul64hi":
            a, b = _to_poly(ir, argn[0], seen, depth + 1), _to_poly(ir, argn[1], seen, depth + 1)
            return a * b if a is not None and b is not None else None
        if (
            fname
            in (
                "static_cast<int>",
                "static_cast<unsigned>",
                "static_cast<size_t>",
                "static_cast<long>",
                "static_cast<long long>",
                "static_cast<unsigned int>",
                "static_cast<int64_t>",
            )
            and len(argn) == 1
        ):
            return _to_poly(ir, argn[0], seen, depth + 1)
        return None
    if t == "binary_expression":
        op = ir.text(n.child_by_field_name("operator"))
        left, right = n.child_by_field_name("left"), n.child_by_field_name("right")
        if left is None or right is None:
            return None
        a = _to_poly(ir, left, seen, depth + 1)
        b = _to_poly(ir, right, seen, depth + 1)
        if a is None or b is None:
            return None
        if op == "+":
            return a + b
        if op == "-":
            return a - b
        if op == "*":
            return a * b
        if op == "<<" and b.value is not None and 0 <= b.value < 63:
            return a * (1 << b.value)
        if op in ("/", "%") and ir._divmod_atoms and (a.value is None or b.value is None) and b != 0:
            num, den = fold_gid(a), fold_gid(b)
            name = f"{'div' if op == '/' else 'mod'}({num}|{den})"
            ir.divmods.setdefault(name, (op, num, den))
            return Poly.sym(name)
        if op in ("/", ">>", "%") and a.value is not None and b.value is not None and b.value != 0:
            av, bv = a.value, b.value
            if op == "/":
                q = abs(av) // abs(bv)
                return Poly.const(q if (av >= 0) == (bv >= 0) else -q)
            if op == ">>":
                return Poly.const(av >> bv)
            r = abs(av) % abs(bv)
            return Poly.const(r if av >= 0 else -r)
        return None
    if t == "unary_expression":
        op = ir.text(n.child_by_field_name("operator"))
        arg = n.child_by_field_name("argument")
        a = _to_poly(ir, arg, seen, depth + 1) if arg is not None else None
        if a is None:
            return None
        if op == "-":
            return -a
        if op == "+":
            return a
        return None
    return None


def _define_value(ir: KernelIR, name: str) -> int | None:
    raw = (ir.model.defines.get(name) or "").strip()
    for _ in range(4):
        raw = raw.strip()
        if raw.startswith("(") and raw.endswith(")"):
            raw = raw[1:-1]
    return _int_literal(raw)


def _is_loop_var(ir: KernelIR, name: str) -> bool:
    return any(lp.var == name for lp in ir.loops)


# -- conditions -------------------------------------------------------------------------------------


def _strip_parens(ir: KernelIR, n: tree_sitter.Node) -> tree_sitter.Node:
    while n.type in ("parenthesized_expression", "condition_clause"):
        inner = next((c for c in n.named_children if c.type != "comment"), None)
        if inner is None:
            break
        n = inner
    return n


def conjuncts(ir: KernelIR, n: tree_sitter.Node | None, negate: bool = False) -> tuple[list[Cond], bool]:
    """Split a condition into comparisons (``a && b``; or ``!(a || b)`` when ``negate``); ``exact`` flag."""
    if n is None:
        return [], False
    n = _strip_parens(ir, n)
    if n.type == "binary_expression":
        op = ir.text(n.child_by_field_name("operator"))
        left, right = n.child_by_field_name("left"), n.child_by_field_name("right")
        if left is not None and right is not None:
            if (op == "&&" and not negate) or (op == "||" and negate):
                a, ea = conjuncts(ir, left, negate)
                b, eb = conjuncts(ir, right, negate)
                return a + b, ea and eb
            if op in _NEGATE:
                cop = _NEGATE[op] if negate else op
                lp, rp = ir.poly(left), ir.poly(right)
                text = ir.text(n)
                return [Cond(("!(" + text + ")") if negate else text, cop, lp, rp, n)], True
    if n.type == "unary_expression" and ir.text(n.child_by_field_name("operator")) == "!":
        arg = n.child_by_field_name("argument")
        return conjuncts(ir, arg, not negate)
    text = ir.text(n)
    return [Cond(("!(" + text + ")") if negate else text, None, None, None, n)], False


def _collect_loops(ir: KernelIR) -> None:
    def depth_of(n: tree_sitter.Node) -> int:
        d = 0
        p = n.parent
        while p is not None and p != ir.body:
            if p.type in ("for_statement", "while_statement", "do_statement"):
                d += 1
            p = p.parent
        return d

    for n in walk(ir.body):
        if n.type == "for_statement":
            var = var_type = None
            start = step = None
            init = n.child_by_field_name("initializer")
            if init is not None and init.type == "declaration":
                names = _declared_names(ir, init)
                if len(names) == 1:
                    var = names[0][0]
                    tnode = init.child_by_field_name("type")
                    var_type = ir.text(tnode)
                    start_node = names[0][2]
                    start = ir.poly(start_node) if start_node is not None else None
            elif init is not None and init.type == "assignment_expression":
                left = init.child_by_field_name("left")
                if (
                    left is not None
                    and left.type == "identifier"
                    and ir.text(init.child_by_field_name("operator")) == "="
                ):
                    var = ir.text(left)
                    start = ir.poly(init.child_by_field_name("right"))
            cond = n.child_by_field_name("condition")
            conds, _exact = conjuncts(ir, cond) if cond is not None else ([], True)
            update = n.child_by_field_name("update")
            if var is not None and update is not None:
                step = _step_of(ir, update, var)
            lp = Loop(n, "for", var, var_type, start, conds, step, n.child_by_field_name("body"), depth_of(n))
            ir.loops.append(lp)
        elif n.type in ("while_statement", "do_statement"):
            cond = n.child_by_field_name("condition")
            conds, _ = conjuncts(ir, cond) if cond is not None else ([], True)
            kind: Literal["while", "do"] = "while" if n.type == "while_statement" else "do"
            lp = Loop(n, kind, None, None, None, conds, None, n.child_by_field_name("body"), depth_of(n))
            lp.var = _while_induction(ir, lp)
            ir.loops.append(lp)
    # Starts and steps are polynomials only now that loop variables are known as symbols.
    for lp in ir.loops:
        if lp.kind == "for" and lp.var is not None:
            init = lp.node.child_by_field_name("initializer")
            if init is not None and init.type == "declaration":
                names = _declared_names(ir, init)
                if names and names[0][2] is not None:
                    lp.start = ir.poly(names[0][2])
            elif init is not None:
                lp.start = ir.poly(init.child_by_field_name("right"))
            cond = lp.node.child_by_field_name("condition")
            lp.conds = conjuncts(ir, cond)[0] if cond is not None else []
            update = lp.node.child_by_field_name("update")
            lp.step = _step_of(ir, update, lp.var) if update is not None else None
        elif lp.var is not None and lp.body is not None:
            local = ir.locals.get(lp.var)
            lp.var_type = local.ctype if local is not None else None
            lp.start = (
                ir.poly(local.value_node) if local is not None and local.value_node is not None else None
            )
            upd = _induction_update(ir, lp.body, lp.var)
            lp.step = _step_of(ir, upd, lp.var) if upd is not None else None
            cond = lp.node.child_by_field_name("condition")
            lp.conds = conjuncts(ir, cond)[0] if cond is not None else []
        if lp.var is not None and lp.start is not None and lp.step is not None:
            for a in AXES:
                if lp.start == Poly.sym(f"gid.{a}") and lp.step == Poly.sym(f"blockDim.{a}") * Poly.sym(
                    f"gridDim.{a}"
                ):
                    lp.grid_stride = a


def _induction_update(ir: KernelIR, body: tree_sitter.Node, var: str) -> tree_sitter.Node | None:
    """The one top-level ``var += s`` / ``var = var + s`` / ``var++`` statement of a while loop's body."""
    stmts = (
        [c for c in body.named_children if c.type == "expression_statement"]
        if body.type == "compound_statement"
        else []
    )
    found = []
    for s in stmts:
        e = next((c for c in s.named_children if c.type != "comment"), None)
        if e is None:
            continue
        target = (
            e.child_by_field_name("left")
            if e.type == "assignment_expression"
            else (e.child_by_field_name("argument") if e.type == "update_expression" else None)
        )
        if target is not None and ir.text(target) == var:
            found.append(e)
    # Any other assignment to var inside the body (nested) makes it no simple induction variable.
    total = sum(
        1
        for n in walk(body)
        if n.type in ("assignment_expression", "update_expression")
        and ir.text(n.child_by_field_name("left") or n.child_by_field_name("argument")) == var
    )
    return found[0] if len(found) == 1 and total == 1 else None


def _while_induction(ir: KernelIR, lp: Loop) -> str | None:
    """``while (i < n) { ...; i += s; }``: the variable compared in the condition and stepped once in the body."""
    if lp.body is None:
        return None
    for c in lp.conds:
        if c.node is None:
            continue
        left = _strip_parens(ir, c.node.child_by_field_name("left") or c.node)
        if (
            left.type == "identifier"
            and ir.text(left) in ir.locals
            and _induction_update(ir, lp.body, ir.text(left)) is not None
        ):
            return ir.text(left)
    return None


def _step_of(ir: KernelIR, update: tree_sitter.Node, var: str) -> Poly | None:
    update = _strip_parens(ir, update)
    if update.type == "update_expression":
        arg = update.child_by_field_name("argument")
        if arg is not None and ir.text(arg) == var:
            return Poly.const(1 if "++" in ir.text(update) else -1)
        return None
    if update.type == "assignment_expression":
        left = update.child_by_field_name("left")
        op = ir.text(update.child_by_field_name("operator"))
        right = update.child_by_field_name("right")
        if left is None or right is None or ir.text(left) != var:
            return None
        r = ir.poly(right)
        if r is None:
            return None
        if op == "+=":
            return r
        if op == "-=":
            return -r
        if op == "=":
            d = r - Poly.sym(var)
            return None if d.depends_on([var]) else d
    return None


def _guards_of(ir: KernelIR, node: tree_sitter.Node) -> list[Guard]:
    """Guards of ``node`` from the outside in: enclosing branches and earlier early exits."""
    out: list[Guard] = []
    child = node
    parent = node.parent
    chain: list[tuple[tree_sitter.Node, tree_sitter.Node]] = []
    while parent is not None and child != ir.body:
        chain.append((parent, child))
        child, parent = parent, parent.parent
    for parent, child in reversed(chain):
        t = parent.type
        if t == "if_statement":
            cond = parent.child_by_field_name("condition")
            cons = parent.child_by_field_name("consequence")
            alt = parent.child_by_field_name("alternative")
            if cons is not None and child == cons:
                conds, exact = conjuncts(ir, cond)
                out.append(Guard("if", conds, parent, ir.text(cond), exact))
            elif alt is not None and child == alt:
                conds, exact = conjuncts(ir, cond, negate=True)
                out.append(Guard("else", conds, parent, ir.text(cond), exact))
        elif t == "conditional_expression":
            cond = parent.child_by_field_name("condition")
            if child == parent.child_by_field_name("consequence"):
                conds, exact = conjuncts(ir, cond)
                out.append(Guard("ternary", conds, parent, ir.text(cond), exact))
            elif child == parent.child_by_field_name("alternative"):
                conds, exact = conjuncts(ir, cond, negate=True)
                out.append(Guard("ternary", conds, parent, ir.text(cond), exact))
        elif t == "binary_expression" and ir.text(parent.child_by_field_name("operator")) == "&&":
            left = parent.child_by_field_name("left")
            if left is not None and child != left:
                conds, exact = conjuncts(ir, left)
                out.append(Guard("and", conds, parent, ir.text(left), exact))
        if t == "compound_statement":
            # Earlier siblings `if (c) return/break/continue;` guard what follows them.
            for sib in parent.named_children:
                if sib.start_byte >= child.start_byte:
                    break
                g = _exit_guard(ir, sib)
                if g is not None:
                    out.append(g)
    return out


def _exit_guard(ir: KernelIR, stmt: tree_sitter.Node) -> Guard | None:
    """``if (c) return;`` (or break/continue) as the guard ``!c`` for the code that follows."""
    if stmt.type != "if_statement" or stmt.child_by_field_name("alternative") is not None:
        return None
    cons = stmt.child_by_field_name("consequence")
    if cons is None:
        return None
    inner = cons
    if inner.type == "compound_statement":
        kids = [c for c in inner.named_children if c.type != "comment"]
        if len(kids) != 1:
            return None
        inner = kids[0]
    kinds = {"return_statement": "return", "break_statement": "break", "continue_statement": "continue"}
    if inner.type not in kinds:
        return None
    cond = stmt.child_by_field_name("condition")
    conds, exact = conjuncts(ir, cond, negate=True)
    return Guard(kinds[inner.type], conds, stmt, ir.text(cond), exact)


# -- accesses ----------------------------------------------------------------------------------------


def _collect_accesses(ir: KernelIR) -> None:
    pnames = {p.name for p in ir.params if p.is_pointer}
    atomic_targets: set[int] = set()
    for n in walk(ir.body):
        if n.type == "call_expression":
            fname = ir.text(n.child_by_field_name("function"))
            m = _ATOMIC.match(fname)
            if not m:
                continue
            args = n.child_by_field_name("arguments")
            argn = [c for c in args.named_children if c.type != "comment"] if args is not None else []
            if not argn:
                continue
            target = _atomic_target(ir, argn[0], pnames)
            if target is not None:
                for sub in walk(target.node):
                    if sub.type == "subscript_expression":
                        atomic_targets.add(sub.id)
                        break
                atomic_targets.add(target.node.id)
                target.stmt = _statement_of(ir, n)
                ir.accesses.append(target)
            value = argn[1] if len(argn) > 1 else None
            parent = n.parent
            used = parent is not None and parent.type not in ("expression_statement",)
            ir.atomics.append(
                Atomic(
                    fname,
                    _ATOMIC_OP[m.group(1)],
                    target,
                    ir.text(value),
                    value,
                    n,
                    ir.loops_of(n),
                    ir.guards_of(n),
                    used,
                )
            )
    for n in walk(ir.body):
        if n.id in atomic_targets:
            continue
        acc = None
        if n.type == "subscript_expression":
            acc = _subscript_access(ir, n, pnames)
        elif n.type == "pointer_expression" and ir.text(n.child_by_field_name("operator")) == "*":
            acc = _deref_access(ir, n, pnames)
        if acc is None:
            continue
        kind, op, stmt = _access_kind(ir, n)
        acc.kind, acc.op, acc.stmt = kind, op, stmt
        ir.accesses.append(acc)
    ir.accesses.sort(key=lambda a: a.node.start_byte)


def _statement_of(ir: KernelIR, n: tree_sitter.Node) -> tree_sitter.Node:
    cur = n
    while cur.parent is not None and cur.type not in (
        "expression_statement",
        "declaration",
        "return_statement",
    ):
        cur = cur.parent
    return cur


def _access_kind(
    ir: KernelIR, n: tree_sitter.Node
) -> tuple[Literal["load", "store", "update"], str | None, tree_sitter.Node | None]:
    parent = n.parent
    while parent is not None and parent.type == "parenthesized_expression":
        n, parent = parent, parent.parent
    if (
        parent is not None
        and parent.type == "assignment_expression"
        and parent.child_by_field_name("left") == n
    ):
        op = ir.text(parent.child_by_field_name("operator"))
        return ("store" if op == "=" else "update"), op, _statement_of(ir, parent)
    if parent is not None and parent.type == "update_expression":
        return "update", ir.text(parent.child_by_field_name("operator")), _statement_of(ir, parent)
    return "load", None, None


def _make_access(
    ir: KernelIR,
    node: tree_sitter.Node,
    base: str,
    space: Literal["global", "shared", "local"],
    index: Poly | None,
    index_text: str,
    ctype: str,
) -> Access:
    return Access(
        node,
        base,
        space,
        "load",
        index,
        index_text,
        ctype,
        ir.loops_of(node),
        ir.guards_of(node),
        node.start_point[0],
    )


def _subscript_access(ir: KernelIR, n: tree_sitter.Node, pnames: set[str]) -> Access | None:
    base, idx = _subscript_parts(ir, n)
    if base is None or idx is None:
        return None
    idx_poly = ir.poly(idx)
    if base.type == "identifier":
        name = ir.text(base)
        var = ir.locals.get(name)
        if var is not None and (var.is_array or var.shared) and not var.is_pointer:
            return _make_access(
                ir,
                n,
                name,
                "shared" if var.shared else "local",
                idx_poly,
                ir.text(idx),
                _element_ctype(var.ctype),
            )
        if var is not None and var.shared and var.is_pointer:
            return None
    if base.type == "subscript_expression":
        return None  # a[i][j] on a pointer-to-array: not modelled
    param, off = _pointer_base(ir, base, pnames, 0)
    if param is None:
        return None
    p = ir.param(param)
    index = off + idx_poly if off is not None and idx_poly is not None else None
    text = ir.text(idx) if off is None or off == Poly() else f"{off.c_text()} + {ir.text(idx)}"
    return _make_access(ir, n, param, "global", index, text, p.ctype if p else "")


def _deref_access(ir: KernelIR, n: tree_sitter.Node, pnames: set[str]) -> Access | None:
    arg = n.child_by_field_name("argument")
    if arg is None:
        return None
    param, off = _pointer_base(ir, arg, pnames, 0)
    if param is None:
        return None
    p = ir.param(param)
    return _make_access(
        ir, n, param, "global", off, off.c_text() if off is not None else ir.text(arg), p.ctype if p else ""
    )


def _atomic_target(ir: KernelIR, addr: tree_sitter.Node, pnames: set[str]) -> Access | None:
    a = _strip_parens(ir, addr)
    if a.type == "pointer_expression" and ir.text(a.child_by_field_name("operator")) == "&":
        inner = a.child_by_field_name("argument")
        if inner is not None:
            inner = _strip_parens(ir, inner)
        if inner is not None and inner.type == "subscript_expression":
            acc = _subscript_access(ir, inner, pnames)
            if acc is not None:
                acc.node = a
                acc.kind = "atomic"
                return acc
    param, off = _pointer_base(ir, a, pnames, 0)
    if param is not None:
        p = ir.param(param)
        acc = _make_access(
            ir, a, param, "global", off, off.c_text() if off is not None else ir.text(a), p.ctype if p else ""
        )
        acc.kind = "atomic"
        return acc
    if a.type == "identifier":
        var = ir.locals.get(ir.text(a))
        if var is not None and var.shared:
            acc = _make_access(ir, a, var.name, "shared", Poly(), "0", _element_ctype(var.ctype))
            acc.kind = "atomic"
            return acc
    return None


# -- accumulations -------------------------------------------------------------------------------------


def _call_parts(ir: KernelIR, n: tree_sitter.Node) -> tuple[str, list[tree_sitter.Node]] | None:
    n = _strip_parens(ir, n)
    if n.type != "call_expression":
        return None
    args = n.child_by_field_name("arguments")
    return ir.text(n.child_by_field_name("function")), [
        c for c in args.named_children if c.type != "comment"
    ] if args else []


def _collect_accumulations(ir: KernelIR) -> None:
    loop_vars = {lp.var for lp in ir.loops if lp.var is not None}
    scalars = {
        name
        for name, v in ir.locals.items()
        if not v.is_pointer and not v.is_array and not v.shared and name not in loop_vars
    }
    for n in walk(ir.body):
        if n.type == "assignment_expression":
            left = n.child_by_field_name("left")
            right = n.child_by_field_name("right")
            if left is None or right is None or left.type != "identifier" or ir.text(left) not in scalars:
                continue
            var = ir.text(left)
            op = ir.text(n.child_by_field_name("operator"))
            compound = {"+=": "sum", "-=": "sum", "*=": "prod", "&=": "and", "|=": "or", "^=": "xor"}
            if op in compound:
                ir.accumulations.append(
                    Accumulation(
                        var,
                        compound[op],  # type: ignore[arg-type]
                        ir.text(right),
                        right,
                        n,
                        ir.loops_of(n),
                        negated=op == "-=",
                    )
                )
                continue
            if op != "=":
                continue
            r = _strip_parens(ir, right)
            found = _binary_accumulation(ir, var, r)
            if found is not None:
                kind, value = found
                ir.accumulations.append(Accumulation(var, kind, ir.text(value), value, n, ir.loops_of(n)))  # type: ignore[arg-type]
        elif n.type == "if_statement":
            acc = _compare_select(ir, n, scalars)
            if acc is not None:
                ir.accumulations.append(acc)


def _binary_accumulation(ir: KernelIR, var: str, r: tree_sitter.Node) -> tuple[str, tree_sitter.Node] | None:
    if r.type == "binary_expression":
        bop = ir.text(r.child_by_field_name("operator"))
        a, b = r.child_by_field_name("left"), r.child_by_field_name("right")
        kinds = {"+": "sum", "*": "prod", "&": "and", "|": "or", "^": "xor"}
        if a is not None and b is not None and bop in kinds:
            if ir.text(_strip_parens(ir, a)) == var:
                return kinds[bop], b
            if ir.text(_strip_parens(ir, b)) == var:
                return kinds[bop], a
    call = _call_parts(ir, r)
    if call is not None and len(call[1]) == 2:
        fname, (a, b) = call
        kind = "max" if fname in _MAX_FUNCS else "min" if fname in _MIN_FUNCS else None
        if kind is not None:
            if ir.text(_strip_parens(ir, a)) == var:
                return kind, b
            if ir.text(_strip_parens(ir, b)) == var:
                return kind, a
    if r.type == "conditional_expression":
        cond = _strip_parens(ir, r.child_by_field_name("condition") or r)
        cons, alt = r.child_by_field_name("consequence"), r.child_by_field_name("alternative")
        if cond.type == "binary_expression" and cons is not None and alt is not None:
            cop = ir.text(cond.child_by_field_name("operator"))
            cl, cr = cond.child_by_field_name("left"), cond.child_by_field_name("right")
            texts = [ir.text(_strip_parens(ir, x)) for x in (cl, cr, cons, alt) if x is not None]
            if len(texts) == 4 and cop in ("<", "<=", ">", ">="):
                lt, rt, ct, at = texts
                # `v > acc ? v : acc` is max; `v < acc ? v : acc` is min (any side order).
                if {lt, rt} == {ct, at} and var in (lt, rt):
                    picks_left = ct == lt
                    greater = cop in (">", ">=")
                    kind = "max" if picks_left == greater else "min"
                    value = cl if rt == var else cr
                    assert value is not None
                    return kind, value
    return None


def _compare_select(ir: KernelIR, n: tree_sitter.Node, scalars: set[str]) -> Accumulation | None:
    """``if (v > best) { best = v; arg = i; }`` → max into ``best`` with companion ``arg = i``."""
    if n.child_by_field_name("alternative") is not None:
        return None
    cond = _strip_parens(ir, n.child_by_field_name("condition") or n)
    cons = n.child_by_field_name("consequence")
    if cond.type != "binary_expression" or cons is None:
        return None
    cop = ir.text(cond.child_by_field_name("operator"))
    cl, cr = cond.child_by_field_name("left"), cond.child_by_field_name("right")
    if cop not in ("<", "<=", ">", ">=") or cl is None or cr is None:
        return None
    stmts = (
        [cons]
        if cons.type != "compound_statement"
        else [c for c in cons.named_children if c.type != "comment"]
    )
    assigns: dict[str, tree_sitter.Node] = {}
    for s in stmts:
        if s.type != "expression_statement":
            return None
        e = next((c for c in s.named_children), None)
        if (
            e is None
            or e.type != "assignment_expression"
            or ir.text(e.child_by_field_name("operator")) != "="
        ):
            return None
        left, right = e.child_by_field_name("left"), e.child_by_field_name("right")
        if left is None or right is None or left.type != "identifier" or ir.text(left) not in scalars:
            return None
        assigns[ir.text(left)] = right
    lt, rt = ir.text(_strip_parens(ir, cl)), ir.text(_strip_parens(ir, cr))
    for var, other, var_on_left in ((rt, cl, False), (lt, cr, True)):
        if var in assigns and ir.text(_strip_parens(ir, assigns[var])) == ir.text(_strip_parens(ir, other)):
            greater_than_var = (cop in (">", ">=")) != var_on_left
            kind: Literal["max", "min"] = "max" if greater_than_var else "min"
            comps = {k: ir.text(v) for k, v in assigns.items() if k != var}
            return Accumulation(var, kind, ir.text(other), other, n, ir.loops_of(n), comps)
    return None


def signed_ctype(ctype: str) -> bool:
    """Is this C integer type signed (``int``, ``long``...) rather than unsigned (``unsigned``, ``size_t``)?"""
    words = ctype.replace("const", "").split()
    if any(w in ("unsigned", "size_t", "uint32_t", "uint64_t", "uint", "uint8_t", "uint16_t") for w in words):
        return False
    return " ".join(words) in _SIGNED_INT_TYPES or any(w in ("int", "long", "short") for w in words)
