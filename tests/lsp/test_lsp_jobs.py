"""The background-job layer (kernellsp.lsp.jobs) in process, against a stand-in server."""

from __future__ import annotations

import asyncio
import threading
import time
from concurrent.futures import Future
from typing import Any

import pytest
from lsprotocol import types

from kernellsp.lsp.jobs import JobManager, ProgressReporter


class FakeProgress:
    """pygls' ``work_done_progress`` surface, recording what is sent."""

    def __init__(self) -> None:
        self.tokens: dict[Any, Future[Any]] = {}
        self.sent: list[tuple[str, Any, Any]] = []

    async def create_async(self, token: str) -> None:
        self.tokens[token] = Future()

    def begin(self, token: str, value: types.WorkDoneProgressBegin) -> None:
        self.sent.append(("begin", token, value))

    def report(self, token: str, value: types.WorkDoneProgressReport) -> None:
        self.sent.append(("report", token, value))

    def end(self, token: str, value: types.WorkDoneProgressEnd) -> None:
        self.sent.append(("end", token, value))

    def of(self, token: str) -> list[tuple[str, Any]]:
        return [(kind, v) for kind, t, v in self.sent if t == token]


class FakeServer:
    def __init__(self, progress: bool = True) -> None:
        self.client_capabilities = types.ClientCapabilities(
            window=types.WindowClientCapabilities(work_done_progress=progress)
        )
        self.work_done_progress = FakeProgress()
        self.messages: list[types.ShowMessageParams] = []
        self.logs: list[types.LogMessageParams] = []

    def window_show_message(self, params: types.ShowMessageParams) -> None:
        self.messages.append(params)

    def window_log_message(self, params: types.LogMessageParams) -> None:
        self.logs.append(params)


@pytest.fixture
def server() -> FakeServer:
    return FakeServer()


@pytest.fixture
async def jobs(server: FakeServer) -> Any:
    jm = JobManager(server, max_workers=2)
    yield jm
    await jm.shutdown(2)


def _ends(server: FakeServer) -> list[str]:
    return [v.message for kind, _t, v in server.work_done_progress.sent if kind == "end"]


async def test_result_and_progress(jobs: JobManager, server: FakeServer) -> None:
    async def work(progress: ProgressReporter, cancel: threading.Event) -> int:
        progress.report("half way", 50)
        progress.report(None, 20)  # never goes back
        return 42

    assert await jobs.start("file:///a.cu", "check", "Checking a.cu", work) == 42
    token = next(iter(t for _k, t, _v in server.work_done_progress.sent))
    seq = server.work_done_progress.of(token)
    assert [k for k, _ in seq] == ["begin", "report", "report", "end"]
    assert seq[0][1].title == "Checking a.cu" and seq[0][1].cancellable is True
    assert [v.percentage for k, v in seq if k == "report"] == [50, 50]
    assert seq[-1][1].message == "done"
    assert token not in server.work_done_progress.tokens  # forgotten once ended
    assert jobs.jobs() == []


async def test_newer_job_cancels_older_of_same_kind_only(jobs: JobManager, server: FakeServer) -> None:
    events: dict[str, threading.Event] = {}

    def factory(name: str) -> Any:
        async def work(progress: ProgressReporter, cancel: threading.Event) -> str:
            events[name] = cancel
            await asyncio.sleep(30)
            return name

        return work

    first = jobs.start("file:///a.cu", "check", "one", factory("one"))
    other_kind = jobs.start("file:///a.cu", "profile", "profile", factory("profile"))
    await asyncio.sleep(0.05)
    second = jobs.start("file:///a.cu", "check", "two", factory("two"))
    await asyncio.sleep(0.05)
    assert first.cancelled() and events["one"].is_set()
    assert not other_kind.done() and not events["profile"].is_set()
    assert jobs.current("file:///a.cu", "check").title == "two"
    assert jobs.cancel("file:///a.cu") == 2
    await asyncio.wait({second, other_kind})
    assert second.cancelled() and other_kind.cancelled()
    assert _ends(server).count("cancelled") == 3


