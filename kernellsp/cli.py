"""Command-line interface (typer): a thin adapter over the core.

Exit codes follow ruff: 0 no findings at or above ``--fail-on``, 1 findings, 2 usage or
environment errors. Data goes to stdout (text, JSON, SARIF); progress and notes go to stderr, and
colour is used only on a TTY.
"""

from __future__ import annotations

import os
import sys
from enum import StrEnum
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.markup import escape

from kernellsp import __version__

app = typer.Typer(
    name="kernellsp",
    help="Static and profile-driven findings for CUDA kernels, and verified rewrites.",
    no_args_is_help=True,
    pretty_exceptions_show_locals=False,
    add_completion=False,
)
rules_app = typer.Typer(help="List the rule matrix or show one rule.", invoke_without_command=True)
app.add_typer(rules_app, name="rules")

# soft_wrap: never re-wrap messages at the console width (paths and CI logs must stay on one line).
err_console = Console(stderr=True, highlight=False, soft_wrap=True)


class OutputFormat(StrEnum):
    text = "text"
    json = "json"
    sarif = "sarif"


class FailOn(StrEnum):
    error = "error"
    warning = "warning"
    info = "info"
    hint = "hint"
    never = "never"


def _version_callback(value: bool) -> None:
    if value:
        typer.echo(f"kernellsp {__version__}")
        raise typer.Exit(0)


@app.callback()
def _root(
    version: Annotated[bool, typer.Option("--version", callback=_version_callback, is_eager=True,
                                          help="Print the version and exit.")] = False,
) -> None:
    """kernellsp: make CUDA kernels fast and keep them correct."""


def _fail(message: str, code: int = 2) -> typer.Exit:
    if err_console.is_terminal:
        err_console.print(f"[bold red]error:[/] {escape(message)}")
    else:
        err_console.print(f"error: {message}", markup=False)
    return typer.Exit(code)


@app.command()
def check(
    paths: Annotated[list[Path], typer.Argument(help="CUDA files or directories.", show_default=False)],
    output_format: Annotated[OutputFormat, typer.Option("--format", "-f", help="Output format.")] = OutputFormat.text,
    arch: Annotated[str, typer.Option(help="Target architecture for the build (sm_90, sm_80, ...).")] = "sm_90",
    fail_on: Annotated[FailOn, typer.Option(help="Lowest severity that makes the exit code 1.")] = FailOn.info,
    no_cache: Annotated[bool, typer.Option("--no-cache", help="Rebuild even if the content hash is cached.")] = False,
    no_build: Annotated[bool, typer.Option("--no-build", help="Source-level rules only; do not run nvcc.")] = False,
    show_fix: Annotated[bool, typer.Option("--show-fix", help="Print each finding's fix hint (text format).")] = False,
    jobs: Annotated[int | None, typer.Option("--jobs", "-j", min=1, help="Parallel builds (default: CPU count).")] = None,
    output: Annotated[Path | None, typer.Option("--output", "-o", help="Write the report to a file.")] = None,
    profile: Annotated[bool, typer.Option("--profile/--no-profile",
                                          help="Also profile spec'd entries under Nsight Compute.")] = False,
    gpu_host: Annotated[str | None, typer.Option("--gpu-host", help="Profile on user@host over ssh.")] = None,
    deep: Annotated[bool, typer.Option("--deep", help="Profile with the deep section set (slow).")] = False,
) -> None:
    """Report static findings (registers, spills, occupancy, hazards) for CUDA files."""
    from kernellsp.check import CheckError, CheckOptions, check_paths
    from kernellsp.occupancy import ARCHS
    from kernellsp.output import format_json, format_sarif, format_text
    from kernellsp.rules import RuleError, load_rules

    if arch.lower().replace("compute_", "sm_") not in ARCHS:
        raise _fail(f"--arch {arch}: unknown architecture (known: {', '.join(ARCHS)})")
    options = CheckOptions(arch=arch, use_cache=not no_cache, build=not no_build, jobs=jobs)
    interactive = err_console.is_terminal and output_format == OutputFormat.text
    try:
        if interactive:
            with err_console.status("checking…") as status:
                report = check_paths(paths, options, progress=lambda d, t, p: status.update(f"checked {d}/{t}: {p}"))
        else:
            report = check_paths(paths, options)
    except CheckError as exc:
        raise _fail(str(exc)) from None
    except RuleError as exc:
        raise _fail(f"malformed rule file: {exc}") from None
    if profile:
        _add_profile_findings(report, paths, arch, gpu_host, deep, no_cache, interactive)
    for note in report.notes:
        err_console.print(f"note: {note}", markup=False)
    if output_format == OutputFormat.json:
        text = format_json(report)
    elif output_format == OutputFormat.sarif:
        workspace = None
        from kernellsp.spec import find_workspace_root

        workspace = find_workspace_root(Path(paths[0]))
        text = format_sarif(report, load_rules(workspace))
    else:
        colour = output is None and sys.stdout.isatty() and "NO_COLOR" not in os.environ
        text = format_text(report, colour=colour, show_fix=show_fix)
    if output is not None:
        try:
            output.write_text(text, encoding="utf-8")
        except OSError as exc:
            raise _fail(f"cannot write {output}: {exc.strerror or exc}") from None
    else:
        sys.stdout.write(text)
        sys.stdout.flush()
    if report.errors:
        raise typer.Exit(2)
    if fail_on != FailOn.never:
        from kernellsp.findings import Severity

        threshold = Severity(fail_on.value).rank
        if any(f.severity.rank >= threshold for f in report.findings):
            raise typer.Exit(1)
    raise typer.Exit(0)


