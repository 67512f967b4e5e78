"""A process pool for CPU-heavy job steps, with cancel flags that cross the process boundary.

Parsing and analysing a large file is pure Python (and tree-sitter) work that holds the GIL for
hundreds of milliseconds; in a thread of the server process it would stall the event loop, and
hover or code actions with it. :class:`ProcessPool` runs such steps in worker processes and gives
each call a :class:`CancelFlag` living in
shared memory: the worker polls it like a :class:`threading.Event` (``CheckOptions.cancel``
accepts it, so nvcc is killed the same way), the server sets it when the awaiting task is
cancelled or the pool closes. Functions and arguments must be picklable (module-level functions).

Workers come from a ``forkserver`` that has already imported :mod:`kernellsp.lsp.worker` (never a
fork of the threaded server itself), so a new worker is ready in milliseconds; where there is no
forkserver (Windows), they are spawned. Each worker watches the server process: if the server dies
without shutting the pool down (SIGKILL), the worker sets every flag (a running nvcc is killed) and
exits, and the forkserver follows once no worker is left.
"""

from __future__ import annotations

import asyncio
import functools
import multiprocessing
import multiprocessing.sharedctypes
import os
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future, ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from typing import Any, TypeVar

T = TypeVar("T")

#: How many calls may be queued or running at once (each holds one flag slot).
SLOTS = 256

_FLAGS: Any = None  # the shared flag array, in worker processes


class CancelFlag:
    """One slot of a shared byte array, with the :class:`threading.Event` methods the core uses."""

    def __init__(self, flags: Any, slot: int) -> None:
        self._flags = flags
        self.slot = slot

    def is_set(self) -> bool:
        return bool(self._flags[self.slot])

    def set(self) -> None:
        self._flags[self.slot] = 1

    def clear(self) -> None:
        self._flags[self.slot] = 0

    def wait(self, timeout: float | None = None) -> bool:
        deadline = None if timeout is None else time.monotonic() + timeout
        while not self.is_set():
            if deadline is not None and time.monotonic() >= deadline:
                return False
            time.sleep(0.02)
        return True


#: How often a worker checks that the server is still there.
WATCH_INTERVAL_S = 0.5


def _alive(pid: int) -> bool:
    """Is ``pid`` a live process (not gone, not a zombie)?"""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            state = f.read().rsplit(b")", 1)[1].split()[0]
        return state not in (b"Z", b"X")
    except FileNotFoundError:
        return False
    except (OSError, IndexError):
        pass
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _watch_server(server_pid: int) -> None:
    while _alive(server_pid):
        time.sleep(WATCH_INTERVAL_S)
    for i in range(SLOTS):  # the server is gone: stop whatever runs (run_tool kills nvcc) and leave
        _FLAGS[i] = 1
    time.sleep(1.0)
    os._exit(0)


def _init_worker(flags: Any, server_pid: int) -> None:
    global _FLAGS
    _FLAGS = flags
    threading.Thread(target=_watch_server, args=(server_pid,), name="kernellsp-watch", daemon=True).start()


def _call(
    slot: int, with_cancel: bool, fn: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any]
) -> Any:
    if with_cancel:
        kwargs = {**kwargs, "cancel": CancelFlag(_FLAGS, slot)}
    return fn(*args, **kwargs)


def _warm() -> None:
    import kernellsp.lsp.worker  # noqa: F401  (tree-sitter, the rules, the build layer)


def _context() -> Any:
    if "forkserver" in multiprocessing.get_all_start_methods():
        ctx = multiprocessing.get_context("forkserver")
        ctx.set_forkserver_preload(["kernellsp.lsp.worker"])
        return ctx
    return multiprocessing.get_context("spawn")


class ProcessPool:
    """Worker processes started on first use; ``run`` awaits one call and honours cancellation."""

    def __init__(self, max_workers: int) -> None:
        self._ctx = _context()
        self._max_workers = max_workers
        self._flags: Any = None
        self._executor: ProcessPoolExecutor | None = None
        self._free = list(range(SLOTS))
        self._used: set[int] = set()
        self._lock = threading.Lock()
        self._closed = False

    def _pool(self) -> ProcessPoolExecutor:
        if self._closed:
            raise RuntimeError("the process pool is shut down")
        if self._executor is None:
            self._flags = multiprocessing.sharedctypes.RawArray("b", SLOTS)
            self._executor = ProcessPoolExecutor(
                max_workers=self._max_workers,
                mp_context=self._ctx,
                initializer=_init_worker,
                initargs=(self._flags, os.getpid()),
            )
        return self._executor

    def warm(self) -> None:
        """Start a worker and import the core in it, without waiting (first checks start faster)."""
        self._pool().submit(_warm)

    def _acquire(self) -> int:
        with self._lock:
            if not self._free:
                raise RuntimeError(f"more than {SLOTS} background computations at once")
            slot = self._free.pop()
            self._used.add(slot)
        self._flags[slot] = 0
        return slot

    def _release(self, slot: int, _f: Future[Any] | None = None) -> None:
        with self._lock:
            if slot in self._used:
                self._used.discard(slot)
                self._free.append(slot)

    async def run(self, fn: Callable[..., T], *args: Any, with_cancel: bool = False, **kwargs: Any) -> T:
        """Run ``fn(*args, **kwargs)`` in a worker; with ``with_cancel`` it also gets ``cancel=flag``.

        Cancelling the awaiting task sets the flag (the worker stops at its next check) and the
        flag slot is recycled once the worker is done with the call.
        """
        try:
            return await self._run_once(fn, args, kwargs, with_cancel)
        except BrokenProcessPool:
            # A worker died (killed for memory, a crash in a native library): the executor is unusable from
            # now on. Start a fresh one and try this call once more instead of failing every later check.
            self._reset()
            return await self._run_once(fn, args, kwargs, with_cancel)

    async def _run_once(
        self, fn: Callable[..., T], args: tuple[Any, ...], kwargs: dict[str, Any], with_cancel: bool
    ) -> T:
        pool = self._pool()
        slot = self._acquire()
        try:
            fut = pool.submit(_call, slot, with_cancel, fn, args, kwargs)
        except BaseException:
            self._release(slot)
            raise
        fut.add_done_callback(functools.partial(self._release, slot))
        try:
            return await asyncio.wrap_future(fut)
        except asyncio.CancelledError:
            self._flags[slot] = 1
            raise

    def _reset(self) -> None:
        """Drop a broken executor; the next call starts new workers."""
        with self._lock:
            old, self._executor = self._executor, None
        if old is not None:
            old.shutdown(wait=False, cancel_futures=True)

    def close(self) -> None:
        """Set every flag in use and stop the pool (running calls end at their next check)."""
        self._closed = True
        if self._executor is None:
            return
        with self._lock:
            for slot in self._used:
                self._flags[slot] = 1
        self._executor.shutdown(wait=False, cancel_futures=True)