async def test_failure_is_reported_once_and_manager_survives(jobs: JobManager, server: FakeServer) -> None:
    async def boom(progress: ProgressReporter, cancel: threading.Event) -> None:
        raise RuntimeError("kaput\nsecond line")

    task = jobs.start("file:///a.cu", "check", "Checking a.cu", boom)
    with pytest.raises(RuntimeError):
        await task
    assert [m.message for m in server.messages] == ["kernellsp: Checking a.cu failed: RuntimeError: kaput"]
    assert server.messages[0].type == types.MessageType.Error
    assert "Traceback" in server.logs[0].message
    assert _ends(server) == ["failed"]

    async def fine(progress: ProgressReporter, cancel: threading.Event) -> str:
        return "ok"

    assert await jobs.start("file:///a.cu", "check", "again", fine) == "ok"


async def test_error_after_cancel_counts_as_cancelled(jobs: JobManager, server: FakeServer) -> None:
    started = asyncio.Event()

    async def work(progress: ProgressReporter, cancel: threading.Event) -> None:
        started.set()
        await jobs.run_blocking(cancel.wait, 10)
        raise RuntimeError("the tool was killed")

    task = jobs.start("file:///a.cu", "check", "t", work)
    await started.wait()
    job = jobs.current("file:///a.cu", "check")
    job.cancel.set()  # as a worker sees it before the task is cancelled
    await asyncio.wait({task})
    assert task.cancelled()
    assert server.messages == []


async def test_reports_from_worker_threads(jobs: JobManager, server: FakeServer) -> None:
    def blocking(progress: ProgressReporter) -> str:
        assert threading.current_thread().name.startswith("kernellsp-job")
        for i in range(1, 6):
            progress.report(f"step {i}", i * 20)
        return "done"

    async def work(progress: ProgressReporter, cancel: threading.Event) -> str:
        return await jobs.run_blocking(blocking, progress)

    assert await jobs.start("file:///a.cu", "optimize", "Optimizing", work) == "done"
    await asyncio.sleep(0.05)  # reports scheduled with call_soon_threadsafe
    reports = [v for k, _t, v in server.work_done_progress.sent if k == "report"]
    assert [r.message for r in reports] == [f"step {i}" for i in range(1, 6)]
    assert [r.percentage for r in reports] == [20, 40, 60, 80, 100]


async def test_user_cancel_through_the_token(jobs: JobManager, server: FakeServer) -> None:
    observed = threading.Event()

    def poll(progress: ProgressReporter, cancel: threading.Event) -> None:
        """A worker thread polling cooperatively, as a long loop would between steps."""
        deadline = time.monotonic() + 10
        while not progress.cancelled and time.monotonic() < deadline:
            time.sleep(0.01)
        if progress.cancelled and cancel.is_set():
            observed.set()

    async def work(progress: ProgressReporter, cancel: threading.Event) -> None:
        await jobs.run_blocking(poll, progress, cancel)

    task = jobs.start("file:///a.cu", "optimize", "Optimizing", work)
    await wait_for(lambda: server.work_done_progress.tokens)
    (token,) = list(server.work_done_progress.tokens)
    server.work_done_progress.tokens[token].cancel()  # what pygls does on window/workDoneProgress/cancel
    await asyncio.wait({task}, timeout=2)
    assert task.cancelled()
    assert await asyncio.to_thread(observed.wait, 5)  # the thread saw it too (a test-side thread)
    assert _ends(server) == ["cancelled"]


async def wait_for(pred: Any, timeout: float = 5) -> None:
    deadline = time.monotonic() + timeout
    while not pred():
        assert time.monotonic() < deadline, "timed out"
        await asyncio.sleep(0.01)


async def test_without_progress_support() -> None:
    server = FakeServer(progress=False)
    jobs = JobManager(server, max_workers=1)
    try:

        async def work(progress: ProgressReporter, cancel: threading.Event) -> str:
            progress.report("no token", 10)
            assert progress.token is None
            return "ran"

        assert await jobs.start("file:///a.cu", "check", "t", work) == "ran"
        assert server.work_done_progress.sent == []
    finally:
        await jobs.shutdown(1)


def wait_for_cancel(seconds: float, cancel: Any = None) -> str:
    """Runs in a worker process: waits on the shared cancel flag."""
    return "cancelled" if cancel.wait(seconds) else "timeout"


def cpu_answer(n: int) -> int:
    return sum(range(n))


async def test_process_pool_runs_and_cancels(server: FakeServer) -> None:
    jobs = JobManager(server, max_workers=1)  # one worker: it must be freed by the cancellation
    try:
        await _process_pool_runs_and_cancels(jobs)
    finally:
        await jobs.shutdown(2)


