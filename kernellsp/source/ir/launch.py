"""The launch model: every kernel of an entry, with its grid, block and scalar arguments at every declared shape.

One model for every reader. A ``__global__`` entry is launched as its spec says (``launch``
evaluated over the resolved sizes of each shape, scalar arguments from ``args``); a kernel launched
by a host-launcher entry is launched as the launcher says: its parameters take the spec's values,
its statements before the launch are followed (``int threads = 256;``,
``dim3 grid((n + 15) / 16, m);``, ``const int blocks = ceil(...)``), and the launch site's
configuration and arguments are evaluated in that environment (:mod:`kernellsp.source.ir.cexpr`).

Canonicalisation passes ask it what the launch implies ("thread ``x`` ranges over ``[0, W)`` exactly
at every shape", "the grid has at least one block per row"), recipes ask it for block sizes.
A value that cannot be evaluated at some shape makes the model ``complete = False``; a reader that
needs a fact for every shape then declines to rely on it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Literal

from kernellsp.source import exprs
from kernellsp.source import spec as specmod
from kernellsp.source.ir.cexpr import (
    EnvValue,
    dim3_of,
    evaluate_node,
    expand_macros,
    file_constants,
    parse_expression,
    return_functions,
)

if TYPE_CHECKING:
    import tree_sitter

    from kernellsp.source.model import Function, LaunchSite, SourceModel

Triple = tuple[int, int, int]


@dataclass(frozen=True)
class LaunchShape:
    """One declared shape: grid and block triples and the kernel's integer scalar arguments."""

    grid: Triple
    block: Triple
    params: Mapping[str, int]
    sizes: Mapping[str, exprs.Value]

    def threads(self, axis: int) -> int:
        """Threads launched along ``axis`` (grid times block)."""
        return self.grid[axis] * self.block[axis]


@dataclass
class KernelLaunch:
    """How one kernel is launched at each shape of its entry's spec (main shape first)."""

    kernel: str
    source: Literal["spec", "host"]
    shapes: list[LaunchShape] = field(default_factory=list)
    #: Every declared shape evaluated (a reader needing a fact for all of them checks this).
    complete: bool = True
    #: Pointer parameters that always receive a buffer the spec allocates (never a null pointer).
    buffers: frozenset[str] = frozenset()
    #: The spec dtype (``f32``, ``f16``...) of each such buffer.
    dtypes: dict[str, str] = field(default_factory=dict)
    #: Shapes whose grid the host computes from the device (not known before a run): grid ``(0, 1, 1)``.
    unknown_grid: list[LaunchShape] = field(default_factory=list)

    def block_dim(self, axis: int) -> int | None:
        """The block's extent along ``axis`` when it is the same at every shape."""
        vals = {s.block[axis] for s in self.shapes}
        return vals.pop() if len(vals) == 1 and self.complete else None

    def params_equal_to(self, values: list[int]) -> list[str]:
        """Integer scalar parameters whose value equals ``values[i]`` at shape ``i``, for every shape."""
        if not self.complete or len(values) != len(self.shapes) or not self.shapes:
            return []
        names = set(self.shapes[0].params)
        return sorted(
            n for n in names if all(s.params.get(n) == v for s, v in zip(self.shapes, values, strict=True))
        )

    def covers_exactly(self, axis: int) -> list[int] | None:
        """Threads along ``axis`` per shape, when known at every shape."""
        if not self.complete or not self.shapes:
            return None
        return [s.threads(axis) for s in self.shapes]


def launch_model(
    model: SourceModel, entry: str, bound: specmod.BoundSpec | None = None
) -> dict[str, KernelLaunch]:
    """The launch of every kernel ``entry`` runs, by kernel name (empty without a spec)."""
    fn = model.function(entry)
    bound = bound if bound is not None else specmod.entry_spec(model, entry)
    if fn is None or not fn.has_body or bound is None:
        return {}
    shapes = _resolved_shapes(bound.spec)
    if fn.kind == "global":
        return {fn.name: _spec_launch(fn, bound.spec, shapes)}
    out: dict[str, KernelLaunch] = {}
    callers = model.launchers(entry)
    for site in model.launch_sites:
        if site.caller not in callers or site.kernel in out:
            continue
        kern = model.function(site.kernel)
        if kern is None or not kern.has_body:
            continue
        out[site.kernel] = _host_launch(model, fn, kern, site, bound.spec, shapes)
    return out


