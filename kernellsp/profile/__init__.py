"""Profiling data: Nsight Compute reports read into typed per-kernel and per-line models."""

from kernellsp.profile.derive import DERIVED_DOC, STALL_REASONS, derive, hot_lines
from kernellsp.profile.models import (
    FocusMetric,
    HotLine,
    KernelProfile,
    LineMetrics,
    NcuRuleResult,
    ProfileReport,
    ReportError,
    SourceMarker,
)
from kernellsp.profile.report import load_report

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
