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

import os
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
from kernellsp.findings import Finding
from kernellsp.profile.environment import device_facts, runner_environment
from kernellsp.profile.findings import (
    KernelSummary,
    profile_findings,
)
from kernellsp.profile.outcome import ProfileError, ProfileOptions, ProfileOutcome
from kernellsp.rules import engine as rules
from kernellsp.run.harness.cubin import CUBIN_FAILURE, cubin_compile_command, cubin_unsupported
from kernellsp.run.process import classify_failure
from kernellsp.run.runner import Runner
from kernellsp.source import spec
from kernellsp.source.model import SourceModel, parse_source

#: Part of the cache key: "profile-2" added per-line stall shares and the device facts (the HTML report).
PROFILE_VERSION = "profile-2"
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


def _plan_jobs(
    path: Path,
    model: SourceModel,
    valid: list[spec.BoundSpec],
    program_mode: bool,
    opts: ProfileOptions,
    nvcc: str,
    ncu: str,
    files: dict[str, bytes],
    notes: list[str],
    runner_name: str,
) -> list[_Job]:
    """The builds and ncu runs to do: the program itself, or one harness per entry (added to ``files``)."""
    from kernellsp.run import harness as hz

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
        device_only = (
            opts.device_only
            and os.environ.get("KERNELLSP_NO_CUBIN") != "1"
            and runner_name not in _CUBIN_REFUSED
        )
        for b in valid:
            try:
                plan = hz.plan_harness(model, b.spec, b.entry)
            except hz.HarnessError as exc:
                notes.append(f"{b.entry}: {exc}")
                continue
            hname = f"harness_{b.entry}.cu"
            # The split build's entry unit: the harness runtime is a shared object compiled once per toolchain.
            files[hname] = hz.generate_harness(plan, f"src/{path.name}", split=True).encode()
            job = _Job(b.entry, b.entry, f"h_{b.entry}", [], harness_cu=hname, flags=list(b.spec.flags))
            if device_only and cubin_unsupported(plan, model, b.spec.flags) is None:
                # The entry unit above compiles to the cubin; the host side has no user code (built once per plan).
                job.host_cu = f"hostharness_{b.entry}.cu"
                files[job.host_cu] = hz.generate_harness(plan, f"src/{path.name}", cubin=True).encode()
            job.run_argv = _harness_ncu_argv(ncu, opts, job)
            jobs.append(job)
    return jobs


def _harness_ncu_argv(ncu: str, opts: ProfileOptions, job: _Job) -> list[str]:
    """ncu over the entry's harness in profile mode (the device-only build's host harness and its cubin, when
    ``job.host_cu`` is set)."""
    exe = f"hc_{job.label}" if job.host_cu else job.exe
    cubin = ["--cubin", f"{job.label}.cubin"] if job.host_cu else []
    return [
        *_ncu_argv(ncu, opts, f"prof_{job.label}"),
        "--profile-from-start",
        "off",
        f"./{exe}",
        *cubin,
        "--mode",
        "profile",
        "--shape",
        str(opts.shape),
        "--seed",
        str(opts.seed),
        "--out",
        f"out_{job.label}",
    ]


def _ncu_report(label: str, res: Any, log: str, fetched: list[Path], rep: Path, notes: list[str]) -> Path:
    """The report one ncu run wrote, or the :class:`ProfileError` that says why there is none."""
    failure = classify_failure(res.output + log)
    if failure is not None:
        raise ProfileError(str(failure), failure.kind)
    if rep not in fetched or not rep.is_file():
        if res.returncode != 0:
            raise ProfileError(
                f"{label} failed under ncu (exit {res.returncode}): {_tail(res.output + log, 6)}",
                "crash",
            )
        raise ProfileError(f"ncu profiled no kernel of {label}: {_tail(log or res.output, 4)}", "no_kernels")
    if res.returncode != 0:
        notes.append(f"{label} exited {res.returncode} under ncu: {_tail(res.output, 2)}")
    return rep


def _keep_reports(dest_dir: Path, path: Path, reports: list[tuple[str, Path]], notes: list[str]) -> list[str]:
    """Copy the ncu reports to ``dest_dir``; the copies made (a failure is a note, not an error)."""
    saved: list[str] = []
    try:
        dest_dir.mkdir(parents=True, exist_ok=True)
        for label, rep in reports:
            dest = dest_dir / f"{path.stem}.{label}.ncu-rep"
            shutil.copy2(rep, dest)
            saved.append(str(dest))
    except OSError as exc:
        notes.append(f"could not keep the reports in {dest_dir}: {exc.strerror or exc}")
    return saved


