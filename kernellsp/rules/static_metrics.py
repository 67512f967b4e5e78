"""Static metrics of a kernel, the facts the rules read before any GPU run: launch facts (from the launch
spec or the launch sites), resources and SASS counts from the build, occupancy, and the per-line facts."""

from __future__ import annotations

import contextlib
import math
import re
from typing import Any

from kernellsp.build import occupancy, toolchain
from kernellsp.build.nvcc import BuildResult, match_kernel
from kernellsp.source import exprs, spec
from kernellsp.source import facts as analysis
from kernellsp.source.model import Function, SourceModel


def _numeric_defines(model: SourceModel) -> dict[str, exprs.Value]:
    out: dict[str, exprs.Value] = {}
    for k, v in model.defines.items():
        try:
            val = exprs.evaluate(v.strip() or "x", out)
        except exprs.ExprError:
            continue
        if isinstance(val, int | float) and not isinstance(val, bool):
            out[k] = val
    return out


def _dim3_product(text: str, names: dict[str, exprs.Value], caller_text: str) -> int | None:
    """Threads in a launch-site block expression: ``256``, ``BS``, ``dim3(16, 16)`` or a dim3 variable."""
    text = text.strip()
    m = re.fullmatch(r"dim3\s*[({](.*)[)}]", text)
    if not m and re.fullmatch(r"[A-Za-z_]\w*", text) and text not in names:
        decl = re.search(rf"\bdim3\s+{re.escape(text)}\s*[({{](.*?)[)}}]\s*;", caller_text)
        if decl:
            m = decl
    parts = [p for p in m.group(1).split(",")] if m else [text]
    total = 1
    for p in parts:
        try:
            v = exprs.evaluate_int(p.strip().rstrip("uUlL"), names)
        except exprs.ExprError:
            return None
        total *= v
    return total


def _launch_facts(fn: Function, model: SourceModel, bound: spec.BoundSpec | None) -> dict[str, Any]:
    """block_size, block_source, smem_dynamic and grid_can_overshoot for one kernel."""
    out: dict[str, Any] = {"has_spec": bound is not None}
    if bound is not None and bound.spec.launch is not None:
        return _spec_launch_facts(bound.spec, out)
    return _launch_site_facts(fn, model, out)


def _spec_launch_facts(s: spec.KernelSpec, out: dict[str, Any]) -> dict[str, Any]:
    """The launch facts of a kernel with a launch spec: its first valid shape, and whether any shape's grid
    has more threads than its largest buffer has elements."""
    overshoot = False
    main: tuple[list[int], list[int], int] | None = None
    for shape in s.all_shapes():
        try:
            names = s.resolved_sizes(shape)
        except exprs.ExprError:
            continue
        dims = spec.launch_dims(s.launch, names)  # type: ignore[arg-type]
        if isinstance(dims, str):
            continue
        if main is None:
            main = dims
        threads = math.prod(dims[0]) * math.prod(dims[1])
        counts = []
        for a in s.args.values():
            if a.count is not None:
                with contextlib.suppress(exprs.ExprError):
                    counts.append(exprs.evaluate_int(a.count, names))
        if counts and threads > max(counts):
            overshoot = True
    if main is not None:
        out.update(block_size=math.prod(main[1]), block_source="spec", smem_dynamic=main[2])
    out["grid_can_overshoot"] = overshoot
    return out


def _launch_site_facts(fn: Function, model: SourceModel, out: dict[str, Any]) -> dict[str, Any]:
    """The launch facts of a kernel without a launch spec, read from its launch sites and __launch_bounds__."""
    names = _numeric_defines(model)
    sites = model.launches_of(fn.name)
    overshoot = False
    for site in sites:
        caller = model.function(site.caller) if site.caller else None
        caller_text = model.text[caller.span.start_byte : caller.span.end_byte] if caller else ""
        if len(site.config) >= 2 and "block_size" not in out:
            bs = _dim3_product(site.config[1], names, caller_text)
            if bs is not None:
                out.update(block_size=bs, block_source=f"launch site line {site.span.start_line + 1}")
        if len(site.config) >= 3 and "smem_dynamic" not in out:
            with contextlib.suppress(exprs.ExprError):
                out["smem_dynamic"] = exprs.evaluate_int(site.config[2], names)
        grid = site.config[0] if site.config else ""
        # ceil_div(n, b), (n + b - 1) / b and friends round the grid up: the last block can overshoot.
        if re.search(r"ceil_div|cdiv", grid) or ("+" in grid and "/" in grid):
            overshoot = True
    if "block_size" not in out and fn.launch_bounds:
        first = fn.launch_bounds.split(",")[0]
        with contextlib.suppress(exprs.ExprError):
            out.update(block_size=exprs.evaluate_int(first, names), block_source="__launch_bounds__")
    out.setdefault("smem_dynamic", 0)
    out["grid_can_overshoot"] = overshoot
    return out


