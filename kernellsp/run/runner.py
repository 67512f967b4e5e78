"""Runners: where GPU work (build, run, ncu, compute-sanitizer) happens.

* :class:`LocalRunner` uses this host's GPU.
* :class:`~kernellsp.run.ssh.SshRunner` uses a remote host over ssh: files go up with ``tar | ssh tar -x``, commands
  run in a remote scratch directory, results come back the same way, and one ssh master
  connection (``ControlMaster``) is reused for every step.

Both give the program under test a fresh scratch directory and an environment stripped of
secrets (no API keys or tokens), run every command in the sandbox of :mod:`kernellsp.run.sandbox`
(bubblewrap: no network, writes only in the scratch directory, no home, resource limits; a named
violation raises ``RunnerError("sandbox_violation")``; ``KERNELLSP_SANDBOX=auto|require|off``),
take the GPU lock alone (timing, ncu) or shared (see :data:`kernellsp.run.gpu_lock.GpuLock`), kill
whole process groups on timeout or cancel, and turn the usual failures into :class:`RunnerError`
messages that name the fix: unreachable host, no nvcc or ncu there, no GPU, counters not
permitted (ERR_NVGPUCTRPERM), timeouts, crashing or hanging kernels.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import subprocess
import tempfile
import threading
import time
import uuid
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from kernellsp.build.nvcc import Cancelled
from kernellsp.run import sandbox as sbx
from kernellsp.run.gpu_lock import (
    _HOLDER_POLL_S,
    _LOCK_NAME,
    GpuHolder,
    GpuLock,
    _holder_json,
    _local_holder,
    _waiting_message,
    gpu_lock_dir,
)
from kernellsp.run.process import (
    RunnerError,
    RunResult,
    _popen_run,
    clean_env,
)

#: The environment variable that sets the sandbox policy. Only the user's environment can: a workspace
#: file comes with the code under test, so it must not be able to turn the sandbox off.
SANDBOX_ENV = "KERNELLSP_SANDBOX"
_sandbox_probe_lock = threading.Lock()
_waits_lock = threading.Lock()
#: What a waiting step showed so far: nothing yet (a holder without a record shows as None).
_NOT_SHOWN = "\0"


def sandbox_setting(value: str | None = None) -> str:
    """``value``, or ``$KERNELLSP_SANDBOX``, or ``auto``; an unknown value is a RunnerError naming the variable."""
    v = (value if value is not None else os.environ.get(SANDBOX_ENV, "")).strip().lower() or "auto"
    if v not in sbx.SETTINGS:
        raise RunnerError("sandbox", f"{SANDBOX_ENV}={v!r}: expected one of {', '.join(sbx.SETTINGS)}")
    return v


class Runner(ABC):
    """Where GPU jobs run. ``workdir`` is a per-job scratch directory on the runner host."""

    name: str
    #: ``auto``: sandbox when the host can, say so when not; ``require``: refuse to run unconfined; ``off``.
    sandbox: str = "auto"
    #: What this process is doing, for the GPU lock's holder record ("optimize of softmax.cu").
    job_label: str = "a kernellsp job"
    #: How long a GPU step waits for the GPU lock; ``None``: as long as it takes (the ``gpu_wait_timeout_s``
    #: setting, 0 = no limit). Cancelling the job ends the wait.
    gpu_wait_s: float | None = None
    #: Called with "waiting for the GPU: held by ..." while a GPU step waits (and again when the holder changes).
    on_gpu_wait: Callable[[str], None] | None = None
    #: The holders a wait was already reported for while some step of this runner kept waiting
    #: (:meth:`_gpu_waiting`), and how many of its steps are trying to take the lock now.
    _reported_waits: set[tuple[str, str, str, int, float] | None] | None = None
    _lock_takers = 0

    @contextlib.contextmanager
    def _taking_lock(self) -> Iterator[None]:
        """Around one step's attempt to take the GPU lock: once no step of this runner is trying any more, the
        waits reported so far are forgotten (a later wait behind the same holder is news again)."""
        with _waits_lock:
            self._lock_takers += 1
        try:
            yield
        finally:
            with _waits_lock:
                self._lock_takers -= 1
                if self._lock_takers == 0:
                    self._reported_waits = None

    def _gpu_waiting(self, holder: GpuHolder | None, where: str, waited_s: float) -> None:
        """Tell ``on_gpu_wait`` that a GPU step waits, once per holder while steps of this runner keep waiting:
        a job whose steps queue behind the same holder (a round's candidates, the entries of ``optimize
        --all`` on a pool) says so once."""
        if self.on_gpu_wait is None:
            return
        key = (holder.label, holder.user, holder.host, holder.pid, holder.since) if holder else None
        with _waits_lock:
            if self._reported_waits is None:
                self._reported_waits = set()
            if key in self._reported_waits:
                return
            self._reported_waits.add(key)
        with contextlib.suppress(Exception):  # a display failure must not fail the job
            self.on_gpu_wait(_waiting_message(holder, where, waited_s))

    def _gpu_wait_expired(self, waited_s: float, holder: GpuHolder | None) -> RunnerError:
        who = holder.describe() if holder is not None else "held by another kernellsp job"
        return RunnerError(
            "busy",
            f"the GPU on {self.name} is still busy after the {self.gpu_wait_s:g} s the "
            f"gpu_wait_timeout_s setting allows ({who}); raise the setting (0 waits as long "
            "as it takes) or try again later",
        )

    _sandbox_probed: tuple[sbx.Sandbox | None, sbx.SandboxStatus] | None = None

    def sandbox_status(self) -> sbx.SandboxStatus:
        """How code under test runs on this runner's host (found out once, on first use)."""
        return self._sandbox_probe()[1]

    def _sandbox_probe(self) -> tuple[sbx.Sandbox | None, sbx.SandboxStatus]:
        with _sandbox_probe_lock:
            if self._sandbox_probed is not None and self._sandbox_stale(self._sandbox_probed[0]):
                self._sandbox_probed = None  # its files went away (a wiped cache): set it up again
            if self._sandbox_probed is None:
                self._sandbox_probed = sbx.probe(self, self.sandbox)
            return self._sandbox_probed

    def _sandbox_stale(self, sb: sbx.Sandbox | None) -> bool:
        return False

    def _sandbox_wrap(
        self, argv: list[str], workdir: str, timeout_s: float
    ) -> tuple[list[str], sbx.Prepared | None]:
        """``argv`` wrapped for the sandbox, or as it is when the host cannot sandbox (``require``: refused)."""
        sb, status = self._sandbox_probe()
        if sb is None:
            if self.sandbox == "require":
                raise RunnerError("sandbox", f"{SANDBOX_ENV}=require, but {status.describe()}")
            return argv, None
        prepared = sb.wrap(argv, workdir, timeout_s)
        return prepared.argv, prepared

    def _sandbox_finish(self, prepared: sbx.Prepared | None, res: RunResult, argv: list[str]) -> RunResult:
        """Strip the sandbox's report from ``res``; raise ``sandbox_violation`` when the command broke it."""
        if prepared is None:
            return res
        sb = self._sandbox_probe()[0]
        assert sb is not None
        try:
            res.stderr, violations = sb.finish(prepared, res.returncode, res.stderr)
        except sbx.SandboxError as exc:
            raise RunnerError("sandbox", str(exc)) from None
        res.sandboxed = True
        m = (
            re.match(r"bwrap: execvp (.*?): (.*)\n?\Z", res.stderr)
            if res.returncode == 1 and not res.stdout
            else None
        )
        if m:  # the program could not be started: the same error as without the sandbox
            raise RunnerError("exec", f"cannot run {argv[0]}: {m.group(2)}")
        if violations:
            raise RunnerError(
                "sandbox_violation",
                f"{Path(argv[0]).name} broke the sandbox on {self.name}: " + "; ".join(violations),
                violations,
                argv,
            )
        return res

    # The sandbox probe's view of the host (kernellsp.run.sandbox.ProbeHost).
    def _sandbox_install(self, files: dict[str, bytes]) -> dict[str, str]:
        raise OSError(f"{type(self).__name__} cannot install the sandbox's files")

    def _sandbox_facts(self, script: str) -> str:
        raise OSError(f"{type(self).__name__} cannot read the host's facts")

    def _sandbox_canary_root(self) -> str:
        return tempfile.gettempdir()

    def _sandbox_resolver(self) -> Callable[[str], str] | None:
        return None

    def _sandbox_trial(self, argv: list[str], workdir: str, timeout_s: float) -> tuple[int, str, str]:
        raise OSError(f"{type(self).__name__} cannot run the sandbox's trial")

    @abstractmethod
    def new_workdir(self) -> str:
        """Create a fresh scratch directory on the runner host and return its path there."""

    @abstractmethod
    def put(self, files: dict[str, bytes], workdir: str) -> None:
        """Write ``{relative path: content}`` into ``workdir``."""

    @abstractmethod
    def get(self, workdir: str, rel_paths: list[str], dest: Path) -> list[Path]:
        """Copy files or directories (relative to ``workdir``) into ``dest``; missing ones are skipped."""

    @abstractmethod
    def run(
        self,
        argv: list[str],
        workdir: str,
        timeout_s: float,
        cancel: threading.Event | None = None,
        env: dict[str, str] | None = None,
        gpu_lock: GpuLock = False,
    ) -> RunResult:
        """Run ``argv`` in ``workdir`` with a clean environment; raise RunnerError on timeout."""

    @abstractmethod
    def which(self, tool: str) -> str | None:
        """Path of ``tool`` on the runner host."""

    @abstractmethod
    def cleanup(self, workdir: str) -> None:
        """Remove a scratch directory."""

    def close(self) -> None:  # noqa: B027 - optional hook: only runners that hold something override it
        """Release what the runner holds open (a local runner holds nothing)."""

    def cached_build(
        self,
        key: str,
        argv: list[str],
        out_rel: str,
        workdir: str,
        timeout_s: float,
        cancel: threading.Event | None = None,
        use_cache: bool = True,
    ) -> RunResult:
        """Run the build ``argv`` unless a binary with this content ``key`` was built before on this host.

        The cache lives on the runner host (the local cache directory's ``bin/``, or ``<scratch root>/bin/``
        over ssh), so an unchanged baseline harness is compiled once per host, not once per candidate.
        ``use_cache=False`` (``--no-cache``, ``KERNELLSP_NO_CACHE=1``) builds and stores nothing.
        """
        use_cache = use_cache and os.environ.get("KERNELLSP_NO_CACHE") != "1"
        if use_cache and self._bin_cache_get(key, out_rel, workdir):
            return RunResult(0, "", f"(cached build {key})", 0.0)
        res = self.run(argv, workdir, timeout_s, cancel)
        if res.returncode == 0 and use_cache:
            self._bin_cache_put(key, out_rel, workdir)
        return res

    def bin_cache_fetch(self, key: str, out_rel: str, workdir: str) -> bool:
        """Copy the binary cached under ``key`` to ``workdir/out_rel``; False when there is none (or caching is off)."""
        return os.environ.get("KERNELLSP_NO_CACHE") != "1" and self._bin_cache_get(key, out_rel, workdir)

    def bin_cache_store(self, key: str, out_rel: str, workdir: str) -> None:
        """Keep ``workdir/out_rel`` in the runner host's binary cache under ``key`` (best effort)."""
        if os.environ.get("KERNELLSP_NO_CACHE") != "1":
            self._bin_cache_put(key, out_rel, workdir)

    def _bin_cache_get(self, key: str, out_rel: str, workdir: str) -> bool:
        return False

    def _bin_cache_put(self, key: str, out_rel: str, workdir: str) -> None:
        return None

    def require(self, tool: str) -> str:
        path = self.which(tool)
        if path is None:
            hints = {
                "nvcc": "install the CUDA toolkit there and put its bin/ on PATH",
                "ncu": "install Nsight Compute there (it ships with the CUDA toolkit) and put ncu on PATH",
                "compute-sanitizer": "compute-sanitizer ships with the CUDA toolkit; put its bin/ on PATH",
            }
            raise RunnerError(
                f"no_{tool.replace('-', '_')}",
                f"{tool} not found on {self.name}: {hints.get(tool, 'install it there')}",
            )
        return path


