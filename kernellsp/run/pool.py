"""The pool runner: whole verifications on the GPUs of a Dask cluster, one verification per GPU at a time.

Why Dask (``distributed``): docs/cluster.md. The shape of it:

* **Workers** are Dask worker processes, one per GPU (``pool.scheduler = "local"`` starts dask-cuda's
  ``LocalCUDACluster`` on this host's GPUs, or, without dask-cuda, the same layout with distributed's own
  ``SpecCluster``: one nanny-managed process per GPU, pinned with ``CUDA_VISIBLE_DEVICES``). Any running
  scheduler address works too (``dask scheduler`` + ``dask-cuda-worker`` on GPU hosts, dask-jobqueue on
  Slurm/PBS).
* :class:`GpuWorkerPlugin`, registered by the client on every worker (present and future: a worker the
  nanny restarts gets it again), finds the worker's GPU with ``nvidia-smi`` and declares one unit of the
  Dask resource ``kernellsp-gpu:<GPU model>``. A verification asks for one unit of its model's resource, so
  a GPU runs one verification at a time, and a run's verdicts all come from GPUs of one model (speedups
  measured on an A100 and an H100 are never compared; a mixed pool is a set of model groups).
* A verification is one task (:func:`run_verification`): the worker writes the file and its local
  includes into a scratch directory and runs :func:`kernellsp.optimize.verify.gate.verify` with a
  :class:`PinnedRunner` (a :class:`LocalRunner` whose every command sees only the worker's GPU and takes a
  lock of that GPU), building for the GPU's own arch. Baseline and candidate are built, checked and timed
  on the same GPU. The :class:`Verdict` (raw timing samples, sanitizer reports, environment) comes back to
  the client, which writes the evidence bundles.
* A worker that dies mid-verification (killed, out of memory, its host lost) makes the scheduler run the
  task again on another worker of the model, from scratch; after ``distributed.scheduler.allowed-failures``
  deaths the candidate gets an ``error`` verdict naming that: never a wrong verdict.
* Cancelling (the caller's event, Ctrl-C) cancels the task and sets a Dask ``Event`` the running task
  watches: its nvcc, harness or compute-sanitizer process is killed at once.
* Progress messages travel as Dask events (``log_event`` / ``subscribe_topic``).

:class:`PoolRunner` is the face the rest of kernellsp sees: a :class:`Runner` whose
:meth:`PoolRunner.verify_remotely` the gate hands whole verifications to, bound to one model group of
one :class:`Pool`. It runs no single commands: profiling (ncu) needs ``runner = local`` or ``ssh``.
"""

from __future__ import annotations

import contextlib
import threading
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import distributed

from kernellsp.build.nvcc import Cancelled
from kernellsp.run import sandbox as sbx
from kernellsp.run.gpu_lock import GpuLock
from kernellsp.run.pool_task import VerifyRequest, VerifyResponse, run_verification
from kernellsp.run.pool_worker import (
    GpuWorkerPlugin,
    PoolError,
    Probe,
    WorkerInfo,
    _worker_info,
    _worker_sandbox,
    list_gpus,
    resource_name,
)
from kernellsp.run.runner import Runner, RunResult


