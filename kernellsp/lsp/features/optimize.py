"""The "Optimize KERNEL with verified rewrite" quick fix and the ``kernellsp.optimize`` command.

The code action (computed from the cached check: no GPU work, no waiting) carries the command
``kernellsp.optimize(uri, entry)``. The command runs :func:`kernellsp.optimize.loop.optimize` as an
``"optimize"`` job with ``$/progress`` and cancellation (the Cancel button stops the loop and
kills its running tools; nothing is written). When the loop's final verdict accepts the champion:

* if the document is still at the version the run started from, the champion is applied with
  ``workspace/applyEdit`` as a versioned whole-document edit (the editor refuses it if the buffer
  moved on), and the original is kept as a backup for ``kernellsp revert``;
* otherwise the result is saved beside the file (``NAME.kernellsp.cu``) and the user is told so.

Either way the verified speedup and the evidence bundle's path are reported in one message.
"""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from lsprotocol import types
from pygls.capabilities import get_capability

from kernellsp.lsp.convert import RangeMapper
from kernellsp.lsp.features.code_actions import kind_requested, workspace_edit
from kernellsp.lsp.jobs import ProgressReporter
from kernellsp.lsp.server import KernelLspServer
from kernellsp.optimize.apply import record_backup, side_file
from kernellsp.optimize.loop import default_proposers, optimize
from kernellsp.optimize.propose.base import ProposerError
from kernellsp.optimize.result import OptimizeError, OptimizeOptions
from kernellsp.optimize.verify.gate import VerifyError, VerifyOptions
from kernellsp.rules.engine import load_rules
from kernellsp.run.runner import RunnerError
from kernellsp.source import spec

log = logging.getLogger(__name__)

KIND = "optimize"
OPTIMIZE = "kernellsp.optimize"


def _entries(model: Any) -> list[str]:
    return [b.entry for b in spec.specs_from_source(model)[0]]


SHOW_PROFILE = "kernellsp.showProfile"


def show_profile_action(
    uri: str, has_profile: bool, diagnostics: list[types.Diagnostic], only: Sequence[str] | None
) -> types.CodeAction | None:
    """ "Show profile report": a quick fix on profile diagnostics, a source action elsewhere."""
    if not has_profile:
        return None
    on_profile = [d for d in diagnostics if str(d.code).startswith(("KL5", "KL6"))]
    kind = types.CodeActionKind.QuickFix if on_profile else types.CodeActionKind.Source
    if not kind_requested(list(only or []), kind):
        return None
    return types.CodeAction(
        title="Show profile report",
        kind=kind,
        diagnostics=on_profile or None,
        command=types.Command(title="Show profile report", command=SHOW_PROFILE, arguments=[uri]),
    )


def optimize_actions(ls: KernelLspServer, params: types.CodeActionParams) -> list[types.CodeAction]:
    """One "Optimize ENTRY with verified rewrite" action per spec'd entry the range touches, and
    "Show profile report" once the document has a profile."""
    extra = show_profile_action(
        params.text_document.uri,
        params.text_document.uri in ls.profiles,
        list(params.context.diagnostics or []),
        params.context.only,
    )
    return ([extra] if extra else []) + _optimize_actions(ls, params)


def _optimize_actions(ls: KernelLspServer, params: types.CodeActionParams) -> list[types.CodeAction]:
    quick = kind_requested(list(params.context.only or []), types.CodeActionKind.QuickFix)
    rewrite = kind_requested(list(params.context.only or []), types.CodeActionKind.RefactorRewrite)
    if not (quick or rewrite):
        return []
    uri = params.text_document.uri
    found = ls.model_for(uri)
    if found is None:
        return []
    _version, model = found
    start, end = params.range.start.line, params.range.end.line
    out: list[types.CodeAction] = []
    # Without a GPU the action would only fail when chosen: offer it greyed out with the reason (clients that
    # support `disabled`), or not at all.
    known = ls.gpu_runner_known()
    no_gpu = known[1] if known is not None and known[0] is None else None
    if no_gpu is not None and not get_capability(
        ls.client_capabilities, "text_document.code_action.disabled_support", False
    ):
        return []
    for entry in _entries(model):
        fn = model.function(entry)
        if fn is None or not fn.has_body:
            continue
        spans = [fn.outer_span or fn.span]
        spans += [
            (model.function(s.kernel).span)  # type: ignore[union-attr]
            for s in model.launch_sites
            if s.caller in model.launchers(entry) and model.function(s.kernel) is not None
        ]
        if not any(sp.start_line <= end and start <= sp.end_line for sp in spans):
            continue
        diags = [
            d
            for d in params.context.diagnostics or []
            if isinstance(d.data, dict)
            and d.data.get("kernel")
            in (entry, *[s.kernel for s in model.launch_sites if s.caller in model.launchers(entry)])
        ]
        kind = types.CodeActionKind.QuickFix if diags and quick else types.CodeActionKind.RefactorRewrite
        if kind == types.CodeActionKind.RefactorRewrite and not rewrite:
            continue
        out.append(
            types.CodeAction(
                title=f"Optimize {entry} with verified rewrite",
                kind=kind,
                diagnostics=diags or None,
                command=types.Command(
                    title=f"Optimize {entry} with verified rewrite", command=OPTIMIZE, arguments=[uri, entry]
                ),
                disabled=types.CodeActionDisabled(reason=f"no GPU to verify a rewrite on: {no_gpu}")
                if no_gpu
                else None,
            )
        )
    return out


