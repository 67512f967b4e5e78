"""Workspace commands: check every CUDA file of the workspace, and revert a rewrite.

* ``kernellsp.checkWorkspace()``: a cancellable ``"check-workspace"`` job (with ``$/progress``) that
  checks every ``.cu``/``.cuh`` file under the workspace root (hidden and build folders skipped, as
  ``kernellsp check DIR`` does), one file at a time in a worker process, and publishes each file's
  diagnostics, so they show in the editor's problem list without opening the files. Open documents
  are checked from their buffers (their own check job). Returns the counts: files, findings, by
  severity and code, notes.
* ``kernellsp.revert(uri)``: restore the backup kernellsp kept when it applied a rewrite to the file
  (what ``kernellsp revert FILE`` does). Refused while the open document has unsaved changes, and when
  the file changed since kernellsp wrote it; returns ``{"reverted": bool, "message": str}``.
"""

from __future__ import annotations

import asyncio
import logging
import threading
from collections import Counter
from pathlib import Path
from typing import Any

from pygls.uris import from_fs_path

from kernellsp.findings import counted
from kernellsp.lsp.features.diagnostics import KIND as CHECK_KIND
from kernellsp.lsp.features.diagnostics import client_options, start_check
from kernellsp.lsp.jobs import ProgressReporter
from kernellsp.lsp.server import CommandError, KernelLspServer
from kernellsp.lsp.worker import check_document
from kernellsp.optimize.apply import ApplyError, revert
from kernellsp.source.files import CheckError, collect_files

log = logging.getLogger(__name__)

CHECK_WORKSPACE = "kernellsp.checkWorkspace"
REVERT = "kernellsp.revert"
KIND = "check-workspace"
#: Severity numbers of LSP diagnostics → names.
_SEVERITY = {1: "error", 2: "warning", 3: "info", 4: "hint"}


async def check_workspace(ls: KernelLspServer) -> dict[str, Any]:
    """Check every CUDA file of the workspace and publish the diagnostics of each."""
    root = ls.workspace_root()
    if root is None:
        raise CommandError("no workspace folder is open")
    notes: list[str] = []
    try:
        files = await ls.jobs.run_blocking(collect_files, [root], notes)
    except CheckError as exc:
        raise CommandError(str(exc)) from None
    root_uri = from_fs_path(str(root)) or str(root)
    open_docs = {doc.uri: doc for doc in ls.workspace.text_documents.values()}

    async def job(progress: ProgressReporter, cancel: threading.Event) -> dict[str, Any]:
        severities: Counter[str] = Counter()
        codes: Counter[str] = Counter()
        options = client_options(ls)
        for i, path in enumerate(files):
            if cancel.is_set():
                raise asyncio.CancelledError()
            uri = from_fs_path(str(path)) or path.as_uri()
            progress.report(f"{path.relative_to(root)} ({i + 1}/{len(files)})", 100 * i / max(1, len(files)))
            if uri in open_docs:
                task = start_check(ls, uri)
                await asyncio.wait({task})
                result = None if task.cancelled() or task.exception() else task.result()
                diagnostics = result.diagnostics if result is not None else []
            else:
                try:
                    text = await ls.jobs.run_blocking(path.read_text, encoding="utf-8", errors="replace")
                except OSError as exc:
                    notes.append(f"{path}: cannot read: {exc.strerror or exc}")
                    continue
                outcome = await ls.jobs.run_in_process(
                    check_document, uri, path, text, ls.settings, root, options, with_cancel=True
                )
                notes.extend(
                    n for n in outcome.notes if n not in notes
                )  # "nvcc not found" once, not per file
                diagnostics = outcome.diagnostics
                ls.publish_layer(uri, CHECK_KIND, None, diagnostics)
            for d in diagnostics:
                severities[_SEVERITY.get(int(d.get("severity") or 1), "error")] += 1
                codes[str(d.get("code"))] += 1
        progress.report(
            f"{counted(sum(severities.values()), 'finding')} in {counted(len(files), 'file')}", 100
        )
        return {
            "root": root_uri,
            "files": len(files),
            "findings": sum(severities.values()),
            "bySeverity": {k: severities.get(k, 0) for k in ("error", "warning", "info", "hint")},
            "byCode": dict(sorted(codes.items())),
            "notes": notes[:20],
            "cancelled": False,
        }

    task = ls.jobs.start(root_uri, KIND, f"Checking {len(files)} file(s) in {root.name}", job)
    try:
        return await task
    except asyncio.CancelledError:
        return {"root": root_uri, "files": len(files), "findings": 0, "cancelled": True}


async def revert_file(ls: KernelLspServer, uri: str) -> dict[str, Any]:
    """Restore the file from the backup kernellsp kept before it applied its last rewrite."""
    path: Path = ls.document_path(uri)
    doc = ls.workspace.text_documents.get(uri)
    if doc is not None:
        try:
            on_disk = await ls.jobs.run_blocking(path.read_text, encoding="utf-8", errors="replace")
        except OSError:
            on_disk = None
        if on_disk is not None and on_disk.replace("\r\n", "\n") != doc.source.replace("\r\n", "\n"):
            return {
                "reverted": False,
                "message": f"{path.name} has unsaved changes; save or discard them first",
            }
    try:
        backup = await ls.jobs.run_blocking(revert, path)
    except ApplyError as exc:
        return {"reverted": False, "message": str(exc)}
    log.info("reverted %s from %s", path, backup)
    return {"reverted": True, "message": f"restored {path.name} from {backup}", "backup": str(backup)}


def register(ls: KernelLspServer) -> None:
    """Register ``kernellsp.checkWorkspace`` and ``kernellsp.revert``."""
    ls.command(CHECK_WORKSPACE)(check_workspace)
    ls.command(REVERT)(revert_file)
