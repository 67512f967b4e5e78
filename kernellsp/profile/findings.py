"""What a profile says about each kernel: the metrics the profile rules read (per kernel and per line), the
bytes a launch spec declares, the bottleneck, and the findings with one summary per kernel."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kernellsp.findings import Finding, Range, Severity, line_range
from kernellsp.rules import engine as rules
from kernellsp.source import exprs, spec
from kernellsp.source.model import SourceModel


@dataclass
class KernelSummary:
    """One profiled kernel: timing, roofline position, bottleneck, hottest lines."""

    name: str
    entry: str | None
    duration_ns: float | None
    dram_pct: float | None
    fp32_pct: float | None
    sm_pct: float | None
    bottleneck: str
    hot_lines: list[dict[str, Any]]
    metrics: dict[str, Any]
    ncu_rules: list[dict[str, Any]]
    #: Every sampled line of the user's file: ``{"line": 1-based, "share": of the kernel's stall samples,
    #: "stall": dominant reason, "stall_share": its share of the line's samples}`` (the HTML report).
    line_stalls: list[dict[str, Any]] = field(default_factory=list)


# --------------------------------------------------------------------------------------------------
# Metrics for the profile rules


def _top_pipe(derived: dict[str, float]) -> tuple[str, float]:
    pipes = {k[: -len("_pipe_pct")]: v for k, v in derived.items() if k.endswith("_pipe_pct")}
    if not pipes:
        return "", 0.0
    name = max(pipes, key=lambda k: pipes[k])
    return name, pipes[name]


def footprint_bytes(bound: spec.BoundSpec | None, shape: int = 0) -> int | None:
    """The fewest DRAM bytes the entry must move: inputs read once, outputs written once."""
    if bound is None:
        return None
    s = bound.spec
    try:
        names = s.resolved_sizes(s.all_shapes()[shape])
    except (exprs.ExprError, IndexError):
        return None
    total = 0
    for a in s.args.values():
        if a.count is None or a.dtype is None:
            continue
        try:
            n = exprs.evaluate_int(a.count, names) * spec.DTYPE_BYTES[a.dtype]
        except exprs.ExprError:
            return None
        total += n * (2 if a.dir == "inout" else 1)
    return total


def kernel_profile_metrics(kp: Any, report: Any, bound: spec.BoundSpec | None) -> dict[str, Any]:
    """Derived ncu metrics plus the composite values the profile rules quote."""
    d: dict[str, Any] = dict(kp.derived)
    d["kernel"] = kp.name
    pipe, pct = _top_pipe(kp.derived)
    if pipe:
        d["top_pipe"], d["top_pipe_pct"] = pipe, pct
    stalls = {
        k[len("stall_") : -len("_share")]: v
        for k, v in kp.derived.items()
        if k.startswith("stall_") and k.endswith("_share")
    }
    if stalls:
        reason = max(stalls, key=lambda k: stalls[k])
        d["dominant_stall"], d["dominant_stall_share"] = reason, stalls[reason]
    waves = d.get("waves")
    if isinstance(waves, int | float) and waves > 0:
        d["tail_idle_pct"] = (
            100.0 * (math.ceil(waves) - waves) / math.ceil(waves) if waves >= 1 else 100.0 * (1 - waves)
        )
    fp = footprint_bytes(bound)
    if fp:
        d["footprint_bytes"] = fp
        if d.get("dram_bytes"):
            d["dram_excess_ratio"] = d["dram_bytes"] / fp
            d["dram_mb"] = d["dram_bytes"] / 1e6
            d["footprint_mb"] = fp / 1e6
    # Roofline position: achieved FP32 rate against the SM-count × 128 FMA/clk × 2 FLOP peak.
    flops = None
    m = kp.metrics
    if all(
        k in m
        for k in (
            "smsp__sass_thread_inst_executed_op_fadd_pred_on.sum",
            "smsp__sass_thread_inst_executed_op_fmul_pred_on.sum",
            "smsp__sass_thread_inst_executed_op_ffma_pred_on.sum",
        )
    ):
        flops = (
            m["smsp__sass_thread_inst_executed_op_fadd_pred_on.sum"]
            + m["smsp__sass_thread_inst_executed_op_fmul_pred_on.sum"]
            + 2 * m["smsp__sass_thread_inst_executed_op_ffma_pred_on.sum"]
        )
    elif "fp32_flop" in d:
        flops = d["fp32_flop"]
    dur = d.get("duration_ns")
    clock = d.get("sm_clock_hz") or getattr(report, "sm_clock_hz", None)
    if flops is not None and dur and report.sm_count and clock:
        d["fp32_flop"] = flops
        d["fp32_gflops"] = flops / dur
        peak = report.sm_count * 128 * 2 * clock
        d["fp32_pct_of_peak"] = 100.0 * (flops / (dur * 1e-9)) / peak
    hl = _hot_lines(kp, 3)
    d["hot_lines_text"] = ", ".join(f"{h['line']} ({100 * h['share']:.0f}%)" for h in hl) or "none"
    return d


def _hot_lines(kp: Any, n: int) -> list[dict[str, Any]]:
    from kernellsp.profile import hot_lines

    out = []
    for h in hot_lines(kp, n):
        out.append(
            {
                "file": h.file,
                "line": h.line,
                "share": h.share,
                "stall": h.dominant_stall,
                "stall_share": h.dominant_stall_share,
            }
        )
    return out


def line_profile_metrics(kp: Any, basename: str) -> dict[int, dict[str, Any]]:
    """Per 1-based line of the user's file: the values the line rules read."""
    lines = kp.lines_for(basename) if hasattr(kp, "lines_for") else {}
    total_samples = sum(lm.stall_samples for lm in lines.values()) or 0.0
    total_inst = sum(lm.inst_executed for lm in lines.values()) or 0.0
    total_sectors = sum(lm.l2_sectors_global for lm in lines.values()) or 0.0
    out: dict[int, dict[str, Any]] = {}
    for ln, lm in lines.items():
        v: dict[str, Any] = {"line": ln}
        if total_samples:
            v["line_stall_share"] = lm.stall_samples / total_samples
        if lm.stalls:
            reason = max(lm.stalls, key=lambda r: lm.stalls[r])
            v["line_dominant_stall"] = reason
            v["line_dominant_stall_share"] = lm.stalls[reason] / lm.stall_samples if lm.stall_samples else 0.0
        if lm.l2_sectors_global:
            v["line_l2_sectors"] = lm.l2_sectors_global
            v["line_ideal_sectors"] = lm.l2_sectors_global_ideal
            v["line_excess_sector_pct"] = 100.0 * lm.l2_sectors_global_excessive / lm.l2_sectors_global
            v["line_sector_share"] = lm.l2_sectors_global / total_sectors if total_sectors else 0.0
            v["line_sectors_per_ideal"] = (
                lm.l2_sectors_global / lm.l2_sectors_global_ideal if lm.l2_sectors_global_ideal else 0.0
            )
        if lm.shared_nway_max:
            v["line_shared_nway"] = lm.shared_nway_max
        if lm.shared_wavefronts:
            v["line_shared_excess_pct"] = 100.0 * lm.shared_wavefronts_excessive / lm.shared_wavefronts
        if lm.inst_executed:
            v["line_avg_threads"] = lm.thread_inst_executed / lm.inst_executed
            v["line_inst_share"] = lm.inst_executed / total_inst if total_inst else 0.0
            v["line_divergent_branches"] = lm.divergent_branches
        out[ln] = v
    return out