def _make_runner(gpu_host: str | None) -> tuple[object | None, str | None]:
    """The runner for profiling, or ``(None, reason)`` when this host cannot profile."""
    from kernellsp.profiling import local_gpu_problem
    from kernellsp.runner import RunnerError, make_runner
    from kernellsp.settings import SettingsError, load_settings
    from kernellsp.spec import find_workspace_root

    try:
        settings = load_settings(find_workspace_root(Path.cwd()))
    except SettingsError as exc:
        return None, str(exc)
    host = gpu_host or settings.gpu_host
    if not host:
        problem = local_gpu_problem()
        if problem is not None:
            return None, f"no GPU here ({problem}) and no --gpu-host"
    try:
        return make_runner(settings.runner, host), None
    except RunnerError as exc:
        return None, str(exc)


def _add_profile_findings(report: object, paths: list[Path], arch: str, gpu_host: str | None, deep: bool,
                          no_cache: bool, interactive: bool) -> None:  # fmt: skip
    from kernellsp.check import CheckReport
    from kernellsp.profiling import ProfileOptions, profile_to_findings_for_check
    from kernellsp.rules import load_rules
    from kernellsp.spec import find_workspace_root

    assert isinstance(report, CheckReport)
    runner, problem = _make_runner(gpu_host)
    if runner is None:
        report.notes.append(f"profiling skipped: {problem}; static findings only")
        return
    files = [Path(fr.path) for fr in report.files if fr.error is None]
    opts = ProfileOptions(arch=arch, deep=deep, use_cache=not no_cache)
    ruleset = load_rules(find_workspace_root(Path(paths[0])))
    if interactive:
        with err_console.status("profiling…") as status:
            outcomes, notes = profile_to_findings_for_check(
                files, runner, opts, ruleset, progress=lambda m, _p: status.update(f"profiling: {m}"))  # type: ignore[arg-type]
    else:
        outcomes, notes = profile_to_findings_for_check(files, runner, opts, ruleset)  # type: ignore[arg-type]
    report.notes.extend(notes)
    by_path = {str(Path(fr.path)): fr for fr in report.files}
    for oc in outcomes:
        fr = by_path.get(str(Path(oc.path)))
        if fr is not None:
            fr.findings.extend(oc.findings)
            fr.findings.sort(key=lambda f: f.sort_key())


