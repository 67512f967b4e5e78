"""The kernellsp language server object: state shared by the features, error policy, shutdown.

:class:`KernelLspServer` is a pygls ``LanguageServer`` that holds

* ``jobs``: the :class:`~kernellsp.lsp.jobs.JobManager` (background checks, later profile and
  optimize runs) and its dedicated executor;
* ``results``: the last published check per document URI (:class:`CheckResult`), from which hover
  and code actions answer without running anything;
* ``layers``: the published diagnostics per URI and producer (``"check"``, later ``"profile"``),
  merged into each publication by :meth:`KernelLspServer.publish_layer`;
* ``settings`` / ``options``: the core :class:`~kernellsp.settings.Settings` and the server's own
  options, replaced atomically when the editor configuration changes.

It also answers requests whose params do not validate with a JSON-RPC ``InvalidParams`` error
(pygls 2.1.1 drops them silently, so the client waits until it times out), turns out-of-band
errors into a log entry plus at most one concise ``window/showMessage`` per kind of error and
minute, and cancels jobs (killing their child processes) when it shuts down.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import cattrs
from lsprotocol import types
from pygls.exceptions import JsonRpcInvalidParams
from pygls.lsp.server import LanguageServer
from pygls.protocol import LanguageServerProtocol
from pygls.uris import to_fs_path

from kernellsp import __version__
from kernellsp.check import FileReport
from kernellsp.lsp.config import ServerOptions
from kernellsp.lsp.jobs import JobManager
from kernellsp.rules.engine import RuleSet
from kernellsp.run.runner import Runner
from kernellsp.settings import Settings
from kernellsp.source.model import SourceModel, parse_source

log = logging.getLogger(__name__)

#: Documents up to this many characters (about 1,000 lines, 50 ms) are re-parsed on the event loop
#: when the cached check is stale; larger ones use the cached model with versioned edits.
FRESH_PARSE_MAX_CHARS = 30_000
#: The same out-of-band error is shown to the user at most once per this many seconds.
ERROR_MESSAGE_INTERVAL_S = 60.0


class CommandError(JsonRpcInvalidParams):
    """A command's failure the user can act on (no such rule, no workspace folder): the client gets the message
    as written, never a Python exception's name in front of it."""


@dataclass
class CheckResult:
    """The last published check of one document."""

    uri: str
    version: int | None
    report: FileReport
    rules: RuleSet
    #: The published diagnostics, in wire format (camelCase dicts).
    diagnostics: list[dict[str, Any]]
    settings: Settings
    seconds: float = 0.0
    finished: float = field(default_factory=time.monotonic)

    @property
    def model(self) -> SourceModel | None:
        """The source model the check ran on (without its tree-sitter tree)."""
        return self.report.model


class _Rejected:
    """Stand-in for a message that was answered with an error while it was being decoded."""

    jsonrpc = "rejected"


_REJECTED = _Rejected()


def _unreadable_answer(data: dict[str, Any], exc: JsonRpcInvalidParams) -> Any:
    """The client's answer to one of our requests did not fit its result type.

    ``null`` where a list was due (a client with no settings answers ``workspace/configuration`` so) means
    "nothing": the request resolves to ``None`` at once. Anything else resolves the request with an error
    that its caller handles (a log line), instead of a pop-up about our own request and a wait for a
    timeout: pygls would otherwise leave the request pending.
    """
    from pygls.protocol.json_rpc import JsonRPCResponseMessage

    if data.get("result") is None:
        return JsonRPCResponseMessage(id=data["id"], jsonrpc="2.0", result=None)
    detail = _validation_detail(exc.__cause__)
    log.warning("the client's answer to request %r does not fit its type: %s", data["id"], detail)
    return types.ResponseErrorMessage(
        id=data["id"],
        error=types.ResponseError(code=JsonRpcInvalidParams.CODE, message=f"unreadable answer: {detail}"),
    )


#: How long an ``exit`` that overtook the ``shutdown`` answer waits for the shutdown's cancellation at most
#: (the handler itself waits up to lifecycle.SHUTDOWN_WAIT_S for the jobs).
SHUTDOWN_HOLD_S = 6.0