async def _process_pool_runs_and_cancels(jobs: JobManager) -> None:
    assert await jobs.run_in_process(cpu_answer, 1000) == sum(range(1000))

    async def work(progress: ProgressReporter, cancel: threading.Event) -> str:
        return await jobs.run_in_process(wait_for_cancel, 30, with_cancel=True)

    task = jobs.start("file:///a.cu", "check", "t", work)
    await asyncio.sleep(0.5)
    t0 = time.monotonic()
    jobs.cancel("file:///a.cu")
    await asyncio.wait({task})
    assert task.cancelled()
    # The worker saw the flag and is free again: the next call does not wait 30 s.
    assert await asyncio.wait_for(jobs.run_in_process(cpu_answer, 10), 10) == 45
    assert time.monotonic() - t0 < 5


async def test_shutdown_refuses_new_jobs(server: FakeServer) -> None:
    jobs = JobManager(server, max_workers=1)
    await jobs.shutdown(1)

    async def work(progress: ProgressReporter, cancel: threading.Event) -> None:
        return None

    with pytest.raises(RuntimeError):
        jobs.start("file:///a.cu", "check", "t", work)


# --------------------------------------------------------------------------------------------------
# The GPU runner the jobs share


def test_profile_and_optimize_share_one_runner_closed_at_shutdown() -> None:
    """One runner per (runner, gpu_host) setting, so an ssh host is reached through one connection; the
    server closes every runner it made when it shuts down (no ssh master or control dir left behind)."""
    from pathlib import Path

    from kernellsp.lsp.server import KernelLspServer
    from kernellsp.run.ssh import SshRunner
    from kernellsp.settings import Settings

    server = KernelLspServer()
    server.settings = Settings(gpu_host="nobody@127.0.0.1:1")  # made lazily: nothing connects yet
    first, problem = server.gpu_runner()
    again, _ = server.gpu_runner()
    assert problem is None and isinstance(first, SshRunner) and again is first
    server.settings = Settings(gpu_host="nobody@127.0.0.1:2")
    other, _ = server.gpu_runner()
    assert isinstance(other, SshRunner) and other is not first
    server.settings = Settings(runner="none")
    assert server.gpu_runner() == (None, "profiling is off (runner = none)")
    dirs = [Path(first._control_dir), Path(other._control_dir)]
    assert all(d.is_dir() for d in dirs)
    server.shutdown()
    assert not any(d.exists() for d in dirs)


def worker_pid() -> int:
    import os

    return os.getpid()


async def test_a_killed_worker_does_not_stop_later_checks(server: FakeServer) -> None:
    """A worker killed from outside (the OOM killer, a crash in a native library) breaks the executor; the
    next call gets fresh workers instead of BrokenProcessPool for the rest of the session."""
    import os
    import signal

    jobs = JobManager(server, max_workers=1)
    try:
        pid = await jobs.run_in_process(worker_pid)
        os.kill(pid, signal.SIGKILL)
        await asyncio.sleep(0.5)
        assert await asyncio.wait_for(jobs.run_in_process(cpu_answer, 10), 30) == 45
        assert await jobs.run_in_process(worker_pid) != pid
    finally:
        await jobs.shutdown(2)


def test_layers_of_an_older_version_are_not_published_with_a_newer_one() -> None:
    """A profile of version 1 points at version 1's lines: once the check of version 2 is published it goes."""
    from kernellsp.lsp.server import KernelLspServer

    server = KernelLspServer()
    sent: list[tuple[int | None, list[str]]] = []
    server.publish_raw_diagnostics = lambda uri, version, diags: sent.append(
        (version, [d["code"] for d in diags])
    )  # type: ignore[method-assign]
    uri = "file:///k.cu"
    server.publish_layer(uri, "check", 1, [{"code": "KL405"}])
    server.publish_layer(uri, "profile", 1, [{"code": "KL601"}])
    assert sent[-1] == (1, ["KL405", "KL601"])
    server.publish_layer(uri, "check", 2, [{"code": "KL004"}])
    assert sent[-1] == (2, ["KL004"])
    server.publish_layer(uri, "profile", 2, [{"code": "KL501"}])
    assert sent[-1] == (2, ["KL004", "KL501"])
