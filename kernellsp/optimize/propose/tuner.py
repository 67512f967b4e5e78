"""The built-in tuner: semantics-preserving rewrites that need no network.

Transforms, each applied to the current champion and named so memory can skip what failed:

* ``tunable:NAME=V`` — make another value of a spec tunable the default (the spec's own search space);
* ``block:B`` — another block size for a 1-D launch whose grid is ``ceil_div(X, <block>)``;
* ``restrict`` — ``const __restrict__`` on pointers the kernel only reads, ``__restrict__`` on the rest
  (the harness allocates every buffer separately; the user asserts no aliasing by accepting);
* ``launch_bounds:B`` — ``__launch_bounds__(B)`` for a fixed block size; ``launch_bounds:B,M`` with the
  minimum of resident blocks that fills an SM's 2048 threads, where registers limit occupancy (KL103);
* ``smem_pad`` — one padding column on ``__shared__ T t[R][C]`` tiles with ``C`` a multiple of 16 that
  are only indexed ``t[i][j]`` (bank conflicts of column walks);
* ``unroll:N`` — ``#pragma unroll N`` before each innermost counted loop whose bound is not a literal
  (filter, window, reduction and K loops), in every kernel the entry runs;
* ``float_literals`` — ``f`` suffixes on double literals in a float kernel (KL401), kept only if the
  correctness gate agrees within the spec's tolerance;
* ``flag:--extra-device-vectorization`` and ``flag:-maxrregcount=R`` (when registers limit occupancy).

Order follows the fired rules: what the findings point at is tried first.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from kernellsp.optimize.propose.base import Candidate, ProposalContext
from kernellsp.source import exprs
from kernellsp.source import facts as analysis
from kernellsp.source import spec as specmod
from kernellsp.source.model import SourceModel, parse_source

_DOUBLE_LIT = re.compile(r"^(\d+\.\d*|\.\d+|\d+\.?\d*[eE][+-]?\d+)$")


def _replace_spec(text: str, entry: str, new_spec: specmod.KernelSpec) -> str | None:
    """``text`` with the entry's spec block changed to ``new_spec`` in the structured fields only."""
    model = parse_source(text)
    bound = next((b for b in specmod.specs_from_source(model)[0] if b.entry == entry and b.block), None)
    if bound is None or bound.block is None:
        return None
    old = bound.spec.model_dump(exclude_none=True)
    new = new_spec.model_dump(exclude_none=True)
    updates = {k: new.get(k) for k in ("launch", "tunables", "flags") if old.get(k) != new.get(k)}
    if not updates:
        return None
    out = specmod.patch_spec_block(text, bound.block, updates)
    # Only a candidate whose spec reads back as exactly the intended one, and is valid for the kernel
    # (e.g. a block within its __launch_bounds__), is worth a verification slot.
    out_model = parse_source(out)
    got = specmod.entry_spec(out_model, entry)
    fn = out_model.function(entry)
    if got is None or fn is None or got.spec.model_dump(exclude_none=True) != new:
        return None
    if any(i.severity == "error" for i in specmod.validate_against(got, fn, out_model)):
        return None
    return out


def _fn_text_edit(
    text: str, entry: str, edit: Callable[[SourceModel, bytes], list[tuple[int, int, bytes]]]
) -> str | None:
    model = parse_source(text)
    data = text.encode()
    edits = edit(model, data)
    if not edits:
        return None
    for start, end, rep in sorted(edits, key=lambda e: e[0], reverse=True):
        data = data[:start] + rep + data[end:]
    out = data.decode()
    return out if out != text else None


_ELEM_BYTES = {"float": 4, "int": 4, "unsigned": 4, "double": 8, "half": 2, "__half": 2, "__nv_bfloat16": 2}


