"""Code of tests/run/test_pool.py that runs inside Dask worker processes, where this host has no GPU.

Importable there by name: pytest puts tests/ on ``sys.path``, and the workers (spawned processes) start with
the parent's ``sys.path``. Two seams, both narrow:

* :func:`fake_probe` stands in for ``nvidia-smi`` on the worker (it names the worker's GPU);
* :func:`verify_until_gpu` is the verification a worker runs: what the gate does before its first GPU step,
  with the real parts (the scope gate, harness planning, both harnesses built with the real nvcc for the
  worker's arch on the worker's own runner), then, in place of correctness, sanitizer and timing, it waits
  ``gpu_seconds`` (watching the cancel event, as the gate's GPU processes are killed on cancel) and returns
  a verdict whose speedup is a function of the candidate's text. It can also kill its own worker process,
  as a crashing GPU host would.
"""

from __future__ import annotations

import hashlib
import os
import threading
import time
from pathlib import Path
from typing import Any

from kernellsp import cache
from kernellsp.build.nvcc import Cancelled
from kernellsp.optimize.verify.gate import Verdict, VerifyError, VerifyOptions
from kernellsp.optimize.verify.scope import check_scope, edit_targets
from kernellsp.run import harness
from kernellsp.run.harness_build import build_harness
from kernellsp.run.pool_worker import GpuInfo
from kernellsp.run.runner import Runner
from kernellsp.source import spec
from kernellsp.source.model import parse_source


def fake_probe(worker_name: str, device: str | None) -> GpuInfo:
    """Workers named ``b…`` have a "Test GPU B" (sm_80); the others a "Test GPU A" (sm_90)."""
    if worker_name.startswith("b"):
        return GpuInfo(
            index=worker_name,
            uuid=f"GPU-test-{worker_name}",
            name="Test GPU B",
            compute_cap="8.0",
            driver="test",
        )
    return GpuInfo(
        index=worker_name, uuid=f"GPU-test-{worker_name}", name="Test GPU A", compute_cap="9.0", driver="test"
    )


def simulated_speedup(baseline: str, candidate: str) -> float:
    """The speedup the stand-in GPU step reports: 1.0 for an unchanged file, else 1.05–1.54 by the text."""
    if candidate == baseline:
        return 1.0
    return 1.05 + int(hashlib.sha256(candidate.encode()).hexdigest()[:6], 16) % 50 / 100


def verify_until_gpu(
    path: Path,
    baseline: str,
    candidate: str,
    entry: str,
    runner: Runner,
    options: VerifyOptions,
    environment: dict[str, Any],
    cancel: threading.Event,
    progress: Any,
    *,
    build: bool = True,
    gpu_seconds: float = 0.2,
    die_once: str | None = None,
    die_always: bool = False,
    cancel_marker: str | None = None,
) -> Verdict:
    """The gate up to its first GPU step, for real; then the stand-in GPU step (see the module's docstring)."""
    import distributed

    t0 = time.monotonic()
    bmodel = parse_source(baseline, str(path))
    scope = check_scope(baseline, candidate, edit_targets(bmodel, entry), str(path), entry)
    if not scope.ok:
        return Verdict("scope_violation", False, scope.reason, entry)
    cmodel = parse_source(candidate, str(path))
    bspec = spec.entry_spec(bmodel, entry)
    if bspec is None:
        raise VerifyError(f"{entry} has no launch spec")
    cbound = spec.entry_spec(cmodel, entry)
    plans = {
        "base": harness.plan_harness(bmodel, bspec.spec, entry),
        "cand": harness.plan_harness(cmodel, cbound.spec if cbound else bspec.spec, entry),
    }
    details: dict[str, Any] = {
        "arch": options.arch,
        "worker_pid": os.getpid(),
        "built": {},
        "includes_seen": sorted(p.name for p in path.parent.iterdir() if p != path),
    }
    if build:
        progress("building baseline and candidate", 5)
        wd = runner.new_workdir()
        try:
            files: dict[str, bytes] = {}
            for who, text in (("base", baseline), ("cand", candidate)):
                files[f"{who}/src/{path.name}"] = text.encode()
                files[f"{who}/harness.cu"] = harness.generate_harness(
                    plans[who], f"src/{path.name}", split=True
                ).encode()
                for inc in path.parent.iterdir():
                    if inc != path and inc.is_file():
                        files[f"{who}/src/{inc.name}"] = inc.read_bytes()
            runner.put(files, wd)
            for who in ("base", "cand"):
                own = sorted((k, v) for k, v in files.items() if k.startswith(f"{who}/"))
                key = cache.digest(*(f"{k}\0{v.decode('utf-8', 'replace')}" for k, v in own))
                res = build_harness(
                    runner,
                    f"{wd}/{who}",
                    "harness.cu",
                    f"h_{who}",
                    options.arch,
                    list(plans[who].flags),
                    nvcc=runner.require("nvcc"),
                    nvcc_version=environment.get("nvcc_version"),
                    sources_key=key,
                    timeout_s=options.build_timeout_s,
                    cancel=cancel,
                )
                if res.returncode != 0:
                    if who == "base":
                        raise VerifyError(f"the baseline's harness does not build: {res.output[-300:]}")
                    return Verdict(
                        "compile_error",
                        False,
                        f"the candidate does not compile: {res.output[-300:]}",
                        entry,
                        details=details,
                        environment=dict(environment),
                    )
                details["built"][who] = (Path(wd) / who / f"h_{who}").stat().st_size
        finally:
            runner.cleanup(wd)
    if die_always or (die_once is not None and not os.path.exists(die_once)):
        if die_once is not None:
            Path(die_once).write_text(distributed.get_worker().address)
        os._exit(1)  # the worker process dies mid-verification, as on a lost host
    progress("GPU steps (stand-in)", 50)
    end = time.monotonic() + gpu_seconds
    while time.monotonic() < end:
        if cancel.is_set():
            if cancel_marker is not None:
                Path(cancel_marker).write_text(f"{time.time()}")
            raise Cancelled("stand-in GPU step")
        time.sleep(0.02)
    s = simulated_speedup(baseline, candidate)
    stats = {
        "speedup": s,
        "baseline_median_ms": 1.0,
        "candidate_median_ms": 1.0 / s,
        "ci_low": s * 0.99,
        "ci_high": s * 1.01,
        "confidence": 0.95,
        "rounds": 3,
    }
    accepted = s >= 1 + options.min_gain_pct / 100
    v = Verdict(
        "accepted" if accepted else "not_faster",
        accepted,
        f"{s:.3f}x (stand-in)",
        entry,
        details=details,
        stats=stats,
        environment=dict(environment),
        timings={"rounds": {"base": [[1.0, 1.0, 1.0]], "cand": [[1 / s, 1 / s, 1 / s]]}},
    )
    v.seconds = time.monotonic() - t0
    return v
