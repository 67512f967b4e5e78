"""Hover: what the last check knows about the kernel or the line under the cursor.

On a kernel's name: registers, spills, stack, shared memory, occupancy and its limiter, block
size and where it came from, and whether the kernel has a launch spec. On a line that carries a
kernellsp diagnostic: the rule's title, the message, the fix and the rule's guidance, with a link.
Answers only from the cached check result (no build, no parse), so it stays instant while jobs run.
"""

from __future__ import annotations

import re
from typing import Any

from lsprotocol import types
from pygls.capabilities import get_capability

from kernellsp.check import KernelReport
from kernellsp.lsp.convert import RangeMapper, rule_url
from kernellsp.lsp.server import CheckResult, KernelLspServer

_WORD = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def _word_at(line: str, col: int) -> tuple[str, int, int] | None:
    for m in _WORD.finditer(line):
        if m.start() <= col < m.end():
            return m.group(0), m.start(), m.end()
    return None


def _fmt(v: Any, unit: str = "") -> str:
    if v is None:
        return "?"
    if isinstance(v, float):
        return f"{v:.0f}{unit}"
    return f"{v}{unit}"


def kernel_markdown(k: KernelReport) -> str:
    """A kernel's resource summary as Markdown."""
    m = k.metrics
    lines = [f"**{k.name}** (`__global__`, {m.get('arch', '?')})", ""]
    if "registers" in m:
        lines.append(f"- registers: {m['registers']} per thread")
        lines.append(
            f"- spills: {_fmt(m.get('spill_stores'))} B stored, {_fmt(m.get('spill_loads'))} B loaded; "
            f"stack frame {_fmt(m.get('stack_frame'))} B"
        )
        lines.append(
            f"- shared memory: {_fmt(m.get('smem_static'))} B static, {_fmt(m.get('smem_dynamic'))} B dynamic"
        )
        if m.get("instantiations", 1) and m.get("instantiations", 1) > 1:
            lines.append(f"- {m['instantiations']} template instantiations (worst shown)")
    else:
        lines.append("- no build data (nvcc unavailable or the build failed)")
    if "occupancy_pct" in m:
        lines.append(
            f"- occupancy: {_fmt(m['occupancy_pct'], '%')} ({_fmt(m.get('blocks_per_sm'))} blocks/SM, "
            f"limited by {m.get('occupancy_limiter', '?')})"
        )
    if m.get("block_size"):
        lines.append(f"- block: {m['block_size']} threads (from {m.get('block_source', '?')})")
    lines.append(f"- launch spec: {'yes' if k.has_spec else 'no (code action: Add launch spec)'}")
    return "\n".join(lines)


def finding_markdown(res: CheckResult, line: int) -> list[str]:
    """Markdown for every finding on ``line``: rule title, message, fix and guidance."""
    out: list[str] = []
    for f in res.report.findings:
        if not (f.range.start_line <= line <= f.range.end_line):
            continue
        rule = res.rules.get(f.code)
        title = rule.title if rule else f.title
        url = rule_url(rule) if rule else None
        head = f"**{f.code}** {title}" + (f" ([rule]({url}))" if url else "")
        parts = [head, "", f.message]
        if f.fix:
            parts += ["", f"**Fix:** {f.fix}"]
        if rule and rule.guidance.strip():
            parts += ["", " ".join(rule.guidance.split())]
        out.append("\n".join(parts))
    return out


def hover(ls: KernelLspServer, params: types.HoverParams) -> types.Hover | None:
    """Kernel resources on a kernel name; rule details on a line with a diagnostic."""
    uri = params.text_document.uri
    res = ls.results.get(uri)
    if res is None or res.model is None:
        return None
    current = ls.model_for(uri)
    doc_version = ls.workspace.get_text_document(uri).version
    if res.version != doc_version and (current is None or current[0] != doc_version):
        return None  # edited since the check and too large to re-parse now: no answer beats a wrong one
    model = current[1] if current is not None else res.model
    mapper = RangeMapper(ls.position_encoding(), model.lines)
    line = params.position.line
    col = mapper.col_from_client(line, params.position.character)
    sections: list[str] = []
    if 0 <= line < len(model.lines):
        w = _word_at(model.lines[line], col)
        k = next((k for k in res.report.kernels if k.name == w[0]), None) if w is not None else None
        if k is not None:
            sections.append(kernel_markdown(k))
    if res.version == doc_version:  # findings' lines hold only for the checked text
        sections += finding_markdown(res, line)
    if not sections:
        return None
    fmts = get_capability(ls.client_capabilities, "text_document.hover.content_format", None) or []
    kind = (
        types.MarkupKind.Markdown
        if (not fmts or types.MarkupKind.Markdown in fmts)
        else types.MarkupKind.PlainText
    )
    return types.Hover(contents=types.MarkupContent(kind=kind, value="\n\n---\n\n".join(sections)))


def register(ls: KernelLspServer) -> None:
    """Register the hover provider."""
    ls.feature(types.TEXT_DOCUMENT_HOVER)(hover)
