"""The element body: its streams, its other reads, its atomics, and the index variables it uses."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from kernellsp.optimize.propose.recipes._elementwise.model import ElementLoop, Form, Stream
from kernellsp.optimize.propose.recipes._elementwise.statements import (
    _depends_on_locals,
    _has_access,
    _index_decl,
)
from kernellsp.optimize.propose.recipes.base import (
    Decline,
    RecipeContext,
)
from kernellsp.source.ir import THREAD_SYMBOLS, Access, Atomic, KernelIR, Poly, walk


def _finish(
    ctx: RecipeContext,
    form: Form,
    prelude: list[Any],
    body: list[Any],
    element: Poly,
    bound: Poly,
    bound_text: str,
    lead: list[str],
    loop_var: str | None = None,
    chunk: Poly | None = None,
    chunk_text: str | None = None,
    reduce: str = "",
    accumulators: frozenset[str] = frozenset(),
    outside_writes: bool = False,
) -> ElementLoop | Decline:
    ir = ctx.ir
    # Index declarations inside the body (`int idx = row * width + col;`) are redefined from the element index.
    body = [st for st in body if not _index_decl(ir, st) or _has_access(ir, st)]
    if not body:
        return Decline("the element body is empty")
    in_body = _body_range(body)
    early_return = _early_return(ir, in_body)
    if isinstance(early_return, Decline):
        return early_return
    why = _inner_loop_decline(ir, in_body)
    if why is not None:
        return why
    lead_var = _lead_var(form, element, loop_var)
    written = ir.written()
    atomics = _body_atomics(ir, in_body, reduce)
    if isinstance(atomics, Decline):
        return atomics
    found = _body_streams(ir, in_body, element, lead_var, written, outside_writes)
    if isinstance(found, Decline):
        return found
    streams, replace, other_reads = found
    lead_syms = {lead_var} | ({loop_var} if loop_var else set()) | THREAD_SYMBOLS
    why = _other_reads_decline(ir, in_body, other_reads, lead_syms, streams, written)
    if why is not None:
        return why
    if early_return:
        _end_element_at_returns(ir, in_body, streams, replace, reduce)
    why = _streams_decline(ctx, streams, reduce)
    if why is not None:
        return why
    names = _index_redefinitions(ir, body, streams, form, element, loop_var)
    if isinstance(names, Decline):
        return names
    redefine, index_names = names
    why = _outside_local_assigned(ir, body, in_body, accumulators)
    if why is not None:
        return why
    return ElementLoop(
        form,
        body,
        prelude,
        element,
        bound,
        bound_text,
        sorted(streams.values(), key=lambda s: _param_pos(ir, s.param)),
        redefine,
        replace,
        chunk,
        chunk_text,
        index_names,
        atomics,
    )


def _body_range(body: list[Any]) -> Callable[[Any], bool]:
    """Is a node inside the element body (between its first statement's start and its last one's end)?"""
    body_start, body_end = body[0].start_byte, body[-1].end_byte

    def in_body(n: Any) -> bool:
        return body_start <= n.start_byte and n.end_byte <= body_end

    return in_body


def _early_return(ir: KernelIR, in_body: Callable[[Any], bool]) -> bool | Decline:
    """Does the body end an element with a plain ``return;`` (outside its loops)? Any other exit declines."""
    early_return = False
    for n in ir.exits:
        if in_body(n):
            if (
                n.type == "return_statement"
                and n.named_child_count == 0
                and not any(
                    in_body(lp.node) and lp.node.start_byte <= n.start_byte < lp.node.end_byte
                    for lp in ir.loops
                )
            ):
                # `return;` ends this element only: it becomes the lambda's return (outputs are preloaded).
                early_return = True
                continue
            return Decline(f"the element body exits early (`{ir.text(n)}`): not a straight-line element body")
    return early_return


def _inner_loop_decline(ir: KernelIR, in_body: Callable[[Any], bool]) -> Decline | None:
    """Why a loop inside the element body rules it out (a data-dependent trip count, or stores in it)."""
    for lp in ir.loops:
        if in_body(lp.node) and (
            lp.var is None
            or lp.step is None
            or len(lp.conds) != 1
            or _depends_on_locals(ir, lp.bound() or Poly())
        ):
            return Decline(
                "the element body loops a data-dependent number of times: its divergent compute, not "
                "the stream loads, bounds the kernel"
            )
    if any(in_body(lp.node) for lp in ir.loops):
        inner = next(lp for lp in ir.loops if in_body(lp.node))
        if any(
            a.space == "global"
            and in_body(a.node)
            and inner.node.start_byte <= a.node.start_byte < inner.node.end_byte
            and a.kind != "load"
            for a in ir.accesses
        ):
            return Decline("the element body writes memory inside a loop")
    return None


def _lead_var(form: Form, element: Poly, loop_var: str | None) -> str:
    """The symbol stream indices are measured along: ``gid.x``, or the chunk loop's counter."""
    lead_var = (
        "gid.x" if element.coeff("gid.x") == Poly.const(1) and form != "chunk" else (loop_var or "gid.x")
    )
    if form == "chunk" and loop_var is not None:
        lead_var = loop_var
    return lead_var


