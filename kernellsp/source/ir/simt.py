"""One thread block of a kernel, executed in lockstep over its syntax tree, with symbolic data.

Recipes ask *what* a block computes, whatever the spelling: a shared-memory tree with interleaved or
sequential addressing, warp shuffles with a per-warp stage, a tree in global memory through a
pointer, ``cg::reduce`` after the collectives pass. Matching each spelling is the approach that does
not converge; executing the block does. Integers (indices, loop counters, thread and block
coordinates) are concrete, taken from one declared shape of the launch model; data are symbolic:
a load is a leaf ``("ld", buffer, element)``, ``+`` adds terms with multiplicities (a commutative,
associative sum: the order a tree adds in does not matter), ``fmaxf`` unites terms, anything else
builds an opaque term. Threads run statement by statement together (SIMT): a statement's reads come
before its writes, warp shuffles read the other lanes, barriers are implied. What the interpreter
cannot follow (a branch on data, a struct, an unknown call) raises :class:`Abort`; a reader then
declines, it never guesses.

The result holds every global store and atomic contribution, and a snapshot of every thread's
locals and the shared arrays after each top-level statement, so a reader can ask "after statement
*k*, do the threads' values of ``v`` add up to what the block writes?".
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from kernellsp.source.ir.cexpr import c_divmod, file_constants, int_literal

if TYPE_CHECKING:
    import tree_sitter

    from kernellsp.source.ir.kernel import KernelIR

Node = "tree_sitter.Node"


class Abort(Exception):
    """The block cannot be executed symbolically (the message says what stopped it)."""


# --------------------------------------------------------------------------------------------------
# Symbolic values


class Sym:
    """A sum of terms with integer multiplicities plus a numeric constant (immutable, hashable).

    A thread that adds a thousand loads one by one builds a thousand sums: ``add`` must not copy the
    terms each time (that is quadratic). A sum made by ``add``/``scale`` only records its two parts; its
    terms are computed (flattened once, iteratively) when someone asks for them: equality, hashing,
    the terms themselves. Terms nest (a product term holds two sums); their hashes are cached.
    """

    __slots__ = ("_flat", "_hash", "_parts")

    def __init__(
        self, terms: frozenset[tuple[Any, int]] | tuple[tuple[Any, int], ...] = (), const: float = 0.0
    ) -> None:
        self._flat: tuple[frozenset[tuple[Any, int]], float] | None = (frozenset(terms), const)
        self._parts: tuple[tuple[Sym, int], ...] = ()
        self._hash: int | None = None

    @staticmethod
    def _lazy(parts: tuple[tuple[Sym, int], ...], const: float) -> Sym:
        s = Sym((), const)
        s._flat = None
        s._parts = ((Sym((), const), 1), *parts) if const else parts
        return s

    def _flatten(self) -> tuple[frozenset[tuple[Any, int]], float]:
        if self._flat is None:
            counts: dict[Any, int] = {}
            const = 0.0
            stack: list[tuple[Sym, int]] = [(self, 1)]
            while stack:
                node, k = stack.pop()
                if node._flat is not None:
                    terms, c = node._flat
                    const += k * c
                    for term, v in terms:
                        counts[term] = counts.get(term, 0) + k * v
                else:
                    stack.extend((part, k * kk) for part, kk in node._parts)
            self._flat = (frozenset((t, v) for t, v in counts.items() if v), const)
            self._parts = ()
        return self._flat

    @property
    def terms(self) -> frozenset[tuple[Any, int]]:
        return self._flatten()[0]

    @property
    def const(self) -> float:
        return self._flatten()[1]

    def __hash__(self) -> int:
        if self._hash is None:
            self._hash = hash(self._flatten())
        return self._hash

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Sym) and hash(self) == hash(other) and self._flatten() == other._flatten()

    def __repr__(self) -> str:
        return f"Sym({len(self.terms)} terms, {self.const})"

    @staticmethod
    def leaf(term: Any) -> Sym:
        return Sym(((term, 1),))

    def counts(self) -> dict[Any, int]:
        return dict(self.terms)

    @staticmethod
    def _make(counts: dict[Any, int], const: float) -> Sym:
        return Sym(frozenset((k, v) for k, v in counts.items() if v), const)

    def add(self, other: Sym | float, sign: int = 1) -> Sym:
        if not isinstance(other, Sym):
            return Sym._lazy(((self, 1),), sign * float(other))
        return Sym._lazy(((self, 1), (other, sign)), 0.0)

    def scale(self, k: int) -> Sym:
        return Sym._lazy(((self, k),), 0.0)

    @property
    def single(self) -> Any | None:
        """The one term of a plain leaf or product (multiplicity 1, no constant)."""
        terms, const = self._flatten()
        if len(terms) == 1 and const == 0:
            ((term, count),) = terms
            return term if count == 1 else None
        return None


def _sym(v: Any) -> Sym:
    return v if isinstance(v, Sym) else Sym((), float(v))


def _opaque(op: str, *args: Any) -> Sym:
    return Sym.leaf((op, *(a if not isinstance(a, float) or not a.is_integer() else int(a) for a in args)))


def sym_mul(a: Any, b: Any) -> Any:
    if not isinstance(a, Sym) and not isinstance(b, Sym):
        return a * b
    for x, y in ((a, b), (b, a)):
        if not isinstance(x, Sym):
            if x == 0:
                return 0
            if x == 1:
                return y
            if isinstance(x, int) or (isinstance(x, float) and x.is_integer() and abs(x) < 64):
                return y.scale(int(x))
            return _opaque("*", float(x), y)
    first, second = (a, b) if hash(a) <= hash(b) else (b, a)
    return _opaque("*", first, second)


def sym_max(a: Any, b: Any, op: str) -> Any:
    if not isinstance(a, Sym) and not isinstance(b, Sym):
        return max(a, b) if op == "max" else min(a, b)
    ident = -math.inf if op == "max" else math.inf
    members: set[Any] = set()
    for v in (a, b):
        if not isinstance(v, Sym):
            if v == ident:
                continue
            members.add(("c", float(v)))
            continue
        t = v.single
        if t is not None and isinstance(t, tuple) and t and t[0] == op:
            members.update(t[1])
        else:
            members.add(v if t is None else t)
    return Sym.leaf((op, frozenset(members)))


@dataclass(frozen=True)
class _Group:
    """A cooperative group: the block, or a tile of ``width`` threads."""

    kind: str
    width: int

    def method(self, name: str, th: int, block: int) -> int:
        if name == "sync":
            return 0
        if self.kind == "block":
            table = {"thread_rank": th, "size": block, "num_threads": block}
        else:
            table = {
                "thread_rank": th % self.width,
                "size": self.width,
                "num_threads": self.width,
                "meta_group_rank": th // self.width,
                "meta_group_size": (block + self.width - 1) // self.width,
            }
        if name not in table:
            raise Abort(f"group method {name}")
        return table[name]


@dataclass(frozen=True)
class Ptr:
    """A pointer value: a global buffer (parameter), a shared array or a thread's local array, plus an element offset."""

    space: str
    name: str
    offset: int = 0


