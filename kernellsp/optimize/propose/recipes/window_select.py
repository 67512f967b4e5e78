"""Window order statistics (median and rank filters): a branch-free selection in registers instead of a sort.

Matches kernels that gather a window of values per point into a local array and sort it to read one
element by rank: a median filter (``window[count / 2]``), a min/max or percentile filter. The shape
recognised, in any spelling: a local array ``T w[CAP]``; a counted *fill* loop that stores values
read from global memory into it (``w[count++] = in[clamp(i + j)]``, ``w[k] = ...``); then a *sort*
region whose statements only permute the array — every store into it takes a value read from it
(directly, or through a temporary that holds one), nothing else is written, no global memory, no
calls — and which compares elements of it; then one store of ``w[K]`` to the output.

Why: the sort's data-dependent loops index the array at run time, so ptxas keeps it in local
memory (the stack, cached in L1), and its branches diverge per lane. The rewrite keeps the user's
gather and replaces the sort and the read by the element of rank ``K`` as a *stable* sort would
place it — its rank is ``#{b : w[b] < w[a]} + #{b < a : w[b] == w[a]}`` (ascending) — computed for
every ``a`` by comparisons in fully unrolled loops over the array's capacity, so the window lives
in registers and every lane runs the same instructions. Ties are broken by position as the
stable sort does, so the output is the very element the user's code stores (bit for bit, signed
zeros included). Which order the sort produces is not proved from the text: the ``order``
parameter proposes ascending first and descending second, and the correctness gate decides (for
the middle of an odd window both give the same element).

When the window's length depends on a scalar argument (a radius), the spec's main shape value is
specialised (``if (radius == 7)``: the gather's trip count becomes a constant, so the array's
indices are constants once unrolled); other values run the user's code unchanged.

Declines without a local array, with several, when the region between the gather and the store
writes anything but the array and its own temporaries, reads global memory, calls functions or
never compares two elements, when the array is read anywhere else, and when the selected index
depends on the array's contents.
"""

from __future__ import annotations

import re
import textwrap
from dataclasses import dataclass, field
from typing import Any

from kernellsp.optimize.propose.recipes.base import (
    Decline,
    Match,
    RecipeContext,
    RecipeError,
    Rewrite,
    define_values,
    indent,
    replace_nodes,
    signature_text,
)
from kernellsp.source import exprs
from kernellsp.source.ir import KernelIR, walk

NAME = "window-select"
ARCHETYPE = "window-select"
RULES = ("KL508", "KL604", "KL601", "KL502")
PARAMS: dict[str, list[Any]] = {"order": ["asc", "desc"]}

#: Largest capacity whose all-pairs selection is unrolled (CAP^2 comparisons per point).
MAX_CAPACITY = 64
_CALLS_ALLOWED = frozenset({"min", "max", "fminf", "fmaxf"})


@dataclass
class Window:
    """What :func:`match` found (statement indexes are into the kernel body's top-level statements)."""

    array: str
    ctype: str
    capacity: str
    fill: int
    sort: tuple[int, int]  # [first, last) statements of the sort region
    store: int
    count: str
    rank_expr: str
    #: Scalar arguments the gather's trip count depends on, with their main-shape values.
    special: dict[str, int] = field(default_factory=dict)


def _local_arrays(ir: KernelIR) -> list[Any]:
    out = []
    for n in walk(ir.body):
        if n.type != "declaration" or "__shared__" in ir.text(n):
            continue
        for d in n.named_children:
            if d.type == "array_declarator":
                out.append((n, d))
    return out


def _subscripts_of(ir: KernelIR, node: Any, array: str) -> list[Any]:
    out = []
    for n in walk(node):
        if n.type == "subscript_expression":
            base = n.child_by_field_name("argument")
            if base is not None and ir.text(base) == array:
                out.append(n)
    return out


def _assignments(node: Any) -> list[Any]:
    return [n for n in walk(node) if n.type == "assignment_expression"]


def _declared_in(ir: KernelIR, node: Any) -> set[str]:
    names = set()
    for n in walk(node):
        if n.type in ("init_declarator", "declaration"):
            d = n.child_by_field_name("declarator")
            if d is not None and d.type == "identifier":
                names.add(ir.text(d))
    return names