def _body_atomics(ir: KernelIR, in_body: Callable[[Any], bool], reduce: str) -> list[Atomic] | Decline:
    """The body's atomics, each of the shape ``reduce`` asks for (one address, or a data-dependent one)."""
    atomics = []
    for at in ir.atomics:
        if not in_body(at.node):
            return Decline(f"the atomic `{ir.text(at.node)}` is outside the element body")
        target = at.target
        if target is None or target.space != "global":
            return Decline(f"the atomic `{ir.text(at.node)}` does not target a global buffer")
        if target.index is None and reduce != "scatter":
            return Decline(
                f"the atomic `{ir.text(at.node)}` updates a data-dependent address (a scatter: the "
                "histogram recipe's shape)"
            )
        per_element = target.index is None or target.index.depends_on(THREAD_SYMBOLS | set(ir.locals))
        if reduce == "atomic" and per_element:
            return Decline(
                f"the atomic `{ir.text(at.node)}` updates an address that differs per element (a scatter: "
                "the histogram recipe's shape)"
            )
        if reduce == "scatter" and not per_element:
            return Decline(
                f"the atomic `{ir.text(at.node)}` updates one address for all elements (a reduction: the "
                "reduce recipe's shape)"
            )
        if at.result_used:
            return Decline(
                f"the value returned by `{ir.text(at.node)}` is used: the order of updates is observable"
            )
        atomics.append(at)
    return atomics


def _body_streams(
    ir: KernelIR,
    in_body: Callable[[Any], bool],
    element: Poly,
    lead_var: str,
    written: Any,
    outside_writes: bool,
) -> tuple[dict[str, Stream], dict[int, str], list[Access]] | Decline:
    """The streams the body accesses at the element's index (each access replaced by its register
    operand) and its other global reads, or why an access rules the body out."""
    streams: dict[str, Stream] = {}
    replace: dict[int, str] = {}
    other_reads: list[Access] = []
    for a in ir.accesses:
        if a.space != "global" or a.kind == "atomic":
            continue
        if not in_body(a.node):
            if outside_writes:
                continue
            if a.kind != "load" or a.base in written:
                return Decline(f"{a.base} is accessed outside the element body")
            continue
        st = _stream_position(a.index, element, lead_var)
        if st is None:
            if a.kind != "load":
                return Decline(
                    f"{a.base}[{a.index_text}] is written at an index that is not the element's "
                    f"(element {element.c_text()})"
                )
            other_reads.append(a)
            continue
        why = _add_stream_access(ir, in_body, streams, a, st)
        if why is not None:
            return why
        replace[a.node.id] = streams[a.base].slot(st[1])
    return streams, replace, other_reads


def _add_stream_access(
    ir: KernelIR, in_body: Callable[[Any], bool], streams: dict[str, Stream], a: Access, st: tuple[int, int]
) -> Decline | None:
    """Record access ``a`` at ``stride*e + offset`` (``st``) on its stream, or say why it cannot be one."""
    s, o = st
    pi = ir.param(a.base)
    if pi is None:
        return Decline(f"{a.base} is not a parameter")
    stream = streams.setdefault(a.base, Stream(a.base, pi.ctype, s))
    if stream.stride != s:
        return Decline(f"{a.base} is accessed with two strides ({stream.stride} and {s}) per element")
    if a.kind == "load":
        stream.reads.add(o)
    else:
        stream.writes.add(o)
        if a.kind == "update":
            stream.reads.add(o)
        body_guards = [g for g in a.guards if in_body(g.node)]
        if body_guards or any(in_body(lp.node) for lp in a.loops):
            stream.conditional_write = True
    stream.accesses.append((a, o))
    return None


def _computed_index(ir: KernelIR, a: Access) -> bool:
    """Is the (non-polynomial) index a function of the element and uniform values only, loading nothing?"""
    idx = a.node.child_by_field_name("indices") if a.node.type == "subscript_expression" else None
    if idx is None:
        return False
    for n in walk(idx):
        if n.type in (
            "subscript_expression",
            "pointer_expression",
            "assignment_expression",
            "update_expression",
        ):
            return False
        if n.type == "call_expression" and ir.text(n.child_by_field_name("function")) not in ("min", "max"):
            return False
    return ir.poly(next(iter(idx.named_children)), divmod=True) is not None