def _start_local_cluster(gpus: list[str]) -> tuple[Any, str]:
    """One worker per GPU of this host (``gpus``: indices or UUIDs; empty: all), one thread each; and which
    kind of cluster that is (dask-cuda's, or distributed's own parts when dask-cuda is missing or fails)."""
    devices = list(gpus)
    if not devices:
        found = list_gpus()
        if not found:
            raise PoolError(
                'pool.scheduler = "local" needs a GPU on this host, and nvidia-smi finds none: set '
                "pool.scheduler to the address of a Dask scheduler with GPU workers"
            )
        devices = [g.index for g in found]
    why = ""
    try:
        from dask_cuda import LocalCUDACluster

        # device_memory_limit=0: no device-memory spilling (the workers hold no device data: the code under
        # test runs in processes of its own). silence_logs=ERROR: workers' INFO lines would flood stderr.
        cluster = LocalCUDACluster(
            CUDA_VISIBLE_DEVICES=devices,
            threads_per_worker=1,
            device_memory_limit=0,
            dashboard_address=None,
            silence_logs=40,
        )
        return cluster, "dask-cuda LocalCUDACluster"
    except ImportError as exc:
        why = f"dask-cuda is not installed ({exc.name})"
    except Exception as exc:  # its GPU discovery or NVML failing: the same layout without it still works
        why = f"dask-cuda's LocalCUDACluster failed: {type(exc).__name__}: {exc}"
    # The layout LocalCUDACluster makes (one nanny-managed worker per GPU, pinned), from distributed's own parts.
    workers = {
        f"gpu-{d}": {"cls": distributed.Nanny, "options": {"nthreads": 1, "env": {"CUDA_VISIBLE_DEVICES": d}}}
        for d in devices
    }
    # No dashboard; the scheduler's small HTTP server (health routes) takes a free port rather than 8787.
    scheduler = {"cls": distributed.Scheduler, "options": {"dashboard": False, "dashboard_address": ":0"}}
    cluster = distributed.SpecCluster(workers=workers, scheduler=scheduler, silence_logs=40)
    return cluster, f"distributed SpecCluster, one pinned worker per GPU ({why})"