def _attribute_fp64(
    sass_by_line: dict[int, dict[str, int]], facts: analysis.KernelFacts, fn: Function
) -> None:
    """Move fp64 instruction counts to the statement that holds the double.

    ptxas's line table gives a promoted expression's DMUL/DADD/conversions to neighbouring lines too (the
    loop header, the closing brace: issue 31 item 5.3), so a per-line finding would point at code with no
    double in it. Counts on a line of the kernel's body without a double literal or declaration go to the
    nearest line that has one (the earlier on a tie); with no such line (a double from a call or a cast),
    they stay where ptxas put them."""
    doubles = sorted(ln for ln, lf in facts.lines.items() if lf.double_literals or lf.double_decls)
    body = fn.body_span
    if not doubles or body is None:
        return
    for ln in sorted(sass_by_line):
        n = sass_by_line[ln].get("fp64", 0)
        if not n or ln in doubles or not body.start_line <= ln <= body.end_line:
            continue
        target = min(doubles, key=lambda d: (abs(d - ln), d))
        sass_by_line[ln]["fp64"] = 0
        dest = sass_by_line.setdefault(target, {})
        dest["fp64"] = dest.get("fp64", 0) + n


def kernel_metrics(
    fn: Function,
    model: SourceModel,
    facts: analysis.KernelFacts,
    build_result: BuildResult | None,
    bound: spec.BoundSpec | None,
    arch: str,
) -> tuple[dict[str, Any], dict[int, dict[str, Any]]]:
    """Kernel-scope metrics and per-line metrics (0-based line → values) for one kernel."""
    km: dict[str, Any] = {"kernel": fn.name, "arch": arch}
    km.update(_launch_facts(fn, model, bound))
    km["readonly_unqualified"] = len(facts.readonly_unqualified)
    km["readonly_names"] = ", ".join(facts.readonly_unqualified)
    km["uses_double_params"] = facts.uses_double_params
    sass_by_line: dict[int, dict[str, int]] = {}
    matched = []
    if build_result is not None and build_result.ok:
        matched = [r for r in build_result.resources if match_kernel(r.mangled, fn.name)]
    if matched:
        worst = max(matched, key=lambda r: (r.registers, r.stack_frame, r.spill_stores))
        km.update(
            registers=worst.registers,
            spill_stores=worst.spill_stores,
            spill_loads=worst.spill_loads,
            stack_frame=worst.stack_frame,
            smem_static=worst.smem_static,
            cmem=worst.cmem,
            barriers=worst.barriers,
            instantiations=len(matched),
        )
        assert build_result is not None
        km["sass_available"] = build_result.sass_available
        if build_result.sass_available:
            # fp64 belongs to the instantiations that ask for it: with axpy<float> and axpy<double> in one file,
            # the double one's DFMAs say nothing about the float one, so its fp64 counts stay out of the lines
            # (every instantiation a double one: the kernel's data is double, and KL401 has nothing to say).
            doubles = {r.mangled for r in matched if toolchain.instantiation_uses_double(r.mangled)}
            if doubles and len(doubles) == len(matched):
                km["uses_double_params"] = True
            for r in matched:
                for ln, counts in build_result.sass_lines.get(r.mangled, {}).items():
                    acc = sass_by_line.setdefault(ln, {})
                    for k, v in counts.items():
                        if k == "fp64" and r.mangled in doubles and len(doubles) < len(matched):
                            continue
                        acc[k] = max(acc.get(k, 0), v)
            km["fp64_insts"] = sum(c.get("fp64", 0) for c in sass_by_line.values())
            km["local_insts"] = sum(
                c.get("local_ld", 0) + c.get("local_st", 0) for c in sass_by_line.values()
            )
        bs = km.get("block_size")
        lim = occupancy.arch_limits(arch)
        km["max_blocks_per_sm"] = lim.max_blocks
        km["max_warps_per_sm"] = lim.max_warps
        if isinstance(bs, int) and bs > 0:
            occ = occupancy.compute(
                arch, bs, worst.registers, worst.smem_static, int(km.get("smem_dynamic", 0))
            )
            if occ.limiter != "invalid":
                km.update(
                    occupancy_pct=occ.occupancy_pct,
                    occupancy_limiter=occ.limiter,
                    blocks_per_sm=occ.blocks_per_sm,
                    limit_registers=occ.limit_registers,
                    limit_shared_memory=occ.limit_shared_memory,
                    limit_warps=occ.limit_warps,
                )
    _attribute_fp64(sass_by_line, facts, fn)
    lines: dict[int, dict[str, Any]] = {}
    for ln in set(facts.lines) | set(sass_by_line):
        lm: dict[str, Any] = {"line": ln + 1}
        lf = facts.lines.get(ln)
        lm.update(analysis.as_line_metrics(lf or analysis.LineFacts()))
        sass = sass_by_line.get(ln)
        if km.get("sass_available"):
            sass = sass or {}
            lm["fp64_ops"] = sass.get("fp64", 0)
            lm["local_ops"] = sass.get("local_ld", 0) + sass.get("local_st", 0)
            lm["atomic_insts"] = sass.get("atomic_global", 0)
        else:
            lm["fp64_ops"] = lm["double_literals"] + lm["double_decls"]
        lines[ln] = lm
    return km, lines