class KernelLspProtocol(LanguageServerProtocol):
    """pygls' protocol, plus an ``InvalidParams`` response for requests that do not validate."""

    #: An ``exit`` held until the shutdown's cancellation is done (a strong reference to its task).
    _held_exit: asyncio.Future[None] | None = None

    def structure_message(self, data: dict[str, Any]) -> Any:
        """pygls' decoding; a request that fails validation gets its error response here."""
        try:
            return super().structure_message(data)
        except JsonRpcInvalidParams as exc:
            if "id" in data and "method" not in data and "error" not in data:
                return _unreadable_answer(data, exc)
            if "id" not in data or "method" not in data:
                raise
            method = str(data.get("method"))
            detail = _validation_detail(exc.__cause__)
            message = f"Invalid params for {method}" + (f": {detail}" if detail else "")
            log.warning("rejected request %r: %s", data.get("id"), message)
            self._send_response(data["id"], error=JsonRpcInvalidParams(message).to_response_error())
            self._server._report_server_error(JsonRpcInvalidParams(message), JsonRpcInvalidParams)
            return _REJECTED

    def handle_message(self, message: Any) -> None:
        """Dispatch, skipping requests already answered by :meth:`structure_message`."""
        if message is _REJECTED:
            return
        method = getattr(message, "method", None)
        if method == types.EXIT and self._shutdown and not self._shutdown_done().is_set():
            # `exit` right behind `shutdown`, before its answer: held until the shutdown handler has cancelled
            # the jobs (and their child processes), so the server never exits halfway through that.
            self._held_exit = asyncio.ensure_future(self._exit_after_shutdown(message))
            return
        super().handle_message(message)
        if method == types.SHUTDOWN and hasattr(message, "id"):
            # The spec: `exit` ends with 0 when a `shutdown` request was received before it. pygls marks the
            # shutdown only once the (asynchronous) handlers are done, so a client that sends `exit` right
            # behind `shutdown` would see 1: marked here, on receipt (later requests are refused from now on,
            # as the spec asks).
            self._shutdown = True

    def _shutdown_done(self) -> asyncio.Event:
        server = self._server
        assert isinstance(server, KernelLspServer)
        return server.shutdown_done

    async def _exit_after_shutdown(self, message: Any) -> None:
        try:
            await asyncio.wait_for(self._shutdown_done().wait(), SHUTDOWN_HOLD_S)
        except TimeoutError:
            log.warning("exit: the shutdown's cancellation did not finish within %g s", SHUTDOWN_HOLD_S)
        # A few turns of the loop so that pygls sends the shutdown's answer before the transport closes.
        for _ in range(5):
            await asyncio.sleep(0)
        super().handle_message(message)

    def notify_raw(self, method: str, params: dict[str, Any]) -> None:
        """Send a notification whose params are already in wire format (no cattrs pass)."""
        self._send_data({"jsonrpc": self.VERSION, "method": method, "params": params})


def _validation_detail(exc: BaseException | None) -> str:
    if exc is None:
        return ""
    try:
        msgs = cattrs.transform_error(exc) if isinstance(exc, cattrs.BaseValidationError) else [str(exc)]
    except Exception:
        msgs = [str(exc)]
    detail = "; ".join(msgs[:2])
    return detail if len(detail) <= 300 else detail[:297] + "..."


