"""Core objects → LSP types: findings to diagnostics, ranges between encodings, rule links.

Core ranges are 0-based lines and *character* (code point) columns; LSP positions count UTF-16
code units unless the client negotiated UTF-8 or UTF-32. :class:`RangeMapper` converts with
pygls' position codec over the lines of the text that was checked (pure-ASCII lines need no
conversion). Everything here is pure and fast: handlers call it on the event loop.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from lsprotocol import types
from pygls.workspace.position_codec import PositionCodec

from kernellsp.findings import Finding, Severity
from kernellsp.findings import Range as CoreRange
from kernellsp.rules import Rule, RuleSet, bundled_rules_dir

SOURCE = "kernellsp"
RULES_URL = "https://github.com/kernellsp/kernellsp/blob/main/rules/"

SEVERITY = {
    Severity.error: types.DiagnosticSeverity.Error,
    Severity.warning: types.DiagnosticSeverity.Warning,
    Severity.info: types.DiagnosticSeverity.Information,
    Severity.hint: types.DiagnosticSeverity.Hint,
}


def rule_url(rule: Rule) -> str | None:
    """The documentation link of a rule: GitHub for bundled rules, a file URI for workspace rules."""
    if not rule.origin:
        return None
    origin = Path(rule.origin)
    try:
        bundled = origin.resolve().parent == bundled_rules_dir().resolve()
    except OSError:
        bundled = False
    if bundled:
        return RULES_URL + origin.name
    try:
        return origin.resolve().as_uri()
    except ValueError:
        return None


class RangeMapper:
    """Convert between core (code point) columns and the client's position encoding."""

    def __init__(self, codec: PositionCodec, lines: Sequence[str]) -> None:
        self.codec = codec
        self.lines = lines
        self._identity = codec.encoding == types.PositionEncodingKind.Utf32

    def _col_to_client(self, line: int, col: int) -> int:
        if self._identity or line >= len(self.lines):
            return col
        text = self.lines[line]
        if text.isascii():
            return col
        return int(self.codec.client_num_units(text[:col]))

    def _col_from_client(self, line: int, units: int) -> int:
        if self._identity or line >= len(self.lines):
            return units
        text = self.lines[line]
        if text.isascii():
            return units
        pos = self.codec.position_from_client_units(self.lines, types.Position(line=line, character=units))
        return int(pos.character)

    def to_client(self, r: CoreRange) -> types.Range:
        return types.Range(
            start=types.Position(line=r.start_line, character=self._col_to_client(r.start_line, r.start_col)),
            end=types.Position(line=r.end_line, character=self._col_to_client(r.end_line, r.end_col)),
        )

    def position_from_client(self, pos: types.Position) -> tuple[int, int]:
        """(line, code point column) of a client position."""
        return pos.line, self._col_from_client(pos.line, pos.character)


def _jsonable(value: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = json.loads(json.dumps(value, default=str))
    return out


def diagnostic(
    finding: Finding, uri: str, mapper: RangeMapper, rules: RuleSet | None, *,
    code_description: bool = True, related_information: bool = True,
) -> types.Diagnostic:  # fmt: skip
    """One finding as an LSP diagnostic: code, link, severity, evidence in ``data``, fix hint."""
    rng = mapper.to_client(finding.range)
    rule = rules.get(finding.code) if rules is not None else None
    href = rule_url(rule) if rule is not None and code_description else None
    related = None
    if finding.fix and related_information:
        related = [types.DiagnosticRelatedInformation(location=types.Location(uri=uri, range=rng),
                                                      message=f"fix: {finding.fix}")]  # fmt: skip
    return types.Diagnostic(
        range=rng,
        message=finding.message,
        severity=SEVERITY[finding.severity],
        code=finding.code,
        code_description=types.CodeDescription(href=href) if href else None,
        source=SOURCE,
        related_information=related,
        data=_jsonable({"code": finding.code, "kernel": finding.kernel, "evidence": finding.evidence,
                        "fix": finding.fix}),
    )
