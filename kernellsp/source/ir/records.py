"""The records of the kernel IR: conditions, guards, loops, accesses, accumulations, atomics, locals."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Literal

from kernellsp.source.ir.poly import THREAD_SYMBOLS, Poly

if TYPE_CHECKING:
    import tree_sitter

Node = "tree_sitter.Node"


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