def _shared_tiles(body: Any, data: bytes) -> list[tuple[str, Any, Any, int]]:
    """``(name, rows node, cols node, element bytes)`` of each ``__shared__ T name[R][C];`` in ``body``."""
    out = []
    stack = [body] if body is not None else []
    while stack:
        n = stack.pop()
        stack.extend(n.children)
        if n.type != "declaration" or b"__shared__" not in data[n.start_byte : n.end_byte]:
            continue
        if b"extern" in data[n.start_byte : n.end_byte]:
            continue
        tnode = n.child_by_field_name("type")
        elem = _ELEM_BYTES.get(data[tnode.start_byte : tnode.end_byte].decode() if tnode is not None else "")
        decls = n.children_by_field_name("declarator")
        if elem is None or len(decls) != 1 or decls[0].type != "array_declarator":
            continue
        outer = decls[0]
        inner = outer.child_by_field_name("declarator")
        if inner is None or inner.type != "array_declarator":
            continue
        ident = inner.child_by_field_name("declarator")
        rows, cols = inner.child_by_field_name("size"), outer.child_by_field_name("size")
        if ident is None or ident.type != "identifier" or rows is None or cols is None:
            continue
        out.append((data[ident.start_byte : ident.end_byte].decode(), rows, cols, elem))
    return out


def _indexed_2d_only(body: Any, data: bytes, name: str) -> bool:
    """Every use of ``name`` in ``body`` (besides its declaration) is ``name[i][j]``."""
    stack = [body]
    while stack:
        n = stack.pop()
        stack.extend(n.children)
        if n.type != "identifier" or data[n.start_byte : n.end_byte].decode() != name:
            continue
        p = n.parent
        if p is not None and p.type == "array_declarator":
            continue  # the declaration
        gp = p.parent if p is not None else None
        if (
            p is None
            or p.type != "subscript_expression"
            or p.child_by_field_name("argument") != n
            or gp is None
            or gp.type != "subscript_expression"
            or gp.child_by_field_name("argument") != p
        ):
            return False
    return True


def _innermost_counted_loops(body: Any, data: bytes) -> list[Any]:
    """``for`` loops under ``body`` with no loop inside, an ``i < bound`` style condition whose bound
    is not a literal, a ``++``/``+=`` step, and no ``#pragma`` on the line before."""
    out = []
    stack = [body] if body is not None else []
    while stack:
        n = stack.pop()
        stack.extend(n.children)
        if n.type != "for_statement":
            continue
        inner = n.child_by_field_name("body")
        nested = [c for c in (inner.children if inner is not None else []) if c is not None]
        todo = list(nested)
        has_loop = False
        while todo:
            c = todo.pop()
            if c.type in ("for_statement", "while_statement", "do_statement"):
                has_loop = True
                break
            todo.extend(c.children)
        cond = n.child_by_field_name("condition")
        step = n.child_by_field_name("update")
        if has_loop or cond is None or step is None or cond.type != "binary_expression":
            continue
        right = cond.child_by_field_name("right")
        if right is None or right.type == "number_literal":
            continue
        if step.type not in ("update_expression", "assignment_expression"):
            continue
        line_start = data.rfind(b"\n", 0, n.start_byte) + 1
        prev_line = data[data.rfind(b"\n", 0, max(line_start - 1, 0)) + 1 : line_start].strip()
        if prev_line.startswith(b"#pragma"):
            continue
        out.append(n)
    return out


def _aliased_as_mutable(model: SourceModel, kernel: str) -> set[str]:
    """Parameters a non-const local pointer is initialised from (``float* v = inp + off;``): a ``const``
    parameter would not convert to it."""
    from kernellsp.source.ir import kernel_ir

    ir = kernel_ir(model, kernel)
    if ir is None:
        return set()
    out = set()
    for var in ir.locals.values():
        if var.is_pointer and "const" not in var.ctype.split():
            if var.points_to is not None:
                out.add(var.points_to)
            elif var.value_node is not None:
                out |= {n for n in ir.identifiers(var.value_node) if ir.param(n) is not None}
    return out


