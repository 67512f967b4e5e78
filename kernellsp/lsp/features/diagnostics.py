"""Diagnostics: check a document on open and save (and, optionally, after edits) and publish.

Each trigger starts a ``"check"`` job for the document (:mod:`kernellsp.lsp.jobs`), so a newer
save cancels the stale check. The job takes the buffer text and version when it is started, runs
:func:`kernellsp.lsp.worker.check_document` (:func:`kernellsp.check.check_text` plus the
conversion to diagnostics) in a worker process, whose cancel flag kills nvcc, and publishes with
the version it started from. ``didClose`` cancels the document's jobs and clears its diagnostics.
"""

from __future__ import annotations

import asyncio
import logging
import threading
from pathlib import Path
from typing import Any

from lsprotocol import types
from pygls.capabilities import get_capability

from kernellsp.findings import counted
from kernellsp.lsp.jobs import ProgressReporter
from kernellsp.lsp.server import CheckResult, KernelLspServer
from kernellsp.lsp.worker import ClientOptions, check_document

log = logging.getLogger(__name__)

KIND = "check"
#: The diagnostics layer of the workspace spec file (kernellsp.toml / pyproject.toml).
WORKSPACE_SPECS = "workspace-specs"
#: How long a check waits for the first ``workspace/configuration`` answer before it goes ahead.
SETTINGS_WAIT_S = 5.0
CUDA_LANGUAGE_IDS = {"cuda", "cuda-cpp", "cu"}


def client_options(ls: KernelLspServer) -> ClientOptions:
    """Position encoding and diagnostic features of the connected client."""
    caps = ls.client_capabilities
    return ClientOptions(
        position_encoding=ls.position_encoding(),
        code_description=bool(
            get_capability(caps, "text_document.publish_diagnostics.code_description_support", False)
        ),
        related_information=bool(
            get_capability(caps, "text_document.publish_diagnostics.related_information", False)
        ),
    )


def start_check(
    ls: KernelLspServer, uri: str, delay_s: float = 0.0, profile: bool = True
) -> asyncio.Task[Any]:
    """Start (or restart) the check job of ``uri`` on its current buffer text and version.

    With ``profile`` (open and save, not edits), the background profile job (:mod:`.profile`) starts at
    the same time, when profiling is possible: it does not wait for the static check.
    """
    doc = ls.workspace.get_text_document(uri)
    version = doc.version
    text = doc.source
    path = ls.document_path(uri)
    if profile:
        from kernellsp.lsp.features.profile import maybe_start_profile

        maybe_start_profile(ls, uri, version, text)

    async def job(progress: ProgressReporter, cancel: threading.Event) -> CheckResult:
        """Wait for the first settings, check in a worker process, publish (unless cancelled)."""
        if not ls.settings_ready.is_set():
            try:
                await asyncio.wait_for(ls.settings_ready.wait(), SETTINGS_WAIT_S)
            except TimeoutError:
                log.warning(
                    "no configuration after %.0f s; checking with the settings so far", SETTINGS_WAIT_S
                )
        settings = ls.settings
        progress.report(f"{path.name} for {settings.arch}")
        outcome = await ls.jobs.run_in_process(
            check_document,
            uri,
            path,
            text,
            settings,
            ls.workspace_root(),
            client_options(ls),
            with_cancel=True,
        )
        if cancel.is_set():
            raise asyncio.CancelledError()
        for note in outcome.notes:
            if note.startswith("nvcc not found"):
                ls.note_once("nvcc", f"kernellsp: {note}", types.MessageType.Warning)
            else:
                ls.window_log_message(types.LogMessageParams(type=types.MessageType.Warning, message=note))
        result = CheckResult(
            uri=uri,
            version=version,
            report=outcome.report,
            rules=outcome.rules,
            diagnostics=outcome.diagnostics,
            settings=settings,
            seconds=outcome.seconds,
        )
        ls.results[uri] = result
        ls.publish_layer(uri, KIND, version, outcome.diagnostics)
        for other_path, diags in outcome.other_files.items():
            # kernellsp.toml's own problems, on its lines (whichever CUDA file's check found them).
            ls.publish_layer(Path(other_path).as_uri(), WORKSPACE_SPECS, None, diags)
        progress.report(counted(len(outcome.diagnostics), "finding"), 100)
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
        start_check(ls, uri, delay_s=ls.options.debounce_ms / 1000.0, profile=False)


async def did_close(ls: KernelLspServer, params: types.DidCloseTextDocumentParams) -> None:
    """Cancel the document's jobs, forget its results and clear its diagnostics."""
    uri = params.text_document.uri
    ls.jobs.cancel(uri)
    ls.forget(uri)
    ls.text_document_publish_diagnostics(types.PublishDiagnosticsParams(uri=uri, diagnostics=[]))


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
