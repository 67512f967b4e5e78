"""The commands' long runs as the command line shows them: the optimize loop, ``optimize --all``'s fan-out,
a profile, a verification and ``check --profile``'s profiling, each with a one-line rich status on a terminal,
its failures turned into usage errors (:func:`kernellsp.cli_support._fail`)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer

from kernellsp.cli_support import (
    _check_html_target,
    _fail,
    _make_runner,
    _require_runner,
    _settings,
    err_console,
)
from kernellsp.report.text import optimize_text

if TYPE_CHECKING:
    from kernellsp.settings import Settings


def _run_check(paths: list[Path], options: Any, interactive: bool) -> Any:
    """``check``'s pipeline over the paths, with a status line when ``interactive``; a usage problem or a
    malformed rule file is a usage error."""
    from kernellsp.check import CheckError, check_paths
    from kernellsp.rules.engine import RuleError

    try:
        if interactive:
            with err_console.status("checking…") as status:
                return check_paths(
                    paths, options, progress=lambda d, t, p: status.update(f"checked {d}/{t}: {p}")
                )
        else:
            return check_paths(paths, options)
    except CheckError as exc:
        raise _fail(str(exc)) from None
    except RuleError as exc:
        raise _fail(f"malformed rule file: {exc}") from None


def _add_profile_findings(
    report: object,
    paths: list[Path],
    settings: Settings,
    arch: str,
    deep: bool,
    no_cache: bool,
    interactive: bool,
) -> None:
    from kernellsp.check import CheckReport
    from kernellsp.profile.batch import profile_to_findings_for_check
    from kernellsp.profile.ncu import ProfileOptions
    from kernellsp.rules.engine import load_rules
    from kernellsp.source.spec import find_workspace_root

    assert isinstance(report, CheckReport)
    runner, problem = _make_runner(settings, f"check --profile of {', '.join(p.name for p in paths)}")
    if runner is None:
        report.notes.append(f"profiling skipped: {problem}; static findings only")
        return
    files = [Path(fr.path) for fr in report.files if fr.error is None]
    opts = ProfileOptions.from_settings(settings, arch=arch, deep=deep, use_cache=not no_cache)
    ruleset = load_rules(find_workspace_root(Path(paths[0])))
    if interactive:
        with err_console.status("profiling…") as status:
            outcomes, notes = profile_to_findings_for_check(
                files,
                runner,  # type: ignore[arg-type]
                opts,
                ruleset,
                progress=lambda m, _p: status.update(f"profiling: {m}"),
            )
    else:
        outcomes, notes = profile_to_findings_for_check(files, runner, opts, ruleset)  # type: ignore[arg-type]
    report.notes.extend(notes)
    by_path = {str(Path(fr.path)): fr for fr in report.files}
    for oc in outcomes:
        fr = by_path.get(str(Path(oc.path)))
        if fr is not None:
            fr.findings.extend(oc.findings)
            fr.findings.sort(key=lambda f: f.sort_key())


class _LoopDisplay:
    """A one-line rich status for the optimize loop: round, candidate, last verdict, best speedup."""

    def __init__(self, status: object | None) -> None:
        self.status = status
        self.best = 1.0
        self.last = ""
        self.cand = ""

    def progress(self, message: str, _pct: float | None) -> None:
        self._show(message)

    def event(self, e: dict[str, object]) -> None:
        kind = e.get("event")
        if kind == "candidate":
            self.cand = f"round {e['round']}, candidate {int(e['index']) + 1}/{e['of']} ({e['description']})"  # type: ignore[call-overload]
        elif kind == "verdict":
            sp = e.get("speedup")
            self.last = f"{e['verdict']}" + (f" {sp:.3f}x" if isinstance(sp, float) else "")
            err_console.print(f"  {self.cand}: {self.last}", markup=False, highlight=False)
        elif kind == "champion":
            self.best = float(e["speedup"])  # type: ignore[arg-type]
            err_console.print(
                f"  new champion: {e['description']} ({self.best:.3f}x over the original)", markup=False
            )
        elif kind == "proposer_error":
            err_console.print(f"  {e['proposer']}: {e['message']}", markup=False)

    def _show(self, message: str) -> None:
        if self.status is not None:
            self.status.update(f"best {self.best:.3f}x | {message}")  # type: ignore[attr-defined]


def _run_optimize_loop(
    file: Path,
    text: str,
    entry: str,
    runner: Any,
    proposers: list[Any],
    opts: Any,
    findings: list[Any],
    json_out: bool,
) -> Any:
    """The loop on one entry, with a one-line status on a terminal; an interrupt or a failure is a usage
    error naming it (no file was changed)."""
    import threading

    from kernellsp.build.nvcc import Cancelled
    from kernellsp.optimize.loop import optimize as run_optimize
    from kernellsp.optimize.result import OptimizeError
    from kernellsp.optimize.verify.gate import VerifyError
    from kernellsp.run.runner import RunnerError

    cancel = threading.Event()
    interactive = err_console.is_terminal and not json_out
    try:
        if interactive:
            with err_console.status("optimizing…") as status:
                disp = _LoopDisplay(status)
                return run_optimize(
                    file,
                    text,
                    entry,
                    runner,
                    proposers,
                    opts,
                    findings,
                    cancel=cancel,
                    progress=disp.progress,
                    on_event=disp.event,
                )
        else:
            disp = _LoopDisplay(None)
            return run_optimize(
                file,
                text,
                entry,
                runner,
                proposers,
                opts,
                findings,
                cancel=cancel,
                on_event=disp.event if not json_out else None,
            )
    except KeyboardInterrupt:
        cancel.set()
        raise _fail("interrupted: no file was changed", 130) from None
    except Cancelled:
        raise _fail("cancelled: no file was changed", 130) from None
    except (OptimizeError, VerifyError, RunnerError) as exc:
        raise _fail(str(exc)) from None


def _echo_optimize_result(
    file: Path, entry: str, result: Any, apply: bool, applied: str | None, json_out: bool
) -> None:
    """The run's outcome on stdout: its summary as JSON, or the verdict with the diff (or the backup) and
    the evidence bundle."""
    import json

    if json_out:
        summary = result.summary()
        summary["applied_backup"] = applied
        typer.echo(json.dumps(summary, indent=2, default=str))
    else:
        typer.echo(optimize_text(file, entry, result, apply, applied))


def _run_fanout(
    jobs: list[Any],
    runner: Any,
    proposers: Any,
    options: Any,
    findings: Any,
    on_done: Any,
    done: list[int],
    json_out: bool,
) -> list[Any]:
    """``optimize --all``'s runs of every entry, with a one-line status on a terminal (``done[0]`` of them
    finished); an interrupt or a failure is a usage error naming it (no file was changed)."""
    import threading

    from kernellsp.build.nvcc import Cancelled
    from kernellsp.optimize import fanout
    from kernellsp.run.runner import RunnerError

    cancel = threading.Event()
    try:
        if err_console.is_terminal and not json_out:
            with err_console.status("optimizing…") as status:

                def progress(job: Any, m: str) -> None:
                    status.update(f"{done[0]}/{len(jobs)} done | {job.path.name}:{job.entry}: {m}")

                return fanout.optimize_all(
                    jobs,
                    runner,
                    proposers,
                    options,
                    findings,
                    cancel,
                    progress,
                    on_done,
                )
        else:
            return fanout.optimize_all(
                jobs,
                runner,
                proposers,
                options,
                findings,
                cancel,
                None,
                on_done,
            )
    except KeyboardInterrupt:
        cancel.set()
        raise _fail("interrupted: no file was changed", 130) from None
    except Cancelled:
        raise _fail("cancelled: no file was changed", 130) from None
    except RunnerError as exc:
        raise _fail(str(exc)) from None


def _run_profile(
    file: Path, text: str, runner: Any, opts: Any, ws_specs: dict[str, Any], interactive: bool
) -> Any:
    """``profile``'s run under Nsight Compute, with a status line when ``interactive``; a failure is a usage
    error naming it."""
    from kernellsp.build.nvcc import Cancelled
    from kernellsp.profile.ncu import ProfileError, profile_file
    from kernellsp.run.runner import RunnerError

    try:
        if interactive:
            with err_console.status("profiling…") as status:
                return profile_file(
                    file,
                    text,
                    runner,
                    opts,
                    ws_specs=ws_specs,
                    progress=lambda m, _p: status.update(f"profiling: {m}"),
                )
        else:
            return profile_file(file, text, runner, opts, ws_specs=ws_specs)
    except (ProfileError, RunnerError) as exc:
        raise _fail(str(exc)) from None
    except Cancelled:
        raise _fail("cancelled", 130) from None


def _run_verify(
    file: Path,
    text: str,
    ctext: str,
    entry: str,
    runner: Any,
    seeds: int,
    min_gain: float,
    json_out: bool,
    *,
    precision: str = "strict",
) -> Any:
    """``verify``'s gates on the candidate, with a status line on a terminal; a failure is a usage error
    naming it."""
    from kernellsp.build.nvcc import Cancelled
    from kernellsp.optimize.verify.gate import VerifyError, VerifyOptions
    from kernellsp.optimize.verify.gate import verify as run_verify
    from kernellsp.run.runner import RunnerError

    try:
        if err_console.is_terminal and not json_out:
            with err_console.status("verifying…") as status:
                return run_verify(
                    file,
                    text,
                    ctext,
                    entry,
                    runner,
                    VerifyOptions(seeds=seeds, min_gain_pct=min_gain, precision=precision),
                    progress=lambda m, _p: status.update(m),
                )
        else:
            return run_verify(
                file,
                text,
                ctext,
                entry,
                runner,
                VerifyOptions(seeds=seeds, min_gain_pct=min_gain, precision=precision),
            )
    except (VerifyError, RunnerError) as exc:
        raise _fail(str(exc)) from None
    except Cancelled:
        raise _fail("cancelled", 130) from None


def _optimize_all(
    paths: list[Path],
    json_out: bool,
    html_out: Path | None,
    proposer: str,
    rounds: int | None,
    candidates: int | None,
    min_gain: float | None,
    seeds: int,
    gpu_host: str | None,
) -> None:
    """``optimize PATH... --all``: every spec'd entry, side by side on the pool (one by one otherwise), then the
    summary table (text, JSON, and an HTML page with --html). Exit 0 when any entry got a verified rewrite."""
    import threading
    import time

    from kernellsp.check import CheckError, CheckOptions, check_text, collect_files
    from kernellsp.optimize import fanout
    from kernellsp.optimize.loop import default_proposers
    from kernellsp.optimize.propose.base import ProposerError
    from kernellsp.optimize.result import OptimizeError, OptimizeOptions
    from kernellsp.optimize.verify.gate import VerifyOptions
    from kernellsp.rules.engine import load_rules
    from kernellsp.source.spec import find_workspace_root

    notes: list[str] = []
    try:
        found = collect_files(paths, notes)
    except CheckError as exc:
        raise _fail(str(exc)) from None
    jobs, more = fanout.find_entries(found)
    for n in notes + more:
        err_console.print(f"note: {n}", markup=False)
    if not jobs:
        raise _fail(
            "no spec'd entry in the given paths: add a /* kernellsp ... */ launch spec above a kernel"
        )
    if html_out is not None:
        _check_html_target(html_out)
    settings = _settings(paths[0], gpu_host)
    runner = _require_runner(settings, "a kernellsp command", "cannot optimize")
    ruleset = load_rules(find_workspace_root(paths[0]))
    try:
        default_proposers(
            settings, ruleset, proposer
        )  # a bad --proposer or LLM setting fails before any work
    except (OptimizeError, ProposerError) as exc:
        raise _fail(str(exc)) from None
    findings_of: dict[Path, list[Any]] = {}
    lock = threading.Lock()

    def findings(job: Any) -> list[Any]:
        with lock:  # one static check per file, however many of its entries run
            if job.path not in findings_of:
                findings_of[job.path] = check_text(job.path, job.text, CheckOptions(), ruleset).findings
            return findings_of[job.path]

    def options(_job: Any) -> OptimizeOptions:
        n = candidates or settings.optimize_candidates
        return OptimizeOptions(
            rounds=rounds or settings.optimize_rounds,
            candidates=n,
            parallel=n,
            min_gain_pct=settings.min_gain_pct if min_gain is None else min_gain,
            verify=VerifyOptions(seeds=seeds, precision=settings.precision),
        )

    done = [0]

    def on_done(o: Any) -> None:
        with lock:
            done[0] += 1
            sp = f" {o.speedup:.2f}x" if o.speedup else ""
            err_console.print(
                f"[{done[0]}/{len(jobs)}] {o.path}:{o.entry}: {o.verdict}{sp} ({o.wall_s:.0f} s)",
                markup=False,
            )

    t0 = time.monotonic()
    outcomes = _run_fanout(
        jobs,
        runner,
        lambda _j: default_proposers(settings, ruleset, proposer),
        options,
        findings,
        on_done,
        done,
        json_out,
    )
    wall = time.monotonic() - t0
    if json_out:
        typer.echo(fanout.summary_json(outcomes, wall, {"runner": runner.name}), nl=False)
    else:
        typer.echo(fanout.summary_text(outcomes, wall), nl=False)
    if html_out is not None:
        html_out.write_text(fanout.summary_html(outcomes, f"kernellsp optimize --all ({runner.name})", wall))
        err_console.print(f"wrote {html_out}", markup=False)
    raise typer.Exit(0 if any(o.accepted for o in outcomes) else 1)
