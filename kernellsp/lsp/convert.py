"""Core objects → LSP wire format: findings to diagnostics, columns between encodings, rule links.

Core ranges are 0-based lines and *character* (code point) columns; LSP positions count UTF-16
code units unless the client negotiated UTF-8 or UTF-32. :class:`RangeMapper` converts both ways
over the lines of the text that was checked (pure-ASCII lines need no conversion).
:func:`diagnostic` builds the JSON object of one ``Diagnostic``. This module imports neither pygls
nor lsprotocol: it runs in worker processes, where that import would cost half a second.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from functools import lru_cache
from pathlib import Path
from typing import Any

from kernellsp.findings import Finding, Severity
from kernellsp.findings import Range as CoreRange
from kernellsp.rules.engine import Rule, RuleSet, bundled_rules_dir

SOURCE = "kernellsp"
RULES_URL = "https://github.com/kernellsp/kernellsp/blob/main/rules/"

#: Finding severity → LSP ``DiagnosticSeverity`` (Error 1, Warning 2, Information 3, Hint 4).
SEVERITY = {Severity.error: 1, Severity.warning: 2, Severity.info: 3, Severity.hint: 4}


def rule_url(rule: Rule) -> str | None:
    """The documentation link of a rule: GitHub for bundled rules, a file URI for workspace rules."""
    return _rule_url(rule.origin, str(bundled_rules_dir())) if rule.origin else None


@lru_cache(maxsize=256)
def _rule_url(origin_text: str, bundled_dir: str) -> str | None:
    origin = Path(origin_text)
    try:
        bundled = origin.resolve().parent == Path(bundled_dir).resolve()
    except OSError:
        bundled = False
    if bundled:
        return RULES_URL + origin.name
    try:
        return origin.resolve().as_uri()
    except ValueError:
        return None


def _units(ch: str, encoding: str) -> int:
    cp = ord(ch)
    if encoding == "utf-8":
        return 1 if cp < 0x80 else 2 if cp < 0x800 else 3 if cp < 0x10000 else 4
    return 2 if cp >= 0x10000 else 1  # utf-16


class RangeMapper:
    """Convert columns between code points (core) and the client's ``positionEncoding``."""

    def __init__(self, encoding: str, lines: Sequence[str]) -> None:
        self.encoding = encoding if encoding in ("utf-8", "utf-16", "utf-32") else "utf-16"
        self.lines = lines

    def _plain(self, line: int) -> bool:
        return self.encoding == "utf-32" or not (0 <= line < len(self.lines)) or self.lines[line].isascii()

    def col_to_client(self, line: int, col: int) -> int:
        """Code point column → client units."""
        if self._plain(line):
            return col
        return sum(_units(c, self.encoding) for c in self.lines[line][:col])

    def col_from_client(self, line: int, units: int) -> int:
        """Client units → code point column (clamped to the line)."""
        if self._plain(line):
            return units
        acc = 0
        for i, c in enumerate(self.lines[line]):
            if acc >= units:
                return i
            acc += _units(c, self.encoding)
        return len(self.lines[line])

    def range_to_client(self, r: CoreRange) -> dict[str, Any]:
        """A core range as an LSP ``Range`` object."""
        return {
            "start": {"line": r.start_line, "character": self.col_to_client(r.start_line, r.start_col)},
            "end": {"line": r.end_line, "character": self.col_to_client(r.end_line, r.end_col)},
        }


_PLAIN = (str, int, float, bool, type(None))


def _jsonable(value: dict[str, Any]) -> dict[str, Any]:
    """``value`` unchanged when it is already plain JSON (the usual case), else a JSON round trip."""
    if all(
        isinstance(v, _PLAIN) or (isinstance(v, dict) and all(isinstance(x, _PLAIN) for x in v.values()))
        for v in value.values()
    ):
        return value
    out: dict[str, Any] = json.loads(json.dumps(value, default=str))
    return out


def diagnostic(
    finding: Finding,
    uri: str,
    mapper: RangeMapper,
    rules: RuleSet | None,
    *,
    code_description: bool = True,
    related_information: bool = True,
) -> dict[str, Any]:
    """One finding as an LSP ``Diagnostic`` (wire format): code, link, severity, ``data``, fix hint."""
    rng = mapper.range_to_client(finding.range)
    rule = rules.get(finding.code) if rules is not None else None
    d: dict[str, Any] = {
        "range": rng,
        "message": finding.message,
        "severity": SEVERITY[finding.severity],
        "code": finding.code,
        "source": SOURCE,
    }
    href = rule_url(rule) if rule is not None and code_description else None
    if href:
        d["codeDescription"] = {"href": href}
    if finding.fix and related_information:
        d["relatedInformation"] = [{"location": {"uri": uri, "range": rng}, "message": f"fix: {finding.fix}"}]
    d["data"] = _jsonable(
        {"code": finding.code, "kernel": finding.kernel, "evidence": finding.evidence, "fix": finding.fix}
    )
    return d
