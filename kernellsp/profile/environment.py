"""The runner's identity (GPU, driver, clocks, tool versions) recorded with every profile and verdict, whether
this host can profile, and the runner the settings ask for."""

from __future__ import annotations

from typing import Any

from kernellsp import cache
from kernellsp.run.runner import Runner, RunnerError

# --------------------------------------------------------------------------------------------------
# Environment


#: How long the runner's identity (GPU, driver, tool versions) is reused before it is asked again.
ENV_TTL_S = 300.0


def runner_environment(runner: Runner, timeout_s: float = 60.0, use_cache: bool = True) -> dict[str, Any]:
    """GPU name, driver, clocks and ncu/nvcc versions on the runner host (recorded with every profile).

    Cached for :data:`ENV_TTL_S` seconds per runner: asking costs three tool starts (about a second).
    """
    own = getattr(runner, "environment", None)
    if callable(own):  # a pool runner: its GPU workers answer (kernellsp.run.pool)
        return dict(own())
    key = cache.digest("env", runner.name)
    if use_cache:
        hit = cache.get("env", key)
        if hit is not None:
            return hit
    env = _query_environment(runner, timeout_s)
    if use_cache:
        cache.put("env", key, env, expire_s=ENV_TTL_S)
    return env


def _query_environment(runner: Runner, timeout_s: float) -> dict[str, Any]:
    env: dict[str, Any] = {"runner": runner.name}
    wd = runner.new_workdir()
    try:
        smi = runner.which("nvidia-smi")
        if smi is None:
            raise RunnerError(
                "no_gpu",
                f"no GPU on {runner.name}: nvidia-smi not found there, so no NVIDIA driver "
                "(profile on a GPU machine, e.g. with --gpu-host user@gpu-host)",
            )
        res = runner.run(
            [
                smi,
                "--query-gpu=name,driver_version,clocks.sm,clocks.max.sm,clocks.mem,clocks.max.mem",
                "--format=csv,noheader,nounits",
            ],
            wd,
            timeout_s,
        )
        if res.returncode != 0 or not res.stdout.strip():
            raise RunnerError(
                "no_gpu", f"nvidia-smi found no GPU on {runner.name}: {res.output.strip()[:200]}"
            )
        parts = [p.strip() for p in res.stdout.strip().splitlines()[0].split(",")]
        keys = ["gpu", "driver", "sm_clock_mhz", "max_sm_clock_mhz", "mem_clock_mhz", "max_mem_clock_mhz"]
        env.update(dict(zip(keys, parts, strict=False)))
        for tool in ("ncu", "nvcc"):
            path = runner.which(tool)
            env[f"{tool}_path"] = path
            if path:
                from kernellsp.build.toolchain import parse_version

                v = runner.run([path, "--version"], wd, timeout_s)
                env[f"{tool}_version"] = parse_version(v.stdout + v.stderr)
    finally:
        runner.cleanup(wd)
    return env


def device_facts(report: Any) -> dict[str, Any]:
    """What the roofline's ceilings are computed from: the device's attributes, the clocks measured while
    profiling, and ncu's per-cycle peaks when the report has them (:data:`ROOFLINE_METRICS`)."""
    m: dict[str, float] = report.kernels[0].metrics if report.kernels else {}
    return {
        "gpu": report.gpu_name,
        "compute_capability": report.compute_capability,
        "sm_count": report.sm_count,
        "sm_clock_hz": report.sm_clock_hz,
        "max_sm_clock_hz": report.max_sm_clock_hz,
        "dram_clock_hz": report.dram_clock_hz,
        "max_mem_clock_hz": report.max_mem_clock_hz,
        "memory_bus_width_bits": m.get("device__attribute_global_memory_bus_width"),
        "l2_slices": m.get("device__attribute_l2s_count"),
        "l2_bytes": m.get("device__attribute_l2_cache_size"),
        "ffma_peak_per_cycle": m.get("sm__sass_thread_inst_executed_op_ffma_pred_on.sum.peak_sustained"),
        "dram_bytes_peak_per_cycle": m.get("dram__bytes.sum.peak_sustained"),
        "l2_bytes_peak_per_cycle": m.get("lts__t_bytes.sum.peak_sustained"),
        "l2_clock_hz": m.get("lts__cycles_elapsed.avg.per_second"),
    }


def local_gpu_problem() -> str | None:
    """Why this host cannot profile (no driver / no GPU / no ncu), or ``None`` when it can."""
    from kernellsp.build import toolchain

    gpu = toolchain.query_gpu()
    if isinstance(gpu, str):
        return gpu
    if toolchain.find_tool("ncu") is None:
        return "ncu not found: " + toolchain.INSTALL_HINTS["ncu"]
    return None


def profiling_runner(settings: Any) -> tuple[Runner | None, str | None]:
    """The runner the settings ask for, or ``(None, reason)`` when profiling is off or impossible here."""
    from kernellsp.run.runner import make_runner

    if settings.runner == "none":
        return None, "profiling is off (runner = none)"
    if not settings.gpu_host and settings.runner != "pool":
        problem = local_gpu_problem()
        if problem is not None:
            return None, f"no GPU here ({problem}) and no GPU host (--gpu-host or the gpu_host setting)"
    try:
        return make_runner(settings.runner, settings.gpu_host, settings=settings), None
    except RunnerError as exc:
        return None, str(exc)