# --------------------------------------------------------------------------------------------------
# The block


@dataclass
class BlockRun:
    """What one block did."""

    block_dim: int
    stores: list[tuple[str, int, Any, int]] = field(default_factory=list)  # buffer, element, value, thread
    atomics: list[tuple[str, int, str, Any, int]] = field(
        default_factory=list
    )  # buffer, element, op, value, thread
    #: After each top-level statement: (per-thread locals, shared arrays, threads that returned).
    snapshots: list[tuple[list[dict[str, Any]], dict[str, dict[int, Any]], frozenset[int]]] = field(
        default_factory=list
    )
    #: Top-level statements (by index) that loaded global memory.
    loads_in: set[int] = field(default_factory=set)

    def outputs(self) -> dict[tuple[str, int], tuple[str, Any]]:
        """Each written global element: (``store``, last value) or (``atomicAdd``..., summed contributions)."""
        out: dict[tuple[str, int], tuple[str, Any]] = {}
        for name, idx, value, _t in self.stores:
            out[(name, idx)] = ("store", value)
        for name, idx, op, value, _t in self.atomics:
            kind, prev = out.get((name, idx), (op, 0 if op == "atomicAdd" else None))
            if op == "atomicAdd" and kind == "atomicAdd":
                out[(name, idx)] = (
                    op,
                    _sym(prev).add(_sym(value))
                    if isinstance(value, Sym) or isinstance(prev, Sym)
                    else prev + value,
                )
            else:
                out[(name, idx)] = (op, None)
        return out


