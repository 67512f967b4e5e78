"""Commands (``workspace/executeCommand``).

* ``kernellsp.addLaunchSpec(uri, kernel)``: insert a draft launch spec above the kernel through
  ``workspace/applyEdit``; returns ``{"applied": bool, "reason": str | None}``.
* ``kernellsp.showRule(code)``: the rule's text (metadata, condition, message, fix, guidance).
* ``kernellsp.checkFile(uri)``: check the document again now (the same job as a save) and return
  a summary: findings by severity and code, kernels (0-based ``line``), spec'd ``entries``, version,
  seconds, or ``cancelled``.

``kernellsp.optimize`` and ``kernellsp.showProfile`` live with their features
(:mod:`.optimize`, :mod:`.profile`); ``kernellsp.checkWorkspace`` and ``kernellsp.revert`` in
:mod:`.workspace`; ``kernellsp.status`` and ``kernellsp.cancelJob`` in :mod:`.status`.
"""

from __future__ import annotations

import asyncio
import logging
from collections import Counter
from pathlib import Path
from typing import Any

from lsprotocol import types

from kernellsp.lsp.features.code_actions import eol_of, launch_spec_text_edit, workspace_edit
from kernellsp.lsp.features.diagnostics import start_check
from kernellsp.lsp.server import CheckResult, CommandError, KernelLspServer
from kernellsp.lsp.worker import parse_document
from kernellsp.rules.engine import RuleError, load_rules
from kernellsp.source import spec
from kernellsp.source.draft import draft_problem

log = logging.getLogger(__name__)

ADD_LAUNCH_SPEC = "kernellsp.addLaunchSpec"
SHOW_RULE = "kernellsp.showRule"
CHECK_FILE = "kernellsp.checkFile"
#: Names reserved for the profile and optimize features (registered by those features).
OPTIMIZE = "kernellsp.optimize"
SHOW_PROFILE = "kernellsp.showProfile"


async def add_launch_spec(ls: KernelLspServer, uri: str, kernel: str) -> dict[str, Any]:
    """Insert a draft launch spec for ``kernel`` in ``uri`` via ``workspace/applyEdit``."""
    doc = ls.workspace.get_text_document(uri)
    version = doc.version
    try:
        text = doc.source
    except OSError as exc:
        return {"applied": False, "reason": f"cannot read {uri}: {exc.strerror or exc}"}
    model = await ls.jobs.run_in_process(parse_document, text, str(ls.document_path(uri)))
    fn = model.function(kernel)
    if fn is None or not fn.is_kernel or not fn.has_body:
        return {"applied": False, "reason": f"no __global__ kernel named {kernel!r} in this document"}
    if any(b.entry == kernel for b in spec.specs_from_source(model)[0]):
        return {"applied": False, "reason": f"{kernel} already has a launch spec"}
    problem = draft_problem(fn, model.text)
    if problem is not None:
        ls.notify(f"kernellsp: no launch spec for {kernel}: {problem}", types.MessageType.Warning)
        return {"applied": False, "reason": problem}
    edit = workspace_edit(ls, uri, version, launch_spec_text_edit(fn, model, eol_of(model)))
    result = await ls.workspace_apply_edit_async(
        types.ApplyWorkspaceEditParams(edit=edit, label=f"Add launch spec for {kernel}")
    )
    if not result.applied:
        reason = result.failure_reason or "the editor did not apply the edit"
        ls.notify(f"kernellsp: could not add a launch spec for {kernel}: {reason}", types.MessageType.Warning)
        return {"applied": False, "reason": reason}
    return {"applied": True, "reason": None}


def rule_text(code: str, workspace: Path | None) -> str:
    """The full text of one rule (what ``kernellsp rules show`` prints)."""
    rs = load_rules(workspace)
    r = rs.get(code.strip().upper())
    if r is None:
        raise CommandError(f"no rule {code!r}; known: {', '.join(sorted(rs.rules))}")
    lines = [
        f"{r.code} {r.name}: {r.title}",
        f"severity: {r.severity.value}   scope: {r.scope}   category: {r.category}   source: {r.source}",
        f"when: {r.when}" if r.when else f"emitter: {r.emitter}",
        f"message: {r.message}",
        f"fix: {r.fix}",
        f'silence: `// kernellsp: ignore[{r.code}]` on the line or the line above, or ignore = ["{r.code}"] in '
        "kernellsp.toml [settings]",
        "",
        r.guidance.strip(),
    ]
    if r.references:
        lines += ["", *[f"see {u}" for u in r.references]]
    return "\n".join(lines)


async def show_rule(ls: KernelLspServer, code: str) -> str:
    """Return the text of rule ``code`` (e.g. ``KL101``)."""
    try:
        return await ls.jobs.run_blocking(rule_text, code, ls.workspace_root())
    except RuleError as exc:
        raise CommandError(f"malformed rule file: {exc}") from None


def summary(res: CheckResult) -> dict[str, Any]:
    """A compact, JSON-able summary of a check result."""
    sev = Counter(f.severity.value for f in res.report.findings)
    return {
        "uri": res.uri,
        "version": res.version,
        "cancelled": False,
        "findings": len(res.report.findings),
        "bySeverity": {k: sev.get(k, 0) for k in ("error", "warning", "info", "hint")},
        "byCode": dict(sorted(Counter(f.code for f in res.report.findings).items())),
        "kernels": [
            {
                "name": k.name,
                "line": k.line,
                "hasSpec": k.has_spec,
                "registers": k.metrics.get("registers"),
                "occupancyPct": k.metrics.get("occupancy_pct"),
            }
            for k in res.report.kernels
        ],
        # The spec'd entries (kernels and host launchers): what kernellsp.optimize can run.
        "entries": list(dict.fromkeys(b.entry for b in res.report.specs)),
        "arch": res.settings.arch,
        "seconds": round(res.seconds, 3),
    }


async def check_file(ls: KernelLspServer, uri: str) -> dict[str, Any]:
    """Check ``uri`` now and return the summary (``{"cancelled": true}`` if a newer check won)."""
    task = start_check(ls, uri)
    await asyncio.wait({task})
    if task.cancelled():
        return {"uri": uri, "cancelled": True}
    exc = task.exception()
    if exc is not None:
        raise ValueError(f"check failed: {type(exc).__name__}: {exc}") from None
    res: CheckResult = task.result()
    return summary(res)


def register(ls: KernelLspServer) -> None:
    """Register the commands (``executeCommandProvider`` lists them automatically)."""
    ls.command(ADD_LAUNCH_SPEC)(add_launch_spec)
    ls.command(SHOW_RULE)(show_rule)
    ls.command(CHECK_FILE)(check_file)