def _other_reads_decline(
    ir: KernelIR,
    in_body: Callable[[Any], bool],
    other_reads: list[Access],
    lead_syms: set[str],
    streams: dict[str, Stream],
    written: Any,
) -> Decline | None:
    """Reads not at the element's index must be of data no element writes, at an index no element moves."""
    for a in other_reads:
        if a.loops and any(in_body(lp.node) for lp in a.loops):
            return Decline(
                f"each element reads {a.base} in a loop ({a.base}[{a.index_text}]): a per-element reduction "
                "(the matmul/matvec/row-reduction recipes' shape), not a map"
            )
        if a.index is None:
            if _computed_index(ir, a) and a.base not in written:
                continue  # `gamma[(i / hw) % c]`: a broadcast computed from the element, read as written
            return Decline(
                f"{a.base}[{a.index_text}] is a data-dependent gather: its random accesses, not the "
                "stream loads, bound the kernel"
            )
        if a.index.depends_on(lead_syms) or _depends_on_locals(ir, a.index):
            return Decline(
                f"{a.base}[{a.index_text}] reads a neighbour of the element (a stencil), not the "
                "element itself"
            )
        if a.base in streams and streams[a.base].writes:
            return Decline(
                f"{a.base} is written per element and also read at {a.index_text}: elements depend on "
                "each other"
            )
        if a.base in written:
            return Decline(
                f"{a.base} is read at {a.index_text}, which is not the element's index, and written"
            )
    return None


def _end_element_at_returns(
    ir: KernelIR,
    in_body: Callable[[Any], bool],
    streams: dict[str, Stream],
    replace: dict[int, str],
    reduce: str,
) -> None:
    """A body with ``return;``: its outputs are preloaded and each return ends the lambda."""
    for strm in streams.values():
        if strm.writes:
            strm.conditional_write = True
    for n in ir.exits:
        if in_body(n) and n.type == "return_statement":
            replace[n.id] = "return kl_acc;" if reduce == "atomic" else "return;"


def _streams_decline(ctx: RecipeContext, streams: dict[str, Stream], reduce: str) -> Decline | None:
    """Why the streams cannot be vectorised (no output, outputs of a reduction, too sparse, unknown
    element size), marking partly written interleaved streams as conditionally written on the way."""
    if not reduce and not any(s.writes for s in streams.values()):
        return Decline("no output is written at the element's index")
    if reduce and any(s.writes for s in streams.values()):
        return Decline("the kernel writes per-element outputs as well as reducing: not a pure reduction")
    for strm in streams.values():
        if (
            strm.writes
            and strm.stride > 1
            and strm.writes != set(range(strm.stride))
            and not strm.reads >= set(range(strm.stride))
        ):
            strm.conditional_write = True
        if strm.stride > 4:
            return Decline(
                f"{strm.param} is read with a stride of {strm.stride} elements per element: too sparse to vectorise"
            )
        if _bytes(ctx, strm) is None:
            return Decline(f"the element type of {strm.param} ({strm.ctype}) has no known size")
        pinfo = ctx.ir.param(strm.param)
        if pinfo is None or not pinfo.is_pointer:
            return Decline(f"{strm.param} is not a pointer parameter")
    return None


def _index_redefinitions(
    ir: KernelIR,
    body: list[Any],
    streams: dict[str, Stream],
    form: Form,
    element: Poly,
    loop_var: str | None,
) -> tuple[list[str], list[str]] | Decline:
    """The lambda's declarations of the user's index variables from ``kl_i``, and the element index's names."""
    # Identifiers of the body that are thread-dependent must be expressible from the element index.
    redefine: list[str] = []
    index_names: list[str] = []
    used = _identifiers_outside_streams(ir, body, streams)
    if used & {"threadIdx", "blockIdx", "blockDim", "gridDim"}:
        return Decline("the element body reads threadIdx/blockIdx/blockDim/gridDim directly")
    for name in sorted(used):
        var = ir.locals.get(name)
        if name == loop_var:
            if element == Poly.sym(loop_var):
                redefine.append(
                    f"const {_decl_type(ir, name)} {name} = static_cast<{_decl_type(ir, name)}>(kl_i);"
                )
                index_names.append(name)
                continue
            return Decline(f"the element body uses the loop counter {name} outside the stream accesses")
        if var is None or name not in ir.index_vars:
            if var is not None and var.points_to is not None:
                return Decline(f"the element body uses the local pointer {name} outside a subscript")
            continue
        got = _redefine_index_var(ir, name, body, form, element)
        if isinstance(got, Decline):
            return got
        redefine.append(got[0])
        if got[1]:
            index_names.append(name)
    if not index_names:
        index_names = [n for n, p in ir.index_vars.items() if p == element] or [str(element)]
    return redefine, index_names