def _sort_region_problem(ir: KernelIR, stmts: list[Any], array: str, count: str) -> str | None:
    """Why statements ``stmts`` do not (visibly) just permute ``array``, or None."""
    if not stmts:
        return "no statements between the gather and the store: nothing is sorted"
    temps: set[str] = set()
    for s in stmts:
        temps |= _declared_in(ir, s)
    for check in (_region_flow_problem, _region_write_problem, _region_temp_problem):
        why = check(ir, stmts, array, count, temps)
        if why:
            return why
    if any(_in_any(a.node, stmts) for a in ir.global_accesses()):
        return "the sort region reads or writes global memory"
    if not any(_compares_elements(ir, n, array) for s in stmts for n in walk(s)):
        return f"the region between the gather and the store never compares two elements of {array}"
    return None


def _compares_elements(ir: KernelIR, n: Any, array: str) -> bool:
    """``n`` is an ordering comparison with an element of ``array`` on one side."""
    if n.type != "binary_expression":
        return False
    op = n.child_by_field_name("operator")
    return op is not None and ir.text(op) in ("<", ">", "<=", ">=") and bool(_subscripts_of(ir, n, array))


def _region_flow_problem(
    ir: KernelIR, stmts: list[Any], array: str, count: str, temps: set[str]
) -> str | None:
    """Jumps out of the region and calls (only min/max are allowed)."""
    for s in stmts:
        for n in walk(s):
            if n.type in ("return_statement", "goto_statement"):
                return "the sort region returns or jumps"
            if n.type == "call_expression":
                fn = n.child_by_field_name("function")
                if fn is None or ir.text(fn) not in _CALLS_ALLOWED:
                    return f"the sort region calls {ir.text(fn) if fn is not None else 'a function'}"
            if n.type == "update_expression":
                arg = n.child_by_field_name("argument")
                name = ir.text(arg) if arg is not None else ""
                if name not in temps:
                    return f"the sort region changes {name}, declared outside it"
    return None


def _region_write_problem(
    ir: KernelIR, stmts: list[Any], array: str, count: str, temps: set[str]
) -> str | None:
    """Writes: plain ``=`` into the array (of an element or a temporary) and into the region's own locals."""
    for s in stmts:
        for a in _assignments(s):
            left, right, op = (a.child_by_field_name(f) for f in ("left", "right", "operator"))
            if left is None or right is None:
                return "an assignment without two sides"
            if left.type == "subscript_expression":
                base = left.child_by_field_name("argument")
                if base is None or ir.text(base) != array:
                    return f"the sort region writes {ir.text(left)}"
                from_array = right.type == "subscript_expression" and _subscripts_of(ir, right, array)
                if (op is not None and ir.text(op) != "=") or (
                    not from_array and ir.text(right).strip() not in temps
                ):
                    return f"a value that is not an element of {array} is stored into it ({ir.text(a)})"
            elif left.type != "identifier":
                return f"the sort region writes {ir.text(left)}"
            elif ir.text(left) == count or ir.text(left) not in temps:
                return f"the sort region writes {ir.text(left)}, declared outside it"
    return None


def _region_temp_problem(
    ir: KernelIR, stmts: list[Any], array: str, count: str, temps: set[str]
) -> str | None:
    """A temporary stored into the array must only ever hold one of its elements (initialiser and assignments)."""
    for s in stmts:
        for n in walk(s):
            if n.type == "init_declarator":
                d, v = n.child_by_field_name("declarator"), n.child_by_field_name("value")
            elif n.type == "assignment_expression" and (lhs := n.child_by_field_name("left")) is not None:
                d, v = lhs, n.child_by_field_name("right")
            else:
                continue
            if d is None or v is None or d.type != "identifier" or ir.text(d) not in temps:
                continue
            holds_element = v.type == "subscript_expression" and bool(_subscripts_of(ir, v, array))
            if not holds_element and _stored_into(ir, stmts, array, ir.text(d)):
                return f"{ir.text(d)} is stored into {array} but does not hold one of its elements"
    return None