@app.command("profile")
def profile_cmd(
    file: Annotated[Path, typer.Argument(help="A CUDA file with launch specs (or a main()).", show_default=False)],
    kernel: Annotated[list[str] | None, typer.Option("--kernel", "-k", help="Only these spec'd entries.")] = None,
    output_format: Annotated[OutputFormat, typer.Option("--format", "-f", help="text or json.")] = OutputFormat.text,
    gpu_host: Annotated[str | None, typer.Option("--gpu-host", help="Profile on user@host over ssh.")] = None,
    deep: Annotated[bool, typer.Option("--deep", help="Use the deep section set (ncu --set full; slow).")] = False,
    save_report: Annotated[Path | None, typer.Option("--save-report", help="Keep the .ncu-rep files here.")] = None,
    arch: Annotated[str, typer.Option(help="Target architecture for the build.")] = "sm_90",
    no_cache: Annotated[bool, typer.Option("--no-cache", help="Profile even if a cached result exists.")] = False,
    top: Annotated[int, typer.Option(help="Findings to show per kernel.")] = 5,
) -> None:
    """Profile FILE's kernels under Nsight Compute: duration, roofline position, bottleneck, findings, hot lines."""
    import json

    from kernellsp.build import Cancelled
    from kernellsp.check import read_source
    from kernellsp.profiling import ProfileError, ProfileOptions, profile_file
    from kernellsp.runner import Runner, RunnerError
    from kernellsp.spec import find_workspace_root, load_workspace_specs

    if not file.exists():
        raise _fail(f"{file}: no such file")
    text, err = read_source(file)
    if text is None:
        raise _fail(f"{file}: {err}")
    runner, problem = _make_runner(gpu_host)
    if runner is None:
        raise _fail(f"cannot profile: {problem}")
    assert isinstance(runner, Runner)
    root = find_workspace_root(file)
    ws_specs = load_workspace_specs(root)[0] if root else {}
    opts = ProfileOptions(arch=arch, deep=deep, use_cache=not no_cache, save_report_dir=save_report,
                          kernels=kernel or None)  # fmt: skip
    interactive = err_console.is_terminal and output_format == OutputFormat.text
    try:
        if interactive:
            with err_console.status("profiling…") as status:
                outcome = profile_file(file, text, runner, opts, ws_specs=ws_specs,
                                       progress=lambda m, _p: status.update(f"profiling: {m}"))  # fmt: skip
        else:
            outcome = profile_file(file, text, runner, opts, ws_specs=ws_specs)
    except (ProfileError, RunnerError) as exc:
        raise _fail(str(exc)) from None
    except Cancelled:
        raise _fail("cancelled", 130) from None
    if output_format == OutputFormat.json:
        typer.echo(json.dumps(outcome.to_dict(), indent=2, sort_keys=True, default=str))
        raise typer.Exit(0)
    env = outcome.environment
    typer.echo(f"{file}: {env.get('gpu', '?')} (driver {env.get('driver', '?')}, ncu {env.get('ncu_version', '?')}, "
               f"SM clock under ncu {float(env.get('clocks_under_ncu_hz') or 0) / 1e9:.2f} GHz)"
               f"{' [cached]' if outcome.cached else ''}; wall {outcome.wall_s:.1f} s")  # fmt: skip
    for k in outcome.kernels:
        dur = f"{k.duration_ns / 1000:.1f} us" if k.duration_ns else "?"
        dram = f"{k.dram_pct:.0f}% of DRAM peak" if k.dram_pct is not None else "DRAM ?"
        fp32 = f"{k.fp32_pct:.1f}% of FP32 peak" if k.fp32_pct is not None else "FP32 ?"
        typer.echo(f"\n{k.name}{f' (entry {k.entry})' if k.entry and k.entry != k.name else ''}: {dur}, {dram}, "
                   f"{fp32}; {k.bottleneck}")  # fmt: skip
        mine = [f for f in outcome.findings if f.kernel == k.name]
        for f in mine[:top]:
            typer.echo(f"  {f.range.start_line + 1:>5}: {f.severity.value} {f.code} {f.message}")
        if k.hot_lines:
            hl = ", ".join(f"{h['line']} ({100 * h['share']:.0f}% {h['stall'] or ''})".replace(" )", ")")
                           for h in k.hot_lines[:5])  # fmt: skip
            typer.echo(f"  hottest lines: {hl}")
    for n in outcome.notes:
        err_console.print(f"note: {n}", markup=False)
    if outcome.reports:
        typer.echo("\nreports: " + ", ".join(outcome.reports))
    raise typer.Exit(0)


