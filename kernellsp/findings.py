"""Findings: what kernellsp reports, whatever produced it (nvcc, a static rule, a profile rule).

A finding has a stable rule code (``KL201``), a severity, a message, a source range and evidence
(the metric values the rule quoted). The CLI prints findings as text, JSON or SARIF; the language
server turns them into diagnostics. Ranges are 0-based (LSP convention).
"""

from __future__ import annotations

from enum import StrEnum
from typing import Any

from pydantic import BaseModel, Field


class Severity(StrEnum):
    """Severity, ordered: error > warning > info > hint."""

    error = "error"
    warning = "warning"
    info = "info"
    hint = "hint"

    @property
    def rank(self) -> int:
        return {"error": 3, "warning": 2, "info": 1, "hint": 0}[self.value]


class Range(BaseModel):
    """0-based start/end line and character column; the end is exclusive."""

    start_line: int
    start_col: int = 0
    end_line: int
    end_col: int = 0


class Finding(BaseModel):
    """One reported problem."""

    code: str
    severity: Severity
    message: str
    path: str
    range: Range
    kernel: str | None = None
    source: str = "static"  # static | nvcc | spec | profile
    title: str = ""
    fix: str | None = None
    evidence: dict[str, Any] = Field(default_factory=dict)
    #: ncu's or our own estimate of the kernel-time share this fix could save (percent, local).
    estimated_speedup_pct: float | None = None
    #: Ordering key within a file: bigger first (profile findings rank by expected impact).
    impact: float = 0.0

    def sort_key(self) -> tuple[str, int, int, str]:
        return (self.path, self.range.start_line, self.range.start_col, self.code)


def counted(n: int, noun: str) -> str:
    """``1 finding``, ``2 findings``, ``0 files``: a count with its noun in the right number."""
    return f"{n} {noun}" + ("" if n == 1 else "s")


def line_range(line: int, text_line: str | None = None) -> Range:
    """The range of a whole source line, without its leading indentation."""
    if text_line is None:
        return Range(start_line=line, start_col=0, end_line=line, end_col=0)
    start = len(text_line) - len(text_line.lstrip())
    return Range(start_line=line, start_col=start, end_line=line, end_col=len(text_line.rstrip()))