_WARP = 32
_TILE_DECL = re.compile(
    r"^(?:const\s+)?(?:(?:cg|cooperative_groups)::)?thread_block_tile\s*<\s*(\d+)\s*>\s*&?\s*(\w+)\s*=\s*"
    r"(?:(?:cg|cooperative_groups)::)?tiled_partition\s*<\s*(\d+)\s*>\s*\(.*\)\s*;$"
)
_MATH = {
    "expf": math.exp,
    "exp": math.exp,
    "__expf": math.exp,
    "sqrtf": math.sqrt,
    "sqrt": math.sqrt,
    "logf": math.log,
    "log": math.log,
    "fabsf": abs,
    "fabs": abs,
    "abs": abs,
    "rsqrtf": lambda x: 1 / math.sqrt(x),
    "floorf": math.floor,
    "ceilf": math.ceil,
    "tanhf": math.tanh,
}
_MIN_MAX = frozenset(
    ("min", "max", "fminf", "fmaxf", "fmin", "fmax", "umin", "umax", "::min", "::max", "std::min", "std::max")
)
_CONVERSIONS = frozenset(
    ("__float2half", "__half2float", "__float2bfloat16", "__bfloat162float", "__int2float_rn")
)
_BARRIERS = ("__syncthreads", "__syncwarp", "__threadfence_block", "__threadfence")