def _resolved_shapes(spec: specmod.KernelSpec) -> list[dict[str, exprs.Value] | None]:
    out: list[dict[str, exprs.Value] | None] = []
    for shape in spec.all_shapes():
        try:
            out.append(spec.resolved_sizes(shape))
        except exprs.ExprError:
            out.append(None)
    return out


def _scalar_values(
    spec: specmod.KernelSpec, names: Mapping[str, exprs.Value], params: list[str]
) -> dict[str, int] | None:
    vals: dict[str, int] = {}
    for p in params:
        a = spec.args.get(p)
        if a is None or a.value is None:
            continue
        try:
            v = exprs.evaluate(a.value, dict(names))
        except exprs.ExprError:
            continue
        if isinstance(v, int) and not isinstance(v, bool):
            vals[p] = v
        elif isinstance(v, float) and v.is_integer():
            vals[p] = int(v)
    return vals


def _spec_launch(
    fn: Function, spec: specmod.KernelSpec, shapes: list[dict[str, exprs.Value] | None]
) -> KernelLaunch:
    out = KernelLaunch(fn.name, "spec")
    out.buffers = frozenset(p.name for p in fn.params if p.is_pointer and _is_buffer(spec, p.name))
    out.dtypes = {n: str(spec.args[n].dtype) for n in out.buffers if spec.args[n].dtype}
    if spec.launch is None:
        out.complete = False
        return out
    for names in shapes:
        dims = specmod.launch_dims(spec.launch, dict(names)) if names is not None else "unresolved"
        if names is None or isinstance(dims, str):
            out.complete = False
            continue
        grid, block, _smem = dims
        params = _scalar_values(spec, names, [p.name for p in fn.params if not p.is_pointer]) or {}
        out.shapes.append(LaunchShape(_triple(grid), _triple(block), params, names))
    return out


def _is_buffer(spec: specmod.KernelSpec, name: str) -> bool:
    a = spec.args.get(name)
    return a is not None and a.is_buffer


def _site_buffers(
    model: SourceModel,
    spec: specmod.KernelSpec,
    entry: Function,
    chain: list[tuple[str, list[str], int]],
    kern: Function,
    site: LaunchSite,
) -> dict[str, str]:
    """Kernel pointer parameters the launch passes a spec buffer (an entry parameter passed on by name),
    with the entry parameter each one is."""
    names = {p.name: p.name for p in entry.params if p.is_pointer and _is_buffer(spec, p.name)}
    for callee, args, _at in chain:
        fn = model.function(callee)
        params = fn.params if fn is not None else []
        names = {
            p.name: names[_bare(arg)]
            for p, arg in zip(params, args, strict=False)
            if p.is_pointer and _bare(arg) in names
        }
    return {
        p.name: names[_bare(arg)]
        for p, arg in zip(kern.params, site.args, strict=False)
        if p.is_pointer and _bare(arg) in names
    }


def _bare(arg: str) -> str:
    """An argument without casts and parentheses: ``(const float*)x`` is ``x``."""
    import re

    return re.sub(r"\([^()]*\*\s*\)|[()\s]", "", arg)


def _triple(v: list[int]) -> Triple:
    return (v[0], v[1], v[2])


def _host_launch(
    model: SourceModel,
    launcher: Function,
    kern: Function,
    site: LaunchSite,
    spec: specmod.KernelSpec,
    shapes: list[dict[str, exprs.Value] | None],
) -> KernelLaunch:
    out = KernelLaunch(kern.name, "host")
    data = model.text.encode("utf-8", errors="replace")
    chain = _call_chain(model, launcher.name, site.caller or "")
    passed = _site_buffers(model, spec, launcher, chain or [], kern, site)
    out.buffers = frozenset(passed)
    out.dtypes = {k: str(spec.args[v].dtype) for k, v in passed.items() if spec.args[v].dtype}
    if chain is None or len(site.config) < 2:
        out.complete = False
        return out
    for names in shapes:
        if names is None:
            out.complete = False
            continue
        start: dict[str, EnvValue] = {**file_constants(model)}
        start.update(_scalar_values(spec, names, [p.name for p in launcher.params]) or {})
        env = _follow_chain(model, data, launcher.name, chain, start, site.span.start_byte)
        if env is None:
            out.complete = False
            continue
        grid = _config(site.config[0], env, model)
        block = _config(site.config[1], env, model)
        params: dict[str, int] = {}
        for p, arg in zip(kern.params, site.args, strict=False):
            if p.is_pointer:
                continue
            v = _value(arg, env, model)
            if v is not None:
                params[p.name] = v
        if grid is None or block is None:
            out.complete = False
            if block is not None:
                # A grid the host computes from the device (multiprocessor count...): the rest is known.
                out.unknown_grid.append(LaunchShape((0, 1, 1), block, params, names))
            continue
        out.shapes.append(LaunchShape(grid, block, params, names))
    return out


