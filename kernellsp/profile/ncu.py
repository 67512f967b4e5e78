"""Profiling: run a file's kernels under Nsight Compute and turn the report into line-level findings.

Kernel mode (the file has launch specs): for each spec'd entry kernellsp generates its own harness
(:mod:`kernellsp.run.harness`), builds it with ``-lineinfo`` on the runner, and runs it under ncu with
``--profile-from-start off``: the harness opens the profiler only around the measured launch, so
warm-up launches are never profiled and every kernel the entry launches is captured once.
Program mode (a file with ``main()`` and no spec): the program runs as it is, and the first launch
of each kernel is kept (at most ``max_launches`` are profiled).

The report is read with the ``ncu-report`` package into per-kernel and per-line metrics; the
profile rules in ``rules/`` (``source = "profile"``) are evaluated over them; ncu's own rule
results are kept as KL590 findings with their estimated speedups. Findings are ranked by expected
impact. Results are cached by source, spec, flags, section set, GPU, driver and ncu version.
"""

from __future__ import annotations

import math
import shutil
import tempfile
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kernellsp import cache
from kernellsp.build.nvcc import local_includes
from kernellsp.check import bind_specs
from kernellsp.findings import Finding, Range, Severity, line_range
from kernellsp.rules import engine as rules
from kernellsp.run.runner import Runner, RunnerError, classify_failure
from kernellsp.source import exprs, spec
from kernellsp.source.model import SourceModel, parse_source

#: Part of the cache key: "profile-2" added per-line stall shares and the device facts (the HTML report).
PROFILE_VERSION = "profile-2"
#: The on-save set. MemoryWorkloadAnalysis_Tables is left to the deep set: it cost 2.0 of 5.4 s on an
#: H200 (tests/bench/results/ncu-sections-h200.md) and the line rules take bank conflicts from SourceCounters.
FAST_SECTIONS = ["SpeedOfLight", "LaunchStats", "Occupancy", "WarpStateStats", "SourceCounters"]
#: Extra counters for the roofline position and the atomic-contention rule (cheap: one pass).
EXTRA_METRICS = [
    "dram__bytes_read.sum",
    "dram__bytes_write.sum",
    "smsp__sass_thread_inst_executed_op_fadd_pred_on.sum",
    "smsp__sass_thread_inst_executed_op_fmul_pred_on.sum",
    "smsp__sass_thread_inst_executed_op_ffma_pred_on.sum",
    "lts__d_atomic_input_cycles_active.max.pct_of_peak_sustained_elapsed",
    "lts__d_atomic_input_cycles_active.avg.pct_of_peak_sustained_elapsed",
    "smsp__inst_executed_op_global_red.sum",
    "smsp__inst_executed_op_global_atom.sum",
]
#: Peak rates for the roofline's ceilings, as ncu's own roofline section reads them (per cycle; constants
#: of the chip: collecting them costs no replay pass).
ROOFLINE_METRICS = [
    "sm__sass_thread_inst_executed_op_ffma_pred_on.sum.peak_sustained",
    "dram__bytes.sum.peak_sustained",
    "lts__t_bytes.sum.peak_sustained",
    "lts__cycles_elapsed.avg.per_second",
]

Progress = Callable[[str, float | None], None]


class ProfileError(RuntimeError):
    """Profiling could not run; the message names the problem and the fix."""

    def __init__(self, message: str, kind: str = "profile") -> None:
        super().__init__(message)
        self.kind = kind


@dataclass
class ProfileOptions:
    """What to collect and how."""

    arch: str = "sm_90"
    sections: list[str] = field(default_factory=lambda: list(FAST_SECTIONS))
    deep: bool = False
    deep_set: str = "full"
    timeout_s: float = 300.0
    build_timeout_s: float = 180.0
    seed: int = 1
    shape: int = 0
    max_launches: int = 20
    use_cache: bool = True
    save_report_dir: Path | None = None
    kernels: list[str] | None = None
    #: ``time.monotonic()`` before which ncu must not start (the editor's debounce: a burst of saves builds at
    #: once, in parallel with the wait, but only the newest save reaches the GPU). ``None``: no wait.
    gpu_not_before: float | None = None

    @classmethod
    def from_settings(cls, settings: Any, **overrides: Any) -> ProfileOptions:
        """The options the settings ask for (arch, section sets, timeouts); ``overrides`` win (command-line flags)."""
        base = dict(
            arch=settings.arch,
            sections=list(settings.ncu_fast_sections),
            deep_set=settings.ncu_deep_set,
            timeout_s=settings.profile_timeout_s,
            build_timeout_s=settings.build_timeout_s,
        )
        return cls(**{**base, **overrides})