class Block:
    """Executes one block of ``ir``'s kernel: 1-D blocks of ``block_dim`` threads, block ``block_idx`` of ``grid_dim``."""

    def __init__(
        self,
        ir: KernelIR,
        block_dim: int,
        grid_dim: int,
        block_idx: int,
        params: dict[str, int | float],
        budget: int = 400_000,
    ) -> None:
        if block_dim > 1024 or block_dim < 1:
            raise Abort(f"block of {block_dim} threads")
        self.ir = ir
        self.B, self.G, self.b = block_dim, grid_dim, block_idx
        self.params = dict(params)
        self.consts = file_constants(ir.model)
        self.pointers = {p.name for p in ir.params if p.is_pointer}
        self.locals: list[dict[str, Any]] = [{} for _ in range(block_dim)]
        self.shared: dict[str, dict[int, Any]] = {}
        self.memory: dict[tuple[str, int], Any] = {}
        self.returned: set[int] = set()
        self.loops: list[tuple[set[int], set[int]]] = []  # (broken, continued) per enclosing loop
        self.budget = budget
        self.run = BlockRun(block_dim)
        self._top = -1
        #: Other lanes' values read by shuffles and group reductions during one statement (reads precede
        #: writes in a lockstep statement, so they cannot change within it).
        self._lanes: dict[tuple[int, int], Any] = {}

    # -- driver -------------------------------------------------------------------------------------

    def execute(self) -> BlockRun:
        for k, st in enumerate(self.ir.statements()):
            self._top = k
            self.exec(st, self.alive(range(self.B)))
            self.run.snapshots.append(
                (
                    [dict(d) for d in self.locals],
                    {k2: dict(v) for k2, v in self.shared.items()},
                    frozenset(self.returned),
                )
            )
        return self.run

    def alive(self, threads: Iterable[int]) -> list[int]:
        out = [t for t in threads if t not in self.returned]
        if self.loops:
            brk, cont = self.loops[-1]
            out = [t for t in out if t not in brk and t not in cont]
        return out

    def tick(self, n: int = 1) -> None:
        self.budget -= n
        if self.budget < 0:
            raise Abort("too long to execute symbolically")

    def text(self, n: tree_sitter.Node | None) -> str:
        return self.ir.text(n)

    # -- statements ---------------------------------------------------------------------------------

    def exec(self, n: tree_sitter.Node | None, active: list[int]) -> None:
        if n is None:
            raise Abort("a missing statement")
        active = self.alive(active)
        if not active:
            return
        self.tick(len(active))
        self._lanes.clear()
        t = n.type
        if t in _NO_OPS:
            return
        handler = _STATEMENTS.get(t)
        if handler is None:
            raise Abort(f"a {t.replace('_', ' ')}")
        handler(self, n, active)

    def _compound(self, n: tree_sitter.Node, active: list[int]) -> None:
        for c in n.named_children:
            self.exec(c, active)

    def _expression_statement(self, n: tree_sitter.Node, active: list[int]) -> None:
        tile = _TILE_DECL.match(" ".join(self.text(n).split()))
        if tile is not None:
            # `cg::thread_block_tile<32> warp = cg::tiled_partition<32>(block);` (the parser reads a comparison)
            for th in active:
                self.locals[th][tile.group(2)] = _Group("tile", int(tile.group(3)))
            return
        e = next((c for c in n.named_children if c.type != "comment"), None)
        if e is not None:
            self.effect(e, active)

    def _return(self, n: tree_sitter.Node, active: list[int]) -> None:
        if n.named_child_count:
            raise Abort("a return with a value")
        self.returned.update(active)

    def _jump(self, n: tree_sitter.Node, active: list[int]) -> None:
        if not self.loops:
            raise Abort(f"{n.type} outside a loop")
        (self.loops[-1][0] if n.type == "break_statement" else self.loops[-1][1]).update(active)

    def declare(self, n: tree_sitter.Node, active: list[int]) -> None:
        text = self.text(n)
        shared = "__shared__" in text.split("=")[0]
        for d in n.children_by_field_name("declarator"):
            target: tree_sitter.Node | None = d
            value: tree_sitter.Node | None = None
            if d.type == "init_declarator":
                target, value = d.child_by_field_name("declarator"), d.child_by_field_name("value")
            is_array = target is not None and target.type == "array_declarator"
            while target is not None and target.type in (
                "array_declarator",
                "pointer_declarator",
                "reference_declarator",
            ):
                target = target.child_by_field_name("declarator")
            if target is None or target.type != "identifier":
                raise Abort("a declaration it cannot name")
            name = self.text(target)
            if shared:
                self.shared.setdefault(name, {})
                for th in active:
                    self.locals[th][name] = Ptr("shared", name)
                continue
            if is_array:
                for th in active:
                    self.locals[th][name] = Ptr("local", f"{name}@{th}")
                    self.shared.setdefault(f"{name}@{th}", {})
                continue
            if value is None:
                for th in active:
                    self.locals[th][name] = None
                continue
            type_text = self.text(n.child_by_field_name("type"))
            if (
                "thread_block" in type_text
                or "grid_group" in type_text
                or "this_thread_block" in self.text(value)
            ):
                width = 32 if "tile" in type_text or "tiled_partition" in self.text(value) else 0
                for th in active:
                    self.locals[th][name] = _Group("tile" if width else "block", width or self.B)
                continue
            if value.type in ("initializer_list", "argument_list"):
                raise Abort("an initializer list")
            vals = [self.eval(value, th) for th in active]
            for th, v in zip(active, vals, strict=True):
                self.locals[th][name] = _convert(v, self.text(n.child_by_field_name("type")))

    def branch(self, n: tree_sitter.Node, active: list[int]) -> None:
        cond = n.child_by_field_name("condition")
        yes: list[int] = []
        no: list[int] = []
        for th in active:
            (yes if _truth(self.eval(cond, th)) else no).append(th)
        if yes:
            self.exec(n.child_by_field_name("consequence"), yes)
        alt = n.child_by_field_name("alternative")
        if alt is not None and no:
            body = (
                next((c for c in alt.named_children if c.type != "comment"), alt)
                if alt.type == "else_clause"
                else alt
            )
            self.exec(body, no)

    def loop(self, n: tree_sitter.Node, active: list[int]) -> None:
        kind = n.type
        if kind == "for_statement":
            init = n.child_by_field_name("initializer")
            if init is not None:
                if init.type == "declaration":
                    self.declare(init, active)
                else:
                    self.effect(init, active)
        cond = n.child_by_field_name("condition")
        update = n.child_by_field_name("update")
        body = n.child_by_field_name("body")
        running = list(active)
        first = True
        while True:
            running = [t for t in running if t not in self.returned]
            if not (kind == "do_statement" and first) and cond is not None:
                running = [t for t in running if _truth(self.eval(cond, t))]
            first = False
            if not running:
                return
            self.loops.append((set(), set()))
            try:
                if body is not None:
                    self.exec(body, running)
                brk, _cont = self.loops[-1]
            finally:
                self.loops.pop()
            running = [t for t in running if t not in brk]
            if update is not None and running:
                self.effect(update, self.alive(running))
            self.tick(len(running))

    # -- effects: assignments, increments, calls -----------------------------------------------------

    def effect(self, e: tree_sitter.Node, active: list[int]) -> None:
        """An expression evaluated for its effect, every thread's reads before any thread's writes."""
        if e.type == "comma_expression":
            for c in e.named_children:
                self.effect(c, active)
            return
        writes: list[tuple[Any, Any]] = []
        for th in active:
            writes.extend(self.effects_of(e, th))
        for target, value in writes:
            self.store(target, value)

    def effects_of(self, e: tree_sitter.Node, th: int) -> list[tuple[Any, Any]]:
        t = e.type
        if t == "assignment_expression":
            op = self.text(e.child_by_field_name("operator"))
            left = e.child_by_field_name("left")
            target = self.lvalue(left, th)
            value = self.eval(e.child_by_field_name("right"), th)
            if op != "=":
                value = _binary(op[:-1], self.load(target, th), value)
            return [(target, value)]
        if t == "update_expression":
            arg = e.child_by_field_name("argument")
            target = self.lvalue(arg, th)
            op = "+" if "++" in self.text(e) else "-"
            return [(target, _binary(op, self.load(target, th), 1))]
        if t == "call_expression":
            self.call(e, th, effect=True)
            return []
        if t in ("parenthesized_expression",):
            inner = next(c for c in e.named_children if c.type != "comment")
            return self.effects_of(inner, th)
        raise Abort(f"a {t.replace('_', ' ')} as a statement")

    def lvalue(self, n: tree_sitter.Node | None, th: int) -> Any:
        """Where an assignment writes: ``("local", thread, name)`` or ``(Ptr, element)``."""
        if n is None:
            raise Abort("a missing target")
        t = n.type
        if t == "identifier":
            return ("local", th, self.text(n))
        if t == "parenthesized_expression":
            return self.lvalue(next(c for c in n.named_children if c.type != "comment"), th)
        if t == "subscript_expression":
            base = self.eval(n.child_by_field_name("argument"), th)
            idx_node = n.child_by_field_name("indices")
            if idx_node is None:
                raise Abort("a subscript without an index")
            idx = self.eval(next(c for c in idx_node.named_children if c.type != "comment"), th)
            if not isinstance(base, Ptr) or not isinstance(idx, int):
                raise Abort("a store through something other than an array and an integer index")
            return (base, base.offset + idx)
        if t == "pointer_expression" and self.text(n.child_by_field_name("operator")) == "*":
            p = self.eval(n.child_by_field_name("argument"), th)
            if not isinstance(p, Ptr):
                raise Abort("a store through a non-pointer")
            return (p, p.offset)
        raise Abort(f"a store to a {t.replace('_', ' ')}")

    def load(self, target: Any, th: int) -> Any:
        if target[0] == "local":
            return self.locals[target[1]].get(target[2])
        ptr, idx = target
        return self.read(ptr, idx)

    def store(self, target: Any, value: Any) -> None:
        if target[0] == "local":
            self.locals[target[1]][target[2]] = value
            return
        ptr, idx = target
        if ptr.space == "global":
            self.memory[(ptr.name, idx)] = value
            self.run.stores.append((ptr.name, idx, value, -1))
        else:
            self.shared.setdefault(ptr.name, {})[idx] = value

    def read(self, ptr: Ptr, idx: int) -> Any:
        if ptr.space == "global":
            if (ptr.name, idx) in self.memory:
                return self.memory[(ptr.name, idx)]
            if self._top >= 0:
                self.run.loads_in.add(self._top)
            return Sym.leaf(("ld", ptr.name, idx))
        cells = self.shared.get(ptr.name)
        if cells is None or idx not in cells:
            raise Abort(f"a read of {ptr.name}[{idx}] before any write")
        return cells[idx]

    # -- expressions --------------------------------------------------------------------------------

    def eval(self, n: tree_sitter.Node | None, th: int) -> Any:
        if n is None:
            raise Abort("a missing expression")
        self.tick()
        t = n.type
        if t == "number_literal":
            return _number(self.text(n))
        if t in ("true", "false"):
            return 1 if t == "true" else 0
        if t == "identifier":
            return self.name(self.text(n), th)
        if t in ("parenthesized_expression", "condition_clause"):
            return self.eval(next(c for c in n.named_children if c.type != "comment"), th)
        handler = _EXPRESSIONS.get(t)
        if handler is None:
            raise Abort(f"a {t.replace('_', ' ')}")
        return handler(self, n, th)

    def _subscript(self, n: tree_sitter.Node, th: int) -> Any:
        ptr, idx = self.lvalue(n, th)
        return self.read(ptr, idx)

    def _pointer(self, n: tree_sitter.Node, th: int) -> Any:
        if self.text(n.child_by_field_name("operator")) == "*":
            ptr, idx = self.lvalue(n, th)
            return self.read(ptr, idx)
        ptr, idx = self.lvalue(n.child_by_field_name("argument"), th)
        if isinstance(ptr, Ptr):
            return Ptr(ptr.space, ptr.name, idx)
        raise Abort("the address of a local")

    def _binary_expr(self, n: tree_sitter.Node, th: int) -> Any:
        op = self.text(n.child_by_field_name("operator"))
        a = self.eval(n.child_by_field_name("left"), th)
        if op == "&&" and not _truth(a):
            return 0
        if op == "||" and _truth(a):
            return 1
        return _binary(op, a, self.eval(n.child_by_field_name("right"), th))

    def _unary(self, n: tree_sitter.Node, th: int) -> Any:
        op = self.text(n.child_by_field_name("operator"))
        a = self.eval(n.child_by_field_name("argument"), th)
        if op == "-":
            return _sym(a).scale(-1) if isinstance(a, Sym) else -a
        if op == "+":
            return a
        if op == "!" and not isinstance(a, Sym):
            return int(not a)
        if op == "~" and isinstance(a, int):
            return ~a
        raise Abort(f"unary {op} of symbolic data")

    def _conditional(self, n: tree_sitter.Node, th: int) -> Any:
        c = self.eval(n.child_by_field_name("condition"), th)
        return self.eval(n.child_by_field_name("consequence" if _truth(c) else "alternative"), th)

    def _cast(self, n: tree_sitter.Node, th: int) -> Any:
        return _convert(
            self.eval(n.child_by_field_name("value"), th), self.text(n.child_by_field_name("type"))
        )

    def _sizeof(self, n: tree_sitter.Node, th: int) -> Any:
        from kernellsp.source.ir.cexpr import evaluate_text

        v = evaluate_text(self.text(n))
        if v is None:
            raise Abort("a sizeof it does not know")
        return v

    def name(self, name: str, th: int) -> Any:
        loc = self.locals[th]
        if name in loc:
            v = loc[name]
            if v is None:
                raise Abort(f"{name} read before it is set")
            return v
        if name in self.pointers:
            return Ptr("global", name)
        if name in self.params:
            return self.params[name]
        if name in self.consts:
            return self.consts[name]
        if name == "warpSize":
            return _WARP
        if name in ("INFINITY", "HUGE_VALF"):
            return math.inf
        if name in ("FLT_MAX",):
            return 3.4028234663852886e38
        raise Abort(f"the name {name}")

    def builtin(self, n: tree_sitter.Node, th: int) -> int:
        arg = self.text(n.child_by_field_name("argument"))
        fld = self.text(n.child_by_field_name("field"))
        if fld not in ("x", "y", "z"):
            raise Abort(f"member {fld}")
        if arg == "blockDim":
            return self.B if fld == "x" else 1
        if arg == "gridDim":
            return self.G if fld == "x" else 1
        if arg == "blockIdx":
            return self.b if fld == "x" else 0
        if arg == "threadIdx":
            return th if fld == "x" else 0
        raise Abort(f"member access {arg}.{fld}")

    def call(self, n: tree_sitter.Node, th: int, effect: bool = False) -> Any:
        fname = self.text(n.child_by_field_name("function")).replace(" ", "")
        args_node = n.child_by_field_name("arguments")
        args = [c for c in args_node.named_children if c.type != "comment"] if args_node is not None else []
        if fname in _BARRIERS:
            return 0
        if fname.startswith("__shfl_"):
            return self.shuffle(fname, args, th)
        if fname in ("cg::reduce", "cooperative_groups::reduce") and len(args) == 3:
            return self.group_reduce(args, th)
        fnode0 = n.child_by_field_name("function")
        if len(args) == 1 and fnode0 is not None and fnode0.type == "parenthesized_expression":
            # `(floatX)(x)`: a cast to a typedef the parser took for a call through a parenthesised name.
            return self.eval(args[0], th)
        if len(args) == 1 and self.is_type(fname):
            # A functional cast: `int(0)`, `T(0.)`, `float(x)`.
            return _convert(self.eval(args[0], th), fname)
        if fname.startswith("atomic"):
            return self.atomic(fname, args, th, effect)
        fnode = n.child_by_field_name("function")
        if fnode is not None and fnode.type == "field_expression":
            obj = self.locals[th].get(self.text(fnode.child_by_field_name("argument")))
            if isinstance(obj, _Group):
                return obj.method(self.text(fnode.child_by_field_name("field")), th, self.B)
        return self.function(fname, [self.eval(a, th) for a in args])

    def atomic(self, fname: str, args: list[tree_sitter.Node], th: int, effect: bool) -> Any:
        target = self.eval(args[0], th)
        value = self.eval(args[1], th) if len(args) > 1 else 1
        if not isinstance(target, Ptr):
            raise Abort("an atomic on a non-pointer")
        if target.space != "global":
            old = self.read(target, target.offset)
            if fname != "atomicAdd":
                raise Abort(f"{fname} in shared memory")
            self.shared[target.name][target.offset] = _binary("+", old, value)
            return old
        self.run.atomics.append((target.name, target.offset, fname, value, th))
        if not effect:
            raise Abort("an atomic whose old value is used")
        return 0

    def function(self, fname: str, vals: list[Any]) -> Any:
        """A pure function of values: min/max, math functions, conversions."""
        if fname in _MIN_MAX:
            if len(vals) != 2:
                raise Abort(f"{fname} of {len(vals)} arguments")
            return sym_max(vals[0], vals[1], "max" if "max" in fname else "min")
        if fname in ("__mul24", "__umul24") and len(vals) == 2 and all(isinstance(v, int) for v in vals):
            return vals[0] * vals[1]
        if fname == "__ldg" and vals and isinstance(vals[0], Ptr):
            return self.read(vals[0], vals[0].offset)
        if fname in _CONVERSIONS and len(vals) == 1:
            return vals[0]
        if fname in _MATH:
            if not any(isinstance(v, Sym) for v in vals):
                fn: Any = _MATH[fname]
                try:
                    return fn(*vals)
                except (ValueError, OverflowError, ZeroDivisionError) as exc:
                    raise Abort(f"{fname}: {exc}") from exc
            return _opaque(fname, *(v if not isinstance(v, Ptr) else repr(v) for v in vals))
        raise Abort(f"a call of {fname}")

    def is_type(self, name: str) -> bool:
        import re

        tparams = set(re.findall(r"(?:typename|class)\s+(\w+)", self.ir.fn.template_params or ""))
        return name in tparams or name in _TYPE_NAMES or name.endswith("_t")

    def group_reduce(self, args: list[tree_sitter.Node], th: int) -> Any:
        """``cg::reduce(tile, v, cg::plus<T>())`` over a 32-thread tile: every lane gets the tile's total."""
        op_text = self.text(args[2])
        base = th - th % _WARP
        lanes = [base + k for k in range(_WARP) if base + k < self.B]
        vals = [self.lane_value(args[1], lane) for lane in lanes]
        acc = vals[0]
        for v in vals[1:]:
            if "plus" in op_text:
                acc = _binary("+", acc, v)
            elif "greater" in op_text or "max" in op_text:
                acc = sym_max(acc, v, "max")
            elif "less" in op_text or "min" in op_text:
                acc = sym_max(acc, v, "min")
            else:
                raise Abort(f"cg::reduce with {op_text}")
        return acc

    def shuffle(self, fname: str, args: list[tree_sitter.Node], th: int) -> Any:
        if len(args) < 3:
            raise Abort(f"{fname} with {len(args)} arguments")
        width = int(self.eval(args[3], th)) if len(args) > 3 else _WARP
        lane_base = th - (th % width)
        lane = th % width
        k = self.eval(args[2], th)
        if not isinstance(k, int):
            raise Abort(f"{fname} by a symbolic lane")
        if fname == "__shfl_down_sync":
            src = lane + k
        elif fname == "__shfl_up_sync":
            src = lane - k
        elif fname == "__shfl_xor_sync":
            src = lane ^ k
        elif fname == "__shfl_sync":
            src = k % width
        else:
            raise Abort(fname)
        if src < 0 or src >= width:
            src = lane
        other = lane_base + src
        if other >= self.B:
            other = th
        return self.lane_value(args[1], other)

    def lane_value(self, n: tree_sitter.Node, lane: int) -> Any:
        key = (n.id, lane)
        if key not in self._lanes:
            self._lanes[key] = self.eval(n, lane)
        return self._lanes[key]


