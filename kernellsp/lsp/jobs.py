"""Background jobs of the language server: one asyncio task per (URI, kind), newest wins.

Every long piece of work (a check after a save, later a profile run or an optimize loop) is a
*job*: a coroutine started through :meth:`JobManager.start` with a document URI, a kind
(``"check"``, ``"profile"``, ``"optimize"``…), a title for the progress UI and a factory
``coro_factory(progress, cancel_event)``. The manager

* keeps one job per (URI, kind): starting a new one cancels the stale one (its
  :class:`threading.Event` is set, so a worker thread kills its child process, and its task is
  cancelled), and keeps strong references to every task until it finishes;
* creates a server-side ``$/progress`` token when the client advertises
  ``window.workDoneProgress``, sends ``begin``, lets the job ``report`` from any thread and always
  sends ``end`` (``done``, ``cancelled`` or ``failed``) in a ``finally``;
* turns a ``window/workDoneProgress/cancel`` from the user into the same cancellation
  (cooperative: the token's future is watched and can be polled through
  :attr:`ProgressReporter.cancelled`);
* logs a failing job with its traceback (server log and ``window/logMessage``) and tells the user
  in one ``window/showMessage`` line; the server never goes down with a job;
* owns a dedicated thread pool (:attr:`JobManager.executor`, used by
  :meth:`JobManager.run_blocking`) for work that mostly waits (child processes, network), so it
  never runs in pygls' pool (which also reads stdin) nor in asyncio's default executor; and a
  process pool (:meth:`JobManager.run_in_process`) for CPU-heavy Python work, which in a thread
  would hold the GIL and stall the event loop.

A job that raises anything while its cancel event is set counts as cancelled, not failed: a
killed compiler or an interrupted loop is the expected consequence of a cancellation.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import os
import threading
import time
import traceback
import uuid
from collections.abc import Awaitable, Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, Protocol, TypeVar

from lsprotocol import types
from pygls.capabilities import get_capability

from kernellsp.lsp.procpool import ProcessPool

log = logging.getLogger(__name__)

T = TypeVar("T")

#: How long to wait for the client to answer ``window/workDoneProgress/create``.
PROGRESS_CREATE_TIMEOUT_S = 5.0


class _ProgressApi(Protocol):
    tokens: dict[Any, Future[Any]]

    async def create_async(self, token: types.ProgressToken) -> Any: ...

    def begin(self, token: types.ProgressToken, value: types.WorkDoneProgressBegin) -> None: ...

    def report(self, token: types.ProgressToken, value: types.WorkDoneProgressReport) -> None: ...

    def end(self, token: types.ProgressToken, value: types.WorkDoneProgressEnd) -> None: ...


class JobServer(Protocol):
    """What the manager needs from the server (a pygls ``LanguageServer`` has all of it)."""

    @property
    def client_capabilities(self) -> types.ClientCapabilities: ...

    @property
    def work_done_progress(self) -> Any: ...

    def window_show_message(self, params: types.ShowMessageParams) -> None: ...

    def window_log_message(self, params: types.LogMessageParams) -> None: ...


class ProgressReporter:
    """A job's handle on its progress bar and on its cancellation; safe to use from any thread.

    ``report`` schedules the ``$/progress`` notification onto the event loop with
    ``call_soon_threadsafe`` (or sends it at once on the loop thread). Percentages are clamped to
    0..100 and never go down. Without a token (the client has no progress support) ``report`` only
    records the last message.
    """

    def __init__(self, job: Job, loop: asyncio.AbstractEventLoop) -> None:
        self._job = job
        self._loop = loop
        self._loop_thread = threading.get_ident()
        self._api: _ProgressApi | None = None
        self.token: str | None = None
        self._percentage = 0
        self._ended = False
        self.last_message: str | None = None

    # Called by the manager on the loop thread.
    def _attach(self, api: _ProgressApi, token: str) -> None:
        self._api = api
        self.token = token

    def _close(self) -> None:
        self._ended = True

    @property
    def cancelled(self) -> bool:
        """True once the job was cancelled (newer job, user cancel, didClose, shutdown)."""
        if self._job.cancel.is_set():
            return True
        fut = self._token_future()
        return fut is not None and fut.cancelled()

    def _token_future(self) -> Future[Any] | None:
        if self._api is None or self.token is None:
            return None
        return self._api.tokens.get(self.token)

    def report(self, message: str | None = None, percentage: int | float | None = None) -> None:
        """Send a progress report (message and/or percentage); callable from worker threads."""
        if message is not None:
            self.last_message = message
        if self._ended or self._api is None:
            return
        if threading.get_ident() == self._loop_thread:
            self._send(message, percentage)
            return
        with contextlib.suppress(RuntimeError):  # the loop is closed: the server is going away
            self._loop.call_soon_threadsafe(self._send, message, percentage)

    def _send(self, message: str | None, percentage: int | float | None) -> None:
        if self._ended or self._api is None or self.token is None:
            return
        pct: int | None = None
        if percentage is not None:
            pct = max(self._percentage, min(100, max(0, int(percentage))))
            self._percentage = pct
        try:
            self._api.report(self.token, types.WorkDoneProgressReport(message=message, percentage=pct))
        except Exception:  # a broken pipe must not break the job
            log.debug("progress report failed", exc_info=True)


JobFactory = Callable[[ProgressReporter, threading.Event], Awaitable[Any]]


@dataclass
class Job:
    """One background job: what it is for, its cancel event, task and progress reporter."""

    uri: str
    kind: str
    title: str
    cancel: threading.Event = field(default_factory=threading.Event)
    task: asyncio.Task[Any] | None = None
    reporter: ProgressReporter | None = None
    started: float = field(default_factory=time.monotonic)
    outcome: str = "running"  # running | done | cancelled | failed
    #: What the job works on, for callers that keep an equivalent running job instead of restarting it.
    tag: Any = None


class JobManager:
    """Start, supersede, cancel and account for background jobs (see the module docstring).

    Use from the event-loop thread (handlers run there). ``max_workers`` sizes the dedicated
    thread executor and the process pool; it defaults to ``min(4, cpu count)``.
    """

    def __init__(self, server: JobServer, max_workers: int | None = None) -> None:
        self.server = server
        workers = max_workers or max(1, min(4, os.cpu_count() or 1))
        self.executor = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="kernellsp-job")
        self.processes = ProcessPool(workers)
        self._current: dict[tuple[str, str], Job] = {}
        self._tasks: set[asyncio.Task[Any]] = set()
        self._closed = False
        #: Called (on the event loop) whenever a job starts or ends; the status feature pushes the change.
        self.on_change: Callable[[], None] | None = None

    # ---------------------------------------------------------------------------------------------
    # Public API

    def start(
        self,
        uri: str,
        kind: str,
        title: str,
        coro_factory: JobFactory,
        *,
        delay_s: float = 0.0,
        progress: bool = True,
        cancellable: bool = True,
    ) -> asyncio.Task[Any]:
        """Start ``coro_factory(progress, cancel_event)`` as the (uri, kind) job; cancel the older one.

        ``delay_s`` waits before doing anything (a debounce: a newer start within the delay
        replaces this job before it made any noise). ``progress=False`` skips the progress token.
        Awaiting the returned task yields the factory's result, raises its exception, or raises
        :class:`asyncio.CancelledError` when the job was cancelled.
        """
        if self._closed:
            raise RuntimeError("the job manager is shut down")
        loop = asyncio.get_running_loop()
        key = (uri, kind)
        old = self._current.get(key)
        if old is not None:
            self._cancel_job(old, "superseded")
        job = Job(uri=uri, kind=kind, title=title)
        job.reporter = ProgressReporter(job, loop)
        task = loop.create_task(
            self._run(job, coro_factory, delay_s, progress, cancellable), name=f"kernellsp-{kind}:{uri}"
        )
        job.task = task
        self._current[key] = job
        self._tasks.add(task)
        task.add_done_callback(self._task_done)
        self._changed()
        return task

    def current(self, uri: str, kind: str) -> Job | None:
        """The running job for (uri, kind), if any."""
        return self._current.get((uri, kind))

    def jobs(self, uri: str | None = None) -> list[Job]:
        """Running jobs, all or those of one URI."""
        return [j for (u, _k), j in self._current.items() if uri is None or u == uri]

    def cancel(self, uri: str, kind: str | None = None) -> int:
        """Cancel the jobs of ``uri`` (of one kind, or all kinds); returns how many."""
        hit = [j for (u, k), j in list(self._current.items()) if u == uri and (kind is None or k == kind)]
        for j in hit:
            self._cancel_job(j, "cancelled")
        return len(hit)

    def cancel_all(self) -> int:
        """Cancel every running job; returns how many."""
        hit = list(self._current.values())
        for j in hit:
            self._cancel_job(j, "cancelled")
        return len(hit)

    async def run_blocking(self, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        """Run blocking ``fn`` in the dedicated executor (never pygls' pool, never the default one)."""
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self.executor, functools.partial(fn, *args, **kwargs))

    async def run_in_process(
        self, fn: Callable[..., T], *args: Any, with_cancel: bool = False, **kwargs: Any
    ) -> T:
        """Run picklable ``fn`` in a worker process; ``with_cancel`` passes ``cancel=`` (an Event-like flag).

        Cancelling the awaiting task (which :meth:`start`'s cancellation does) sets the flag.
        """
        return await self.processes.run(fn, *args, with_cancel=with_cancel, **kwargs)

    async def shutdown(self, timeout_s: float = 3.0) -> None:
        """Cancel every job, wait up to ``timeout_s`` for the tasks, stop the executor."""
        self.cancel_all()
        pending = [t for t in self._tasks if not t.done()]
        if pending:
            await asyncio.wait(pending, timeout=timeout_s)
        self.close()

    def close(self) -> None:
        """Synchronous last resort (the loop may be gone): set every cancel event, stop the pool."""
        self._closed = True
        for j in list(self._current.values()):
            j.cancel.set()
        self.processes.close()
        self.executor.shutdown(wait=False, cancel_futures=True)

    # ---------------------------------------------------------------------------------------------
    # Internals

    def _cancel_job(self, job: Job, why: str) -> None:
        log.debug("cancelling %s job for %s (%s)", job.kind, job.uri, why)
        job.cancel.set()
        if job.task is not None and not job.task.done():
            job.task.cancel()
        if self._current.get((job.uri, job.kind)) is job:
            del self._current[(job.uri, job.kind)]
            self._changed()

    def _changed(self) -> None:
        if self.on_change is not None and not self._closed:
            try:
                self.on_change()
            except Exception:  # a listener must never break job accounting
                log.debug("job change listener failed", exc_info=True)

    def _task_done(self, task: asyncio.Task[Any]) -> None:
        self._tasks.discard(task)
        if not task.cancelled():
            task.exception()  # retrieved: awaiting callers still see it; asyncio does not warn

    def _supports_progress(self) -> bool:
        return bool(get_capability(self.server.client_capabilities, "window.work_done_progress", False))

    async def _begin_progress(self, job: Job, cancellable: bool) -> str | None:
        api: _ProgressApi = self.server.work_done_progress
        token = f"kernellsp-{job.kind}-{uuid.uuid4().hex[:12]}"
        try:
            await asyncio.wait_for(api.create_async(token), PROGRESS_CREATE_TIMEOUT_S)
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # the client refused or did not answer: run without progress
            log.info("no progress for %s job (%s: %s)", job.kind, type(exc).__name__, exc)
            return None
        assert job.reporter is not None
        job.reporter._attach(api, token)
        fut = api.tokens.get(token)
        if fut is not None:
            loop = asyncio.get_running_loop()

            def on_token_done(f: Future[Any]) -> None:
                if f.cancelled():
                    job.cancel.set()  # at once, from whatever thread cancelled the future
                    with contextlib.suppress(RuntimeError):
                        loop.call_soon_threadsafe(self._cancel_job, job, "cancelled by the user")

            fut.add_done_callback(on_token_done)
        api.begin(token, types.WorkDoneProgressBegin(title=job.title, cancellable=cancellable, percentage=0))
        return token

    async def _run(
        self, job: Job, factory: JobFactory, delay_s: float, progress: bool, cancellable: bool
    ) -> Any:
        token: str | None = None
        assert job.reporter is not None
        try:
            if delay_s > 0:
                await asyncio.sleep(delay_s)
            if progress and self._supports_progress():
                token = await self._begin_progress(job, cancellable)
            result = await factory(job.reporter, job.cancel)
            job.outcome = "done"
            return result
        except asyncio.CancelledError:
            # However the task was cancelled (a newer job, the user, asyncio.run() winding down at
            # exit), worker threads must stop too: they only see the event.
            job.cancel.set()
            job.outcome = "cancelled"
            raise
        except Exception as exc:
            if job.cancel.is_set():
                job.outcome = "cancelled"
                log.debug("%s job for %s stopped after cancellation: %r", job.kind, job.uri, exc)
                raise asyncio.CancelledError() from exc
            job.outcome = "failed"
            self._report_failure(job, exc)
            raise
        finally:
            job.reporter._close()
            if token is not None:
                api = self.server.work_done_progress
                try:
                    api.end(token, types.WorkDoneProgressEnd(message=job.outcome))
                except Exception:  # the client may be gone
                    log.debug("progress end failed", exc_info=True)
                api.tokens.pop(token, None)
            if self._current.get((job.uri, job.kind)) is job:
                del self._current[(job.uri, job.kind)]
                self._changed()

    def _report_failure(self, job: Job, exc: BaseException) -> None:
        tb = "".join(traceback.format_exception(exc))
        log.error("%s job for %s failed:\n%s", job.kind, job.uri, tb)
        first = (str(exc).strip().splitlines() or [""])[0]
        if len(first) > 300:
            first = first[:297] + "..."
        line = f"kernellsp: {job.title} failed: {type(exc).__name__}{': ' + first if first else ''}"
        try:
            self.server.window_log_message(types.LogMessageParams(type=types.MessageType.Error, message=tb))
            self.server.window_show_message(
                types.ShowMessageParams(type=types.MessageType.Error, message=line)
            )
        except Exception:
            log.debug("could not tell the client", exc_info=True)
