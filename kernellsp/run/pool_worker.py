"""The pool's worker side: the worker's GPU (``nvidia-smi``), its :class:`PinnedRunner` and the
:class:`GpuWorkerPlugin` that declares the GPU as a Dask resource (:mod:`kernellsp.run.pool`).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import shutil
import socket
import subprocess
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import distributed
from distributed.diagnostics.plugin import WorkerPlugin

import kernellsp
from kernellsp.build.nvcc import Cancelled
from kernellsp.run import sandbox as sbx
from kernellsp.run.gpu_lock import _LOCK_NAME, GpuLock, gpu_lock_dir
from kernellsp.run.runner import LocalRunner, Runner, RunnerError, RunResult

PLUGIN_NAME = "kernellsp-gpu"
RESOURCE_PREFIX = "kernellsp-gpu:"
_SMI_FIELDS = (
    "index",
    "uuid",
    "name",
    "compute_cap",
    "driver_version",
    "memory.total",
    "clocks.sm",
    "clocks.max.sm",
    "clocks.mem",
    "clocks.max.mem",
)


class PoolError(RunnerError):
    """The pool cannot do what was asked (no scheduler, no GPU worker, version skew); the message names the fix."""

    def __init__(self, message: str) -> None:
        super().__init__("pool", message)


def resource_name(model: str) -> str:
    """The Dask resource a worker with a ``model`` GPU declares (one unit: one verification at a time)."""
    return RESOURCE_PREFIX + model


# --------------------------------------------------------------------------------------------------
# The worker's GPU


@dataclass
class GpuInfo:
    """One GPU as ``nvidia-smi`` names it."""

    index: str
    uuid: str
    name: str
    compute_cap: str
    driver: str = ""
    memory_mib: int | None = None
    sm_clock_mhz: str = ""
    max_sm_clock_mhz: str = ""
    mem_clock_mhz: str = ""
    max_mem_clock_mhz: str = ""

    @property
    def arch(self) -> str:
        """The nvcc target of this GPU (``9.0`` → ``sm_90``)."""
        return "sm_" + self.compute_cap.replace(".", "")


def _smi() -> str:
    smi = shutil.which("nvidia-smi")
    if smi is None:
        raise PoolError("nvidia-smi not found on this worker's host: no NVIDIA driver there")
    return smi


def _parse_smi_row(line: str) -> GpuInfo:
    parts = [p.strip() for p in line.split(",")]
    if len(parts) < len(_SMI_FIELDS):
        raise PoolError(f"nvidia-smi gave an unexpected line: {line!r}")
    v = dict(zip(_SMI_FIELDS, parts, strict=False))
    mem = v["memory.total"]
    return GpuInfo(
        index=v["index"],
        uuid=v["uuid"],
        name=v["name"],
        compute_cap=v["compute_cap"],
        driver=v["driver_version"],
        memory_mib=int(mem) if mem.isdigit() else None,
        sm_clock_mhz=v["clocks.sm"],
        max_sm_clock_mhz=v["clocks.max.sm"],
        mem_clock_mhz=v["clocks.mem"],
        max_mem_clock_mhz=v["clocks.max.mem"],
    )


def list_gpus() -> list[GpuInfo]:
    """Every GPU of this host (``nvidia-smi``; empty when there is none)."""
    try:
        smi = _smi()
    except PoolError:
        return []
    res = subprocess.run(
        [smi, f"--query-gpu={','.join(_SMI_FIELDS)}", "--format=csv,noheader,nounits"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    if res.returncode != 0:
        return []
    return [_parse_smi_row(ln) for ln in res.stdout.strip().splitlines() if ln.strip()]


def query_gpu(device: str | None) -> GpuInfo:
    """The GPU ``device`` names (an index, a ``GPU-…`` UUID or a PCI bus id; None: device 0)."""
    smi = _smi()
    res = subprocess.run(
        [smi, "-i", device or "0", f"--query-gpu={','.join(_SMI_FIELDS)}", "--format=csv,noheader,nounits"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    if res.returncode != 0 or not res.stdout.strip():
        raise PoolError(
            f"nvidia-smi -i {device or '0'} found no GPU: {(res.stdout + res.stderr).strip()[:200]}"
        )
    return _parse_smi_row(res.stdout.strip().splitlines()[0])


def worker_device() -> str | None:
    """The GPU this worker process was given: the first of ``CUDA_VISIBLE_DEVICES`` (dask-cuda rotates the
    list so that each worker's own GPU comes first), or None (device 0) when it is unset."""
    first = os.environ.get("CUDA_VISIBLE_DEVICES", "").split(",")[0].strip()
    return first or None


#: The worker-side probe: (worker name, device from CUDA_VISIBLE_DEVICES) → the worker's GPU.
Probe = Callable[[str, str | None], GpuInfo]


def nvidia_smi_probe(_worker_name: str, device: str | None) -> GpuInfo:
    """The production probe: ask nvidia-smi about the worker's device."""
    return query_gpu(device)


# --------------------------------------------------------------------------------------------------
# The worker's runner


class PinnedRunner(LocalRunner):
    """A :class:`LocalRunner` for one GPU of a multi-GPU host.

    Every command sees only that GPU (``CUDA_VISIBLE_DEVICES=<its UUID>``: the UUID, not an index, because
    nvidia-smi counts in PCI order while CUDA counts fastest first unless ``CUDA_DEVICE_ORDER`` says
    otherwise). GPU steps take the GPU's own lock file (``kernellsp-gpu-<UUID>.lock``), so workers on
    different GPUs of one host run side by side, and hold the host's shared lock in shared mode, so that a
    plain local runner (which takes it exclusively and may use any GPU) never runs beside them.
    """

    def __init__(self, gpu: GpuInfo, scratch_root: Path | None = None, sandbox: str | None = None) -> None:
        super().__init__(scratch_root, sandbox)
        self.gpu = gpu
        self.name = f"GPU {gpu.index} ({gpu.name}) of {socket.gethostname()}"
        self.gpu_lock_name = f"kernellsp-gpu-{re.sub(r'[^A-Za-z0-9_.-]', '_', gpu.uuid)}.lock"

    def _run_unwrapped(
        self,
        argv: list[str],
        workdir: str,
        timeout_s: float,
        cancel: threading.Event | None,
        env: dict[str, str] | None,
        gpu_lock: GpuLock,
        label: str,
    ) -> RunResult:
        env = {**(env or {}), "CUDA_VISIBLE_DEVICES": self.gpu.uuid}
        if not gpu_lock:
            return super()._run_unwrapped(argv, workdir, timeout_s, cancel, env, gpu_lock, label)
        with _flock(Path(gpu_lock_dir()) / _LOCK_NAME, shared=True, timeout_s=self.gpu_wait_s, cancel=cancel):
            return super()._run_unwrapped(argv, workdir, timeout_s, cancel, env, gpu_lock, label)


@contextlib.contextmanager
def _flock(path: Path, shared: bool, timeout_s: float | None, cancel: threading.Event | None) -> Any:
    """Hold ``path`` locked (shared or exclusive), waiting cancellably; ``timeout_s`` None: as long as it takes
    (as the host's own GPU lock waits: only ``gpu_wait_timeout_s`` limits a wait)."""
    import fcntl

    try:
        fd = os.open(path, os.O_RDONLY | os.O_CREAT, 0o644)
    except OSError as exc:
        raise RunnerError("lock", f"cannot open the GPU lock {path}: {exc.strerror or exc}") from None
    with os.fdopen(fd) as fh:
        t0 = time.monotonic()
        while True:
            try:
                fcntl.flock(fh, (fcntl.LOCK_SH if shared else fcntl.LOCK_EX) | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if cancel is not None and cancel.is_set():
                    raise Cancelled("gpu lock") from None
                if timeout_s is not None and time.monotonic() - t0 > timeout_s:
                    raise RunnerError(
                        "busy",
                        f"the GPU stayed busy with another kernellsp job for {timeout_s:.0f} s (lock {path})",
                    ) from None
                time.sleep(0.1)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def _tool_version(runner: Runner, tool: str) -> tuple[str | None, str | None]:
    from kernellsp.build.toolchain import parse_version

    path = runner.which(tool)
    if path is None:
        return None, None
    try:
        res = subprocess.run([path, "--version"], capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired):
        return path, None
    return path, parse_version(res.stdout + res.stderr)


def worker_environment(runner: PinnedRunner, worker_address: str) -> dict[str, Any]:
    """What every verdict of this worker records (the keys of :func:`kernellsp.profile.environment.runner_environment`,
    plus the GPU's UUID and arch and the worker)."""
    g = runner.gpu
    env: dict[str, Any] = {
        "runner": runner.name,
        "gpu": g.name,
        "driver": g.driver,
        "sm_clock_mhz": g.sm_clock_mhz,
        "max_sm_clock_mhz": g.max_sm_clock_mhz,
        "mem_clock_mhz": g.mem_clock_mhz,
        "max_mem_clock_mhz": g.max_mem_clock_mhz,
        "gpu_uuid": g.uuid,
        "gpu_index": g.index,
        "compute_capability": g.compute_cap,
        "arch": g.arch,
        "pool_worker": worker_address,
        "host": socket.gethostname(),
    }
    for tool in ("ncu", "nvcc"):
        env[f"{tool}_path"], env[f"{tool}_version"] = _tool_version(runner, tool)
    return env


@dataclass
class WorkerInfo:
    """One worker of the pool as its plugin found it (``gpu`` None: it takes no verifications; ``problem`` says why)."""

    address: str
    name: str
    host: str
    nthreads: int
    kernellsp_version: str
    gpu: GpuInfo | None = None
    problem: str | None = None
    environment: dict[str, Any] = field(default_factory=dict)

    @property
    def model(self) -> str | None:
        return self.gpu.name if self.gpu is not None else None

    def describe(self) -> str:
        if self.gpu is None:
            return f"{self.address} ({self.host}): no GPU: {self.problem}"
        g = self.gpu
        mem = f", {g.memory_mib} MiB" if g.memory_mib else ""
        threads = f", {self.nthreads} threads" if self.nthreads != 1 else ""
        return f"{self.address} ({self.host}): GPU {g.index} {g.name} ({g.arch}{mem}, {g.uuid}){threads}"


class GpuWorkerPlugin(WorkerPlugin):
    """Finds each worker's GPU once and declares its model's resource (one unit).

    A worker whose kernellsp differs from the client's declares nothing: a Verdict pickled by one version
    and read by another could silently lose fields.
    """

    name = PLUGIN_NAME

    def __init__(self, probe: Probe | None = None, client_version: str = kernellsp.__version__) -> None:
        self.probe = probe or nvidia_smi_probe
        self.client_version = client_version
        self.info: WorkerInfo | None = None
        self.runner: PinnedRunner | None = None

    async def setup(self, worker: Any) -> None:
        loop = asyncio.get_running_loop()
        info, self.runner = await loop.run_in_executor(None, self._find, worker)
        self.info = info
        if info.gpu is not None:
            await worker.set_resources(**{resource_name(info.gpu.name): 1})

    def _find(self, worker: Any) -> tuple[WorkerInfo, PinnedRunner | None]:
        info = WorkerInfo(
            address=worker.address,
            name=str(worker.name),
            host=socket.gethostname(),
            nthreads=int(worker.state.nthreads),
            kernellsp_version=kernellsp.__version__,
        )
        if kernellsp.__version__ != self.client_version:
            info.problem = (
                f"kernellsp {kernellsp.__version__} on the worker, {self.client_version} on the client: "
                "install the same version on both"
            )
            return info, None
        try:
            gpu = self.probe(str(worker.name), worker_device())
            runner = PinnedRunner(gpu)
            info.environment = worker_environment(runner, worker.address)
        except (
            Exception
        ) as exc:  # any probe failure leaves the worker out with the reason, never the pool down
            info.problem = str(exc) or type(exc).__name__
            return info, None
        info.gpu = gpu
        return info, runner


def _plugin() -> GpuWorkerPlugin:
    worker = distributed.get_worker()
    plugin = worker.plugins.get(PLUGIN_NAME)
    if not isinstance(plugin, GpuWorkerPlugin):
        raise PoolError(
            f"worker {worker.address} has no kernellsp plugin (it joined before the client registered it)"
        )
    return plugin


def _worker_info(dask_worker: Any) -> WorkerInfo:
    """Runs on a worker (``Client.run`` passes it as ``dask_worker``): what its plugin found."""
    worker = dask_worker
    plugin = worker.plugins.get(PLUGIN_NAME)
    if isinstance(plugin, GpuWorkerPlugin) and plugin.info is not None:
        return plugin.info
    return WorkerInfo(
        worker.address,
        str(worker.name),
        socket.gethostname(),
        int(worker.state.nthreads),
        kernellsp.__version__,
        problem="the kernellsp plugin has not set this worker up",
    )


def _worker_sandbox(dask_worker: Any) -> sbx.SandboxStatus | None:
    """Runs on a worker (``Client.run``): how code under test is confined there (probed once per worker)."""
    plugin = dask_worker.plugins.get(PLUGIN_NAME)
    runner = plugin.runner if isinstance(plugin, GpuWorkerPlugin) else None
    return runner.sandbox_status() if runner is not None else None


__all__ = [
    "GpuInfo",
    "GpuWorkerPlugin",
    "PinnedRunner",
    "PoolError",
    "WorkerInfo",
    "list_gpus",
    "query_gpu",
    "worker_environment",
]