_NO_OPS = frozenset(
    ("comment", "empty_statement", "namespace_alias_definition", "using_declaration", "alias_declaration")
)
_STATEMENTS: dict[str, Any] = {
    "compound_statement": Block._compound,
    "declaration": Block.declare,
    "expression_statement": Block._expression_statement,
    "if_statement": Block.branch,
    "for_statement": Block.loop,
    "while_statement": Block.loop,
    "do_statement": Block.loop,
    "return_statement": Block._return,
    "break_statement": Block._jump,
    "continue_statement": Block._jump,
}
_EXPRESSIONS: dict[str, Any] = {
    "field_expression": Block.builtin,
    "subscript_expression": Block._subscript,
    "pointer_expression": Block._pointer,
    "binary_expression": Block._binary_expr,
    "unary_expression": Block._unary,
    "conditional_expression": Block._conditional,
    "cast_expression": Block._cast,
    "call_expression": Block.call,
    "sizeof_expression": Block._sizeof,
}
_TYPE_NAMES = frozenset(
    [
        "int",
        "unsigned",
        "float",
        "double",
        "long",
        "short",
        "char",
        "bool",
        "size_t",
        "half",
        "__half",
        "__nv_bfloat16",
        "uint",
        "ushort",
        "uchar",
    ]
)