class HostRunner(Runner):
    """A runner that starts processes on one host (this one, or over ssh) inside the sandbox."""

    def run(
        self,
        argv: list[str],
        workdir: str,
        timeout_s: float,
        cancel: threading.Event | None = None,
        env: dict[str, str] | None = None,
        gpu_lock: GpuLock = False,
    ) -> RunResult:
        wrapped, prepared = self._sandbox_wrap(argv, workdir, timeout_s)
        res = self._run_unwrapped(wrapped, workdir, timeout_s, cancel, env, gpu_lock, Path(argv[0]).name)
        return self._sandbox_finish(prepared, res, argv)

    @abstractmethod
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
        """Run the (already wrapped) command on the host, with the environment and the GPU lock."""


class LocalRunner(HostRunner):
    """This host's GPU."""

    #: The lock file GPU steps take in the temp directory: one for the host (a pool worker pinned to one GPU
    #: of several takes that GPU's own, :class:`kernellsp.run.pool.PinnedRunner`).
    gpu_lock_name: str = _LOCK_NAME

    def __init__(self, scratch_root: Path | None = None, sandbox: str | None = None) -> None:
        self.name = "this host"
        self.scratch_root = scratch_root or Path(tempfile.gettempdir())
        self.sandbox = sandbox_setting(sandbox)

    def new_workdir(self) -> str:
        return tempfile.mkdtemp(prefix="kernellsp-job-", dir=self.scratch_root)

    def put(self, files: dict[str, bytes], workdir: str) -> None:
        for rel, data in files.items():
            p = Path(workdir) / rel
            p.parent.mkdir(parents=True, exist_ok=True)
            p.write_bytes(data)

    def get(self, workdir: str, rel_paths: list[str], dest: Path) -> list[Path]:
        out = []
        dest.mkdir(parents=True, exist_ok=True)
        for rel in rel_paths:
            src = Path(workdir) / rel
            if src.is_dir():
                target = dest / rel
                shutil.copytree(src, target, dirs_exist_ok=True)
                out.append(target)
            elif src.is_file():
                target = dest / rel
                target.parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(src, target)
                out.append(target)
        return out

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
        full_env = clean_env(env, home=workdir)
        if env is None or "TMPDIR" not in env:
            # A temporary directory per command: in the sandbox every command is PID 2 of its own namespace and nvcc
            # names its temporary files by PID, so two builds at once in one TMPDIR (a baseline and a candidate, a
            # cubin and its host harness) would delete each other's files.
            try:
                tmp = tempfile.mkdtemp(prefix=".tmp-", dir=workdir)
            except OSError:  # a workdir that cannot hold it: the workdir itself, as before
                return self._run_locked(argv, workdir, timeout_s, cancel, full_env, gpu_lock, label)
            full_env["TMPDIR"] = tmp
            try:
                return self._run_locked(argv, workdir, timeout_s, cancel, full_env, gpu_lock, label)
            finally:
                shutil.rmtree(tmp, ignore_errors=True)
        return self._run_locked(argv, workdir, timeout_s, cancel, full_env, gpu_lock, label)

    def _run_locked(
        self,
        argv: list[str],
        workdir: str,
        timeout_s: float,
        cancel: threading.Event | None,
        full_env: dict[str, str],
        gpu_lock: GpuLock,
        label: str,
    ) -> RunResult:
        if not gpu_lock:
            return _popen_run(argv, workdir, timeout_s, cancel, full_env, label)
        lock_path = Path(gpu_lock_dir()) / self.gpu_lock_name
        import fcntl

        try:
            # Read-only and world-readable: another user's kernellsp can take the same lock (flock needs no write).
            fd = os.open(lock_path, os.O_RDONLY | os.O_CREAT, 0o644)
        except OSError as exc:
            raise RunnerError(
                "lock",
                f"cannot open the GPU lock {lock_path}: {exc.strerror or exc} (its folder is "
                "KERNELLSP_GPU_LOCK_DIR, /tmp when unset: create the folder, unset the variable, or remove a "
                "lock file left unreadable by another user)",
            ) from None
        with os.fdopen(fd) as fh, self._taking_lock():
            t0 = time.monotonic()
            shown: str | None = _NOT_SHOWN
            next_look = 0.0
            holder: GpuHolder | None = None
            while True:
                try:
                    fcntl.flock(
                        fh, (fcntl.LOCK_SH if gpu_lock == "shared" else fcntl.LOCK_EX) | fcntl.LOCK_NB
                    )
                    break
                except BlockingIOError:
                    if cancel is not None and cancel.is_set():
                        raise Cancelled("gpu lock") from None
                    now = time.monotonic()
                    if self.gpu_wait_s is not None and now - t0 > self.gpu_wait_s:
                        raise self._gpu_wait_expired(now - t0, holder) from None
                    if now >= next_look:
                        next_look = now + _HOLDER_POLL_S
                        holder = _local_holder(lock_path)
                        who = holder.describe() if holder is not None else None
                        # A step of this very process waiting for another of its steps is not reported: the
                        # job queues its own GPU steps, which is no wait for the GPU.
                        if who != shown and not (holder is not None and holder.is_process(os.getpid())):
                            shown = who
                            self._gpu_waiting(holder, "", now - t0)
                    time.sleep(0.1)
            mine = lock_path.parent / f"{lock_path.name}.holder.{os.getuid()}"
            with contextlib.suppress(
                OSError
            ):  # the record is for waiters' messages; the lock works without it
                tmp = mine.with_name(f"{mine.name}.{uuid.uuid4().hex[:6]}")
                tmp.write_text(_holder_json(self.job_label) + "\n", encoding="utf-8")
                os.chmod(tmp, 0o644)
                tmp.replace(mine)
            try:
                return _popen_run(argv, workdir, timeout_s, cancel, full_env, label)
            finally:
                with contextlib.suppress(OSError):
                    mine.unlink()
                fcntl.flock(fh, fcntl.LOCK_UN)

    def _sandbox_install(self, files: dict[str, bytes]) -> dict[str, str]:
        from kernellsp.cache import cache_dir

        try:
            d = cache_dir() / "sandbox"
            d.mkdir(parents=True, exist_ok=True, mode=0o700)
        except OSError:
            d = Path(tempfile.mkdtemp(prefix="kernellsp-sandbox-"))
        out: dict[str, str] = {}
        for name, data in files.items():
            p = d / name
            if not (p.is_file() and p.read_bytes() == data):
                tmp = d / f".{name}.{uuid.uuid4().hex[:6]}"
                tmp.write_bytes(data)
                tmp.replace(p)
            out[name] = str(p)
        return out

    def _sandbox_facts(self, script: str) -> str:
        # The user's own environment: the facts include $HOME, the home to hide.
        res = subprocess.run(
            ["sh", script, "facts"], capture_output=True, text=True, timeout=30, errors="replace"
        )
        return res.stdout

    def _sandbox_canary_root(self) -> str:
        return str(self.scratch_root)

    def _sandbox_resolver(self) -> Callable[[str], str] | None:
        return os.path.realpath

    def _sandbox_stale(self, sb: sbx.Sandbox | None) -> bool:
        return sb is not None and not all(os.path.isfile(p) for p in (sb.script, sb.filter_path) if p)

    def _sandbox_trial(self, argv: list[str], workdir: str, timeout_s: float) -> tuple[int, str, str]:
        res = _popen_run(argv, workdir, timeout_s, None, clean_env(home=workdir), "sandbox trial")
        return res.returncode, res.stdout, res.stderr

    def which(self, tool: str) -> str | None:
        from kernellsp.build import toolchain

        return toolchain.find_tool(tool)

    def _bin_dir(self) -> Path:
        from kernellsp.cache import cache_dir

        return cache_dir() / "bin"

    def _bin_cache_get(self, key: str, out_rel: str, workdir: str) -> bool:
        src = self._bin_dir() / key
        if not src.is_file():
            return False
        dest = Path(workdir) / out_rel
        shutil.copy2(src, dest)
        return True

    def _bin_cache_put(self, key: str, out_rel: str, workdir: str) -> None:
        try:
            d = self._bin_dir()
            d.mkdir(parents=True, exist_ok=True)
            tmp = d / f".{key}.{uuid.uuid4().hex[:6]}"
            shutil.copy2(Path(workdir) / out_rel, tmp)
            tmp.replace(d / key)
        except OSError:
            pass

    def cleanup(self, workdir: str) -> None:
        shutil.rmtree(workdir, ignore_errors=True)