class KernelLspServer(LanguageServer):
    """kernellsp's language server (create it with :func:`kernellsp.lsp.create_server`)."""

    def __init__(self) -> None:
        super().__init__(
            "kernellsp",
            __version__,
            text_document_sync_kind=types.TextDocumentSyncKind.Incremental,
            protocol_cls=KernelLspProtocol,
        )
        self.jobs = JobManager(self)
        self.results: dict[str, CheckResult] = {}
        #: The last profile (:class:`kernellsp.profile.outcome.ProfileOutcome`) per document, and the document
        #: version it was taken of (its lines hold for that version only).
        self.profiles: dict[str, Any] = {}
        self.profile_versions: dict[str, int | None] = {}
        #: The text each profile was taken of (the HTML report shows those lines).
        self.profile_texts: dict[str, str] = {}
        self.settings = Settings()
        self.options = ServerOptions()
        #: ``initializationOptions`` and the last ``workspace/configuration`` answer (camelCase).
        self.init_section: dict[str, Any] = {}
        self.config_section: dict[str, Any] = {}
        #: Set once the first configuration pull finished (checks wait for it, briefly).
        self.settings_ready = asyncio.Event()
        #: Set when the ``shutdown`` handler has cancelled and waited for the jobs (``exit`` waits for it).
        self.shutdown_done = asyncio.Event()
        #: Diagnostics per document and layer (wire format) with the version they were computed for.
        self.layers: dict[str, dict[str, tuple[int | None, list[dict[str, Any]]]]] = {}
        self.notes_shown: set[str] = set()
        #: The invalid-settings message last shown (shown again only when it changes).
        self.settings_error_shown: str | None = None
        self._models: dict[str, tuple[int | None, SourceModel]] = {}
        self._error_shown: dict[str, float] = {}
        self._reporting = False
        #: GPU runners made so far, per (runner, gpu_host) setting: with the reason when there is none.
        self._runners: dict[tuple[str, str | None], tuple[Runner | None, str | None]] = {}
        self._runners_lock = threading.Lock()

    # ---------------------------------------------------------------------------------------------
    # Helpers for the features

    def gpu_runner(self) -> tuple[Runner | None, str | None]:
        """The runner for GPU work under the current settings, or ``(None, reason)``.

        Made once per ``(runner, gpu_host)`` (asking may start nvidia-smi) and shared by the profile
        layer and the optimize command, so an ssh host is reached through one connection. A runner
        for earlier settings stays open while jobs that started with it finish; all close at shutdown.
        """
        from kernellsp.profile.environment import profiling_runner

        key = (self.settings.runner, self.settings.gpu_host)
        with self._runners_lock:
            if key not in self._runners:
                runner, problem = profiling_runner(self.settings)
                if runner is not None:
                    # Other kernellsp jobs on the GPU (a terminal's optimize, CI) queue behind the editor's and see
                    # who holds it; the editor's jobs wait for theirs in line too, logged, cancellable by the job.
                    runner.job_label = (
                        f"the kernellsp language server (workspace {self.workspace_root() or '?'})"
                    )
                    runner.gpu_wait_s = self.settings.gpu_wait_timeout_s or None
                    runner.on_gpu_wait = lambda m: log.info("%s", m)
                self._runners[key] = (runner, problem)
            return self._runners[key]

    def gpu_runner_known(self) -> tuple[Runner | None, str | None] | None:
        """:meth:`gpu_runner`'s answer when it was already asked for the current settings, else ``None`` (never
        starts nvidia-smi or ssh: code actions must answer at once)."""
        with self._runners_lock:
            return self._runners.get((self.settings.runner, self.settings.gpu_host))

    def position_encoding(self) -> str:
        """The negotiated position encoding: ``utf-8``, ``utf-16`` or ``utf-32``."""
        enc = self.workspace.position_encoding or types.PositionEncodingKind.Utf16
        return enc.value if isinstance(enc, types.PositionEncodingKind) else str(enc)

    def publish_layer(
        self, uri: str, layer: str, version: int | None, diagnostics: list[dict[str, Any]]
    ) -> None:
        """Replace one layer of a document's diagnostics (``"check"``; later ``"profile"``...) and
        publish all layers together, since a publication replaces everything the client shows.

        Only layers computed for ``version`` are published with it: a layer of an older version points at
        lines that have moved (it is dropped; the next save recomputes it).
        """
        layers = self.layers.setdefault(uri, {})
        layers[layer] = (version, diagnostics)
        for name in [n for n, (v, _) in layers.items() if v != version]:
            del layers[name]
        merged = [d for _, diags in layers.values() for d in diags]
        self.publish_raw_diagnostics(uri, version, merged)

    def publish_raw_diagnostics(
        self, uri: str, version: int | None, diagnostics: list[dict[str, Any]]
    ) -> None:
        """Publish diagnostics already in wire format (large files: no per-item conversion here)."""
        params: dict[str, Any] = {"uri": uri, "diagnostics": diagnostics}
        if version is not None:
            params["version"] = version
        protocol = self.protocol
        assert isinstance(protocol, KernelLspProtocol)
        protocol.notify_raw(types.TEXT_DOCUMENT_PUBLISH_DIAGNOSTICS, params)

    def workspace_root(self) -> Path | None:
        """The workspace root the client opened, if any."""
        try:
            root = self.workspace.root_path
        except RuntimeError:  # before initialize
            return None
        return Path(root) if root else None

    def document_path(self, uri: str) -> Path:
        """A file system path for ``uri`` (untitled buffers get a name under the workspace)."""
        path = to_fs_path(uri)
        if path:
            return Path(path)
        name = uri.rsplit("/", 1)[-1].replace(":", "-") or "untitled"
        if not name.endswith((".cu", ".cuh")):
            name += ".cu"  # nvcc needs the suffix to compile the buffer as CUDA
        return (self.workspace_root() or Path.cwd()) / name

    def notify(self, message: str, kind: types.MessageType = types.MessageType.Info) -> None:
        """``window/showMessage``, never raising (the client may be gone)."""
        try:
            self.window_show_message(types.ShowMessageParams(type=kind, message=message))
        except Exception:
            log.debug("showMessage failed", exc_info=True)

    def note_once(self, key: str, message: str, kind: types.MessageType = types.MessageType.Info) -> None:
        """Show ``message`` the first time ``key`` comes up in this session."""
        if key not in self.notes_shown:
            self.notes_shown.add(key)
            self.notify(message, kind)

    def model_for(self, uri: str) -> tuple[int | None, SourceModel] | None:
        """The source model matching the document's current version, cheaply.

        The cached check's model when it is current; otherwise a fresh parse of the buffer when it
        is small enough to parse within a request's budget (memoised per version); otherwise the
        stale cached model with its own version (callers must send versioned edits then).
        """
        doc = self.workspace.get_text_document(uri)
        res = self.results.get(uri)
        if res is not None and res.model is not None and res.version == doc.version:
            return res.version, res.model
        memo = self._models.get(uri)
        if memo is not None and memo[0] == doc.version and doc.version is not None:
            return memo
        try:
            text = doc.source
        except OSError:
            text = None
        if text is not None and len(text) <= FRESH_PARSE_MAX_CHARS:
            model = parse_source(text, str(self.document_path(uri)))
            self._models[uri] = (doc.version, model)
            return doc.version, model
        if res is not None and res.model is not None:
            return res.version, res.model
        return None

    def forget(self, uri: str) -> None:
        """Drop everything cached for a closed document."""
        self.results.pop(uri, None)
        self.profiles.pop(uri, None)
        self.profile_versions.pop(uri, None)
        self.profile_texts.pop(uri, None)
        self.layers.pop(uri, None)
        self._models.pop(uri, None)

    # ---------------------------------------------------------------------------------------------
    # pygls hooks

    def report_server_error(self, error: Exception, source: Any) -> None:
        """Log every out-of-band error; show one concise line per kind of error and minute.

        Errors of requests already went back to the client as error responses, so they are only
        logged. Guarded against recursion: reporting must not report its own failure.
        """
        log.error("server error (%s): %s", getattr(source, "__name__", source), error)
        if getattr(source, "__name__", "") == "FeatureRequestError" or self._reporting:
            return
        text = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
        key = f"{type(error).__name__}:{text[:80]}"
        now = time.monotonic()
        if now - self._error_shown.get(key, -1e9) < ERROR_MESSAGE_INTERVAL_S:
            return
        self._error_shown[key] = now
        self._reporting = True
        try:
            if len(text) > 200:
                text = text[:197] + "..."
            self.window_show_message(
                types.ShowMessageParams(
                    type=types.MessageType.Error, message=f"kernellsp: {text} (details in the server log)"
                )
            )
        except Exception:
            log.debug("could not show the error", exc_info=True)
        finally:
            self._reporting = False

    def shutdown(self) -> None:
        """Transport ends (exit, stdin closed, SIGTERM, TCP peer gone): cancel jobs, then pygls' shutdown.

        pygls' own pool is stopped without waiting: its stdin reader may block in ``readline``
        for as long as the client keeps the pipe open (``kernellsp.lsp.main`` exits past it).
        """
        self.jobs.close()
        with self._runners_lock:
            for runner, _ in self._runners.values():
                if runner is not None:
                    try:
                        runner.close()
                    except Exception:  # an ssh master already gone: nothing to release
                        log.debug("closing %s failed", runner.name, exc_info=True)
            self._runners.clear()
        if self._thread_pool is not None:
            self._thread_pool.shutdown(wait=False, cancel_futures=True)
            self._thread_pool = None
        super().shutdown()