def _with_divisor(pat: re.Pattern[str], text: str, b: int) -> str:
    """``ceil_div(X, old)`` in ``text`` written ``ceil_div(X, b)``."""
    return pat.sub(lambda m: f"{m.group(1)}({m.group(2)}, {b})", text)


def _block_agnostic(model: SourceModel, kernel: str) -> bool:
    """Do the kernel's threads compute the same whatever the block size: no shared memory, barriers or warp
    primitives, and every global index a function of the global thread index (not of threadIdx or blockIdx
    alone)?"""
    from kernellsp.source.ir import kernel_ir

    ir = kernel_ir(model, kernel)
    if ir is None or ir.barriers or ir.warp_ops or any(v.shared for v in ir.locals.values()):
        return False
    for a in ir.global_accesses():
        if a.index is None:
            return False
        if any(s.startswith(("threadIdx.", "blockIdx.", "blockDim.")) for s in a.index.symbols()):
            return False
    return True


def _grid_formula(model: SourceModel, site: Any) -> str | None:
    """The launch's grid as an expression that names its block the way the block expression does: the grid
    text itself, or the initializer of the launcher local it names (``int blocks = (n + threads - 1) / threads;``)."""
    block = site.config[1].strip()
    grid = site.config[0].strip()
    if not re.fullmatch(r"[A-Za-z_]\w*|\d+[uU]?", block):
        return None
    if re.search(rf"\b{re.escape(block)}\b", grid):
        return grid
    if re.fullmatch(r"[A-Za-z_]\w*", grid) and site.caller:
        fn = model.function(site.caller)
        body = model.text[fn.span.start_byte : fn.span.end_byte] if fn is not None else ""
        m = re.search(
            rf"\b(?:int|unsigned|size_t|long|auto|const)[\w\s]*\b{re.escape(grid)}\s*=\s*([^;]+);", body
        )
        if (
            m
            and re.search(rf"\b{re.escape(block)}\b", m.group(1))
            and "(" not in m.group(1).split("(")[0][-1:]
        ):
            return f"({m.group(1).strip()})"
    return None