@rules_app.callback()
def rules_list(ctx: typer.Context) -> None:
    """List every rule: code, severity, scope and title."""
    if ctx.invoked_subcommand is not None:
        return
    from kernellsp.rules import RuleError, load_rules
    from kernellsp.spec import find_workspace_root

    try:
        rs = load_rules(find_workspace_root(Path.cwd()))
    except RuleError as exc:
        raise _fail(f"malformed rule file: {exc}") from None
    for r in rs.sorted():
        typer.echo(f"{r.code}  {r.severity.value:<7}  {r.scope:<6}  {r.source:<7}  {r.name}: {r.title}")


@rules_app.command("show")
def rules_show(code: Annotated[str, typer.Argument(help="Rule code, e.g. KL101.")]) -> None:
    """Print one rule: metadata, condition, message, fix and guidance."""
    from kernellsp.rules import RuleError, load_rules
    from kernellsp.spec import find_workspace_root

    try:
        rs = load_rules(find_workspace_root(Path.cwd()))
    except RuleError as exc:
        raise _fail(f"malformed rule file: {exc}") from None
    r = rs.get(code.upper())
    if r is None:
        raise _fail(f"no rule {code!r} (see `kernellsp rules`)")
    lines = [
        f"{r.code} {r.name}: {r.title}",
        f"  severity: {r.severity.value}   scope: {r.scope}   category: {r.category}   source: {r.source}",
        f"  when:     {r.when}" if r.when else f"  emitter:  {r.emitter}",
        f"  message:  {r.message}",
        f"  fix:      {r.fix}",
        f"  file:     {r.origin}",
        "",
        r.guidance.strip(),
    ]
    if r.references:
        lines += ["", *[f"  see {u}" for u in r.references]]
    typer.echo("\n".join(lines))


@app.command()
def doctor() -> None:
    """Report nvcc, ptxas, nvdisasm, ncu, the GPU, counter permission and LLM settings, with fixes."""
    from kernellsp.doctor import run_checks
    from kernellsp.spec import find_workspace_root

    checks = run_checks(find_workspace_root(Path.cwd()))
    mark = {"ok": "ok  ", "missing": "MISS", "warn": "warn"}
    for c in checks:
        typer.echo(f"[{mark[c.status]}] {c.name:<18} {c.detail}")
        if c.fix and c.status != "ok":
            typer.echo(f"       fix: {c.fix}")
    raise typer.Exit(1 if any(c.required and c.status != "ok" for c in checks) else 0)


cache_app = typer.Typer(help="Manage the content-hash cache.")
app.add_typer(cache_app, name="cache")


@cache_app.command("clear")
def cache_clear() -> None:
    """Remove every cached build and profile."""
    from kernellsp import cache

    cache.clear()
    typer.echo(f"cleared {cache.cache_dir()}")


def main() -> None:
    """Console-script entry: run the app; unexpected errors become one line and exit code 2."""
    try:
        app()
    except SystemExit:
        raise
    except KeyboardInterrupt:
        err_console.print("interrupted")
        sys.exit(130)
    except Exception as exc:  # the last line of defence: never a traceback for users
        if os.environ.get("KERNELLSP_DEBUG"):
            raise
        err_console.print(f"kernellsp: internal error: {type(exc).__name__}: {exc} "
                          "(set KERNELLSP_DEBUG=1 for the traceback and please report it)", markup=False)  # fmt: skip
        sys.exit(2)