@dataclass
class KernelSummary:
    """One profiled kernel: timing, roofline position, bottleneck, hottest lines."""

    name: str
    entry: str | None
    duration_ns: float | None
    dram_pct: float | None
    fp32_pct: float | None
    sm_pct: float | None
    bottleneck: str
    hot_lines: list[dict[str, Any]]
    metrics: dict[str, Any]
    ncu_rules: list[dict[str, Any]]
    #: Every sampled line of the user's file: ``{"line": 1-based, "share": of the kernel's stall samples,
    #: "stall": dominant reason, "stall_share": its share of the line's samples}`` (the HTML report).
    line_stalls: list[dict[str, Any]] = field(default_factory=list)


@dataclass
class ProfileOutcome:
    """Everything one profile run produced."""

    path: str
    findings: list[Finding]
    kernels: list[KernelSummary]
    environment: dict[str, Any]
    notes: list[str]
    wall_s: float
    cached: bool = False
    reports: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {
            "path": self.path,
            "findings": [f.model_dump(mode="json") for f in self.findings],
            "kernels": [k.__dict__ for k in self.kernels],
            "environment": self.environment,
            "notes": self.notes,
            "wall_s": self.wall_s,
            "reports": self.reports,
        }

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> ProfileOutcome:
        return cls(
            path=d["path"],
            findings=[Finding.model_validate(f) for f in d["findings"]],
            kernels=[KernelSummary(**k) for k in d["kernels"]],
            environment=d["environment"],
            notes=d["notes"],
            wall_s=d["wall_s"],
            reports=d.get("reports", []),
        )


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


# --------------------------------------------------------------------------------------------------
# Metrics for the profile rules


def _top_pipe(derived: dict[str, float]) -> tuple[str, float]:
    pipes = {k[: -len("_pipe_pct")]: v for k, v in derived.items() if k.endswith("_pipe_pct")}
    if not pipes:
        return "", 0.0
    name = max(pipes, key=lambda k: pipes[k])
    return name, pipes[name]


def footprint_bytes(bound: spec.BoundSpec | None, shape: int = 0) -> int | None:
    """The fewest DRAM bytes the entry must move: inputs read once, outputs written once."""
    if bound is None:
        return None
    s = bound.spec
    try:
        names = s.resolved_sizes(s.all_shapes()[shape])
    except (exprs.ExprError, IndexError):
        return None
    total = 0
    for a in s.args.values():
        if a.count is None or a.dtype is None:
            continue
        try:
            n = exprs.evaluate_int(a.count, names) * spec.DTYPE_BYTES[a.dtype]
        except exprs.ExprError:
            return None
        total += n * (2 if a.dir == "inout" else 1)
    return total


def kernel_profile_metrics(kp: Any, report: Any, bound: spec.BoundSpec | None) -> dict[str, Any]:
    """Derived ncu metrics plus the composite values the profile rules quote."""
    d: dict[str, Any] = dict(kp.derived)
    d["kernel"] = kp.name
    pipe, pct = _top_pipe(kp.derived)
    if pipe:
        d["top_pipe"], d["top_pipe_pct"] = pipe, pct
    stalls = {
        k[len("stall_") : -len("_share")]: v
        for k, v in kp.derived.items()
        if k.startswith("stall_") and k.endswith("_share")
    }
    if stalls:
        reason = max(stalls, key=lambda k: stalls[k])
        d["dominant_stall"], d["dominant_stall_share"] = reason, stalls[reason]
    waves = d.get("waves")
    if isinstance(waves, int | float) and waves > 0:
        d["tail_idle_pct"] = (
            100.0 * (math.ceil(waves) - waves) / math.ceil(waves) if waves >= 1 else 100.0 * (1 - waves)
        )
    fp = footprint_bytes(bound)
    if fp:
        d["footprint_bytes"] = fp
        if d.get("dram_bytes"):
            d["dram_excess_ratio"] = d["dram_bytes"] / fp
            d["dram_mb"] = d["dram_bytes"] / 1e6
            d["footprint_mb"] = fp / 1e6
    # Roofline position: achieved FP32 rate against the SM-count × 128 FMA/clk × 2 FLOP peak.
    flops = None
    m = kp.metrics
    if all(
        k in m
        for k in (
            "smsp__sass_thread_inst_executed_op_fadd_pred_on.sum",
            "smsp__sass_thread_inst_executed_op_fmul_pred_on.sum",
            "smsp__sass_thread_inst_executed_op_ffma_pred_on.sum",
        )
    ):
        flops = (
            m["smsp__sass_thread_inst_executed_op_fadd_pred_on.sum"]
            + m["smsp__sass_thread_inst_executed_op_fmul_pred_on.sum"]
            + 2 * m["smsp__sass_thread_inst_executed_op_ffma_pred_on.sum"]
        )
    elif "fp32_flop" in d:
        flops = d["fp32_flop"]
    dur = d.get("duration_ns")
    clock = d.get("sm_clock_hz") or getattr(report, "sm_clock_hz", None)
    if flops is not None and dur and report.sm_count and clock:
        d["fp32_flop"] = flops
        d["fp32_gflops"] = flops / dur
        peak = report.sm_count * 128 * 2 * clock
        d["fp32_pct_of_peak"] = 100.0 * (flops / (dur * 1e-9)) / peak
    hl = _hot_lines(kp, 3)
    d["hot_lines_text"] = ", ".join(f"{h['line']} ({100 * h['share']:.0f}%)" for h in hl) or "none"
    return d


