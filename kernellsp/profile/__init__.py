"""Profiling data: Nsight Compute reports read into typed per-kernel and per-line models."""

from typing import TYPE_CHECKING

from kernellsp.profile.report import (
    DERIVED_DOC,
    STALL_REASONS,
    FocusMetric,
    HotLine,
    KernelProfile,
    LineMetrics,
    NcuRuleResult,
    ProfileReport,
    ReportError,
    SourceMarker,
    derive,
    hot_lines,
    load_report,
)

if TYPE_CHECKING:
    from kernellsp.rules.registry import MetricDef

__all__ = [
    "DERIVED_DOC",
    "STALL_REASONS",
    "FocusMetric",
    "HotLine",
    "KernelProfile",
    "LineMetrics",
    "NcuRuleResult",
    "ProfileReport",
    "ReportError",
    "SourceMarker",
    "derive",
    "hot_lines",
    "load_report",
]


def metric_defs() -> list["MetricDef"]:
    """Kernel-scope profile metrics for the rule registry (:mod:`kernellsp.rules.registry`)."""
    import re

    from kernellsp.rules.registry import MetricDef

    out: list[MetricDef] = []
    for name, doc in DERIVED_DOC.items():
        m = re.search(r"\[([^\]]+)\]\s*$", doc)
        unit = m.group(1) if m else ""
        out.append(MetricDef(name, "kernel", "ncu", unit, doc))
    for reason, doc in STALL_REASONS.items():
        name = f"stall_{reason}_share"
        if name not in DERIVED_DOC:
            out.append(MetricDef(name, "kernel", "ncu", "fraction", f"share of warp latency stalled on {reason}: {doc}"))
    return out