def _stored_into(ir: KernelIR, stmts: list[Any], array: str, name: str) -> bool:
    for s in stmts:
        for a in _assignments(s):
            left, right = a.child_by_field_name("left"), a.child_by_field_name("right")
            if (
                left is not None
                and right is not None
                and left.type == "subscript_expression"
                and ir.text(right).strip() == name
                and _subscripts_of(ir, left, array)
            ):
                return True
    return False


def _in_any(node: Any, stmts: list[Any]) -> bool:
    return any(s.start_byte <= node.start_byte and node.end_byte <= s.end_byte for s in stmts)


def _gathered_count(ir: KernelIR, gather: Any, array: str) -> str | None:
    """How many elements the gather leaves in ``array``, as C text: ``c`` when it stores through
    ``array[c++]``; ``B`` when the gather loop ``for (v = 0; v < B; ++v)`` stores through ``array[v]``.
    Not the sort's loop bounds: a bubble or selection sort runs its passes to ``n - 1``."""
    var, bound = _counted_from_zero(ir, gather)
    for a in _assignments(gather):
        left = a.child_by_field_name("left")
        indices = left.child_by_field_name("indices") if left is not None else None
        inner = next(iter(indices.named_children), None) if indices is not None else None
        if left is None or not _subscripts_of(ir, left, array) or inner is None:
            continue
        if inner.type == "update_expression" and ir.text(inner).endswith("++"):
            arg = inner.child_by_field_name("argument")
            if arg is not None and arg.type == "identifier":
                return ir.text(arg)
        if inner.type == "identifier" and var is not None and ir.text(inner) == var:
            return bound
    return None


def _counted_from_zero(ir: KernelIR, loop: Any) -> tuple[str | None, str | None]:
    """(variable, exclusive bound text) of ``for (int v = 0; v < B; ++v)`` (``<=``: ``(B) + 1``), else Nones."""
    lp = next((x for x in ir.loops if x.node == loop), None)
    cond = loop.child_by_field_name("condition")
    if lp is None or lp.var is None or cond is None or cond.type != "binary_expression":
        return None, None
    if lp.start is None or lp.step is None or str(lp.start) != "0" or str(lp.step) != "1":
        return None, None
    left, op, right = (cond.child_by_field_name(f) for f in ("left", "operator", "right"))
    if (
        left is None
        or op is None
        or right is None
        or ir.text(left) != lp.var
        or ir.text(op) not in ("<", "<=")
    ):
        return None, None
    return lp.var, ir.text(right) if ir.text(op) == "<" else f"({ir.text(right)}) + 1"


def _trip_count_names(ir: KernelIR, stmts: list[Any], fill: int) -> set[str]:
    """Names the gather loop's header depends on, through the locals declared before it."""
    loop = stmts[fill]
    names: set[str] = set()
    for f in ("initializer", "condition", "update"):
        h = loop.child_by_field_name(f)
        if h is not None:
            names |= ir.identifiers(h)
    defs: dict[str, Any] = {}
    for s in stmts[:fill]:
        for d in s.named_children if s.type == "declaration" else []:
            dn = d.child_by_field_name("declarator") if d.type == "init_declarator" else None
            if dn is not None and dn.type == "identifier":
                defs[ir.text(dn)] = d.child_by_field_name("value")
    seen: set[str] = set()
    todo = list(names)
    while todo:
        n = todo.pop()
        if n not in seen:
            seen.add(n)
            todo += list(ir.identifiers(defs[n])) if defs.get(n) is not None else []
    return seen


def _special_params(ctx: RecipeContext, stmts: list[Any], fill: int) -> dict[str, int] | str:
    """Scalar arguments the gather's trip count depends on (through locals declared before it)."""
    ir = ctx.ir
    scalars = {p.name for p in ir.params if not p.is_pointer}
    needed = sorted(_trip_count_names(ir, stmts, fill) & scalars)
    if not needed:
        return {}
    values = ctx.main_param_values()
    if values is None:
        return "the window's length depends on " + ", ".join(needed) + " and the spec gives no shape"
    missing = [n for n in needed if n not in values]
    if missing:
        return f"the window's length depends on {missing[0]}, whose main-shape value the spec does not give"
    return {n: values[n] for n in needed}