def _hot_lines(kp: Any, n: int) -> list[dict[str, Any]]:
    from kernellsp.profile import hot_lines

    out = []
    for h in hot_lines(kp, n):
        out.append(
            {
                "file": h.file,
                "line": h.line,
                "share": h.share,
                "stall": h.dominant_stall,
                "stall_share": h.dominant_stall_share,
            }
        )
    return out


def line_profile_metrics(kp: Any, basename: str) -> dict[int, dict[str, Any]]:
    """Per 1-based line of the user's file: the values the line rules read."""
    lines = kp.lines_for(basename) if hasattr(kp, "lines_for") else {}
    total_samples = sum(lm.stall_samples for lm in lines.values()) or 0.0
    total_inst = sum(lm.inst_executed for lm in lines.values()) or 0.0
    total_sectors = sum(lm.l2_sectors_global for lm in lines.values()) or 0.0
    out: dict[int, dict[str, Any]] = {}
    for ln, lm in lines.items():
        v: dict[str, Any] = {"line": ln}
        if total_samples:
            v["line_stall_share"] = lm.stall_samples / total_samples
        if lm.stalls:
            reason = max(lm.stalls, key=lambda r: lm.stalls[r])
            v["line_dominant_stall"] = reason
            v["line_dominant_stall_share"] = lm.stalls[reason] / lm.stall_samples if lm.stall_samples else 0.0
        if lm.l2_sectors_global:
            v["line_l2_sectors"] = lm.l2_sectors_global
            v["line_ideal_sectors"] = lm.l2_sectors_global_ideal
            v["line_excess_sector_pct"] = 100.0 * lm.l2_sectors_global_excessive / lm.l2_sectors_global
            v["line_sector_share"] = lm.l2_sectors_global / total_sectors if total_sectors else 0.0
            v["line_sectors_per_ideal"] = (
                lm.l2_sectors_global / lm.l2_sectors_global_ideal if lm.l2_sectors_global_ideal else 0.0
            )
        if lm.shared_nway_max:
            v["line_shared_nway"] = lm.shared_nway_max
        if lm.shared_wavefronts:
            v["line_shared_excess_pct"] = 100.0 * lm.shared_wavefronts_excessive / lm.shared_wavefronts
        if lm.inst_executed:
            v["line_avg_threads"] = lm.thread_inst_executed / lm.inst_executed
            v["line_inst_share"] = lm.inst_executed / total_inst if total_inst else 0.0
            v["line_divergent_branches"] = lm.divergent_branches
        out[ln] = v
    return out


def bottleneck(d: dict[str, Any]) -> str:
    """A one-phrase classification (the same thresholds as the kernel rules)."""
    sm, mem = d.get("sm_pct"), d.get("mem_pct")
    if sm is None or mem is None:
        return "unknown"
    if max(sm, mem) < 60:
        return "latency-bound" if d.get("waves", 1) >= 1 else "small grid (latency-bound)"
    if mem >= sm:
        dram, l2, l1 = d.get("dram_pct", 0), d.get("l2_pct", 0), d.get("l1_pct", 0)
        # L2 throughput includes the DRAM traffic that passes through it: DRAM wins unless L2 is clearly higher
        # (the same thresholds as KL501-KL503).
        if dram >= 60 and l2 - dram < 25:
            return "memory-bound (DRAM)"
        return "memory-bound (L2)" if l2 >= l1 - 10 else "memory-bound (L1)"
    pipe = d.get("top_pipe")
    return f"compute-bound ({pipe} pipe)" if pipe else "compute-bound"


# --------------------------------------------------------------------------------------------------
# Findings