def _truth(v: Any) -> bool:
    if isinstance(v, Sym | Ptr):
        raise Abort("a branch on data")
    return bool(v)


def _number(text: str) -> int | float:
    v = int_literal(text)
    if v is not None:
        return v
    try:
        return float(text.rstrip("fFlL"))
    except ValueError as exc:
        raise Abort(f"the literal {text}") from exc


_INT_TYPES = (
    "int",
    "unsigned",
    "long",
    "short",
    "size_t",
    "char",
    "uint",
    "int32_t",
    "uint32_t",
    "int64_t",
    "uint64_t",
)


def _convert(v: Any, ctype: str) -> Any:
    """A value converted as a declaration or a cast of ``ctype`` converts it (data stay symbolic)."""
    words = ctype.replace("const", "").replace("volatile", "").split()
    if isinstance(v, int | float) and not isinstance(v, bool) and words:
        if (
            any(w in ("float", "double", "__half", "half", "__nv_bfloat16") for w in words)
            and "*" not in ctype
        ):
            return float(v)
        if any(w in _INT_TYPES for w in words) and "*" not in ctype:
            return int(v) if not math.isinf(v) else v
    return v


def _binary(op: str, a: Any, b: Any) -> Any:
    if isinstance(a, Ptr) or isinstance(b, Ptr):
        return _pointer_arith(op, a, b)
    if isinstance(a, Sym) or isinstance(b, Sym):
        return _symbolic(op, a, b)
    if a is None or b is None:
        raise Abort(f"{op} on an unset value")
    if op in _COMPARE:
        return int(_COMPARE[op](a, b))
    if op in ("&&", "||"):
        return int(bool(b))
    if isinstance(a, int) and isinstance(b, int):
        return _integer(op, a, b)
    if op in ("+", "-", "*", "/"):
        try:
            return {"+": a + b, "-": a - b, "*": a * b}[op] if op != "/" else a / b
        except ZeroDivisionError as exc:
            raise Abort("a division by zero") from exc
    raise Abort(f"{op} on {type(a).__name__}")


