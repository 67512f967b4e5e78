"""Diagnostics: check a document on open and save (and, optionally, after edits) and publish.

Each trigger starts a ``"check"`` job for the document (:mod:`kernellsp.lsp.jobs`), so a newer
save cancels the stale check, and nvcc is killed through ``CheckOptions.cancel``. The job reads
the buffer text and version when it is started, runs :func:`kernellsp.check.check_text` in the
job manager's executor and publishes with the version it started from. ``didClose`` cancels the
document's jobs and clears its diagnostics.

``KERNELLSP_TEST_JOB_DELAY`` (seconds) makes every check wait that long, cancellably, before it
starts: a test hook for exercising slow jobs. It only delays; results are always real.
"""

from __future__ import annotations

import asyncio
import logging
import os
import threading
import time
from pathlib import Path
from typing import Any

from lsprotocol import types
from pygls.capabilities import get_capability

from kernellsp import rules as rules_mod
from kernellsp import spec, toolchain
from kernellsp.build import Cancelled
from kernellsp.check import CheckOptions, FileReport, check_text
from kernellsp.lsp.convert import RangeMapper, diagnostic
from kernellsp.lsp.jobs import ProgressReporter
from kernellsp.lsp.server import CheckResult, KernelLspServer
from kernellsp.settings import Settings

log = logging.getLogger(__name__)

KIND = "check"
#: How long a check waits for the first ``workspace/configuration`` answer before it goes ahead.
SETTINGS_WAIT_S = 5.0
TEST_DELAY_ENV = "KERNELLSP_TEST_JOB_DELAY"
CUDA_LANGUAGE_IDS = {"cuda", "cuda-cpp", "cu"}


def _test_delay() -> float:
    try:
        return max(0.0, float(os.environ.get(TEST_DELAY_ENV, "0") or 0))
    except ValueError:
        return 0.0


def run_check(path: Path, text: str, settings: Settings, workspace: Path | None, cancel: threading.Event,
              progress: ProgressReporter | None = None) -> tuple[FileReport, rules_mod.RuleSet, list[str]]:  # fmt: skip
    """Blocking: check ``text`` as the content of ``path``; returns the report, rules and notes.

    Runs in a worker thread. Raises :class:`kernellsp.build.Cancelled` when ``cancel`` is set.
    """
    delay = _test_delay()
    if delay and cancel.wait(delay):
        raise Cancelled("check")
    if cancel.is_set():
        raise Cancelled("check")
    notes: list[str] = []
    root = spec.find_workspace_root(path) if path.parent.exists() else None
    root = root or workspace
    ruleset = rules_mod.load_rules(root)
    ws_specs, issues, origin = spec.load_workspace_specs(root) if root else ({}, [], None)
    notes.extend(i.message for i in issues)
    nvcc = toolchain.find_tool("nvcc") is not None
    if not nvcc:
        notes.append(f"nvcc not found, so only source-level rules ran: {toolchain.INSTALL_HINTS['nvcc']}")
    if progress is not None:
        progress.report(f"building {path.name} for {settings.arch}" if nvcc else f"analysing {path.name}", 10)
    options = CheckOptions(arch=settings.arch, build=nvcc, build_timeout_s=settings.build_timeout_s,
                           workspace=root, cancel=cancel)  # fmt: skip
    report = check_text(path, text, options, ruleset, ws_specs, origin)
    if report.build is not None and report.build.error:
        notes.append(f"build of {path.name}: {report.build.error}")
    return report, ruleset, notes


def publish(ls: KernelLspServer, uri: str, version: int | None, diagnostics: list[types.Diagnostic]) -> None:
    """Push diagnostics for one document version."""
    ls.text_document_publish_diagnostics(
        types.PublishDiagnosticsParams(uri=uri, version=version, diagnostics=diagnostics)
    )


def to_diagnostics(ls: KernelLspServer, uri: str, report: FileReport, ruleset: rules_mod.RuleSet) -> list[types.Diagnostic]:
    """A report's findings as diagnostics in the client's position encoding and capabilities."""
    caps = ls.client_capabilities
    lines = report.model.lines if report.model is not None else []
    mapper = RangeMapper(ls.workspace.position_codec, lines)
    code_desc = bool(get_capability(caps, "text_document.publish_diagnostics.code_description_support", False))
    related = bool(get_capability(caps, "text_document.publish_diagnostics.related_information", False))
    return [diagnostic(f, uri, mapper, ruleset, code_description=code_desc, related_information=related)
            for f in report.findings]  # fmt: skip