def profile_findings(
    report: Any,
    model: SourceModel,
    path: str,
    ruleset: rules.RuleSet,
    specs_by_entry: dict[str, spec.BoundSpec],
    entry_of: dict[str, str | None],
) -> tuple[list[Finding], list[KernelSummary]]:
    """Evaluate the profile rules over every kernel of ``report`` that is defined in ``model``."""
    from kernellsp.check import _finding

    basename = Path(path).name
    findings: list[Finding] = []
    summaries: list[KernelSummary] = []
    kernel_rules = ruleset.conditional("kernel", "profile")
    line_rules = ruleset.conditional("line", "profile")
    ncu_rule = ruleset.by_emitter("ncu-rule")
    seen: set[str] = set()
    for kp in report.kernels:
        if kp.name in seen:
            continue
        seen.add(kp.name)
        fn = model.function(kp.name)
        entry = entry_of.get(kp.name)
        bound = specs_by_entry.get(entry or kp.name)
        km = kernel_profile_metrics(kp, report, bound)
        rng = (
            Range(
                start_line=fn.name_span.start_line,
                start_col=fn.name_span.start_col,
                end_line=fn.name_span.end_line,
                end_col=fn.name_span.end_col,
            )
            if fn is not None
            else Range(start_line=0, end_line=0)
        )
        kfind: list[Finding] = []
        # Kernels defined elsewhere (cuBLAS, a library, another file) get a summary but no findings:
        # there is no line of this file to put them on.
        local = fn is not None
        for rule in kernel_rules if local else []:
            if rules.applies(rule, km):
                kfind.append(_finding(rule, path, rng, km, kp.name))
        lines = line_profile_metrics(kp, basename) if local else {}
        for ln, lv in sorted(lines.items()):
            values = {**km, **lv}
            text = model.lines[ln - 1] if 0 < ln <= len(model.lines) else None
            for rule in line_rules:
                if rules.applies(rule, values):
                    kfind.append(_finding(rule, path, line_range(ln - 1, text), values, kp.name))
        if ncu_rule is not None and local:
            for r in kp.ncu_rules:
                if r.type not in ("OPT", "WRN"):
                    continue
                title = r.title or r.name or r.rule_identifier
                est = (
                    f" (ncu est. {r.speedup_type or 'local'} speedup {r.estimated_speedup_pct:.0f}%)"
                    if r.estimated_speedup_pct
                    else ""
                )
                msg = f"ncu {r.rule_identifier}: {title}: {' '.join(r.message.split())[:400]}{est}"
                f = _finding(ncu_rule, path, rng, {"message": msg}, kp.name, msg)
                f.estimated_speedup_pct = r.estimated_speedup_pct
                f.impact = r.estimated_speedup_pct or 0.0
                f.severity = Severity.info
                f.evidence = {"ncu_rule": r.rule_identifier, "section": r.section, "type": r.type}
                kfind.append(f)
        for f in kfind:
            f.source = "profile"
            f.evidence.setdefault("duration_ns", km.get("duration_ns"))
        findings.extend(kfind)
        summaries.append(
            KernelSummary(
                name=kp.name,
                entry=entry,
                duration_ns=km.get("duration_ns"),
                dram_pct=km.get("dram_pct"),
                fp32_pct=km.get("fp32_pct_of_peak"),
                sm_pct=km.get("sm_pct"),
                bottleneck=bottleneck(km),
                hot_lines=_hot_lines(kp, 5),
                metrics={k: v for k, v in km.items() if isinstance(v, int | float | str)},
                line_stalls=[
                    {
                        "line": ln,
                        "share": lv["line_stall_share"],
                        "stall": lv.get("line_dominant_stall"),
                        "stall_share": lv.get("line_dominant_stall_share"),
                    }
                    for ln, lv in sorted(lines.items())
                    if lv.get("line_stall_share")
                ],
                ncu_rules=[
                    {
                        "id": r.rule_identifier,
                        "type": r.type,
                        "title": r.title,
                        "speedup_pct": r.estimated_speedup_pct,
                    }
                    for r in kp.ncu_rules
                    if r.type in ("OPT", "WRN")
                ],
            )
        )
    findings.sort(key=lambda f: (-f.impact, f.range.start_line))
    return findings, summaries


# --------------------------------------------------------------------------------------------------
# The job


def _sources(path: Path, text: str, model: SourceModel) -> dict[str, bytes]:
    files = {f"src/{path.name}": text.encode("utf-8")}
    base = path.resolve().parent
    for inc in local_includes(model, path):
        try:
            rel = inc.relative_to(base)
        except ValueError:
            continue
        files[f"src/{rel.as_posix()}"] = inc.read_bytes()
    return files


def _ncu_argv(ncu: str, options: ProfileOptions, out: str) -> list[str]:
    argv = [ncu, "--force-overwrite", "--export", out, "--import-source", "yes", "--log-file", "ncu.log"]
    if options.deep:
        argv += ["--set", options.deep_set]
    else:
        for s in options.sections:
            argv += ["--section", s]
    argv += ["--metrics", ",".join(EXTRA_METRICS + ROOFLINE_METRICS)]
    return argv