_COMPARE: dict[str, Any] = {
    "<": lambda a, b: a < b,
    ">": lambda a, b: a > b,
    "<=": lambda a, b: a <= b,
    ">=": lambda a, b: a >= b,
    "==": lambda a, b: a == b,
    "!=": lambda a, b: a != b,
}


def _pointer_arith(op: str, a: Any, b: Any) -> Ptr:
    if isinstance(a, Ptr) and isinstance(b, int) and op in ("+", "-"):
        return Ptr(a.space, a.name, a.offset + (b if op == "+" else -b))
    if isinstance(b, Ptr) and isinstance(a, int) and op == "+":
        return Ptr(b.space, b.name, b.offset + a)
    raise Abort(f"{op} on pointers")


def _symbolic(op: str, a: Any, b: Any) -> Any:
    if op == "+":
        return _sym(a).add(b) if isinstance(a, Sym) else _sym(b).add(a)
    if op == "-":
        return _sym(a).add(b, -1)
    if op == "*":
        return sym_mul(a, b)
    if op == "/":
        return _opaque("/", a, b)
    raise Abort(f"{op} on symbolic data")


def _integer(op: str, a: int, b: int) -> int:
    """C's integer arithmetic: ``/`` and ``%`` truncate toward zero."""
    if op in ("/", "%"):
        got = c_divmod(op, a, b)
        if got is None:
            raise Abort("a division by zero")
        return got
    ops = {
        "+": lambda: a + b,
        "-": lambda: a - b,
        "*": lambda: a * b,
        "<<": lambda: a << b,
        ">>": lambda: a >> b,
        "&": lambda: a & b,
        "|": lambda: a | b,
        "^": lambda: a ^ b,
    }
    if op not in ops:
        raise Abort(f"integer {op}")
    return ops[op]()
