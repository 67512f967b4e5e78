"""The IR of one kernel (:class:`KernelIR`) and its build: locals, loops, index variables, accesses."""

from __future__ import annotations

import contextlib
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from kernellsp.source.ir.accesses import _collect_accesses, _collect_accumulations
from kernellsp.source.ir.control import _collect_loops, _guards_of
from kernellsp.source.ir.expressions import _collect_locals, _element_ctype, _to_poly, walk
from kernellsp.source.ir.poly import AXES, BUILTINS, THREAD_SYMBOLS, Poly, fold_gid
from kernellsp.source.ir.records import Access, Accumulation, Atomic, Guard, LocalVar, Loop, ParamInfo
from kernellsp.source.model import Function, SourceModel

if TYPE_CHECKING:
    import tree_sitter


@dataclass
class KernelIR:
    """The IR of one kernel definition; see :mod:`kernellsp.source.ir`."""

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

    def uniform_locals(self) -> set[str]:
        """Locals with one value that is the same for every thread (parameters, sizes, ``n / 2``, ``min(a, b)``)."""
        from kernellsp.source.ir.expressions import uniform_value

        return {
            name
            for name, v in self.locals.items()
            if v.assignments == 0
            and not v.shadowed
            and not v.is_pointer
            and not v.is_array
            and not v.shared
            and v.value_node is not None
            and uniform_value(self, v.value_node)
        }

    def flat_statements(self) -> list[tree_sitter.Node]:
        """The body's statements with a closing guard opened: ``decls; if (c) { S }`` gives ``decls + S``.

        In normal form (``structured-exits``) a kernel is its declarations followed by the guard that
        bounds its threads; a recipe that looks for the statements doing the work reads them here,
        and the guard's conditions in :meth:`guards_of` of any of them.
        """
        stmts = self.statements()
        while (
            stmts
            and stmts[-1].type == "if_statement"
            and stmts[-1].child_by_field_name("alternative") is None
        ):
            cons = stmts[-1].child_by_field_name("consequence")
            if cons is None or cons.type != "compound_statement":
                break
            stmts = stmts[:-1] + [c for c in cons.named_children if c.type != "comment"]
        return stmts

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
        if p is None:
            return None
        p = fold_gid(p)
        return _recombine_digits(p, self.divmods) if divmod and self.divmods else p

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


def _recombine_digits(p: Poly, divmods: dict[str, tuple[str, Poly, Poly]]) -> Poly:
    """``c*T*div(x|T) + c*mod(x|T)`` becomes ``c*x`` (C's ``/`` and ``%`` satisfy ``(x/T)*T + x%T == x``)."""
    for name, (op, num, den) in divmods.items():
        if op != "%":
            continue
        div = f"div({num}|{den})"
        if div not in divmods:
            continue
        c = p.coeff(name)
        if c == Poly():
            continue
        expected = c * den * Poly.sym(div)
        if all(p.terms.get(m) == v for m, v in expected.terms.items()):
            p = p - expected - c * Poly.sym(name) + c * num
    return p


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