def _call_chain(model: SourceModel, entry: str, caller: str) -> list[tuple[str, list[str], int]] | None:
    """The calls that lead from ``entry`` to host function ``caller`` (``[]`` when they are the same)."""
    if caller == entry:
        return []
    seen = {entry}
    frontier: list[tuple[str, list[tuple[str, list[str], int]]]] = [(entry, [])]
    while frontier:
        name, path = frontier.pop(0)
        for callee, args, at in model.host_calls(name):
            if callee in seen:
                continue
            step = [*path, (callee, args, at)]
            if callee == caller:
                return step
            seen.add(callee)
            frontier.append((callee, step))
    return None


def _follow_chain(
    model: SourceModel,
    data: bytes,
    entry: str,
    chain: list[tuple[str, list[str], int]],
    env: dict[str, EnvValue],
    until: int,
) -> dict[str, EnvValue] | None:
    """The environment at byte ``until`` of the last function of ``chain``, entered from ``entry`` through its calls."""
    fn_name = entry
    for callee, args, at in chain:
        body = _body_node(model, model.function(fn_name))
        target = model.function(callee)
        if body is None or target is None:
            return None
        env = _follow_statements(body, data, env, at, model)
        inner: dict[str, EnvValue] = {**file_constants(model)}
        for p, arg in zip(target.params, args, strict=False):
            v = _value(arg, env, model)
            if v is not None:
                inner[p.name] = v
        env, fn_name = inner, callee
    body = _body_node(model, model.function(fn_name))
    return _follow_statements(body, data, env, until, model) if body is not None else None


def _body_node(model: SourceModel, fn: Function | None) -> tree_sitter.Node | None:
    if model.tree is None or fn is None or fn.body_span is None:
        return None
    n = model.tree.root_node.descendant_for_byte_range(fn.body_span.start_byte, fn.body_span.end_byte)
    while n is not None and n.type != "compound_statement":
        n = n.parent
    return n


def _expanded(text: str, model: SourceModel) -> str:
    """``text`` with the file's macros and one-``return`` functions (``divUp(n, 16)``) expanded."""
    return expand_macros(text, model.defines, {**return_functions(model), **model.macros})


def _config(text: str, env: Mapping[str, EnvValue], model: SourceModel) -> Triple | None:
    got = parse_expression(_expanded(text, model))
    if got is None:
        return None
    node, data = got
    return dim3_of(node, data, env)


def _value(text: str, env: Mapping[str, EnvValue], model: SourceModel) -> int | None:
    got = parse_expression(_expanded(text, model))
    if got is None:
        return None
    node, data = got
    return evaluate_node(node, data, env)


def _follow_statements(
    body: tree_sitter.Node, data: bytes, env: dict[str, EnvValue], until: int, model: SourceModel
) -> dict[str, EnvValue]:
    """``env`` after the launcher's straight-line declarations and assignments before byte ``until``.

    A name assigned inside a branch or loop becomes unknown: which value reaches the launch depends
    on the run.
    """
    for st in body.named_children:
        if st.start_byte >= until:
            break
        if st.type == "declaration":
            _declare(st, data, env, model)
        elif st.type == "expression_statement":
            _assign(st, data, env, model)
        elif st.type == "compound_statement" and st.end_byte <= until:
            env = _follow_statements(st, data, env, until, model)
        else:
            for name in _assigned_names(st, data):
                env.pop(name, None)
    return env


def _node_value(
    node: tree_sitter.Node, data: bytes, env: Mapping[str, EnvValue], model: SourceModel
) -> int | None:
    """An expression node's value with the file's macros expanded (its text re-parsed when it names one)."""
    text = data[node.start_byte : node.end_byte].decode("utf-8", errors="replace")
    if any(name in text for name in (*model.defines, *model.macros, *return_functions(model))):
        return _value(text, env, model)
    return evaluate_node(node, data, env)


