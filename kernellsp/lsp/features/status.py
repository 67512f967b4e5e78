"""Status for editors: where GPU work runs, whether it can, and which long jobs are running.

* ``kernellsp.status()`` returns, and the ``kernellsp/status`` notification pushes whenever a job
  starts or ends::

      {"runner": "local" | "ssh" | "none", "gpuHost": str | None,
       "gpu": {"ready": bool, "name": str | None, "problem": str | None},
       "jobs": [{"uri", "kind", "title", "seconds", "message"}]}

  ``gpu`` comes from the runner the settings ask for (:meth:`KernelLspServer.gpu_runner`) and its
  identity (``nvidia-smi`` there, cached), worked out in the job executor once per ``(runner,
  gpuHost)``. ``jobs`` lists the profile, optimize and workspace-check jobs (a check after a save is
  too short to be worth a status line).
* ``kernellsp.cancelJob(uri, kind)`` cancels one job (as the progress bar's Cancel button does) and
  returns ``{"cancelled": n}``.

VS Code's status bar item is built on these; any client can use them.
"""

from __future__ import annotations

import asyncio
import logging
import time
import weakref
from typing import Any

from kernellsp.lsp.server import KernelLspProtocol, KernelLspServer
from kernellsp.profile.environment import runner_environment
from kernellsp.run.runner import RunnerError

log = logging.getLogger(__name__)

STATUS = "kernellsp.status"
CANCEL_JOB = "kernellsp.cancelJob"
NOTIFICATION = "kernellsp/status"
#: Job kinds the status lists.
SHOWN_KINDS = frozenset({"profile", "optimize", "check-workspace"})
#: Seconds a runner's identity is asked for at most.
GPU_QUERY_TIMEOUT_S = 30.0


class _State:
    """Per-server state: the GPU state per (runner, gpuHost) and the pending push."""

    def __init__(self) -> None:
        self.gpu: dict[tuple[str, str | None], dict[str, Any]] = {}
        self.push: asyncio.Task[None] | None = None
        self.tasks: set[asyncio.Task[None]] = set()
        self.last: Any = None


_STATES: weakref.WeakKeyDictionary[KernelLspServer, _State] = weakref.WeakKeyDictionary()


def _state(ls: KernelLspServer) -> _State:
    state = _STATES.get(ls)
    if state is None:
        state = _STATES[ls] = _State()
    return state


def _query_gpu(ls: KernelLspServer) -> dict[str, Any]:
    """Blocking: make (or reuse) the runner and ask it what GPU it has."""
    runner, problem = ls.gpu_runner()
    if runner is None:
        return {"ready": False, "name": None, "problem": problem}
    try:
        env = runner_environment(runner, timeout_s=GPU_QUERY_TIMEOUT_S)
    except RunnerError as exc:
        return {"ready": False, "name": None, "problem": str(exc)}
    return {"ready": True, "name": env.get("gpu"), "problem": None}


async def gpu_state(ls: KernelLspServer) -> dict[str, Any]:
    """The GPU state under the current settings (asked once per runner setting)."""
    key = (ls.settings.runner, ls.settings.gpu_host)
    cached = _state(ls).gpu.get(key)
    if cached is None:
        cached = await ls.jobs.run_blocking(_query_gpu, ls)
        _state(ls).gpu[key] = cached
    return cached


def payload(ls: KernelLspServer, gpu: dict[str, Any]) -> dict[str, Any]:
    """The status object (see the module docstring)."""
    now = time.monotonic()
    jobs = [
        {
            "uri": job.uri,
            "kind": job.kind,
            "title": job.title,
            "seconds": round(now - job.started, 1),
            "message": job.reporter.last_message if job.reporter is not None else None,
        }
        for job in ls.jobs.jobs()
        if job.kind in SHOWN_KINDS
    ]
    return {"runner": ls.settings.runner, "gpuHost": ls.settings.gpu_host, "gpu": gpu, "jobs": jobs}


async def status(ls: KernelLspServer) -> dict[str, Any]:
    """``kernellsp.status()``."""
    return payload(ls, await gpu_state(ls))


async def cancel_job(ls: KernelLspServer, uri: str, kind: str | None = None) -> dict[str, Any]:
    """``kernellsp.cancelJob(uri, kind)``: cancel that job (every job of ``uri`` without ``kind``)."""
    return {"cancelled": ls.jobs.cancel(uri, kind)}


async def _push(ls: KernelLspServer) -> None:
    await asyncio.sleep(0)  # coalesce the changes of one loop iteration (a superseded job and its successor)
    state = _state(ls)
    state.push = None
    body = payload(ls, await gpu_state(ls))
    signature = (body["runner"], body["gpuHost"], body["gpu"], [(j["uri"], j["kind"]) for j in body["jobs"]])
    if signature == state.last:
        return  # only check jobs came and went: nothing the status shows changed
    state.last = signature
    protocol = ls.protocol
    if isinstance(protocol, KernelLspProtocol):
        try:
            protocol.notify_raw(NOTIFICATION, body)
        except Exception:  # the client may be gone
            log.debug("status notification failed", exc_info=True)


def schedule_push(ls: KernelLspServer) -> None:
    """Push the status soon (once for a burst of job changes); called on the event loop."""
    state = _state(ls)
    if state.push is not None and not state.push.done():
        return
    try:
        loop = asyncio.get_running_loop()
    except RuntimeError:
        return
    task = loop.create_task(_push(ls), name="kernellsp-status")
    state.push = task
    state.tasks.add(task)
    task.add_done_callback(state.tasks.discard)


def register(ls: KernelLspServer) -> None:
    """Register the commands and push the status on every job change."""
    ls.command(STATUS)(status)
    ls.command(CANCEL_JOB)(cancel_job)
    ls.jobs.on_change = lambda: schedule_push(ls)
