"""Findings from rules: a rule's condition evaluated over a kernel's metrics (kernel scope) and each line's
(line scope), and the finding a rule makes, with its rendered message, evidence and impact; the built-in
rules (nvcc's messages, spec problems) are looked up by their emitter."""

from __future__ import annotations

from typing import Any

from kernellsp.findings import Finding, Range, line_range
from kernellsp.rules import engine as rules
from kernellsp.source.model import Function, SourceModel


def _finding(
    rule: rules.Rule,
    path: str,
    rng: Range,
    values: dict[str, Any],
    kernel: str | None,
    message: str | None = None,
) -> Finding:
    used = rule.metric_names()
    evidence = {k: v for k, v in values.items() if k in used and k not in ("kernel", "line")}
    return Finding(
        code=rule.code,
        severity=rule.severity,
        message=message if message is not None else rules.render(rule.message, values),
        path=path,
        range=rng,
        kernel=kernel,
        source=rule.source if rule.emitter is None else ("spec" if "spec" in rule.emitter else "nvcc"),
        title=rule.title,
        fix=rule.fix,
        evidence=evidence,
        impact=rules.impact(rule, values),
    )


def evaluate_rules(
    ruleset: rules.RuleSet,
    model: SourceModel,
    path: str,
    fn: Function,
    km: dict[str, Any],
    lines: dict[int, dict[str, Any]],
    source: str = "static",
) -> list[Finding]:
    """Run kernel-scope and line-scope rules of ``source`` over one kernel's metrics."""
    out: list[Finding] = []
    for rule in ruleset.conditional("kernel", source):
        if rules.applies(rule, km):
            out.append(_finding(rule, path, _span_range(fn.name_span), km, fn.name))
    line_rules = ruleset.conditional("line", source)
    for ln in sorted(lines):
        values = {**km, **lines[ln]}
        for rule in line_rules:
            if rules.applies(rule, values):
                text = model.lines[ln] if ln < len(model.lines) else None
                out.append(_finding(rule, path, line_range(ln, text), values, fn.name))
    return out


def _span_range(span: Any) -> Range:
    return Range(
        start_line=span.start_line, start_col=span.start_col, end_line=span.end_line, end_col=span.end_col
    )


def _builtin(
    ruleset: rules.RuleSet,
    emitter: str,
    path: str,
    rng: Range,
    values: dict[str, Any],
    kernel: str | None = None,
) -> Finding | None:
    rule = ruleset.by_emitter(emitter)
    if rule is None:
        return None
    return _finding(rule, path, rng, values, kernel)