def _the_array(ir: KernelIR) -> tuple[str, str, str] | Decline:
    """The one local array: (name, capacity text, element type)."""
    arrays = _local_arrays(ir)
    if not arrays:
        return Decline("no local array: nothing is gathered and sorted")
    if len(arrays) > 1:
        return Decline("several local arrays")
    decl, adecl = arrays[0]
    name_node = adecl.child_by_field_name("declarator")
    size_node = adecl.child_by_field_name("size")
    type_node = decl.child_by_field_name("type")
    if name_node is None or size_node is None or type_node is None:
        return Decline("a local array without a declared size")
    return ir.text(name_node), ir.text(size_node), ir.text(type_node)


def _capacity(ctx: RecipeContext, capacity: str) -> int | None:
    """The array's declared size through the file's ``#define`` constants, if at most :data:`MAX_CAPACITY`."""
    try:
        cap = exprs.evaluate(capacity, define_values(ctx.model))
    except exprs.ExprError:
        return None
    return cap if isinstance(cap, int) and not isinstance(cap, bool) and 0 < cap <= MAX_CAPACITY else None


def match(ctx: RecipeContext) -> Match | Decline:
    ir = ctx.ir
    if ir.atomics or ir.barriers or ir.warp_ops:
        return Decline("atomics, barriers or warp operations: not a per-point window filter")
    found = _the_array(ir)
    if isinstance(found, Decline):
        return found
    array, capacity, ctype = found
    stmts = ir.flat_statements()
    fill = next(
        (
            k
            for k, s in enumerate(stmts)
            if s.type == "for_statement"
            and any(
                (left := a.child_by_field_name("left")) is not None and _subscripts_of(ir, left, array)
                for a in _assignments(s)
            )
        ),
        None,
    )
    if fill is None:
        return Decline(f"no counted loop fills {array}")
    store = next(
        (
            k
            for k, s in enumerate(stmts)
            if k > fill
            and s.type == "expression_statement"
            and (a := next(iter(_assignments(s)), None)) is not None
            and (right := a.child_by_field_name("right")) is not None
            and right.type == "subscript_expression"
            and _subscripts_of(ir, right, array)
            and (left := a.child_by_field_name("left")) is not None
            and left.type == "subscript_expression"
            and not _subscripts_of(ir, left, array)
        ),
        None,
    )
    if store is None:
        return Decline(f"no store of one element of {array} to global memory after the gather")
    if store != len(stmts) - 1:
        return Decline("statements follow the store of the selected element")
    region = stmts[fill + 1 : store]
    count = _gathered_count(ir, stmts[fill], array)
    if count is None:
        return Decline(
            f"how many elements the gather leaves in {array} is not known (it stores through "
            f"{array}[c++] or through {array}[v] of a loop from 0)"
        )
    why = _sort_region_problem(ir, region, array, count)
    if why:
        return Decline(why)
    for s in stmts[:fill]:
        if _subscripts_of(ir, s, array):
            return Decline(f"{array} is used before the gather")
    right = _assignments(stmts[store])[0].child_by_field_name("right")
    indices = right.child_by_field_name("indices") if right is not None else None
    idx = next(iter(indices.named_children), None) if indices is not None else None
    if idx is None or _subscripts_of(ir, idx, array):
        return Decline("the selected index depends on the array's contents")
    cap = _capacity(ctx, capacity)
    if cap is None:
        return Decline(f"the array's capacity {capacity} is not a constant of at most {MAX_CAPACITY}")
    special = _special_params(ctx, stmts, fill)
    if isinstance(special, str):
        return Decline(special)
    w = Window(array, ctype, capacity, fill, (fill + 1, store), store, count, ir.text(idx), special)
    binding = {
        "window": f"{ctype} {array}[{capacity}] ({cap})",
        "gather": f"line {stmts[fill].start_point[0] + 1}",
        "sort": f"lines {region[0].start_point[0] + 1}-{region[-1].end_point[0] + 1} (replaced)",
        "selected": f"{array}[{w.rank_expr}] of {count}",
    }
    if special:
        binding["specialised"] = ", ".join(f"{k} == {v}" for k, v in special.items())
    return Match(binding, w)