def _known_findings(
    ls: KernelLspServer, uri: str, version: int | None, entry: str
) -> tuple[list[Any], dict[str, Any] | None]:
    """The findings already known for this version of the document (static, then profile), and the profile
    summary of ``entry`` when there is one."""
    res = ls.results.get(uri)
    findings = list(res.report.findings) if res is not None and res.version == version else []
    # The profile's findings only when they were taken of this very text (their lines must hold).
    prof = ls.profiles.get(uri) if ls.profile_versions.get(uri) == version else None
    if prof is not None:
        findings += list(prof.findings)
    profile = None
    if prof is not None:
        summary = next((k for k in prof.kernels if k.entry == entry or k.name == entry), None)
        profile = summary.__dict__ if summary is not None else None
    return findings, profile


async def _apply_champion(
    ls: KernelLspServer, uri: str, version: int | None, text: str, entry: str, champion_text: str
) -> tuple[bool, str | None]:
    """Replace the document with the champion through the client, if it still holds ``text`` at ``version``;
    return whether the client applied it and, if not, its reason."""
    current = ls.workspace.get_text_document(uri)
    applied = False
    reason = None
    if current.version == version and current.source == text:
        lines = text.split("\n")
        # The end of the document in the negotiated position encoding (Neovim speaks UTF-8, VS Code UTF-16).
        last = len(lines) - 1
        end = types.Position(
            line=last,
            character=RangeMapper(ls.position_encoding(), lines).col_to_client(last, len(lines[last])),
        )
        edit = types.TextEdit(
            range=types.Range(start=types.Position(line=0, character=0), end=end),
            new_text=champion_text,
        )
        wedit = workspace_edit(ls, uri, version, edit)
        reply = await ls.workspace_apply_edit_async(
            types.ApplyWorkspaceEditParams(edit=wedit, label=f"Optimize {entry}")
        )
        applied = bool(reply.applied)
        reason = reply.failure_reason
    return applied, reason


async def run_optimize(ls: KernelLspServer, uri: str, entry: str) -> dict[str, Any]:
    """``kernellsp.optimize(uri, entry)``: the verified rewrite loop as a cancellable job."""
    doc = ls.workspace.get_text_document(uri)
    version = doc.version
    text = doc.source
    path = ls.document_path(uri)
    settings = ls.settings
    runner, problem = ls.gpu_runner()
    if runner is None:
        msg = f"kernellsp: cannot optimize {entry}: {problem}"
        ls.notify(msg, types.MessageType.Warning)
        return {"accepted": False, "reason": msg}
    root = spec.find_workspace_root(path) if path.parent.is_dir() else ls.workspace_root()
    ruleset = load_rules(root)
    try:
        proposers = default_proposers(settings, ruleset)
    except (OptimizeError, ProposerError) as exc:
        ls.notify(f"kernellsp: {exc}", types.MessageType.Warning)
        return {"accepted": False, "reason": str(exc)}
    findings, profile = _known_findings(ls, uri, version, entry)
    options = OptimizeOptions(
        rounds=settings.optimize_rounds,
        candidates=settings.optimize_candidates,
        min_gain_pct=settings.min_gain_pct,
        verify=VerifyOptions(precision=settings.precision),
    )

    async def job(progress: ProgressReporter, cancel: threading.Event) -> Any:
        """Run the loop in the dedicated executor; report round, candidate and verdicts."""
        best = [1.0]

        def event(e: dict[str, Any]) -> None:
            if e.get("event") == "champion":
                best[0] = float(e["speedup"])
            if e.get("event") == "verdict":
                progress.report(f"round {e['round']}: {e['verdict']} (best {best[0]:.3f}x)")

        def say(message: str, pct: float | None) -> None:
            progress.report(f"{message} (best {best[0]:.3f}x)", int(pct) if pct is not None else None)

        return await ls.jobs.run_blocking(
            optimize,
            path,
            text,
            entry,
            runner,
            proposers,
            options,
            findings,
            profile,
            None,
            cancel,
            say,
            event,
        )

    task = ls.jobs.start(uri, KIND, f"Optimizing {entry}", job)
    try:
        result = await task
    except asyncio.CancelledError:
        return {"accepted": False, "reason": "cancelled; nothing was changed"}
    except (OptimizeError, VerifyError, RunnerError) as exc:
        ls.notify(f"kernellsp: optimizing {entry} failed: {exc}", types.MessageType.Warning)
        return {"accepted": False, "reason": str(exc)}
    if result is None or not result.accepted or result.final is None:
        why = (
            f"{result.final.kind}: {result.final.message}"
            if result is not None and result.final
            else (result.stop_reason if result is not None else "no result")
        )
        ls.notify(f"kernellsp: no verified improvement for {entry} ({why}); the file is unchanged")
        return {"accepted": False, "reason": why, "bundle": result.bundle if result else None}
    message = f"{entry}: verified {result.final.message}"
    applied, reason = await _apply_champion(ls, uri, version, text, entry, result.champion_text)
    if applied:
        record_backup(path, text, result.champion_text, result.bundle)
    if not applied:
        side = side_file(path, result.champion_text)
        ls.notify(
            f"kernellsp: {message}; the document changed while optimizing"
            f"{' (' + reason + ')' if reason else ''}, so the result was saved as {side}"
        )
        return {
            "accepted": True,
            "applied": False,
            "side_file": str(side),
            "speedup": result.speedup,
            "message": message,
            "bundle": result.bundle,
        }
    ls.notify(f"kernellsp: {message}; applied (evidence in {Path(result.bundle or '').name})")
    return {
        "accepted": True,
        "applied": True,
        "speedup": result.speedup,
        "message": message,
        "bundle": result.bundle,
    }


def register(ls: KernelLspServer) -> None:
    """Register ``kernellsp.optimize``."""
    ls.command(OPTIMIZE)(run_optimize)
