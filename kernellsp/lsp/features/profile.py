"""Background profiling: after a check, run the file's spec'd entries under ncu and publish line findings.

When the settings allow it (a local GPU or a ``gpuHost``; ``runner`` not ``none``) and the file has a
launch spec or a ``main``, each finished check starts a ``"profile"`` job for the document, after a
short debounce; a newer save restarts it, cancelling the stale run (its ncu process is killed).
The job runs :func:`kernellsp.profile.ncu.profile_file` in the dedicated executor (it mostly waits on
nvcc and ncu), reports ``$/progress``, and publishes its findings as the ``"profile"`` layer next
to the static ones, with the version it started from. Results are cached by content hash, so
re-saving an unchanged file publishes at once without touching the GPU. ``kernellsp.showProfile``
returns the last profile as text (the same report as ``kernellsp profile``) or, asked for ``"html"``, as
the HTML page of ``kernellsp profile --html`` (VS Code shows it in a webview).
"""

from __future__ import annotations

import asyncio
import logging
import threading
from typing import Any

from lsprotocol import types

from kernellsp.lsp.convert import RangeMapper, diagnostic
from kernellsp.lsp.jobs import ProgressReporter
from kernellsp.lsp.server import KernelLspServer
from kernellsp.profile.ncu import ProfileError, ProfileOptions, format_outcome, profile_file
from kernellsp.report.html import HtmlReportError, Run, profile_page
from kernellsp.rules.engine import load_rules
from kernellsp.run.runner import RunnerError
from kernellsp.source import spec
from kernellsp.source.model import SourceModel

log = logging.getLogger(__name__)

KIND = "profile"
SHOW_PROFILE = "kernellsp.showProfile"
#: Debounce after a check before the GPU is touched (a burst of saves profiles once).
DELAY_S = 0.5


def wants_profile(model: SourceModel | None) -> bool:
    """Does the checked buffer have something to run (a spec comment block or a ``main``)?"""
    return model is not None and (bool(model.spec_blocks) or model.has_main)


def maybe_start_profile(ls: KernelLspServer, uri: str, version: int | None, text: str,
                        model: SourceModel | None) -> asyncio.Task[Any] | None:  # fmt: skip
    """Start the profile job of ``uri`` when profiling is possible and the file has something to run."""
    path = ls.document_path(uri)
    if not wants_profile(model):
        return None
    runner, problem = ls.gpu_runner()
    if runner is None:
        if problem and "runner = none" not in problem and "profile-off" not in ls.notes_shown:
            # A log line, not a pop-up: most machines that edit CUDA have no GPU, and that is fine.
            ls.notes_shown.add("profile-off")
            ls.window_log_message(types.LogMessageParams(type=types.MessageType.Info,
                                                         message=f"kernellsp: background profiling is off: {problem}"))  # fmt: skip
        return None
    settings = ls.settings

    async def job(progress: ProgressReporter, cancel: threading.Event) -> Any:
        """Profile in the dedicated executor and publish the ``profile`` layer."""
        root = spec.find_workspace_root(path) if path.parent.is_dir() else ls.workspace_root()
        ws_specs = spec.load_workspace_specs(root)[0] if root else {}
        options = ProfileOptions.from_settings(settings)
        ruleset = load_rules(root)
        try:
            outcome = await ls.jobs.run_blocking(
                profile_file, path, text, runner, options, ruleset, ws_specs, cancel,
                lambda m, p: progress.report(m, int(p) if p is not None else None),
            )  # fmt: skip
        except (ProfileError, RunnerError) as exc:
            ls.notify(f"kernellsp: profiling {path.name} failed: {exc}", types.MessageType.Warning)
            ls.publish_layer(uri, KIND, version, [])
            return None
        if cancel.is_set():
            raise asyncio.CancelledError()
        doc = ls.workspace.get_text_document(uri)
        if doc.version != version:
            return None  # the buffer moved on; the next save profiles again
        mapper = RangeMapper(ls.position_encoding(), text.split("\n"))
        from kernellsp.lsp.features.diagnostics import client_options

        opts = client_options(ls)
        diags = [diagnostic(f, uri, mapper, ruleset, code_description=opts.code_description,
                            related_information=opts.related_information) for f in outcome.findings]  # fmt: skip
        ls.profiles[uri] = outcome
        ls.profile_versions[uri] = version
        ls.profile_texts[uri] = text
        ls.publish_layer(uri, KIND, version, diags)
        progress.report(f"{len(diags)} profile finding(s)" + (" (cached)" if outcome.cached else ""), 100)
        return outcome

    return ls.jobs.start(uri, KIND, f"Profiling {path.name}", job, delay_s=DELAY_S)


async def show_profile(ls: KernelLspServer, uri: str, *options: str) -> Any:
    """``kernellsp.showProfile(uri[, "html"])``: the last profile of the document.

    As text (the same report as ``kernellsp profile``), or with ``"html"`` as
    ``{"html": page, "title": ...}`` (the page of ``kernellsp profile --html``) or ``{"message": why not}``.
    (pygls counts a command's parameters: the optional form is a variadic one.)
    """
    form = options[0] if options else "text"
    outcome = ls.profiles.get(uri)
    name = ls.document_path(uri).name
    if outcome is None:
        why = "no profile yet: save the file with a launch spec and a GPU configured (runner, gpuHost)"
        return {"html": None, "message": why} if form == "html" else why
    if form != "html":
        return format_outcome(outcome, name)
    text = ls.profile_texts.get(uri) or ls.workspace.get_text_document(uri).source
    try:
        page = await ls.jobs.run_blocking(profile_page, [Run("profile", outcome, text)], f"kernellsp profile: {name}")
    except HtmlReportError as exc:
        return {"html": None, "message": str(exc)}
    return {"html": page, "title": f"Profile: {name}"}


def register(ls: KernelLspServer) -> None:
    """Register ``kernellsp.showProfile``."""
    ls.command(SHOW_PROFILE)(show_profile)
