"""Background profiling: on open and save, run the file's spec'd entries under ncu and publish line findings.

When the settings allow it (a local GPU or a ``gpuHost``; ``runner`` not ``none``) and the file has a
launch spec or a ``main``, each open and save starts a ``"profile"`` job for the document next to the
static check (not after it). The job first asks the content-hash cache: an unchanged file publishes at
once, without the debounce or the GPU. Otherwise it builds at once and waits out a short debounce
(:data:`DELAY_S` from the save) only before ncu, so a burst of saves compiles in parallel with the wait
but reaches the GPU once; a newer save restarts the job, cancelling the stale run (nvcc and ncu are
killed), unless the same text is already being profiled with the same settings: that job goes on
(the same content is never profiled twice). The job runs :func:`kernellsp.profile.ncu.profile_file` in
the dedicated executor (it mostly waits on nvcc and ncu), reports ``$/progress``, and publishes its
findings as the ``"profile"`` layer next to the static ones, with the version it started from. When the
server starts, the harness runtime object is built in the background (:func:`warm_up`), so the first
profile compiles only the entry's own unit. ``kernellsp.showProfile``
returns the last profile as text (the same report as ``kernellsp profile``) or, asked for ``"html"``, as
the HTML page of ``kernellsp profile --html`` (VS Code shows it in a webview).
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import re
import threading
import time
from typing import Any

from lsprotocol import types

from kernellsp.lsp.convert import RangeMapper, diagnostic
from kernellsp.lsp.jobs import ProgressReporter
from kernellsp.lsp.server import KernelLspServer
from kernellsp.profile.ncu import ProfileError, ProfileOptions, cached_profile, profile_file
from kernellsp.report.html import HtmlReportError, Run, profile_page
from kernellsp.report.profile_text import format_outcome
from kernellsp.rules.engine import load_rules
from kernellsp.run.runner import RunnerError
from kernellsp.source import spec
from kernellsp.source.model import SourceModel, parse_source

log = logging.getLogger(__name__)

KIND = "profile"
SHOW_PROFILE = "kernellsp.showProfile"
#: Debounce from a save to the first GPU work (a burst of saves profiles once); the build does not wait for it.
DELAY_S = 0.5
#: A cheap test on the event loop: could the text have a spec block or a ``main``? (the job parses to be sure)
_MAYBE_PROFILE = re.compile(r"/\*\s*kernellsp\b|\bmain\s*\(")


def wants_profile(model: SourceModel | None) -> bool:
    """Does the checked buffer have something to run (a spec comment block or a ``main``)?"""
    return model is not None and (bool(model.spec_blocks) or model.has_main)


def maybe_start_profile(
    ls: KernelLspServer, uri: str, version: int | None, text: str, model: SourceModel | None = None
) -> asyncio.Task[Any] | None:
    """Start the profile job of ``uri`` when profiling is possible and the file has something to run.

    ``model`` (when the caller has one) decides at once; without it a cheap text test decides whether to
    start, and the job parses in the executor and ends quietly when there is nothing to run.
    """
    path = ls.document_path(uri)
    if model is not None and not wants_profile(model):
        return None
    if model is None and not _MAYBE_PROFILE.search(text):
        return None
    runner, problem = ls.gpu_runner()
    if runner is None:
        if problem and "runner = none" not in problem and "profile-off" not in ls.notes_shown:
            # A log line, not a pop-up: most machines that edit CUDA have no GPU, and that is fine.
            ls.notes_shown.add("profile-off")
            ls.window_log_message(
                types.LogMessageParams(
                    type=types.MessageType.Info, message=f"kernellsp: background profiling is off: {problem}"
                )
            )
        return None
    settings = ls.settings
    fingerprint = (hashlib.sha256(text.encode()).hexdigest(), settings.model_dump_json(), str(path))
    running = ls.jobs.current(uri, KIND)
    if (
        running is not None
        and running.tag == fingerprint
        and running.task is not None
        and not running.task.done()
    ):
        return running.task  # this very text is being profiled with these settings: let that job finish
    not_before = time.monotonic() + DELAY_S

    async def job(progress: ProgressReporter, cancel: threading.Event) -> Any:
        """Answer from the cache, or profile in the dedicated executor; publish the ``profile`` layer."""
        root = spec.find_workspace_root(path) if path.parent.is_dir() else ls.workspace_root()
        ws_specs = spec.load_workspace_specs(root)[0] if root else {}
        options = ProfileOptions.from_settings(settings, gpu_not_before=not_before)
        if model is None and not wants_profile(await ls.jobs.run_blocking(parse_source, text, str(path))):
            return None
        ruleset = load_rules(root)
        try:
            outcome = await ls.jobs.run_blocking(cached_profile, path, text, runner, options, ws_specs)
            if outcome is None:
                outcome = await ls.jobs.run_blocking(
                    profile_file,
                    path,
                    text,
                    runner,
                    options,
                    ruleset,
                    ws_specs,
                    cancel,
                    lambda m, p: progress.report(m, int(p) if p is not None else None),
                )
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
        diags = [
            diagnostic(
                f,
                uri,
                mapper,
                ruleset,
                code_description=opts.code_description,
                related_information=opts.related_information,
            )
            for f in outcome.findings
        ]
        ls.profiles[uri] = outcome
        ls.profile_versions[uri] = version
        ls.profile_texts[uri] = text
        ls.publish_layer(uri, KIND, version, diags)
        progress.report(f"{len(diags)} profile finding(s)" + (" (cached)" if outcome.cached else ""), 100)
        return outcome

    task = ls.jobs.start(uri, KIND, f"Profiling {path.name}", job)
    started = ls.jobs.current(uri, KIND)
    if started is not None:
        started.tag = fingerprint
    return task


def warm_up(ls: KernelLspServer) -> None:
    """Build the harness runtime object for the current arch in the background, when a GPU runner is set up.

    Runs in the job executor (asking for the runner may start nvidia-smi; the environment query starts
    nvcc, ncu and nvidia-smi once, which the first profile then finds in the cache). Failures are left to
    the first profile, which reports them.
    """
    from kernellsp.profile.environment import runner_environment
    from kernellsp.run.harness_build import warm_runtime

    def work() -> None:
        try:
            runner, _ = ls.gpu_runner()
            if runner is None:
                return
            env = runner_environment(runner)
            warm_runtime(runner, ls.settings.arch, env.get("nvcc_version"), ls.settings.build_timeout_s)
        except Exception:  # the first profile reports whatever this hit
            log.info("warming the harness runtime failed", exc_info=True)

    ls.jobs.executor.submit(work)


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
        page = await ls.jobs.run_blocking(
            profile_page, [Run("profile", outcome, text)], f"kernellsp profile: {name}"
        )
    except HtmlReportError as exc:
        return {"html": None, "message": str(exc)}
    return {"html": page, "title": f"Profile: {name}"}


def register(ls: KernelLspServer) -> None:
    """Register ``kernellsp.showProfile``."""
    ls.command(SHOW_PROFILE)(show_profile)
