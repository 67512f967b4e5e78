"""Processes the runners start: the environment code under test gets (:func:`clean_env`), a command run
with a deadline and a cancel event that kills its whole process group (:func:`_popen_run`), what came of
it (:class:`RunResult`), and the runner's errors (:class:`RunnerError`), with well-known tool failures
turned into messages that name the fix (:func:`classify_failure`)."""

from __future__ import annotations

import contextlib
import os
import re
import signal
import subprocess
import threading
import time
from dataclasses import dataclass

from kernellsp.build.nvcc import Cancelled

#: Environment variables passed to programs under test; everything else is dropped.
_ENV_KEEP = (
    "PATH",
    "LD_LIBRARY_PATH",
    "CUDA_HOME",
    "CUDA_PATH",
    "CUDA_VISIBLE_DEVICES",
    "LANG",
    "LC_ALL",
    "TERM",
    "NVIDIA_TF32_OVERRIDE",
    "CUDA_DEVICE_ORDER",
)
_SECRET = re.compile(r"(KEY|TOKEN|SECRET|PASSWORD|PASSWD|CREDENTIAL|AUTH)", re.I)
_RC_MARK = "__kernellsp_rc="


class RunnerError(RuntimeError):
    """A runner problem the user can fix; ``kind`` is a stable tag for tests and the LSP.

    ``kind == "sandbox_violation"``: the command broke the sandbox; ``violations`` names what it did and
    ``argv`` is the command (as the caller gave it, before the sandbox's wrapper).
    """

    def __init__(
        self, kind: str, message: str, violations: list[str] | None = None, argv: list[str] | None = None
    ) -> None:
        super().__init__(message)
        self.kind = kind
        self.violations = list(violations or [])
        self.argv = list(argv or [])


@dataclass
class RunResult:
    """A finished command: exit code, output, wall time."""

    returncode: int
    stdout: str
    stderr: str
    seconds: float
    #: Ran inside the sandbox (False: unconfined, see :meth:`Runner.sandbox_status`).
    sandboxed: bool = False

    @property
    def output(self) -> str:
        return self.stdout + self.stderr


def clean_env(extra: dict[str, str] | None = None, home: str | None = None) -> dict[str, str]:
    """The environment for code under test: a short allow-list, never anything that looks secret."""
    env = {k: v for k, v in os.environ.items() if k in _ENV_KEEP and not _SECRET.search(k)}
    env.setdefault("PATH", "/usr/local/cuda/bin:/usr/bin:/bin")
    if home:
        env["HOME"] = home
        env["TMPDIR"] = home
    # Results must not depend on the TF32 default of any library the program links.
    env.setdefault("NVIDIA_TF32_OVERRIDE", "0")
    for k, v in (extra or {}).items():
        if not _SECRET.search(k):
            env[k] = v
    return env


def classify_failure(output: str) -> RunnerError | None:
    """Recognise well-known failures in a tool's output."""
    if "ERR_NVGPUCTRPERM" in output:
        return RunnerError(
            "counters",
            "the GPU's performance counters are restricted to administrators (ERR_NVGPUCTRPERM): run as root, "
            "or set NVreg_RestrictProfilingToAdminUsers=0 (https://developer.nvidia.com/ERR_NVGPUCTRPERM); "
            "timing still works without counters",
        )
    if re.search(
        r"no CUDA-capable device|CUDA driver version is insufficient|cudaErrorNoDevice|"
        r"No supported GPU|no kernels were profiled.*device",
        output,
    ):
        return RunnerError("no_gpu", "no usable CUDA GPU on the runner host (check nvidia-smi there)")
    if "Failed to initialize the profiler" in output or "LibraryNotLoaded" in output:
        return RunnerError(
            "profiler", "ncu could not start its profiler on this host: " + _last_lines(output)
        )
    return None


def _last_lines(text: str, n: int = 3) -> str:
    lines = [ln for ln in text.strip().splitlines() if ln.strip()]
    return " | ".join(lines[-n:])


def _popen_run(
    argv: list[str],
    cwd: str | None,
    timeout_s: float,
    cancel: threading.Event | None,
    env: dict[str, str] | None,
    label: str,
) -> RunResult:
    t0 = time.monotonic()
    try:
        proc = subprocess.Popen(
            argv,
            cwd=cwd,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            errors="replace",
            start_new_session=True,
        )
    except OSError as exc:
        raise RunnerError("exec", f"cannot run {argv[0]}: {exc.strerror or exc}") from None
    deadline = t0 + timeout_s
    while True:
        try:
            out, err = proc.communicate(timeout=0.2)
            return RunResult(proc.returncode, out, err, time.monotonic() - t0)
        except subprocess.TimeoutExpired:
            if cancel is not None and cancel.is_set():
                _killpg(proc)
                raise Cancelled(label) from None
            if time.monotonic() > deadline:
                _killpg(proc)
                raise RunnerError(
                    "timeout",
                    f"{label} did not finish within {timeout_s:.0f} s and was killed "
                    "(a hanging kernel? raise the timeout if the work is really that long)",
                ) from None


def _killpg(proc: subprocess.Popen[str]) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        proc.kill()
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.communicate(timeout=10)