def make_runner(
    runner: str = "local", gpu_host: str | None = None, sandbox: str | None = None, settings: Any = None
) -> Runner:
    """The runner the settings ask for; ``sandbox`` defaults to ``$KERNELLSP_SANDBOX`` (or ``auto``).

    ``runner = "pool"`` needs ``settings`` (its ``pool`` section) and Dask (the ``cluster`` extra).
    """
    if runner == "pool":
        return _pool_runner(settings)
    if gpu_host:
        from kernellsp.run.ssh import SshRunner  # ssh.py builds on this module's HostRunner

        return SshRunner(gpu_host, sandbox=sandbox)
    if runner == "none":
        raise RunnerError("none", "profiling is off (runner = none)")
    return LocalRunner(sandbox=sandbox)


def _pool_runner(settings: Any) -> Runner:
    """The pool runner (:mod:`kernellsp.run.pool`), or a RunnerError naming what to install."""
    try:
        from kernellsp.run.pool import pool_runner
    except ImportError as exc:
        raise RunnerError(
            "pool",
            f"runner = pool needs Dask ({exc.name} is not installed): pip install 'kernellsp[cluster]'",
        ) from None
    if settings is None:
        raise RunnerError("pool", "runner = pool needs the pool settings (pool.scheduler, pool.gpus)")
    return pool_runner(settings)