class Pool:
    """A connection to a Dask cluster of GPU workers (started here for ``scheduler = "local"``).

    Connects on first use. ``probe`` finds a worker's GPU (nvidia-smi; tests without a GPU pass their own).
    """

    def __init__(
        self,
        scheduler: str = "local",
        gpus: list[str] | None = None,
        gpu_model: str | None = None,
        probe: Probe | None = None,
        connect_timeout_s: float = 60.0,
        no_worker_grace_s: float = 120.0,
        verify_fn: Callable[..., Any] | None = None,
    ) -> None:
        self.scheduler = scheduler
        self.gpus = [str(g) for g in (gpus or [])]
        self.gpu_model = gpu_model
        self.probe = probe
        self.connect_timeout_s = connect_timeout_s
        #: How long a verification waits while no worker of its model is in the pool (a jobqueue cluster may
        #: be scaling up) before it gives up.
        self.no_worker_grace_s = no_worker_grace_s
        #: What the workers run (None: the gate's ``verify``); see :attr:`VerifyRequest.verify_fn`.
        self.verify_fn = verify_fn
        self._lock = threading.Lock()
        self._client: Any = None
        #: What ``scheduler = "local"`` started (dask-cuda's cluster or the fallback, and why); "" otherwise.
        self.cluster_kind = ""
        self._cluster: Any = None
        self._topic = f"kernellsp-progress-{uuid.uuid4().hex[:12]}"
        self._progress: dict[str, Callable[[str, float | None], None]] = {}

    @property
    def label(self) -> str:
        return "local pool" if self.scheduler == "local" else f"pool {self.scheduler}"

    def client(self) -> Any:
        """The Dask client, connected (and the local cluster started) on first use."""
        with self._lock:
            if self._client is None:
                self._connect()
            return self._client

    def _connect(self) -> None:
        try:
            if self.scheduler == "local":
                self._cluster, self.cluster_kind = _start_local_cluster(self.gpus)
                self._client = distributed.Client(self._cluster, timeout=self.connect_timeout_s)
            else:
                self._client = distributed.Client(self.scheduler, timeout=self.connect_timeout_s)
        except PoolError:
            raise
        except (OSError, TimeoutError) as exc:
            self._close_quietly()
            raise PoolError(
                f"cannot reach the Dask scheduler at {self.scheduler} within {self.connect_timeout_s:.0f} s "
                f"({exc}); start one (`dask scheduler`, then `dask-cuda-worker ADDRESS` on each GPU host) "
                'or set pool.scheduler = "local"'
            ) from None
        except Exception as exc:  # dask-cuda and the nannies raise many kinds while starting workers
            self._close_quietly()
            raise PoolError(f"the {self.label} did not start: {type(exc).__name__}: {exc}") from None
        self._client.register_plugin(GpuWorkerPlugin(self.probe))
        self._client.subscribe_topic(self._topic, self._on_progress)

    def _on_progress(self, event: Any) -> None:
        msg = event[1] if isinstance(event, tuple) and len(event) == 2 else event
        if isinstance(msg, dict):
            cb = self._progress.get(str(msg.get("id")))
            if cb is not None:
                with contextlib.suppress(
                    Exception
                ):  # a display problem must not break the client's event loop
                    cb(str(msg.get("message", "")), msg.get("pct"))

    def workers(self) -> list[WorkerInfo]:
        """Every worker with what its plugin found (GPU, or why it takes no verifications)."""
        client = self.client()
        found = client.run(_worker_info)
        return sorted(found.values(), key=lambda w: (w.host, w.gpu.index if w.gpu else "", w.address))

    def groups(self) -> dict[str, list[WorkerInfo]]:
        """The workers that can verify, by GPU model (limited to ``gpu_model`` when set)."""
        out: dict[str, list[WorkerInfo]] = {}
        for w in self.workers():
            if w.gpu is not None and (not self.gpu_model or self.gpu_model.lower() in w.gpu.name.lower()):
                out.setdefault(w.gpu.name, []).append(w)
        return out

    def wait_for_gpus(self, timeout_s: float) -> dict[str, list[WorkerInfo]]:
        """The model groups, once at least one GPU worker is there (a cluster may still be starting workers)."""
        deadline = time.monotonic() + timeout_s
        while True:
            groups = self.groups()
            if groups or time.monotonic() > deadline:
                break
            time.sleep(0.5)
        if not groups:
            ws = self.workers()
            why = "; ".join(w.describe() for w in ws) if ws else "the scheduler has no workers"
            want = (
                f" with a GPU matching pool.gpu_model = {self.gpu_model!r}"
                if self.gpu_model
                else " with a GPU"
            )
            raise PoolError(
                f"the {self.label} has no worker{want} ({why}); start dask-cuda-worker on a GPU host"
            )
        return groups

    def runner(self, model: str | None = None) -> PoolRunner:
        """A runner bound to the workers of ``model`` (None: the largest group)."""
        return PoolRunner(self, model)

    def close(self) -> None:
        with self._lock:
            self._close_quietly()

    def _close_quietly(self) -> None:
        client, cluster = self._client, self._cluster
        self._client = self._cluster = None
        with contextlib.suppress(Exception):
            if client is not None:
                client.close(timeout=10)
        with contextlib.suppress(Exception):
            if cluster is not None:
                cluster.close(timeout=30)

    # -- one verification

    def verify(
        self,
        model: str,
        path: Path,
        baseline: str,
        candidate: str,
        entry: str,
        options: Any,
        cancel: threading.Event | None,
        progress: Callable[[str, float | None], None] | None,
        verify_fn: Callable[..., Any] | None = None,
    ) -> Any:
        """Run one verification on a worker of ``model`` and return its Verdict (the contract of the gate's
        ``verify``: raises VerifyError when it could not run, Cancelled when cancelled)."""
        from distributed.scheduler import KilledWorker

        from kernellsp.optimize.verify.gate import VerifyError

        client = self.client()
        req = VerifyRequest(
            id=uuid.uuid4().hex,
            file_name=path.name,
            baseline=baseline,
            candidate=candidate,
            entry=entry,
            options=options,
            includes=_includes(path, baseline),
            cancel_event=f"kernellsp-cancel-{uuid.uuid4().hex}",
            progress_topic=self._topic,
            verify_fn=verify_fn or self.verify_fn,
        )
        if progress is not None:
            self._progress[req.id] = progress
        submitted = time.time()
        fut = client.submit(
            run_verification,
            req,
            key=f"kernellsp-verify-{entry}-{req.id[:12]}",
            resources={resource_name(model): 1},
            pure=False,
        )
        last_check = time.monotonic()
        missing_since: float | None = None
        try:
            while True:
                try:
                    resp = fut.result(timeout=0.25)
                    break
                except TimeoutError:
                    pass
                if cancel is not None and cancel.is_set():
                    self._cancel(client, fut, req)
                    raise Cancelled("pool") from None
                now = time.monotonic()
                if now - last_check > 2:
                    last_check = now
                    with contextlib.suppress(Exception):
                        client.run_on_scheduler(_schedule_unrunnable)
                    if self._has_workers(client, model):
                        missing_since = None
                    elif missing_since is None:
                        missing_since = now
                    elif now - missing_since > self.no_worker_grace_s:
                        fut.cancel()
                        raise VerifyError(
                            f"no worker with a {model} GPU has been in the {self.label} for "
                            f"{self.no_worker_grace_s:.0f} s; {entry} was not verified"
                        )
        except KilledWorker as exc:
            raise VerifyError(
                f"verifying {entry} killed the worker running it, again on each worker it was moved "
                f"to ({exc}); no verdict (distributed.scheduler.allowed-failures limits the retries)"
            ) from None
        except distributed.client.FutureCancelledError:
            raise Cancelled("pool") from None
        finally:
            self._progress.pop(req.id, None)
        assert isinstance(resp, VerifyResponse)
        if resp.error_kind == "cancelled":
            raise Cancelled(resp.error or "pool")
        if resp.error is not None:
            raise VerifyError(resp.error if resp.error_kind != "runner" else f"runner problem: {resp.error}")
        v = resp.verdict
        assert v is not None  # a response without an error carries a verdict
        # Where and when: the submit → start → finish → return times split the pool's own latency.
        v.environment["pool"] = {
            "scheduler": self.scheduler,
            "worker": resp.worker,
            "gpu_uuid": resp.gpu_uuid,
            "submitted_at": submitted,
            "started_at": resp.started_at,
            "finished_at": resp.finished_at,
            "returned_at": time.time(),
            "task_seconds": resp.seconds,
            "verify_seconds": resp.verify_seconds,
        }
        return v

    def _cancel(self, client: Any, fut: Any, req: VerifyRequest) -> None:
        # Both: the future's cancel drops a queued task; the event reaches one already running (Dask cannot
        # interrupt a running task's thread, but the task watches the event and kills its process).
        with contextlib.suppress(Exception):
            distributed.Event(req.cancel_event, client=client).set()
        with contextlib.suppress(Exception):
            fut.cancel()

    @staticmethod
    def _has_workers(client: Any, model: str) -> bool:
        res = resource_name(model)
        with contextlib.suppress(Exception):
            info = client.scheduler_info(n_workers=-1)
            return any(res in (w.get("resources") or {}) for w in info.get("workers", {}).values())
        return True  # the scheduler did not answer: not proof that the workers are gone