def bottleneck(d: dict[str, Any]) -> str:
    """A one-phrase classification (the same thresholds as the kernel rules)."""
    sm, mem = d.get("sm_pct"), d.get("mem_pct")
    if sm is None or mem is None:
        return "unknown"
    if max(sm, mem) < 60:
        return "latency-bound" if d.get("waves", 1) >= 1 else "small grid (latency-bound)"
    if mem >= sm:
        dram, l2, l1 = d.get("dram_pct", 0), d.get("l2_pct", 0), d.get("l1_pct", 0)
        # L2 throughput includes the DRAM traffic that passes through it: DRAM wins unless L2 is clearly higher
        # (the same thresholds as KL501-KL503).
        if dram >= 60 and l2 - dram < 25:
            return "memory-bound (DRAM)"
        return "memory-bound (L2)" if l2 >= l1 - 10 else "memory-bound (L1)"
    pipe = d.get("top_pipe")
    return f"compute-bound ({pipe} pipe)" if pipe else "compute-bound"


# --------------------------------------------------------------------------------------------------
# Findings


def profile_findings(
    report: Any,
    model: SourceModel,
    path: str,
    ruleset: rules.RuleSet,
    specs_by_entry: dict[str, spec.BoundSpec],
    entry_of: dict[str, str | None],
) -> tuple[list[Finding], list[KernelSummary]]:
    """Evaluate the profile rules over every kernel of ``report`` that is defined in ``model``."""
    from kernellsp.rules.evaluate import _finding

    basename = Path(path).name
    findings: list[Finding] = []
    summaries: list[KernelSummary] = []
    kernel_rules = ruleset.conditional("kernel", "profile")
    line_rules = ruleset.conditional("line", "profile")
    ncu_rule = ruleset.by_emitter("ncu-rule")
    seen: set[str] = set()
    for kp in report.kernels:
        if kp.name in seen:
            continue
        seen.add(kp.name)
        fn = model.function(kp.name)
        entry = entry_of.get(kp.name)
        bound = specs_by_entry.get(entry or kp.name)
        km = kernel_profile_metrics(kp, report, bound)
        rng = (
            Range(
                start_line=fn.name_span.start_line,
                start_col=fn.name_span.start_col,
                end_line=fn.name_span.end_line,
                end_col=fn.name_span.end_col,
            )
            if fn is not None
            else Range(start_line=0, end_line=0)
        )
        kfind: list[Finding] = []
        # Kernels defined elsewhere (cuBLAS, a library, another file) get a summary but no findings:
        # there is no line of this file to put them on.
        local = fn is not None
        for rule in kernel_rules if local else []:
            if rules.applies(rule, km):
                kfind.append(_finding(rule, path, rng, km, kp.name))
        lines = line_profile_metrics(kp, basename) if local else {}
        for ln, lv in sorted(lines.items()):
            values = {**km, **lv}
            text = model.lines[ln - 1] if 0 < ln <= len(model.lines) else None
            for rule in line_rules:
                if rules.applies(rule, values):
                    kfind.append(_finding(rule, path, line_range(ln - 1, text), values, kp.name))
        if ncu_rule is not None and local:
            for r in kp.ncu_rules:
                if r.type not in ("OPT", "WRN"):
                    continue
                title = r.title or r.name or r.rule_identifier
                est = (
                    f" (ncu est. {r.speedup_type or 'local'} speedup {r.estimated_speedup_pct:.0f}%)"
                    if r.estimated_speedup_pct
                    else ""
                )
                msg = f"ncu {r.rule_identifier}: {title}: {' '.join(r.message.split())[:400]}{est}"
                f = _finding(ncu_rule, path, rng, {"message": msg}, kp.name, msg)
                f.estimated_speedup_pct = r.estimated_speedup_pct
                f.impact = r.estimated_speedup_pct or 0.0
                f.severity = Severity.info
                f.evidence = {"ncu_rule": r.rule_identifier, "section": r.section, "type": r.type}
                kfind.append(f)
        for f in kfind:
            f.source = "profile"
            f.evidence.setdefault("duration_ns", km.get("duration_ns"))
        findings.extend(kfind)
        summaries.append(
            KernelSummary(
                name=kp.name,
                entry=entry,
                duration_ns=km.get("duration_ns"),
                dram_pct=km.get("dram_pct"),
                fp32_pct=km.get("fp32_pct_of_peak"),
                sm_pct=km.get("sm_pct"),
                bottleneck=bottleneck(km),
                hot_lines=_hot_lines(kp, 5),
                metrics={k: v for k, v in km.items() if isinstance(v, int | float | str)},
                line_stalls=[
                    {
                        "line": ln,
                        "share": lv["line_stall_share"],
                        "stall": lv.get("line_dominant_stall"),
                        "stall_share": lv.get("line_dominant_stall_share"),
                    }
                    for ln, lv in sorted(lines.items())
                    if lv.get("line_stall_share")
                ],
                ncu_rules=[
                    {
                        "id": r.rule_identifier,
                        "type": r.type,
                        "title": r.title,
                        "speedup_pct": r.estimated_speedup_pct,
                    }
                    for r in kp.ncu_rules
                    if r.type in ("OPT", "WRN")
                ],
            )
        )
    findings.sort(key=lambda f: (-f.impact, f.range.start_line))
    return findings, summaries