class Tuner:
    """Proposes tuner transforms; implements :class:`kernellsp.optimize.propose.base.Proposer`."""

    name = "tuner"

    def propose(self, ctx: ProposalContext, k: int) -> list[Candidate]:
        fired = {f.code for f in ctx.findings if f.kernel == ctx.entry}
        tried = ctx.tried_keys()
        tried_desc = {t.get("transform") for t in ctx.tried}
        out: list[Candidate] = []
        for transform, rules, make in self._transforms(ctx, fired):
            if transform in tried_desc:
                continue
            try:
                text = make()
            except (exprs.ExprError, ValueError, KeyError):
                continue
            if text is None or text == ctx.text:
                continue
            cand = Candidate(text=text, description=transform, proposer="tuner", rules=rules)
            if cand.key in tried or any(c.key == cand.key for c in out):
                continue
            out.append(cand)
            if len(out) >= k:
                break
        return out

    # ------------------------------------------------------------------------------------------

    def _transforms(
        self, ctx: ProposalContext, fired: set[str]
    ) -> list[tuple[str, list[str], Callable[[], str | None]]]:
        s = ctx.spec.spec
        items: list[tuple[int, str, list[str], Callable[[], str | None]]] = []
        # 1. Spec tunables: the spec author's own search space.
        for name, values in s.tunables.items():
            for v in values[1:]:

                def make(name: str = name, v: int | str = v) -> str | None:
                    vals = list(s.tunables[name])
                    vals.remove(v)
                    new = s.model_copy(update={"tunables": {**s.tunables, name: [v, *vals]}})
                    return _replace_spec(ctx.text, ctx.entry, new)

                items.append((10, f"tunable:{name}={v}", ["KL202"], make))
        # 2. Block size of a 1-D launch written as ceil_div(X, B) / B with a literal B.
        if s.launch is not None and not s.tunables:
            block = s.launch.block_dims()
            grid = s.launch.grid_dims()
            if len(block) == 1 and isinstance(block[0], int) and len(grid) == 1 and isinstance(grid[0], str):
                cur = block[0]
                pat = re.compile(rf"(ceil_div|cdiv)\(\s*(.+?),\s*{cur}\s*\)")
                if pat.search(grid[0]):
                    for b in (128, 256, 512, 1024):
                        if b == cur:
                            continue

                        def make_b(b: int = b) -> str | None:
                            g0 = str(grid[0])
                            launch = specmod.LaunchSpec(
                                grid=pat.sub(lambda m: f"{m.group(1)}({m.group(2)}, {b})", g0),
                                block=b,
                                smem=s.launch.smem,  # type: ignore[union-attr]
                            )
                            return _replace_spec(ctx.text, ctx.entry, s.model_copy(update={"launch": launch}))

                        items.append((20, f"block:{b}", ["KL202", "KL507"], make_b))
        # 2a. Block shapes of a 2-D spec launch whose grid is ceil_div(X, bx), ceil_div(Y, by).
        items += self._block_shape_items(ctx)
        # 2b. Block size of a host launcher's 1-D launch (its grid and block expressions, what the scope allows).
        items += self._host_block_items(ctx)
        # 3. Qualifiers and loop annotations.
        items += self._qualifier_items(ctx, fired)
        # 4. Precision of literals.
        if "KL401" in fired or self._has_double_literals(ctx):
            items.append(
                (
                    1 if "KL401" in fired else 30,
                    "float_literals",
                    ["KL401"],
                    lambda: self._float_literals(ctx),
                )
            )
        # 5. Compile options.
        items.append(
            (
                40,
                "flag:--extra-device-vectorization",
                [],
                lambda: self._flag(ctx, "--extra-device-vectorization"),
            )
        )
        if "KL103" in fired:
            for f in ctx.findings:
                if f.code == "KL103" and f.kernel == ctx.entry and f.evidence.get("registers"):
                    regs = int(f.evidence["registers"])
                    target = max(32, (regs * 3 // 4) // 8 * 8)
                    items.append(
                        (
                            8,
                            f"flag:-maxrregcount={target}",
                            ["KL103"],
                            lambda t=target: self._flag(ctx, f"-maxrregcount={t}"),  # type: ignore[misc]
                        )
                    )
        items.sort(key=lambda t: t[0])
        return [(name, rules, make) for _, name, rules, make in items]

    def _qualifier_items(
        self, ctx: ProposalContext, fired: set[str]
    ) -> list[tuple[int, str, list[str], Callable[[], str | None]]]:
        """``restrict``, ``launch_bounds:...`` and ``unroll:N``: edits of the kernels' text that keep their meaning."""
        items: list[tuple[int, str, list[str], Callable[[], str | None]]] = []
        items.append((5 if "KL405" in fired else 15, "restrict", ["KL405"], lambda: self._restrict(ctx)))
        bs = self._fixed_block(ctx)
        fn = ctx.model.function(ctx.entry)
        if bs and fn is not None and fn.kind == "global" and not fn.launch_bounds:
            items.append((25, f"launch_bounds:{bs}", ["KL103"], lambda: self._launch_bounds(ctx, bs)))
            if "KL103" in fired and bs <= 1024:
                # Registers limit occupancy: ask for as many resident blocks as fill the SM's 2048 threads.
                min_blocks = min(32, max(2, 2048 // bs))
                items.append(
                    (
                        9,
                        f"launch_bounds:{bs},{min_blocks}",
                        ["KL103"],
                        lambda: self._launch_bounds(ctx, bs, min_blocks),
                    )
                )
        # 3a. Shared tiles whose rows are a multiple of the 32 banks: one padding column.
        items.append((12, "smem_pad", [], lambda: self._smem_pad(ctx)))
        # 3b. Unrolling of counted inner loops whose trip count nvcc does not know.
        for factor in (4, 8):
            items.append((35, f"unroll:{factor}", [], lambda f=factor: self._unroll(ctx, f)))  # type: ignore[misc]
        return items

    def _block_shape_items(
        self, ctx: ProposalContext
    ) -> list[tuple[int, str, list[str], Callable[[], str | None]]]:
        """``block:BXxBY``: another 2-D block shape for a kernel whose threads are independent."""
        s = ctx.spec.spec
        fn = ctx.model.function(ctx.entry)
        if s.launch is None or s.tunables or fn is None or fn.kind != "global":
            return []
        block, grid = s.launch.block_dims(), s.launch.grid_dims()
        if len(block) != 2 or len(grid) < 2 or not all(isinstance(b, int) for b in block):
            return []
        if not _block_agnostic(ctx.model, ctx.entry):
            return []
        pats = [re.compile(rf"(ceil_div|cdiv)\(\s*(.+?),\s*{b}\s*\)") for b in block]
        if not all(isinstance(g, str) and p.search(g) for g, p in zip(grid, pats, strict=False)):
            return []
        out: list[tuple[int, str, list[str], Callable[[], str | None]]] = []
        for bx, by in ((32, 8), (32, 4), (64, 4), (32, 16), (128, 2), (16, 16)):
            if [bx, by] == block:
                continue

            def make(bx: int = bx, by: int = by) -> str | None:
                g = [_with_divisor(pats[i], str(grid[i]), b) for i, b in enumerate((bx, by))]
                launch = specmod.LaunchSpec(grid=[*g, *grid[2:]], block=[bx, by], smem=s.launch.smem)  # type: ignore[union-attr]
                return _replace_spec(ctx.text, ctx.entry, s.model_copy(update={"launch": launch}))

            out.append((21, f"block:{bx}x{by}", ["KL202", "KL404"], make))
        return out

    def _host_block_items(
        self, ctx: ProposalContext
    ) -> list[tuple[int, str, list[str], Callable[[], str | None]]]:
        """``host_block:K=B``: kernel K's launch in the host launcher with B threads per block and its grid
        recomputed from the launcher's own formula (the block's spelling replaced by B). Only for kernels whose
        threads are independent (no shared memory, barrier or warp primitive) and index data by the global
        thread index alone, so that any block covering the same range computes the same thing."""
        from kernellsp.source.ir.launch import launch_model

        fn = ctx.model.function(ctx.entry)
        if fn is None or fn.kind == "global":
            return []
        lm = launch_model(ctx.model, ctx.entry, ctx.spec)
        callers = set(ctx.model.launchers(ctx.entry))
        out: list[tuple[int, str, list[str], Callable[[], str | None]]] = []
        for site in ctx.model.launch_sites:
            kl = lm.get(site.kernel)
            if site.caller not in callers or kl is None or not kl.complete or len(site.config_spans) < 2:
                continue
            b = kl.block_dim(0)
            if (
                b is None
                or kl.block_dim(1) != 1
                or kl.block_dim(2) != 1
                or not _block_agnostic(ctx.model, site.kernel)
            ):
                continue
            grid = _grid_formula(ctx.model, site)
            if grid is None:
                continue
            for nb in (128, 256, 512, 1024):
                if nb == b:
                    continue

                def make(site: Any = site, nb: int = nb, grid: str = grid) -> str | None:
                    data = ctx.text.encode()
                    g_span, b_span = site.config_spans[0], site.config_spans[1]
                    new_grid = re.sub(rf"\b{re.escape(site.config[1].strip())}\b", str(nb), grid)
                    for start, end, rep in sorted(
                        [
                            (g_span.start_byte, g_span.end_byte, new_grid),
                            (b_span.start_byte, b_span.end_byte, str(nb)),
                        ],
                        reverse=True,
                    ):
                        data = data[:start] + rep.encode() + data[end:]
                    return data.decode()

                out.append((22, f"host_block:{site.kernel}={nb}", ["KL202", "KL507"], make))
        return out

    def _fixed_block(self, ctx: ProposalContext) -> int | None:
        s = ctx.spec.spec
        if s.launch is None:
            return None
        sizes = set()
        for shape in s.all_shapes():
            try:
                dims = specmod.launch_dims(s.launch, s.resolved_sizes(shape))
            except exprs.ExprError:
                return None
            if isinstance(dims, str):
                return None
            sizes.add(dims[1][0] * dims[1][1] * dims[1][2])
        return sizes.pop() if len(sizes) == 1 else None

    def _restrict(self, ctx: ProposalContext) -> str | None:
        """``const __restrict__`` / ``__restrict__`` on the pointers of every kernel the entry runs (the entry,
        or each kernel a host launcher launches)."""
        from kernellsp.optimize.verify.scope import edit_targets

        all_facts = analysis.analyse(ctx.model)
        kernels = [k for k in edit_targets(ctx.model, ctx.entry) if k in all_facts]
        if not kernels:
            return None

        def edit(model: SourceModel, data: bytes) -> list[tuple[int, int, bytes]]:
            edits: list[tuple[int, int, bytes]] = []
            for name in kernels:
                f = model.function(name)
                if f is not None:
                    readonly = set(all_facts[name].readonly_unqualified) - _aliased_as_mutable(model, name)
                    edits += self._restrict_edits(f, data, readonly)
            return edits

        return _fn_text_edit(ctx.text, ctx.entry, edit)

    @staticmethod
    def _restrict_edits(f: Any, data: bytes, readonly: set[str]) -> list[tuple[int, int, bytes]]:
        edits = []
        for p in f.params:
            if not p.is_pointer or p.is_restrict:
                continue
            ptext = data[p.span.start_byte : p.span.end_byte].decode()
            star = ptext.rfind("*")
            if star < 0:
                continue
            # `float *c` must not become `float * __restrict__c` (one identifier): space on both sides.
            new = ptext[: star + 1] + " __restrict__ " + ptext[star + 1 :].lstrip()
            if p.name in readonly and not p.is_const:
                new = "const " + new
            edits.append((p.span.start_byte, p.span.end_byte, new.encode()))
        return edits

    def _launch_bounds(self, ctx: ProposalContext, bs: int, min_blocks: int | None = None) -> str | None:
        bounds = f"{bs}, {min_blocks}" if min_blocks else f"{bs}"

        def edit(model: SourceModel, data: bytes) -> list[tuple[int, int, bytes]]:
            f = model.function(ctx.entry)
            assert f is not None
            # `__global__ void __launch_bounds__(B) name(...)`: insert right before the name.
            start = f.name_span.start_byte
            return [(start, start, f"__launch_bounds__({bounds}) ".encode())]

        return _fn_text_edit(ctx.text, ctx.entry, edit)

    def _smem_pad(self, ctx: ProposalContext) -> str | None:
        """``__shared__ T t[R][C]`` with ``C`` a multiple of 16 words becomes ``t[R][C + 1]`` in every kernel
        the entry runs, where ``t`` is only ever indexed as ``t[i][j]`` (so no code sees the row length).

        A column walk ``t[threadIdx.x][k]`` then hits 32 different banks instead of one (the classic
        transpose fix); the padded tile must still fit the 48 KB of static shared memory."""
        from kernellsp.optimize.verify.scope import edit_targets
        from kernellsp.source.ir.cexpr import evaluate_text, file_constants

        kernels = edit_targets(ctx.model, ctx.entry)

        def edit(model: SourceModel, data: bytes) -> list[tuple[int, int, bytes]]:
            edits: list[tuple[int, int, bytes]] = []
            for name in kernels:
                f = model.function(name)
                if f is None or f.body_span is None or model.tree is None:
                    continue
                body = model.tree.root_node.descendant_for_byte_range(
                    f.body_span.start_byte, f.body_span.end_byte
                )
                consts = file_constants(model)
                for arr, rows, cols, elem_bytes in _shared_tiles(body, data):
                    n_rows = evaluate_text(data[rows.start_byte : rows.end_byte].decode(), consts, model)
                    n_cols = evaluate_text(data[cols.start_byte : cols.end_byte].decode(), consts, model)
                    if n_rows is None or n_cols is None or n_cols % 16 != 0:
                        continue
                    if n_rows * (n_cols + 1) * elem_bytes > 48 * 1024 or not _indexed_2d_only(
                        body, data, arr
                    ):
                        continue
                    text = data[cols.start_byte : cols.end_byte].decode()
                    edits.append((cols.start_byte, cols.end_byte, f"{text} + 1".encode()))
            return edits

        return _fn_text_edit(ctx.text, ctx.entry, edit)

    def _unroll(self, ctx: ProposalContext, factor: int) -> str | None:
        """``#pragma unroll FACTOR`` before every innermost counted ``for`` loop of the kernels the entry
        runs whose bound is not a literal (nvcc unrolls those itself) and that carries no pragma yet."""
        from kernellsp.optimize.verify.scope import edit_targets

        kernels = edit_targets(ctx.model, ctx.entry)

        def edit(model: SourceModel, data: bytes) -> list[tuple[int, int, bytes]]:
            edits: list[tuple[int, int, bytes]] = []
            for name in kernels:
                f = model.function(name)
                if f is None or f.body_span is None or model.tree is None:
                    continue
                body = model.tree.root_node.descendant_for_byte_range(
                    f.body_span.start_byte, f.body_span.end_byte
                )
                for loop in _innermost_counted_loops(body, data):
                    line_start = data.rfind(b"\n", 0, loop.start_byte) + 1
                    indent = data[line_start : loop.start_byte]
                    if indent.strip():
                        continue  # the loop shares its line with other code: a pragma line cannot go before it
                    edits.append((line_start, line_start, indent + f"#pragma unroll {factor}\n".encode()))
            return edits

        return _fn_text_edit(ctx.text, ctx.entry, edit)

    def _has_double_literals(self, ctx: ProposalContext) -> bool:
        facts = analysis.analyse(ctx.model).get(ctx.entry)
        return bool(
            facts and not facts.uses_double_params and any(lf.double_literals for lf in facts.lines.values())
        )

    def _float_literals(self, ctx: ProposalContext) -> str | None:
        facts = analysis.analyse(ctx.model).get(ctx.entry)
        if facts is None or facts.uses_double_params:
            return None

        def edit(model: SourceModel, data: bytes) -> list[tuple[int, int, bytes]]:
            f = model.function(ctx.entry)
            if f is None or f.body_span is None or model.tree is None:
                return []
            body = model.tree.root_node.descendant_for_byte_range(
                f.body_span.start_byte, f.body_span.end_byte
            )
            edits = []
            stack = [body] if body is not None else []
            while stack:
                n = stack.pop()
                if n.type == "primitive_type" and data[n.start_byte : n.end_byte] == b"double":
                    return []  # the kernel computes in double on purpose
                if n.type == "number_literal":
                    t = data[n.start_byte : n.end_byte].decode()
                    if _DOUBLE_LIT.match(t):
                        edits.append((n.end_byte, n.end_byte, b"f"))
                stack.extend(n.children)
            return edits

        return _fn_text_edit(ctx.text, ctx.entry, edit)

    def _flag(self, ctx: ProposalContext, flag: str) -> str | None:
        s = ctx.spec.spec
        if flag in s.flags:
            return None
        flags = [
            f for f in s.flags if not (flag.startswith("-maxrregcount") and f.startswith("-maxrregcount"))
        ]
        return _replace_spec(ctx.text, ctx.entry, s.model_copy(update={"flags": [*flags, flag]}))
