"""The built-in tuner: semantics-preserving rewrites that need no network.

Transforms, each applied to the current champion and named so memory can skip what failed:

* ``tunable:NAME=V`` — make another value of a spec tunable the default (the spec's own search space);
* ``block:B`` — another block size for a 1-D launch whose grid is ``ceil_div(X, <block>)``;
* ``restrict`` — ``const __restrict__`` on pointers the kernel only reads, ``__restrict__`` on the rest
  (the harness allocates every buffer separately; the user asserts no aliasing by accepting);
* ``launch_bounds:B`` — ``__launch_bounds__(B)`` for a fixed block size;
* ``float_literals`` — ``f`` suffixes on double literals in a float kernel (KL401), kept only if the
  correctness gate agrees within the spec's tolerance;
* ``flag:--extra-device-vectorization`` and ``flag:-maxrregcount=R`` (when registers limit occupancy).

Order follows the fired rules: what the findings point at is tried first.
"""

from __future__ import annotations

import re
from collections.abc import Callable

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
        # 3. Qualifiers.
        items.append((5 if "KL405" in fired else 15, "restrict", ["KL405"], lambda: self._restrict(ctx)))
        bs = self._fixed_block(ctx)
        fn = ctx.model.function(ctx.entry)
        if bs and fn is not None and fn.kind == "global" and not fn.launch_bounds:
            items.append((25, f"launch_bounds:{bs}", ["KL103"], lambda: self._launch_bounds(ctx, bs)))
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
        facts = analysis.analyse(ctx.model).get(ctx.entry)
        fn = ctx.model.function(ctx.entry)
        if fn is None or facts is None:
            return None
        readonly = set(facts.readonly_unqualified)

        def edit(model: SourceModel, data: bytes) -> list[tuple[int, int, bytes]]:
            f = model.function(ctx.entry)
            assert f is not None
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

        return _fn_text_edit(ctx.text, ctx.entry, edit)

    def _launch_bounds(self, ctx: ProposalContext, bs: int) -> str | None:
        def edit(model: SourceModel, data: bytes) -> list[tuple[int, int, bytes]]:
            f = model.function(ctx.entry)
            assert f is not None
            # `__global__ void __launch_bounds__(B) name(...)`: insert right before the name.
            start = f.name_span.start_byte
            return [(start, start, f"__launch_bounds__({bs}) ".encode())]

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
