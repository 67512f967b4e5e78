"""One verification's scratch directory on its runner, and the harness runs in it that every gate makes."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from kernellsp.optimize.verify import oracle
from kernellsp.optimize.verify.verdict import VerifyOptions
from kernellsp.run import harness
from kernellsp.run.gpu_lock import GpuLock
from kernellsp.run.runner import LocalRunner, Runner

T = TypeVar("T")


@dataclass
class _Built:
    exe: str
    plan: harness.HarnessPlan


class Session:
    """One verification on one runner: a scratch dir holding both sources and both harnesses."""

    def __init__(self, runner: Runner, opts: VerifyOptions, cancel: threading.Event | None) -> None:
        self.runner = runner
        self.opts = opts
        self.cancel = cancel
        self.wd = runner.new_workdir()
        # Local results are read in place; remote ones are fetched first.
        self.local = Path(self.wd) if isinstance(runner, LocalRunner) else None
        self.fetch_root: Path | None = None
        self.n = 0
        # Harness runs of one session may run in threads (the sanitizer's tools side by side): each takes its
        # output name under this lock.
        self._n_lock = threading.Lock()
        self.env: dict[str, Any] = {}
        self.run_seed = 0
        #: Seconds per phase (correctness, error budget, sanitizer, timing, launch checks): the gate's cost.
        self.phase_s: dict[str, float] = {}
        #: Shapes the gate drew (plan index -> the sizes it overrides): checked where the baseline handles them.
        self.drawn_shapes: dict[int, dict[str, int]] = {}
        #: The candidate's static shared memory (from its first check run): decides whether racecheck applies.
        self.cand_static_smem = 0
        #: Where the built harnesses are, relative to ``wd`` (each side builds in a directory of its own).
        self.exe_paths: dict[str, str] = {}
        #: The baseline's higher-precision oracle (built on the first float mismatch); None: nothing to promote.
        self.oracle: oracle.OracleRuns | None = None
        #: Every harness process of this verification and where its seconds went (evidence of the gate's cost:
        #: wall with the GPU-lock wait, the process alone, and the harness's own host steps).
        self.runs: list[dict[str, Any]] = []
        self._pool: ThreadPoolExecutor | None = None

    def background(self, fn: Callable[[], T]) -> Future[T]:
        """Run ``fn`` in a thread now; :meth:`close` waits for it before the scratch directory goes."""
        if self._pool is None:
            self._pool = ThreadPoolExecutor(max_workers=2, thread_name_prefix="kernellsp-verify")
        return self._pool.submit(fn)

    def settle(self) -> None:
        """Wait for background work (before timing: a compile beside timed launches would disturb them)."""
        if self._pool is not None:
            self._pool.shutdown(wait=True)
            self._pool = None

    def close(self) -> None:
        if self._pool is not None:
            # Background work (the oracle's compile) writes into the scratch directory: finish it first.
            self._pool.shutdown(wait=True)
        self.runner.cleanup(self.wd)

    def run(self, argv: list[str], gpu: GpuLock = True, timeout: float | None = None) -> Any:
        return self.runner.run(argv, self.wd, timeout or self.opts.timeout_s, self.cancel, gpu_lock=gpu)

    def result(self, out: str) -> harness.HarnessResult:
        if self.local is not None:
            return harness.read_result(self.local / out)
        import tempfile

        if self.fetch_root is None:
            self.fetch_root = Path(tempfile.mkdtemp(prefix="kernellsp-verify-"))
        self.runner.get(self.wd, [out], self.fetch_root)
        return harness.read_result(self.fetch_root / out)

    def harness_run(
        self,
        exe: str,
        mode: str,
        shape: int,
        seed: int,
        poison: str = "nan",
        reps: int | None = None,
        warmup: int | None = None,
        fresh: bool = False,
        wrapper: list[str] | None = None,
        dump_last: bool = False,
        sets: list[str] | None = None,
        check_launches: int = 0,
        alloc: str = "guard",
        timeout: float | None = None,
        gpu: GpuLock = True,
    ) -> tuple[Any, harness.HarnessResult | None, str]:
        """One harness process; ``gpu`` how it holds the GPU (``True``: alone, ``"shared"``: beside other shared
        runs; see :data:`kernellsp.run.gpu_lock.GpuLock`)."""
        with self._n_lock:
            self.n += 1
            out = f"r{self.n:04d}"
        argv = harness.harness_argv(
            f"./{self.exe_paths.get(exe, exe)}",
            mode,  # type: ignore[arg-type]
            out,
            shape=shape,
            seed=seed,
            reps=reps,
            warmup=warmup,
            poison=poison,  # type: ignore[arg-type]
            fresh_inputs=fresh,
            dump_last=dump_last,
            sets=sets,
            check_launches=check_launches,
            alloc=alloc,  # type: ignore[arg-type]
        )
        t0 = time.monotonic()
        res = self.run([*(wrapper or []), *argv], gpu=gpu, timeout=timeout)
        record: dict[str, Any] = {
            "exe": exe,
            "mode": mode,
            "shape": shape,
            "sets": len(sets or []) or 1,
            "tool": Path(wrapper[0]).name if wrapper else None,
            "gpu": "shared" if gpu == "shared" else "alone",
            "wall_s": round(time.monotonic() - t0, 3),
            "process_s": round(float(getattr(res, "seconds", 0.0) or 0.0), 3),
        }
        self.runs.append(record)
        try:
            result = self.result(out)
        except harness.HarnessError:
            return res, None, out
        host = result.raw.get("host_seconds")
        if isinstance(host, dict):
            record["host_s"] = {k: round(float(v), 3) for k, v in host.items() if isinstance(v, int | float)}
        launches = [x.launch_s for x in result.sets if x.launch_s is not None]
        if launches:
            record["fastest_launch_s"] = min(launches)
        return res, result, out


def _bytes(r: harness.HarnessResult, name: str) -> bytes:
    return r.read_bytes(name)


def first_line(text: str, n: int = 8) -> str:
    lines = [ln for ln in text.strip().splitlines() if ln.strip()]
    keep = [ln for ln in lines if "error" in ln.lower()] or lines
    return " | ".join(keep[:n])


def derive_seed(run_seed: int, k: int) -> int:
    """The k-th input seed of a verification (63 bits: JSON- and command-line-friendly)."""
    return harness.mix64((run_seed + (k + 1) * 0x9E3779B97F4A7C15) & (2**64 - 1)) >> 1
