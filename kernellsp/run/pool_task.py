"""One verification as a Dask task: what the client sends (:class:`VerifyRequest`), what the worker runs
(:func:`run_verification`) and what it answers (:class:`VerifyResponse`) (:mod:`kernellsp.run.pool`).
"""

from __future__ import annotations

import asyncio
import shutil
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import distributed

from kernellsp.build.nvcc import Cancelled
from kernellsp.run.pool_worker import PoolError, _plugin
from kernellsp.run.runner import RunnerError


@dataclass
class VerifyRequest:
    """Everything a worker needs for one verification: it sees none of the client's files."""

    id: str
    file_name: str
    baseline: str
    candidate: str
    entry: str
    options: Any  # VerifyOptions (typed loosely: this module must import without the optimize stage)
    #: The file's local includes, relative to its folder (the gate copies these next to both sides).
    includes: dict[str, bytes]
    cancel_event: str
    progress_topic: str
    #: The verification the worker runs: :func:`kernellsp.optimize.verify.gate.verify`. A test on a host
    #: without a GPU passes a function that does the same up to the GPU steps (scope, plan, real nvcc build).
    verify_fn: Callable[..., Any] | None = None


@dataclass
class VerifyResponse:
    """A worker's answer: the verdict, or the error that stopped the verification (``error_kind``: ``verify``,
    ``runner``, ``cancelled``, ``pool``)."""

    verdict: Any | None
    error: str | None
    error_kind: str | None
    worker: str
    gpu_uuid: str | None
    seconds: float
    #: Wall-clock times (``time.time()``) of the task's start and end on the worker: with the client's own
    #: submit and return times they split the pool's added latency into dispatch and return.
    started_at: float = 0.0
    finished_at: float = 0.0
    #: Seconds of the verification itself (the rest of ``seconds``: the scratch copy, the cancel watcher).
    verify_seconds: float = 0.0


def run_verification(req: VerifyRequest) -> VerifyResponse:
    """The task: verify ``req`` on this worker's GPU (runs on a worker)."""
    from kernellsp.optimize.verify.gate import VerifyError, verify

    t0, started = time.monotonic(), time.time()
    worker = distributed.get_worker()

    def answer(
        verdict: Any,
        error: str | None = None,
        kind: str | None = None,
        gpu: str | None = None,
        verify_s: float = 0.0,
    ) -> VerifyResponse:
        return VerifyResponse(
            verdict, error, kind, worker.address, gpu, time.monotonic() - t0, started, time.time(), verify_s
        )

    try:
        plugin = _plugin()
    except PoolError as exc:
        return answer(None, str(exc), "pool")
    runner, info = plugin.runner, plugin.info
    if runner is None or info is None:
        return answer(
            None, f"worker {worker.address} cannot verify: {info.problem if info else 'not set up'}", "pool"
        )
    uuid_ = runner.gpu.uuid
    cancel = threading.Event()
    done = threading.Event()
    # Made here: the worker's client is known in the task's own thread only.
    flag = distributed.Event(req.cancel_event, client=distributed.get_client())
    threading.Thread(target=_watch_cancel, args=(flag, cancel, done), daemon=True).start()

    def progress(message: str, pct: float | None) -> None:
        worker.log_event(req.progress_topic, {"id": req.id, "message": message, "pct": pct})

    root = Path(tempfile.mkdtemp(prefix="kernellsp-pool-"))
    try:
        path = root / req.file_name
        path.write_text(req.baseline)
        for rel, data in req.includes.items():
            p = (root / rel).resolve()
            # Only files under the scratch folder, whatever the client sent.
            if root.resolve() in p.parents:
                p.parent.mkdir(parents=True, exist_ok=True)
                p.write_bytes(data)
        # Built for this GPU: a pool of mixed models builds each candidate for the GPU that runs it.
        opts = replace(req.options, arch=runner.gpu.arch)
        fn = req.verify_fn or verify
        tv = time.monotonic()
        verdict = fn(
            path,
            req.baseline,
            req.candidate,
            req.entry,
            runner,
            opts,
            dict(info.environment),
            cancel,
            progress,
        )
        return answer(verdict, gpu=uuid_, verify_s=time.monotonic() - tv)
    except Cancelled as exc:
        return answer(None, f"cancelled ({exc})", "cancelled", uuid_)
    except VerifyError as exc:
        return answer(None, str(exc), "verify", uuid_)
    except RunnerError as exc:
        return answer(None, f"{exc} (on {runner.name})", "runner", uuid_)
    finally:
        done.set()
        shutil.rmtree(root, ignore_errors=True)


def _watch_cancel(flag: Any, cancel: threading.Event, done: threading.Event) -> None:
    """Set ``cancel`` once the client sets ``flag`` (the Dask event that is one verification's cancel flag).

    Polled twice a second (``is_set``, one short scheduler call) rather than waited on: a wait left pending on
    the scheduler when the cluster shuts down is logged there as an error.
    """
    while not done.wait(0.5):
        try:
            if flag.is_set():
                cancel.set()
                return
        except asyncio.CancelledError:
            return  # the worker is shutting down: its task goes with it
        except Exception:
            # The scheduler is unreachable: then the client cannot cancel either, and the task ends by itself.
            time.sleep(1.0)


__all__ = [
    "VerifyRequest",
    "VerifyResponse",
    "run_verification",
]