def start_check(ls: KernelLspServer, uri: str, delay_s: float = 0.0) -> asyncio.Task[Any]:
    """Start (or restart) the check job of ``uri`` on its current buffer text and version."""
    doc = ls.workspace.get_text_document(uri)
    version = doc.version
    text = doc.source
    path = ls.document_path(uri)

    async def job(progress: ProgressReporter, cancel: threading.Event) -> CheckResult:
        if not ls.settings_ready.is_set():
            try:
                await asyncio.wait_for(ls.settings_ready.wait(), SETTINGS_WAIT_S)
            except TimeoutError:
                log.warning("no configuration after %.0f s; checking with the settings so far", SETTINGS_WAIT_S)
        settings = ls.settings
        t0 = time.monotonic()
        report, ruleset, notes = await ls.jobs.run_blocking(
            run_check, path, text, settings, ls.workspace_root(), cancel, progress
        )
        if cancel.is_set():
            raise asyncio.CancelledError()
        for note in notes:
            if note.startswith("nvcc not found"):
                ls.note_once("nvcc", f"kernellsp: {note}", types.MessageType.Warning)
            else:
                ls.window_log_message(types.LogMessageParams(type=types.MessageType.Warning, message=note))
        diags = to_diagnostics(ls, uri, report, ruleset)
        result = CheckResult(uri=uri, version=version, report=report, rules=ruleset, diagnostics=diags,
                             settings=settings, seconds=time.monotonic() - t0)  # fmt: skip
        ls.results[uri] = result
        publish(ls, uri, version, diags)
        progress.report(f"{len(diags)} finding(s)", 100)
        return result

    return ls.jobs.start(uri, KIND, f"Checking {path.name}", job, delay_s=delay_s)


def _is_cuda(ls: KernelLspServer, uri: str, language_id: str | None) -> bool:
    if language_id and language_id.lower() in CUDA_LANGUAGE_IDS:
        return True
    return uri.lower().endswith((".cu", ".cuh"))


async def did_open(ls: KernelLspServer, params: types.DidOpenTextDocumentParams) -> None:
    """Check a CUDA document as soon as it is opened."""
    doc = params.text_document
    if _is_cuda(ls, doc.uri, doc.language_id):
        start_check(ls, doc.uri)


async def did_save(ls: KernelLspServer, params: types.DidSaveTextDocumentParams) -> None:
    """Re-check after a save; the previous check of the document is cancelled."""
    uri = params.text_document.uri
    doc = ls.workspace.get_text_document(uri)
    if _is_cuda(ls, uri, doc.language_id):
        start_check(ls, uri)


async def did_change(ls: KernelLspServer, params: types.DidChangeTextDocumentParams) -> None:
    """With ``checkOnChange``, re-check after ``debounceMs`` without further edits."""
    if not ls.options.check_on_change:
        return
    uri = params.text_document.uri
    doc = ls.workspace.get_text_document(uri)
    if _is_cuda(ls, uri, doc.language_id):
        start_check(ls, uri, delay_s=ls.options.debounce_ms / 1000.0)


async def did_close(ls: KernelLspServer, params: types.DidCloseTextDocumentParams) -> None:
    """Cancel the document's jobs, forget its results and clear its diagnostics."""
    uri = params.text_document.uri
    ls.jobs.cancel(uri)
    ls.forget(uri)
    publish(ls, uri, None, [])


def recheck_open_documents(ls: KernelLspServer) -> int:
    """Check every open CUDA document again (after a settings change); returns how many."""
    n = 0
    for doc in list(ls.workspace.text_documents.values()):
        if _is_cuda(ls, doc.uri, doc.language_id):
            start_check(ls, doc.uri)
            n += 1
    return n


def register(ls: KernelLspServer) -> None:
    """Register the document-sync handlers."""
    ls.feature(types.TEXT_DOCUMENT_DID_OPEN)(did_open)
    ls.feature(types.TEXT_DOCUMENT_DID_SAVE, types.SaveOptions(include_text=False))(did_save)
    ls.feature(types.TEXT_DOCUMENT_DID_CHANGE)(did_change)
    ls.feature(types.TEXT_DOCUMENT_DID_CLOSE)(did_close)