def _schedule_unrunnable(dask_scheduler: Any) -> int:
    """Runs on the scheduler (``Client.run_on_scheduler``): give waiting tasks to workers that gained their resource.

    A worker declares its GPU's resource in the plugin's ``setup``, after it registered; the scheduler looks for
    a home for ``no-worker`` tasks only when a worker joins, so a task whose worker died waits for ever for the
    restarted one unless someone asks again. This asks again (the same call the scheduler makes on a join).
    """
    s = dask_scheduler
    if not getattr(s, "unrunnable", None):
        return 0
    recs: dict[Any, str] = {}
    for ws in list(s.running):
        recs.update(s.bulk_schedule_unrunnable_after_adding_worker(ws))
    if recs:
        s.transitions(recs, stimulus_id=f"kernellsp-resources-{time.time()}")
    return len(recs)


def _includes(path: Path, text: str) -> dict[str, bytes]:
    """The local headers ``path`` includes, relative to its folder (as the gate copies them)."""
    from kernellsp.build.nvcc import local_includes
    from kernellsp.source.model import parse_source

    out: dict[str, bytes] = {}
    if not path.exists():
        return out
    for inc in local_includes(parse_source(text, str(path)), path):
        try:
            out[inc.relative_to(path.resolve().parent).as_posix()] = inc.read_bytes()
        except (ValueError, OSError):
            continue
    return out


