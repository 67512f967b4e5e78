"""``doctor``: what this machine can do for kernellsp, and how to fix what is missing.

Each check is a :class:`Check` with a status (``ok``, ``missing``, ``warn``), what was found, and
the fix. The CLI prints them and exits by :func:`exit_code`: 0 when everything is there, 1 when
something optional is missing (profiling, verification or the LLM cannot run here), 2 when kernellsp
cannot do its basic job (no nvcc, or settings it cannot use: a broken kernellsp.toml, an arch nvcc does
not build). The language server logs them at start-up.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from kernellsp.build import toolchain
from kernellsp.settings import Settings, SettingsError, load_settings


@dataclass
class Check:
    """One line of the doctor's report."""

    name: str
    status: Literal["ok", "missing", "warn"]
    detail: str
    fix: str = ""
    #: Needed for static checks (nvcc); the others unlock profiling, verification or the LLM.
    required: bool = False


def _tool(name: str, purpose: str, required: bool = False) -> Check:
    path = toolchain.find_tool(name)
    if path is None:
        return Check(
            name, "missing", f"not found ({purpose})", toolchain.INSTALL_HINTS.get(name, ""), required
        )
    ver = toolchain.tool_version(name)
    return Check(name, "ok", f"{path}" + (f" ({ver})" if ver else ""), "", required)


def counter_permission() -> Check:
    """Whether non-root users may read GPU performance counters (ERR_NVGPUCTRPERM otherwise)."""
    params = Path("/proc/driver/nvidia/params")
    if not params.is_file():
        return Check(
            "gpu counters",
            "missing",
            "no NVIDIA driver on this host",
            "profile on a GPU host (--gpu-host user@host) or install the driver",
        )
    try:
        text = params.read_text()
    except OSError as exc:
        return Check("gpu counters", "warn", f"cannot read {params}: {exc}")
    admin_only = any(line.strip() == "RmProfilingAdminOnly: 1" for line in text.splitlines())
    if admin_only and os.geteuid() != 0:
        return Check(
            "gpu counters",
            "missing",
            "restricted to administrators (RmProfilingAdminOnly: 1)",
            "run as root, or set NVreg_RestrictProfilingToAdminUsers=0 for the nvidia module "
            "(https://developer.nvidia.com/ERR_NVGPUCTRPERM)",
        )
    return Check("gpu counters", "ok", "readable" + (" (as root)" if admin_only else ""))


def run_checks(workspace: Path | None = None) -> list[Check]:
    """Every check, in the order the CLI prints them."""
    checks = [
        _tool("nvcc", "builds and static analysis", required=True),
        _tool("ptxas", "register and spill reports", required=True),
        _tool("nvdisasm", "per-line SASS: fp64, local memory, atomics"),
        _tool("ncu", "profiling with Nsight Compute"),
        _tool("compute-sanitizer", "memcheck/racecheck gate for rewrites"),
    ]
    gpu = toolchain.query_gpu()
    if isinstance(gpu, str):
        checks.append(Check("gpu", "missing", gpu, "profile on a GPU host with --gpu-host user@host"))
    else:
        mem = f", {gpu.memory_mib} MiB" if gpu.memory_mib else ""
        checks.append(Check("gpu", "ok", f"{gpu.name} (driver {gpu.driver}{mem})"))
    checks.append(counter_permission())
    try:
        import ncu_report  # noqa: F401

        checks.append(Check("ncu-report", "ok", "Python reader for .ncu-rep files is installed"))
    except ImportError:
        checks.append(
            Check("ncu-report", "missing", "cannot read Nsight Compute reports", "pip install ncu-report")
        )
    try:
        settings: Settings | None = load_settings(workspace)
    except SettingsError as exc:
        settings = None
        checks.append(
            Check(
                "settings", "missing", str(exc), "correct the file or the setting named above", required=True
            )
        )
    if settings is not None:
        llm = settings.llm
        if not llm.configured:
            checks.append(
                Check(
                    "llm",
                    "warn",
                    "no endpoint configured: rewrites come from the built-in recipes, then the built-in tuner",
                    "set llm.base_url and llm.model in kernellsp.toml [settings] or "
                    "KERNELLSP_LLM_BASE_URL / KERNELLSP_LLM_MODEL",
                )
            )
        elif not os.environ.get(llm.api_key_env):
            checks.append(
                Check(
                    "llm",
                    "warn",
                    f"{llm.model} at {llm.base_url}, but ${llm.api_key_env} is not set",
                    f"export {llm.api_key_env}=... (or set llm.api_key_env to the variable that holds the key)",
                )
            )
        else:
            checks.append(Check("llm", "ok", f"{llm.model} at {llm.base_url} (key in ${llm.api_key_env})"))
        problem = toolchain.arch_problem(settings.arch)
        if problem is None:
            checks.append(Check("arch", "ok", toolchain.normalise_arch(settings.arch), required=True))
        else:
            origin = "KERNELLSP_ARCH" if os.environ.get("KERNELLSP_ARCH") else "the arch setting"
            checks.append(
                Check(
                    "arch",
                    "missing",
                    f"{origin} {settings.arch!r}: {problem}",
                    "set arch (kernellsp.toml [settings], KERNELLSP_ARCH or the editor's kernellsp.arch) "
                    "to one nvcc builds, e.g. sm_90",
                    required=True,
                )
            )
        runner = settings.runner if not settings.gpu_host else f"ssh {settings.gpu_host}"
        checks.append(Check("runner", "ok", runner))
        if settings.runner == "pool":
            checks.extend(pool_checks(settings))
    checks.extend(sandbox_checks(settings.gpu_host if settings is not None else None))
    return checks