def profile_file(
    path: Path,
    text: str,
    runner: Runner,
    options: ProfileOptions | None = None,
    ruleset: rules.RuleSet | None = None,
    ws_specs: dict[str, spec.KernelSpec] | None = None,
    cancel: threading.Event | None = None,
    progress: Progress | None = None,
    environment: dict[str, Any] | None = None,
) -> ProfileOutcome:
    """Profile every spec'd entry of ``path`` (or the program, if it has ``main`` and no spec)."""
    from kernellsp.profile import ReportError, load_report
    from kernellsp.run import harness as hz
    from kernellsp.run.harness_build import build_harness

    if getattr(runner, "verify_remotely", None) is not None:  # before a local pool is started for nothing
        raise ProfileError(
            "runner = pool verifies rewrites on the pool's GPUs but does not profile (ncu runs single "
            "commands in one scratch folder): profile with runner = local, or ssh with gpu_host",
            "pool",
        )
    opts = options or ProfileOptions()
    t0 = time.monotonic()
    report_progress = progress or (lambda _m, _p: None)
    model = parse_source(text, str(path))
    ruleset = ruleset or rules.load_rules(spec.find_workspace_root(path))
    valid, program_mode = _select(path, model, opts, ws_specs)
    # Where the time goes (``--format json``'s environment.phases and the bench tables); see docs/speed.md.
    phases: dict[str, float] = {"parse_s": time.monotonic() - t0}
    report_progress("querying the GPU", 2)
    t = time.monotonic()
    # A copy: the report's own values are added below, and a caller may pass one environment for many files.
    env = dict(environment or runner_environment(runner))
    phases["environment_s"] = time.monotonic() - t
    key = profile_key(path, text, model, valid, opts, env)
    if opts.use_cache and opts.save_report_dir is None:
        hit = cache.get("profile", key)
        if hit is not None:
            outcome = ProfileOutcome.from_dict(hit)
            outcome.cached = True
            return outcome
    t = time.monotonic()
    nvcc = runner.require("nvcc")
    ncu = runner.require("ncu")
    wd = runner.new_workdir()
    notes: list[str] = []
    reports: list[tuple[str, Path]] = []
    entry_of: dict[str, str | None] = {}
    local_tmp = Path(tempfile.mkdtemp(prefix="kernellsp-profile-"))
    try:
        files = _sources(path, text, model)
        jobs: list[_Job] = []
        if program_mode:
            exe = "prog"
            build_argv = [nvcc, "-O3", f"-arch={opts.arch}", "-lineinfo", "-o", exe, f"src/{path.name}"]
            run_argv = [
                *_ncu_argv(ncu, opts, "prof_program"),
                "--launch-count",
                str(opts.max_launches),
                f"./{exe}",
            ]
            jobs.append(_Job("program", None, exe, run_argv, build_argv=build_argv))
        else:
            for b in valid:
                try:
                    plan = hz.plan_harness(model, b.spec, b.entry)
                except hz.HarnessError as exc:
                    notes.append(f"{b.entry}: {exc}")
                    continue
                hname = f"harness_{b.entry}.cu"
                # The split build's entry unit: the harness runtime is a shared object compiled once per toolchain.
                files[hname] = hz.generate_harness(plan, f"src/{path.name}", split=True).encode()
                exe = f"h_{b.entry}"
                run_argv = [
                    *_ncu_argv(ncu, opts, f"prof_{b.entry}"),
                    "--profile-from-start",
                    "off",
                    f"./{exe}",
                    "--mode",
                    "profile",
                    "--shape",
                    str(opts.shape),
                    "--seed",
                    str(opts.seed),
                    "--out",
                    f"out_{b.entry}",
                ]
                jobs.append(_Job(b.entry, b.entry, exe, run_argv, harness_cu=hname, flags=list(b.spec.flags)))
        if not jobs:
            raise ProfileError(f"{path.name}: no entry could be profiled: " + "; ".join(notes), "no_spec")
        runner.put(files, wd)
        phases["plan_s"] = time.monotonic() - t
        user_files = {k: v for k, v in files.items() if k.startswith("src/")}

        def build(job: _Job) -> tuple[int, str, dict[str, float]]:
            """One entry's build: (exit code, output, sub-phases)."""
            tb = time.monotonic()
            own = {**user_files, **({job.harness_cu: files[job.harness_cu]} if job.harness_cu else {})}
            src_key = cache.digest(*(f"{k}\0{v.decode('utf-8', 'replace')}" for k, v in sorted(own.items())))
            if job.harness_cu is None:
                assert job.build_argv is not None
                bkey = cache.digest("bin", src_key, " ".join(job.build_argv), str(env.get("nvcc_version")))
                res = runner.cached_build(
                    bkey, job.build_argv, job.exe, wd, opts.build_timeout_s, cancel, opts.use_cache
                )
                return res.returncode, res.output, {"total_s": time.monotonic() - tb}
            hb = build_harness(
                runner,
                wd,
                job.harness_cu,
                job.exe,
                opts.arch,
                job.flags,
                nvcc=nvcc,
                nvcc_version=env.get("nvcc_version"),
                sources_key=src_key,
                timeout_s=opts.build_timeout_s,
                cancel=cancel,
                use_cache=opts.use_cache,
            )
            return hb.returncode, hb.output, {**hb.phases, "total_s": time.monotonic() - tb}

        # Every entry builds at once (nvcc is CPU work); each one's ncu run starts as soon as its own build is
        # done and the GPU is free, so the builds of later entries overlap the GPU work of earlier ones.
        tbuild = time.monotonic()
        pool = ThreadPoolExecutor(
            max_workers=max(1, min(len(jobs), 4)), thread_name_prefix="kernellsp-profile-build"
        )
        try:
            futures = [pool.submit(build, job) for job in jobs]
            report_progress("building " + ", ".join(j.label for j in jobs), 5)
            for i, (job, fut) in enumerate(zip(jobs, futures, strict=True)):
                label = job.label
                rc, output, bphases = fut.result()
                phases[f"build_{label}_s"] = bphases.pop("total_s")
                phases.update({f"build_{label}_{k}": v for k, v in bphases.items()})
                if rc != 0:
                    raise ProfileError(f"building {label} for profiling failed: {_tail(output, 6)}", "build")
                if i == 0:
                    phases["build_s"] = time.monotonic() - tbuild
                    if opts.gpu_not_before is not None:
                        tw = time.monotonic()
                        _wait_until(opts.gpu_not_before, cancel)
                        phases["debounce_wait_s"] = time.monotonic() - tw
                report_progress(f"profiling {label} with ncu", 5 + 90 * (i + 0.5) / len(jobs))
                res, log, fetched, out_name, seconds = _run_ncu(
                    runner, wd, job.run_argv, opts, cancel, local_tmp / label
                )
                phases[f"ncu_{label}_s"] = seconds
                phases["ncu_s"] = phases.get("ncu_s", 0.0) + seconds
                failure = classify_failure(res.output + log)
                if failure is not None:
                    raise ProfileError(str(failure), failure.kind)
                rep = local_tmp / label / out_name
                if rep not in fetched or not rep.is_file():
                    if res.returncode != 0:
                        raise ProfileError(
                            f"{label} failed under ncu (exit {res.returncode}): {_tail(res.output + log, 6)}",
                            "crash",
                        )
                    raise ProfileError(
                        f"ncu profiled no kernel of {label}: {_tail(log or res.output, 4)}", "no_kernels"
                    )
                if res.returncode != 0:
                    notes.append(f"{label} exited {res.returncode} under ncu: {_tail(res.output, 2)}")
                reports.append((label, rep))
        finally:
            # A failed or cancelled profile does not wait for the other entries' builds (cancel kills them).
            pool.shutdown(wait=False, cancel_futures=True)
        findings: list[Finding] = []
        summaries: list[KernelSummary] = []
        specs_by_entry = {b.entry: b for b in valid}
        saved: list[str] = []
        phases["report_s"] = phases["rules_s"] = 0.0
        for label, rep in reports:
            tr = time.monotonic()
            try:
                # SASS text is not needed by the rules; disassembling it costs about a second.
                report = load_report(rep, sass=False)
            except ReportError as exc:
                raise ProfileError(f"cannot read the ncu report of {label}: {exc}", "report") from None
            phases["report_s"] += time.monotonic() - tr
            tr = time.monotonic()
            for kp in report.kernels:
                entry_of.setdefault(kp.name, None if label == "program" else label)
            f, s = profile_findings(report, model, str(path), ruleset, specs_by_entry, entry_of)
            phases["rules_s"] += time.monotonic() - tr
            findings.extend(f)
            summaries.extend(s)
            env.setdefault("report_ncu_version", report.ncu_version)
            env.setdefault("clocks_under_ncu_hz", report.sm_clock_hz)
            env.setdefault("device", device_facts(report))
        phases["total_s"] = time.monotonic() - t0
        env = {**env, "phases": phases}
        findings.sort(key=lambda f: (-f.impact, f.range.start_line, f.code))
        outcome = ProfileOutcome(
            path=str(path),
            findings=findings,
            kernels=summaries,
            environment=env,
            notes=notes,
            wall_s=time.monotonic() - t0,
        )
        if opts.use_cache:
            cache.put("profile", key, outcome.to_dict())
        if opts.save_report_dir is not None:
            # After the cache: a bad destination must not cost the profile itself.
            try:
                opts.save_report_dir.mkdir(parents=True, exist_ok=True)
                for label, rep in reports:
                    dest = opts.save_report_dir / f"{path.stem}.{label}.ncu-rep"
                    shutil.copy2(rep, dest)
                    saved.append(str(dest))
            except OSError as exc:
                notes.append(f"could not keep the reports in {opts.save_report_dir}: {exc.strerror or exc}")
            outcome.reports = saved
        report_progress("done", 100)
        return outcome
    finally:
        runner.cleanup(wd)
        shutil.rmtree(local_tmp, ignore_errors=True)


