"""Formatting findings: compiler-style text, stable JSON, and SARIF 2.1.0.

Text is ``path:line:col: severity: CODE message`` (1-based, gcc's layout with the colon after the
severity, so editors' and CI's gcc problem matchers pick it up), coloured only when the stream is a TTY. JSON is stable: keys sorted,
findings ordered by path, line, column and code, schema versioned. SARIF follows GitHub code
scanning's profile: repo-relative URIs, rules with help text, 1-based regions, and a
``primaryLocationLineHash`` fingerprint.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections import Counter
from pathlib import Path
from typing import Any

from kernellsp import __version__
from kernellsp.check import CheckReport
from kernellsp.findings import Finding, Severity
from kernellsp.rules.engine import Rule, RuleSet

JSON_SCHEMA_VERSION = 1
_COLOURS = {"error": "\x1b[1;31m", "warning": "\x1b[1;33m", "info": "\x1b[1;36m", "hint": "\x1b[2m"}
_RESET = "\x1b[0m"


def display_path(path: str, base: Path | None = None) -> str:
    """``path`` relative to ``base`` (default: the working directory) when inside it, else as given."""
    try:
        rel = os.path.relpath(os.path.abspath(path), base or Path.cwd())
    except ValueError:
        return path
    return path if rel.startswith("..") else rel


def format_text(report: CheckReport, colour: bool = False, show_fix: bool = False) -> str:
    """Compiler-style lines, then a one-line summary."""
    lines: list[str] = []
    for f in report.findings:
        sev = f.severity.value
        sev_txt = f"{_COLOURS[sev]}{sev}{_RESET}" if colour else sev
        code = f"\x1b[1m{f.code}\x1b[0m" if colour else f.code
        lines.append(
            f"{display_path(f.path)}:{f.range.start_line + 1}:{f.range.start_col + 1}: {sev_txt}: {code} {f.message}"
        )
        if show_fix and f.fix:
            lines.append(f"    fix: {f.fix}")
    for fr in report.files:
        if fr.error:
            lines.append(f"{display_path(fr.path)}: error: {fr.error}")
    lines.append(summary(report))
    return "\n".join(lines) + "\n"


def summary(report: CheckReport) -> str:
    counts = Counter(f.severity.value for f in report.findings)
    n_files = len(report.files)
    n_kernels = sum(len(fr.kernels) for fr in report.files)
    if not report.findings:
        head = "No findings"
    else:
        parts = [
            f"{counts[s]} {s}{'s' if counts[s] != 1 and s != 'info' else ''}"
            for s in ("error", "warning", "info", "hint")
            if counts[s]
        ]
        head = (
            f"{len(report.findings)} finding{'s' if len(report.findings) != 1 else ''} ({', '.join(parts)})"
        )
    errs = len(report.errors)
    tail = f"; {errs} file{'s' if errs != 1 else ''} could not be checked" if errs else ""
    return f"{head} in {n_files} file{'s' if n_files != 1 else ''} ({n_kernels} kernel{'s' if n_kernels != 1 else ''}){tail}."


def finding_dict(f: Finding) -> dict[str, Any]:
    d = f.model_dump(mode="json")
    d["path"] = display_path(f.path)
    # 1-based positions for humans and CI tools; the LSP adapter uses the 0-based model directly.
    d["location"] = {
        "line": f.range.start_line + 1,
        "column": f.range.start_col + 1,
        "end_line": f.range.end_line + 1,
        "end_column": f.range.end_col + 1,
    }
    return d


def format_json(report: CheckReport) -> str:
    """Stable JSON: ``{"version", "kernellsp", "findings", "files", "notes", "summary"}``."""
    files = []
    for fr in report.files:
        files.append(
            {
                "path": display_path(fr.path),
                "error": fr.error,
                "kernels": [
                    {
                        "name": k.name,
                        "line": k.line + 1,
                        "has_spec": k.has_spec,
                        "metrics": {mk: mv for mk, mv in sorted(k.metrics.items()) if mv is not None},
                    }
                    for k in fr.kernels
                ],
                "build": None
                if fr.build is None
                else {
                    "ok": fr.build.ok,
                    "arch": fr.build.arch,
                    "nvcc": fr.build.nvcc_version,
                    "cached": fr.build.cached,
                    "sass": fr.build.sass_available,
                },
            }
        )
    doc = {
        "version": JSON_SCHEMA_VERSION,
        "kernellsp": __version__,
        "findings": [finding_dict(f) for f in report.findings],
        "files": files,
        "notes": report.notes,
        "summary": dict(Counter(f.severity.value for f in report.findings)),
    }
    return json.dumps(doc, indent=2, sort_keys=True) + "\n"


_SARIF_LEVEL = {
    Severity.error: "error",
    Severity.warning: "warning",
    Severity.info: "note",
    Severity.hint: "note",
}
_SARIF_PROBLEM = {
    Severity.error: "error",
    Severity.warning: "warning",
    Severity.info: "recommendation",
    Severity.hint: "recommendation",
}


#: Rule categories about whether the code is right, not how fast it is.
_CORRECTNESS = frozenset({"hazard", "build", "spec"})


def sarif_tags(rule: Rule) -> list[str]:
    """A rule's SARIF tags, each once: ``cuda``, ``correctness`` or ``performance``, its category, and
    ``profile`` for rules that need a GPU profile (GitHub shows them as filters)."""
    tags = ["cuda", "correctness" if rule.category in _CORRECTNESS else "performance", rule.category]
    if rule.source == "profile":
        tags.append("profile")
    return list(dict.fromkeys(tags))


def _line_hash(f: Finding, text_lines: dict[str, list[str]]) -> str:
    lines = text_lines.get(f.path)
    content = lines[f.range.start_line].strip() if lines and f.range.start_line < len(lines) else ""
    return hashlib.sha256(f"{f.code}:{content}".encode()).hexdigest()[:16] + ":1"


def format_sarif(report: CheckReport, ruleset: RuleSet) -> str:
    """SARIF 2.1.0 for GitHub code scanning (validated against the official schema in the tests)."""
    used = sorted({f.code for f in report.findings})
    rule_index = {code: i for i, code in enumerate(used)}
    rules_out = []
    for code in used:
        r = ruleset.get(code)
        if r is None:
            rules_out.append({"id": code, "shortDescription": {"text": code}})
            continue
        rules_out.append(
            {
                "id": r.code,
                "name": r.name,
                "shortDescription": {"text": r.title[:1024]},
                "fullDescription": {"text": " ".join(r.guidance.split())[:4000]},
                "help": {
                    "text": f"{r.fix}\n\n{' '.join(r.guidance.split())}",
                    "markdown": f"**Fix:** {r.fix}\n\n{' '.join(r.guidance.split())}",
                },
                "defaultConfiguration": {"level": _SARIF_LEVEL[r.severity]},
                "properties": {
                    "tags": sarif_tags(r),
                    "precision": "high" if r.source == "profile" or r.emitter else "medium",
                    "problem.severity": _SARIF_PROBLEM[r.severity],
                },
                **({"helpUri": r.references[0]} if r.references else {}),
            }
        )
    text_lines = {fr.path: fr.model.lines for fr in report.files if fr.model is not None}
    results = []
    for f in report.findings:
        region: dict[str, int] = {"startLine": f.range.start_line + 1, "startColumn": f.range.start_col + 1}
        if f.range.end_line >= f.range.start_line:
            region["endLine"] = f.range.end_line + 1
            end_col = f.range.end_col + 1
            if f.range.end_line > f.range.start_line or end_col > region["startColumn"]:
                region["endColumn"] = end_col
        result: dict[str, Any] = {
            "ruleId": f.code,
            "ruleIndex": rule_index[f.code],
            "level": _SARIF_LEVEL[f.severity],
            "message": {"text": f.message},
            "locations": [
                {
                    "physicalLocation": {
                        "artifactLocation": {
                            "uri": Path(display_path(f.path)).as_posix(),
                            "uriBaseId": "%SRCROOT%",
                        },
                        "region": region,
                    }
                }
            ],
            "partialFingerprints": {"primaryLocationLineHash": _line_hash(f, text_lines)},
        }
        if f.evidence:
            result["properties"] = {"evidence": f.evidence, **({"kernel": f.kernel} if f.kernel else {})}
        results.append(result)
    doc = {
        "$schema": "https://json.schemastore.org/sarif-2.1.0.json",
        "version": "2.1.0",
        "runs": [
            {
                "tool": {
                    "driver": {
                        "name": "kernellsp",
                        "version": __version__,
                        "semanticVersion": __version__,
                        "informationUri": "https://github.com/kernellsp/kernellsp",
                        "rules": rules_out,
                    }
                },
                "originalUriBaseIds": {"%SRCROOT%": {"uri": Path.cwd().as_uri() + "/"}},
                "results": results,
                "invocations": [
                    {
                        "executionSuccessful": not report.errors,
                        "toolExecutionNotifications": [
                            {"level": "warning", "message": {"text": n}} for n in report.notes + report.errors
                        ],
                    }
                ],
            }
        ],
    }
    return json.dumps(doc, indent=2) + "\n"