def exit_code(checks: list[Check]) -> int:
    """2: a required check failed (no nvcc, unusable settings); 1: an optional one is missing; 0: all there."""
    if any(c.required and c.status == "missing" for c in checks):
        return 2
    return 1 if any(c.status == "missing" for c in checks) else 0


def sandbox_checks(gpu_host: str | None = None) -> list[Check]:
    """What confines the code under test on this host and, when one is set, on the ssh GPU host."""
    from kernellsp.run.runner import RunnerError, make_runner
    from kernellsp.run.ssh import SshRunner

    out: list[Check] = []
    try:
        runners = [("sandbox", make_runner("local"))]
        if gpu_host:
            runners.append((f"sandbox ({gpu_host})", SshRunner(gpu_host)))
    except RunnerError as exc:  # a bad KERNELLSP_SANDBOX value or ssh target
        return [Check("sandbox", "missing", str(exc), "set KERNELLSP_SANDBOX to auto, require or off")]
    for name, runner in runners:
        try:
            status = runner.sandbox_status()
        finally:
            runner.close()
        if status.confined:
            out.append(Check(name, "ok", status.describe()))
        else:
            fix = (
                ""
                if status.mode == "off"
                else "install bubblewrap on the runner host (apt-get install bubblewrap) "
                "and allow unprivileged user namespaces; "
            ) + "KERNELLSP_SANDBOX=require refuses to run unconfined"
            out.append(Check(name, "warn", status.describe(), fix))
    return out


def pool_checks(settings: Settings) -> list[Check]:
    """``runner = "pool"``: the scheduler, and each worker with its GPU (a local pool is started to ask)."""
    try:
        from kernellsp.run import pool as poolmod
        from kernellsp.run.pool_worker import PoolError
    except ImportError as exc:
        return [
            Check(
                "pool",
                "missing",
                f"runner = pool, but Dask is not installed ({exc.name})",
                "pip install 'kernellsp[cluster]'",
                required=True,
            )
        ]
    p = settings.pool
    pool = poolmod.Pool(p.scheduler, list(p.gpus), p.gpu_model, connect_timeout_s=p.connect_timeout_s)
    try:
        workers = pool.workers()
    except PoolError as exc:
        pool.close()
        return [Check("pool", "missing", str(exc), "see docs/cluster.md", required=True)]
    pool.close()
    usable = [w for w in workers if w.gpu is not None]
    models = sorted({w.gpu.name for w in usable if w.gpu is not None})
    head = Check(
        "pool",
        "ok" if usable else "missing",
        f"{pool.label}"
        + (f" [{pool.cluster_kind}]" if pool.cluster_kind else "")
        + f": {len(workers)} workers, {len(usable)} with a GPU"
        + (f" ({', '.join(models)})" if models else ""),
        "" if usable else "start dask-cuda-worker SCHEDULER-ADDRESS on each GPU host (docs/cluster.md)",
        required=True,
    )
    out = [head]
    for line in poolmod.describe_workers(workers):
        bad = line.startswith("warning:") or ": no GPU:" in line
        out.append(Check("pool worker", "warn" if bad else "ok", line))
    return out