@dataclass
class _Job:
    """One thing to profile: a spec'd entry's harness (split build) or the program itself."""

    label: str
    entry: str | None
    exe: str
    run_argv: list[str]
    build_argv: list[str] | None = None
    harness_cu: str | None = None
    flags: list[str] = field(default_factory=list)


def _select(
    path: Path, model: SourceModel, opts: ProfileOptions, ws_specs: dict[str, spec.KernelSpec] | None
) -> tuple[list[spec.BoundSpec], bool]:
    """The entries to profile (valid specs, ``--kernel`` applied) and whether the program runs instead."""
    bound, issues = bind_specs(model, ws_specs or {}, None)
    errors = [i for i in issues if i.severity == "error"]
    valid = [
        b
        for b in bound
        if not any(i.severity == "error" for i in spec.validate_against(b, model.function(b.entry), model))
    ]
    if opts.kernels:
        unknown = [k for k in opts.kernels if k not in {b.entry for b in valid}]
        if unknown:
            known = ", ".join(b.entry for b in valid) or "none"
            raise ProfileError(
                f"{path.name}: {', '.join(unknown)}: no valid launch spec for that entry "
                f"(entries with one: {known})",
                "no_spec",
            )
        valid = [b for b in valid if b.entry in opts.kernels]
    program_mode = not valid and model.has_main
    if not valid and not program_mode:
        hint = (
            "fix the spec errors `kernellsp check` reports (KL003)"
            if errors
            else "add a `/* kernellsp ... */` launch spec above an entry (the 'Add launch spec' code action drafts one)"
        )
        raise ProfileError(
            f"{path.name}: nothing to profile: no valid launch spec and no main(); {hint}", "no_spec"
        )
    return valid, program_mode