def _node_dim3(
    node: tree_sitter.Node, data: bytes, env: Mapping[str, EnvValue], model: SourceModel
) -> Triple | None:
    if node.type in ("argument_list", "initializer_list", "parameter_list"):
        vals = [_node_value(c, data, env, model) for c in node.named_children if c.type != "comment"]
        if not vals or len(vals) > 3 or any(v is None for v in vals):
            return None
        full = [v for v in vals if v is not None] + [1] * (3 - len(vals))
        return (full[0], full[1], full[2])
    return _config(data[node.start_byte : node.end_byte].decode("utf-8", errors="replace"), env, model)


def _declare(st: tree_sitter.Node, data: bytes, env: dict[str, EnvValue], model: SourceModel) -> None:
    tnode = st.child_by_field_name("type")
    is_dim3 = tnode is not None and data[tnode.start_byte : tnode.end_byte].decode() == "dim3"
    for d in st.children_by_field_name("declarator"):
        if is_dim3 and d.type == "function_declarator":
            # `dim3 block(BLOCK, BLOCK);` parses as a function declaration (the most vexing parse).
            fname, plist = d.child_by_field_name("declarator"), d.child_by_field_name("parameters")
            if fname is not None and plist is not None:
                name = data[fname.start_byte : fname.end_byte].decode()
                env.pop(name, None)
                got = _node_dim3(plist, data, env, model)
                if got is not None:
                    env[name] = got
            continue
        name_node = d.child_by_field_name("declarator") if d.type == "init_declarator" else d
        if name_node is None or name_node.type != "identifier":
            continue
        name = data[name_node.start_byte : name_node.end_byte].decode()
        value = d.child_by_field_name("value") if d.type == "init_declarator" else None
        env.pop(name, None)
        if value is None:
            if is_dim3:
                env[name] = (1, 1, 1)
            continue
        if is_dim3:
            got = _node_dim3(value, data, env, model)
            if got is not None:
                env[name] = got
            continue
        v = _node_value(value, data, env, model)
        if v is not None:
            env[name] = v


def _assign(st: tree_sitter.Node, data: bytes, env: dict[str, EnvValue], model: SourceModel) -> None:
    expr = next((c for c in st.named_children if c.type != "comment"), None)
    if expr is None or expr.type != "assignment_expression":
        for name in _assigned_names(st, data):
            env.pop(name, None)
        return
    left, right = expr.child_by_field_name("left"), expr.child_by_field_name("right")
    op_node = expr.child_by_field_name("operator")
    if left is None or right is None or op_node is None:
        return
    op = data[op_node.start_byte : op_node.end_byte]
    if left.type == "identifier" and op == b"=":
        name = data[left.start_byte : left.end_byte].decode()
        v = _node_value(right, data, env, model)
        if v is None:
            env.pop(name, None)
        else:
            env[name] = v
        return
    if left.type == "field_expression":
        arg, fld = left.child_by_field_name("argument"), left.child_by_field_name("field")
        if arg is None or fld is None:
            return
        name = data[arg.start_byte : arg.end_byte].decode()
        axis = {"x": 0, "y": 1, "z": 2}.get(data[fld.start_byte : fld.end_byte].decode())
        cur = env.get(name)
        v = _node_value(right, data, env, model)
        if isinstance(cur, tuple) and axis is not None and v is not None and op == b"=":
            lst = list(cur)
            lst[axis] = v
            env[name] = (lst[0], lst[1], lst[2])
        else:
            env.pop(name, None)
        return
    for name in _assigned_names(st, data):
        env.pop(name, None)


def _assigned_names(node: tree_sitter.Node, data: bytes) -> set[str]:
    """Names assigned, incremented or declared anywhere under ``node``."""
    out: set[str] = set()
    stack = [node]
    while stack:
        n = stack.pop()
        target = None
        if n.type == "assignment_expression":
            target = n.child_by_field_name("left")
        elif n.type == "update_expression":
            target = n.child_by_field_name("argument")
        elif n.type == "init_declarator":
            target = n.child_by_field_name("declarator")
        elif n.type == "pointer_expression" and data[n.start_byte : n.start_byte + 1] == b"&":
            # `cudaDeviceGetAttribute(&num_SMs, ...)`: a call may write through the address.
            target = n.child_by_field_name("argument")
        while target is not None and target.type == "field_expression":
            target = target.child_by_field_name("argument")
        if target is not None and target.type == "identifier":
            out.add(data[target.start_byte : target.end_byte].decode())
        stack.extend(n.children)
    return out