def _identifiers_outside_streams(ir: KernelIR, body: list[Any], streams: dict[str, Stream]) -> set[str]:
    """The identifiers the body uses outside its stream accesses."""
    used: set[str] = set()
    for stmt in body:
        for n in walk(stmt):
            if any(
                n.start_byte >= a.node.start_byte and n.end_byte <= a.node.end_byte
                for a, _ in (x for s in streams.values() for x in s.accesses)
            ):
                continue
            if n.type == "identifier":
                used.add(ir.text(n))
    return used


def _redefine_index_var(
    ir: KernelIR, name: str, body: list[Any], form: Form, element: Poly
) -> tuple[str, bool] | Decline:
    """The lambda's declaration of index variable ``name`` from ``kl_i`` and whether it is the element index."""
    ip = ir.index_vars[name]
    if _assigned_in(ir, name, body):
        return Decline(f"the element body assigns the index variable {name}")
    t = _decl_type(ir, name)
    if ip == element:
        return f"const {t} {name} = static_cast<{t}>(kl_i);", True
    if form == "2d" and ip == Poly.sym("gid.x"):
        return f"const {t} {name} = static_cast<{t}>(kl_i % ({_poly_ll(bound_text_w(element))}));", False
    if form == "2d" and ip == Poly.sym("gid.y"):
        return f"const {t} {name} = static_cast<{t}>(kl_i / ({_poly_ll(bound_text_w(element))}));", False
    if form == "3d" and ip in (Poly.sym("gid.x"), Poly.sym("gid.y"), Poly.sym("gid.z")):
        w, plane = _poly_ll(element.coeff("gid.y")), _poly_ll(element.coeff("gid.z"))
        digit = {
            "gid.x": f"kl_i % ({w})",
            "gid.y": f"(kl_i / ({w})) % (({plane}) / ({w}))",
            "gid.z": f"kl_i / ({plane})",
        }[next(iter(ip.symbols()))]
        return f"const {t} {name} = static_cast<{t}>({digit});", False
    return Decline(f"the element body uses {name} = {ip}, which is not the element index")


def _outside_local_assigned(
    ir: KernelIR, body: list[Any], in_body: Callable[[Any], bool], accumulators: frozenset[str]
) -> Decline | None:
    # Locals assigned inside the body but declared outside it would be shared by all elements a thread handles.
    for stmt in body:
        for n in walk(stmt):
            if n.type in ("assignment_expression", "update_expression"):
                tgt = n.child_by_field_name("left") or n.child_by_field_name("argument")
                if tgt is not None and tgt.type == "identifier":
                    var = ir.locals.get(ir.text(tgt))
                    if var is not None and not in_body(var.decl) and ir.text(tgt) not in accumulators:
                        return Decline(
                            f"the element body assigns {ir.text(tgt)}, which is declared outside it"
                        )
    return None


def bound_text_w(element: Poly) -> Poly:
    """The row width ``W`` of a 2-D element index ``W*gid.y + gid.x``."""
    return element.coeff("gid.y")


def _poly_ll(p: Poly) -> str:
    return p.c_text()


def _param_pos(ir: KernelIR, name: str) -> int:
    p = ir.param(name)
    return p.position if p else 0


def _assigned_in(ir: KernelIR, name: str, body: list[Any]) -> bool:
    for stmt in body:
        for n in walk(stmt):
            if n.type in ("assignment_expression", "update_expression"):
                tgt = n.child_by_field_name("left") or n.child_by_field_name("argument")
                if tgt is not None and ir.text(tgt) == name:
                    return True
    return False


def _decl_type(ir: KernelIR, name: str) -> str:
    var = ir.locals.get(name)
    t = (var.ctype if var is not None else "long long").replace("const ", "").strip()
    return t or "long long"


def _stream_position(index: Poly | None, element: Poly, lead: str) -> tuple[int, int] | None:
    """``(s, o)`` with ``index == s*element + o``, ``1 <= s``, ``0 <= o < s``; else ``None``."""
    if index is None:
        return None
    s_poly = index.coeff(lead)
    lead_coeff = element.coeff(lead)
    if s_poly.value is None or lead_coeff.value is None or lead_coeff.value == 0:
        return None
    if s_poly.value % lead_coeff.value:
        return None
    s = s_poly.value // lead_coeff.value
    if s < 1:
        return None
    rest = index - element * s
    if rest.value is None or not 0 <= rest.value < s:
        return None
    return s, rest.value


def _bytes(ctx: RecipeContext, s: Stream) -> int | None:
    b = ctx.elem_bytes(s.param)
    return b if b in (1, 2, 4, 8) else None