def profile_key(
    path: Path,
    text: str,
    model: SourceModel,
    valid: list[spec.BoundSpec],
    opts: ProfileOptions,
    env: dict[str, Any],
) -> str:
    """The profile cache key: the content (file, local includes, specs), what is collected, and the GPU and tools."""
    return cache.digest(
        PROFILE_VERSION,
        text,
        *(spec.spec_to_toml(b.spec, True) for b in valid),
        opts.arch,
        " ".join(opts.sections),
        str(opts.deep),
        opts.deep_set,
        str(opts.seed),
        str(opts.shape),
        str(env.get("gpu")),
        str(env.get("driver")),
        str(env.get("ncu_version")),
        str(env.get("nvcc_version")),
        *(p.read_bytes().decode("utf-8", "replace") for p in local_includes(model, path)),
    )


def cached_profile(
    path: Path,
    text: str,
    runner: Runner,
    options: ProfileOptions | None = None,
    ws_specs: dict[str, spec.KernelSpec] | None = None,
) -> ProfileOutcome | None:
    """The cached outcome of :func:`profile_file` for exactly this content, or ``None``; never builds or runs.

    The editor asks this first on every save: an unchanged file is answered at once, without the debounce.
    The runner's identity comes from its own cache (:func:`runner_environment`); when that has expired the
    answer is ``None`` rather than a query of the GPU host.
    """
    opts = options or ProfileOptions()
    if not opts.use_cache or opts.save_report_dir is not None:
        return None
    env = cache.get("env", cache.digest("env", runner.name))
    if env is None:
        return None
    model = parse_source(text, str(path))
    try:
        valid, _ = _select(path, model, opts, ws_specs)
    except ProfileError:
        return None
    hit = cache.get("profile", profile_key(path, text, model, valid, opts, env))
    if hit is None:
        return None
    outcome = ProfileOutcome.from_dict(hit)
    outcome.cached = True
    return outcome


def _wait_until(deadline: float, cancel: threading.Event | None) -> None:
    """Sleep until ``time.monotonic() >= deadline``; raises :class:`Cancelled` as soon as ``cancel`` is set."""
    from kernellsp.build.nvcc import Cancelled

    while (left := deadline - time.monotonic()) > 0:
        if cancel is not None:
            if cancel.wait(min(left, 0.05)):
                raise Cancelled("profile (debounce)")
        else:
            time.sleep(left)