def points(ctx: RecipeContext, m: Match) -> list[dict[str, Any]]:
    return [{"order": o} for o in PARAMS["order"]]


def generate(ctx: RecipeContext, m: Match, params: dict[str, Any]) -> Rewrite:
    w: Window = m.data
    order = params.get("order", "asc")
    if order not in ("asc", "desc"):
        raise RecipeError("order is asc or desc")
    ir = ctx.ir
    stmts = ir.flat_statements()
    fill, store = stmts[w.fill], stmts[w.store]
    less = "<" if order == "asc" else ">"
    # The fast path is the user's body with: the specialised sizes as constants up to the gather, the gather's
    # loop unrolled (with a constant trip count its stores get constant indices: registers), the sort region
    # (and the comments in it) gone, and the store taking the selected element.
    special = {
        n.id: f"({w.special[ir.text(n)]})"
        for s in stmts[: w.fill + 1]
        for n in walk(s)
        if n.type == "identifier"
        and ir.text(n) in w.special
        and not (n.parent is not None and n.parent.type == "field_expression")
    }
    rep = {n.id: special[n.id] for s in stmts[: w.fill] for n in walk(s) if n.id in special}
    # (the gather keeps its own lines' indentation: the pragma goes on a line of its own before it)
    rep[fill.id] = "#pragma unroll\n" + " " * fill.start_point[1] + replace_nodes(ir, fill, special)
    for n in fill.parent.named_children if fill.parent is not None else []:
        if fill.end_byte <= n.start_byte and n.end_byte <= store.start_byte:
            rep[n.id] = ""
    right = _assignments(store)[0].child_by_field_name("right")
    assert right is not None
    select = f"""// The element of rank {w.rank_expr} among the first {w.count} as a stable {"ascending" if order == "asc" else "descending"} sort places it
// (kernellsp recipe {NAME}): every comparison unrolled over the capacity, so {w.array} stays in registers.
const int kl_n = (int)({w.count});
const int kl_k = (int)({w.rank_expr});
{w.ctype} kl_selected = {w.array}[0];
#pragma unroll
for (int kl_a = 0; kl_a < ({w.capacity}); ++kl_a) {{
    if (kl_a < kl_n) {{
        int kl_rank = 0;
        #pragma unroll
        for (int kl_b = 0; kl_b < ({w.capacity}); ++kl_b) {{
            if (kl_b < kl_n) {{
                kl_rank += ({w.array}[kl_b] {less} {w.array}[kl_a]) || (kl_b < kl_a && {w.array}[kl_b] == {w.array}[kl_a]);
            }}
        }}
        if (kl_rank == kl_k) kl_selected = {w.array}[kl_a];
    }}
}}
"""
    rep[store.id] = _continued(
        select + replace_nodes(ir, store, {right.id: "kl_selected"}), store.start_point[1]
    )
    fast = _statements_of(replace_nodes(ir, ir.body, rep))
    if w.special:
        cond = " && ".join(f"{k} == {v}" for k, v in w.special.items())
        code = (
            f"{signature_text(ctx)}\n{{\n"
            f"    if ({cond}) {{  // the spec's main shape: a constant window length\n"
            f"{indent(fast, 8)}\n"
            "    } else {\n"
            f"{indent(_statements_of(ir.text(ir.body)), 8)}\n"
            "    }\n}\n"
        )
    else:
        code = f"{signature_text(ctx)}\n{{\n{indent(fast, 4)}\n}}\n"
    return Rewrite(ctx.kernel.name, code)


def _continued(text: str, col: int) -> str:
    """``text`` put where a statement at column ``col`` was: its lines after the first indented to ``col``."""
    first, *rest = text.split("\n")
    return "\n".join([first, *((" " * col + ln) if ln.strip() else "" for ln in rest)])


def _statements_of(body: str) -> str:
    """A ``{ ... }`` block's statements, without the braces, dedented, blank runs squeezed."""
    inner = textwrap.dedent(body.strip()[1:-1].strip("\n"))
    return re.sub(r"\n\s*\n(\s*\n)+", "\n\n", inner).strip("\n")