def _read_reports(
    reports: list[tuple[str, Path]],
    model: SourceModel,
    path: Path,
    ruleset: rules.RuleSet,
    valid: list[spec.BoundSpec],
    entry_of: dict[str, str | None],
    env: dict[str, Any],
    phases: dict[str, float],
) -> tuple[list[Finding], list[KernelSummary]]:
    """Each ncu report read and its kernels' findings evaluated (the report's device facts go into ``env``)."""
    from kernellsp.profile import ReportError, load_report

    findings: list[Finding] = []
    summaries: list[KernelSummary] = []
    specs_by_entry = {b.entry: b for b in valid}
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
    return findings, summaries


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
        jobs = _plan_jobs(path, model, valid, program_mode, opts, nvcc, ncu, files, notes, runner.name)
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
            if job.host_cu is not None:
                rc, output, sub = _build_device_only(runner, wd, job, files, src_key, opts, nvcc, env, cancel)
                return rc, output, {**sub, "total_s": time.monotonic() - tb}
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
                refusal = _cubin_refusal(runner, wd, job, res, fetched, local_tmp / label / out_name)
                if refusal is not None:
                    res, log, fetched, out_name, more = _usual_build_instead(
                        runner, wd, job, refusal, build, ncu, opts, cancel, local_tmp / label, notes, phases
                    )
                    seconds += more
                phases[f"ncu_{label}_s"] = seconds
                phases["ncu_s"] = phases.get("ncu_s", 0.0) + seconds
                reports.append(
                    (label, _ncu_report(label, res, log, fetched, local_tmp / label / out_name, notes))
                )
        finally:
            # A failed or cancelled profile does not wait for the other entries' builds (cancel kills them).
            pool.shutdown(wait=False, cancel_futures=True)
        findings, summaries = _read_reports(reports, model, path, ruleset, valid, entry_of, env, phases)
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
            outcome.reports = _keep_reports(opts.save_report_dir, path, reports, notes)
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
    #: The device-only build's host unit (no user code); ``harness_cu`` is then compiled to ``<label>.cubin``.
    host_cu: str | None = None


#: Runner hosts whose driver cannot run a device-only build (no cuModuleEnumerateFunctions): the usual build there.
_CUBIN_REFUSED: set[str] = set()


def _build_device_only(
    runner: Runner,
    wd: str,
    job: _Job,
    files: dict[str, bytes],
    src_key: str,
    opts: ProfileOptions,
    nvcc: str,
    env: dict[str, Any],
    cancel: threading.Event | None,
) -> tuple[int, str, dict[str, float]]:
    """The cubin of the entry unit and the host harness (from the binary cache after the first build) at once."""
    from kernellsp.run.harness_build import build_harness

    assert job.host_cu is not None and job.harness_cu is not None
    nvcc_version = str(env.get("nvcc_version"))
    host_key = cache.digest(job.host_cu, files[job.host_cu].decode("utf-8", "replace"))
    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="kernellsp-host-harness") as pool:
        host = pool.submit(
            build_harness,
            runner,
            wd,
            job.host_cu,
            f"hc_{job.label}",
            opts.arch,
            job.flags,
            nvcc=nvcc,
            nvcc_version=nvcc_version,
            sources_key=host_key,
            timeout_s=opts.build_timeout_s,
            cancel=cancel,
            use_cache=opts.use_cache,
        )
        t = time.monotonic()
        cubin = f"{job.label}.cubin"
        argv = cubin_compile_command(job.harness_cu, cubin, opts.arch, job.flags, nvcc)
        neutral = cubin_compile_command(job.harness_cu, "OUT.cubin", opts.arch, job.flags, nvcc)
        key = cache.digest("cubin", src_key, " ".join(neutral), nvcc_version)
        res = runner.cached_build(key, argv, cubin, wd, opts.build_timeout_s, cancel, opts.use_cache)
        phases = {"cubin_s": time.monotonic() - t}
        hb = host.result()
    phases.update({f"host_{k}": v for k, v in hb.phases.items()})
    if res.returncode != 0:
        return res.returncode, res.output, phases
    return hb.returncode, hb.output, phases


def _usual_build_instead(
    runner: Runner,
    wd: str,
    job: _Job,
    refusal: str,
    build: Callable[[_Job], tuple[int, str, dict[str, float]]],
    ncu: str,
    opts: ProfileOptions,
    cancel: threading.Event | None,
    dest: Path,
    notes: list[str],
    phases: dict[str, float],
) -> tuple[Any, str, list[Path], str, float]:
    """After the harness could not use the cubin (a driver before CUDA 12.4, another parameter list than the
    source text's): the usual build of the same entry unit, and ncu again. Only this entry pays for it."""
    label = job.label
    notes.append(f"{label}: the device-only build could not run ({refusal}); built the usual way")
    if "driver" in refusal:
        _CUBIN_REFUSED.add(runner.name)
    job.host_cu = None
    job.run_argv = _harness_ncu_argv(ncu, opts, job)
    rc, output, bphases = build(job)
    phases[f"build_{label}_usual_s"] = bphases.pop("total_s")
    phases.update({f"build_{label}_usual_{k}": v for k, v in bphases.items()})
    if rc != 0:
        raise ProfileError(f"building {label} for profiling failed: {_tail(output, 6)}", "build")
    return _run_ncu(runner, wd, job.run_argv, opts, cancel, dest)


def _cubin_refusal(
    runner: Runner, wd: str, job: _Job, res: Any, fetched: list[Path], rep: Path
) -> str | None:
    """The harness's message when a device-only run failed because it could not use the cubin; else ``None``."""
    if job.host_cu is None or (res.returncode == 0 and rep in fetched):
        return None
    from kernellsp.run import harness as hz

    out = f"out_{job.label}"
    if not runner.get(wd, [f"{out}/result.json"], rep.parent):
        return None
    try:
        error = hz.read_result(rep.parent / out).error or ""
    except hz.HarnessError:
        return None
    return error if error.startswith(CUBIN_FAILURE) else None


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