def _run_ncu(
    runner: Runner,
    wd: str,
    run_argv: list[str],
    opts: ProfileOptions,
    cancel: threading.Event | None,
    dest: Path,
) -> tuple[Any, str, list[Path], str, float]:
    """Run one ncu command on the GPU; returns (result, ncu log, fetched files, report name, seconds)."""
    tn = time.monotonic()
    res = runner.run(run_argv, wd, opts.timeout_s, cancel, gpu_lock=True)
    seconds = time.monotonic() - tn
    out_name = run_argv[run_argv.index("--export") + 1] + ".ncu-rep"
    fetched = runner.get(wd, [out_name, "ncu.log"], dest)
    log_path = dest / "ncu.log"
    log = log_path.read_text(errors="replace") if log_path.is_file() else ""
    return res, log, fetched, out_name, seconds


def _tail(text: str, n: int) -> str:
    lines = [ln for ln in text.strip().splitlines() if ln.strip() and not ln.startswith("==PROF==")]
    return " | ".join(lines[-n:]) if lines else "(no output)"


def local_gpu_problem() -> str | None:
    """Why this host cannot profile (no driver / no GPU / no ncu), or ``None`` when it can."""
    from kernellsp.build import toolchain

    gpu = toolchain.query_gpu()
    if isinstance(gpu, str):
        return gpu
    if toolchain.find_tool("ncu") is None:
        return "ncu not found: " + toolchain.INSTALL_HINTS["ncu"]
    return None


#: Failures of the GPU host rather than of one file.
_HOST_FAILURES = frozenset({"unreachable", "no_gpu", "counters", "no_ncu", "no_nvcc", "profiler"})


def profile_to_findings_for_check(
    paths: list[Path],
    runner: Runner,
    options: ProfileOptions,
    ruleset: rules.RuleSet,
    progress: Progress | None = None,
    cancel: threading.Event | None = None,
) -> tuple[list[ProfileOutcome], list[str]]:
    """Profile each file that has something to profile; files without specs or main are skipped."""
    outcomes: list[ProfileOutcome] = []
    notes: list[str] = []
    env: dict[str, Any] | None = None
    for p in paths:
        try:
            text = p.read_text(encoding="utf-8", errors="replace")
        except OSError as exc:
            notes.append(f"{p}: cannot read: {exc.strerror or exc}")
            continue
        model = parse_source(text, str(p))
        root = spec.find_workspace_root(p)
        ws_specs = spec.load_workspace_specs(root)[0] if root else {}
        if not (model.spec_blocks or model.has_main or any(model.function(e) for e in ws_specs)):
            continue
        try:
            if env is None:
                env = runner_environment(runner)
            outcomes.append(profile_file(p, text, runner, options, ruleset, ws_specs, cancel, progress, env))
        except (ProfileError, RunnerError) as exc:
            if exc.kind in _HOST_FAILURES:
                # The same failure would repeat for every other file: say it once and stop.
                notes.append(f"{p}: profiling failed: {exc}")
                break
            notes.append(f"{p}: profiling skipped: {exc}")
    return outcomes, notes


def format_outcome(outcome: ProfileOutcome, label: str, top: int = 5) -> str:
    """The human report of a profile (the CLI prints it; the editor shows it as "Show profile report")."""
    env = outcome.environment
    clock = float(env.get("clocks_under_ncu_hz") or 0) / 1e9
    out = [
        f"{label}: {env.get('gpu', '?')} (driver {env.get('driver', '?')}, ncu {env.get('ncu_version', '?')}, "
        f"SM clock under ncu {clock:.2f} GHz){' [cached]' if outcome.cached else ''}; wall {outcome.wall_s:.1f} s"
    ]
    for k in outcome.kernels:
        dur = f"{k.duration_ns / 1000:.1f} us" if k.duration_ns else "?"
        dram = f"{k.dram_pct:.0f}% of DRAM peak" if k.dram_pct is not None else "DRAM ?"
        fp32 = f"{k.fp32_pct:.1f}% of FP32 peak" if k.fp32_pct is not None else "FP32 ?"
        entry = f" (entry {k.entry})" if k.entry and k.entry != k.name else ""
        out.append(f"\n{k.name}{entry}: {dur}, {dram}, {fp32}; {k.bottleneck}")
        for f in [f for f in outcome.findings if f.kernel == k.name][:top]:
            out.append(f"  {f.range.start_line + 1:>5}: {f.severity.value} {f.code} {f.message}")
        if k.hot_lines:
            hl = ", ".join(
                f"{h['line']} ({100 * h['share']:.0f}% {h['stall'] or ''})".replace(" )", ")")
                for h in k.hot_lines[:5]
            )
            out.append(f"  hottest lines: {hl}")
    return "\n".join(out)


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