class PoolRunner(Runner):
    """One model group of a :class:`Pool`, as a runner: the gate hands it whole verifications.

    It runs no single commands (``run``, ``put``...): those would need one worker's scratch directory across
    calls. Profiling with ncu needs ``runner = local`` or ``ssh``.
    """

    def __init__(self, pool: Pool, model: str | None = None, owner: bool = True) -> None:
        self.pool = pool
        self._model = model
        self._owner = owner
        self.sandbox = "auto"

    @property
    def name(self) -> str:  # type: ignore[override]
        return f"{self.pool.label}" + (f" ({self._model} GPUs)" if self._model else "")

    @property
    def model(self) -> str:
        """The GPU model of this runner's workers (the largest group when none was named)."""
        if self._model is None:
            groups = self.pool.wait_for_gpus(self.pool.connect_timeout_s)
            self._model = max(groups, key=lambda m: (len(groups[m]), m))
        return self._model

    def groups(self) -> dict[str, list[WorkerInfo]]:
        return self.pool.wait_for_gpus(self.pool.connect_timeout_s)

    def for_model(self, model: str) -> PoolRunner:
        """A runner on the same pool bound to another model group (closing it leaves the pool open)."""
        return PoolRunner(self.pool, model, owner=False)

    def verify_remotely(
        self,
        path: Path,
        baseline: str,
        candidate: str,
        entry: str,
        options: Any,
        environment: dict[str, Any] | None,
        cancel: threading.Event | None,
        progress: Callable[[str, float | None], None] | None,
    ) -> Any:
        """The gate's ``verify`` on a worker of this runner's model (``environment`` is the worker's own)."""
        return self.pool.verify(self.model, path, baseline, candidate, entry, options, cancel, progress)

    def environment(self) -> dict[str, Any]:
        """A worker's environment for the run's records: the GPU model, driver, tools; the pool's size."""
        workers = self.groups()[self.model]
        env = dict(workers[0].environment)
        env["runner"] = self.name
        env["pool"] = {
            "scheduler": self.pool.scheduler,
            "model": self.model,
            "gpus": len(workers),
            "workers": [w.address for w in workers],
        }
        return env

    def sandbox_status(self) -> sbx.SandboxStatus:
        """How a worker of this model confines the code under test (each verdict records its own worker's)."""
        workers = self.groups()[self.model]
        client = self.pool.client()
        got = client.run(_worker_sandbox, workers=[workers[0].address])
        status = next(iter(got.values()), None)
        if not isinstance(status, sbx.SandboxStatus):
            return sbx.SandboxStatus("unconfined", workers[0].host, "the worker did not report its sandbox")
        return status

    def _no_steps(self) -> PoolError:
        return PoolError(
            f"the {self.pool.label} verifies whole candidates on its workers and runs no single "
            "commands: profiling (ncu) needs runner = local or ssh"
        )

    def new_workdir(self) -> str:
        raise self._no_steps()

    def put(self, files: dict[str, bytes], workdir: str) -> None:
        raise self._no_steps()

    def get(self, workdir: str, rel_paths: list[str], dest: Path) -> list[Path]:
        raise self._no_steps()

    def run(
        self,
        argv: list[str],
        workdir: str,
        timeout_s: float,
        cancel: threading.Event | None = None,
        env: dict[str, str] | None = None,
        gpu_lock: GpuLock = False,
    ) -> RunResult:
        raise self._no_steps()

    def which(self, tool: str) -> str | None:
        raise self._no_steps()

    def cleanup(self, workdir: str) -> None:
        raise self._no_steps()

    def close(self) -> None:
        """Disconnect (and stop a local cluster), when this runner owns the pool."""
        if self._owner:
            self.pool.close()


def pool_runner(settings: Any, probe: Probe | None = None) -> PoolRunner:
    """The runner for ``runner = "pool"`` from the ``pool`` settings (connects on first use)."""
    p = settings.pool
    return Pool(
        p.scheduler, list(p.gpus), p.gpu_model, probe=probe, connect_timeout_s=p.connect_timeout_s
    ).runner()


def describe_workers(info: list[WorkerInfo]) -> list[str]:
    """One line per worker, and a warning for GPUs shared by several workers (their GPU steps take turns)."""
    lines = [w.describe() for w in info]
    seen: dict[tuple[str, str], int] = {}
    for w in info:
        if w.gpu is not None:
            seen[(w.host, w.gpu.uuid)] = seen.get((w.host, w.gpu.uuid), 0) + 1
    lines += [
        f"warning: {n} workers share GPU {u} on {h} (pin one worker per GPU with CUDA_VISIBLE_DEVICES; "
        "dask-cuda-worker does)"
        for (h, u), n in seen.items()
        if n > 1
    ]
    return lines


__all__ = [
    "Pool",
    "PoolRunner",
    "describe_workers",
    "pool_runner",
]
