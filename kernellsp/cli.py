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

from kernellsp import __version__
from kernellsp.cli_commands import (
    run_optimize_command,
    run_profile_command,
    run_spec_draft_command,
    run_verify_command,
)
from kernellsp.cli_runs import (
    _add_profile_findings,
    _run_check,
)
from kernellsp.cli_support import (
    FailOn,
    OutputFormat,
    _fail,
    _hide_redundant_help_types,
    _json_format,
    _make_runner,
    _no_runner,
    _project_options,
    _settings,
    _write_check_report,
    err_console,
    errors_as_json,
)
from kernellsp.report.text import doctor_text, history_text, replay_text, rule_line, rule_text

app = typer.Typer(
    name="kernellsp",
    help="Static and profile-driven findings for CUDA kernels, and verified rewrites.",
    no_args_is_help=True,
    pretty_exceptions_show_locals=False,
    add_completion=False,
)
rules_app = typer.Typer(help="List the rule matrix or show one rule.", invoke_without_command=True)
app.add_typer(rules_app, name="rules")


_hide_redundant_help_types()


def _version_callback(value: bool) -> None:
    if value:
        typer.echo(f"kernellsp {__version__}")
        raise typer.Exit(0)


@app.callback()
def _root(
    ctx: typer.Context,
    version: Annotated[
        bool,
        typer.Option(
            "--version", callback=_version_callback, is_eager=True, help="Print the version and exit."
        ),
    ] = False,
) -> None:
    """kernellsp: make CUDA kernels fast and keep them correct."""
    errors_as_json.set(False)  # a command that prints JSON sets it (one process may run several commands)
    # A bad sandbox setting is refused before any command does work (doctor reports it among its checks):
    # found only when code is about to run, it would end a long job at its first GPU step.
    if ctx.invoked_subcommand != "doctor":
        from kernellsp.run.runner import RunnerError, sandbox_setting

        try:
            sandbox_setting()
        except RunnerError as exc:
            typer.echo(f"error: {exc} (unset it, or set one of those)", err=True)
            raise typer.Exit(2) from None


@app.command()
def check(
    paths: Annotated[
        list[Path],
        typer.Argument(metavar="PATH", help="CUDA files (.cu, .cuh) or folders.", show_default=False),
    ],
    output_format: Annotated[
        OutputFormat, typer.Option("--format", "-f", help="Output format.")
    ] = OutputFormat.text,
    arch: Annotated[
        str | None,
        typer.Option(
            metavar="SM",
            help="Target architecture for the build (sm_90, sm_100a, "
            "...; default: the `arch` setting, sm_90).",
        ),
    ] = None,
    fail_on: Annotated[
        FailOn, typer.Option(help="Lowest severity that makes the exit code 1.")
    ] = FailOn.info,
    no_cache: Annotated[
        bool, typer.Option("--no-cache", help="Rebuild even if the content hash is cached.")
    ] = False,
    no_build: Annotated[
        bool, typer.Option("--no-build", help="Source-level rules only; do not run nvcc.")
    ] = False,
    show_fix: Annotated[
        bool, typer.Option("--show-fix", help="Print each finding's fix hint (text format).")
    ] = False,
    jobs: Annotated[
        int | None, typer.Option("--jobs", "-j", min=1, help="Parallel builds (default: CPU count).")
    ] = None,
    output: Annotated[Path | None, typer.Option("--output", "-o", help="Write the report to a file.")] = None,
    profile: Annotated[
        bool, typer.Option("--profile/--no-profile", help="Also profile spec'd entries under Nsight Compute.")
    ] = False,
    gpu_host: Annotated[str | None, typer.Option("--gpu-host", help="Profile on user@host over ssh.")] = None,
    deep: Annotated[bool, typer.Option("--deep", help="Profile with the deep section set (slow).")] = False,
    include_dir: Annotated[
        list[str] | None,
        typer.Option(
            "--include-dir",
            "-I",
            metavar="DIR",
            help="Add an include folder for nvcc (repeatable; after "
            "compile_commands.json's and the include_dirs setting's).",
        ),
    ] = None,
    define: Annotated[
        list[str] | None,
        typer.Option("--define", "-D", metavar="NAME[=VALUE]", help="Define a macro for nvcc (repeatable)."),
    ] = None,
    select: Annotated[
        list[str] | None,
        typer.Option(
            "--select",
            metavar="CODES",
            help="Report only these rules: codes or prefixes, comma-separated "
            "(KL4,KL101); replaces the project's select setting.",
        ),
    ] = None,
    ignore: Annotated[
        list[str] | None,
        typer.Option(
            "--ignore",
            metavar="CODES",
            help="Never report these rules (codes or prefixes, "
            "comma-separated); adds to the project's ignore setting.",
        ),
    ] = None,
) -> None:
    """Report static findings (registers, spills, occupancy, hazards) for CUDA files.

    Include folders and defines come from compile_commands.json (the nearest one above each file, or build/compile_commands.json), then the include_dirs, defines and extra_flags settings, then -I and -D.

    Silence a finding with a comment on its line or the line above, `// kernellsp: ignore[KL404]` (`ignore-file[KL004]`: the whole file), or project-wide with select/ignore in the settings of kernellsp.toml.
    """
    from kernellsp.build.toolchain import arch_problem, normalise_arch
    from kernellsp.check import CheckOptions

    errors_as_json.set(output_format == OutputFormat.json)

    settings = _settings(Path(paths[0]) if paths else Path.cwd(), gpu_host)
    origin = (
        f"--arch {arch}"
        if arch
        else f"the arch setting {settings.arch!r} (kernellsp.toml [settings] or KERNELLSP_ARCH)"
    )
    arch = normalise_arch(arch or settings.arch)
    problem = arch_problem(arch)
    anchor = Path(paths[0]) if paths else Path.cwd()
    try:
        flags, selection = _project_options(
            anchor, settings, include_dir or [], define or [], select, ignore or []
        )
    except typer.Exit:
        if problem is not None:  # the options' own error is printed already: the arch's goes with it
            _fail(f"{origin}: {problem}")
        raise
    if problem is not None:
        raise _fail(f"{origin}: {problem}")
    options = CheckOptions(
        arch=arch,
        build_timeout_s=settings.build_timeout_s,
        use_cache=not no_cache,
        build=not no_build,
        jobs=jobs,
        flags=flags,
        selection=selection,
    )
    interactive = err_console.is_terminal and output_format == OutputFormat.text
    report = _run_check(paths, options, interactive)
    if profile:
        _add_profile_findings(report, paths, settings, arch, deep, no_cache, interactive)
    for note in report.notes:
        err_console.print(f"note: {note}", markup=False)
    _write_check_report(report, paths, output_format, output, show_fix)
    if report.errors:
        raise typer.Exit(2)
    if fail_on != FailOn.never:
        from kernellsp.findings import Severity

        threshold = Severity(fail_on.value).rank
        if any(f.severity.rank >= threshold for f in report.findings):
            raise typer.Exit(1)
    raise typer.Exit(0)


@app.command("profile")
def profile_cmd(
    file: Annotated[
        Path, typer.Argument(help="A CUDA file with launch specs (or a main()).", show_default=False)
    ],
    kernel: Annotated[
        list[str] | None, typer.Option("--kernel", "-k", help="Only these spec'd entries.")
    ] = None,
    output_format: Annotated[
        OutputFormat, typer.Option("--format", "-f", help="text or json.")
    ] = OutputFormat.text,
    gpu_host: Annotated[str | None, typer.Option("--gpu-host", help="Profile on user@host over ssh.")] = None,
    deep: Annotated[
        bool, typer.Option("--deep", help="Use the deep section set (ncu --set full; slow).")
    ] = False,
    save_report: Annotated[
        Path | None, typer.Option("--save-report", help="Keep the .ncu-rep files here.")
    ] = None,
    arch: Annotated[
        str | None,
        typer.Option(help="Target architecture for the build (default: the `arch` setting, sm_90)."),
    ] = None,
    no_cache: Annotated[
        bool, typer.Option("--no-cache", help="Profile even if a cached result exists.")
    ] = False,
    top: Annotated[int, typer.Option(help="Findings to show per kernel.")] = 5,
    html_out: Annotated[
        Path | None,
        typer.Option(
            "--html",
            help="Also write the report as one self-contained HTML "
            "page: roofline chart, per-line stalls, findings (needs the "
            "'report' extra: plotly).",
        ),
    ] = None,
) -> None:
    """Profile FILE's kernels under Nsight Compute: duration, roofline position, bottleneck, findings, hot lines."""
    errors_as_json.set(output_format == OutputFormat.json)
    run_profile_command(
        file, kernel, output_format, gpu_host, deep, save_report, arch, no_cache, top, html_out
    )


@app.command()
def optimize(
    files: Annotated[
        list[Path],
        typer.Argument(
            help="A CUDA file with a launch spec (with --all: files and folders).", show_default=False
        ),
    ],
    kernel: Annotated[
        str | None, typer.Option("--kernel", "-k", help="The spec'd entry to optimize.")
    ] = None,
    all_entries: Annotated[
        bool,
        typer.Option(
            "--all",
            help="Optimize every spec'd entry of the given files and "
            "folders (across the pool with runner = pool) and print a summary "
            "table; --html writes the table as a page.",
        ),
    ] = False,
    apply: Annotated[
        bool, typer.Option("--apply", help="Write the verified winner (a backup is kept).")
    ] = False,
    output_format: Annotated[
        OutputFormat, typer.Option("--format", "-f", help="text or json.")
    ] = OutputFormat.text,
    json_out: Annotated[bool, typer.Option("--json", hidden=True, help="The same as --format json.")] = False,
    rounds: Annotated[int | None, typer.Option(min=1, help="Rounds of proposals.")] = None,
    candidates: Annotated[int | None, typer.Option(min=1, help="Candidates per round.")] = None,
    proposer: Annotated[
        str,
        typer.Option(
            help="auto (recipes, then the LLM if configured, then the tuner), recipes, tuner or llm."
        ),
    ] = "auto",
    explain: Annotated[
        bool,
        typer.Option(
            "--explain",
            help="List every recipe as matched (with its binding) or "
            "declined (with the reason) and exit; needs no GPU.",
        ),
    ] = False,
    min_gain: Annotated[
        float | None, typer.Option(help="Minimum verified gain in percent (default 2).")
    ] = None,
    seeds: Annotated[int, typer.Option(min=1, help="Input seeds for the correctness gate.")] = 3,
    gpu_host: Annotated[str | None, typer.Option("--gpu-host", help="Run on user@host over ssh.")] = None,
    html_out: Annotated[
        Path | None,
        typer.Option(
            "--html",
            help="Write the profile report of the baseline and "
            "the winner on one roofline chart (profiles both; needs the "
            "'report' extra: plotly).",
        ),
    ] = None,
) -> None:
    """Propose rewrites, verify each (scope, correctness, sanitizer, timing) and keep only a proven winner."""

    json_out = _json_format(output_format, json_out, "optimize")
    run_optimize_command(
        files,
        kernel,
        all_entries,
        apply,
        json_out,
        rounds,
        candidates,
        proposer,
        explain,
        min_gain,
        seeds,
        gpu_host,
        html_out,
    )


@app.command()
def verify(
    file: Annotated[
        Path, typer.Argument(help="The baseline CUDA file (with a launch spec).", show_default=False)
    ],
    candidate: Annotated[Path, typer.Option("--candidate", "-c", help="The rewrite to check.")],
    kernel: Annotated[str | None, typer.Option("--kernel", "-k", help="The spec'd entry.")] = None,
    output_format: Annotated[
        OutputFormat, typer.Option("--format", "-f", help="text or json.")
    ] = OutputFormat.text,
    json_out: Annotated[bool, typer.Option("--json", hidden=True, help="The same as --format json.")] = False,
    seeds: Annotated[int, typer.Option(min=1, help="Input seeds for the correctness gate.")] = 3,
    min_gain: Annotated[
        float | None,
        typer.Option(help="Minimum verified gain in percent (default: the `min_gain_pct` setting, 2)."),
    ] = None,
    gpu_host: Annotated[str | None, typer.Option("--gpu-host", help="Run on user@host over ssh.")] = None,
    evidence: Annotated[Path | None, typer.Option(help="Write the evidence bundle here.")] = None,
) -> None:
    """Run the scope, correctness, sanitizer and timing gates on a rewrite from anywhere; exit 0 only if accepted."""
    json_out = _json_format(output_format, json_out, "verify")
    run_verify_command(file, candidate, kernel, json_out, seeds, min_gain, gpu_host, evidence)


@app.command()
def history(file: Annotated[Path | None, typer.Argument(help="Only this file.")] = None) -> None:
    """Show what the rewrite loop tried: idea, proposer, verdict, predicted vs measured gain."""
    from kernellsp.optimize.evidence import Memory, _rel, state_dir

    base = file if file is not None else Path.cwd() / "x.cu"
    mem = Memory(state_dir(base) / "memory.json")
    recs = mem.records
    if file is not None:
        recs = [r for r in recs if r.get("file") == _rel(file)]
    if not recs:
        typer.echo("no history" + (f" for {file}" if file else ""))
        raise typer.Exit(0)
    typer.echo(history_text(recs))


@app.command()
def replay(
    bundle: Annotated[Path, typer.Argument(help="An evidence bundle directory.")],
    gpu_host: Annotated[str | None, typer.Option("--gpu-host", help="Run on user@host over ssh.")] = None,
) -> None:
    """Re-run a bundle's final verdict and compare it with the recorded one; exit 0 when they agree."""
    from kernellsp.optimize.loop import replay as run_replay
    from kernellsp.optimize.result import OptimizeError
    from kernellsp.optimize.verify.gate import VerifyError
    from kernellsp.run.runner import Runner, RunnerError

    if not bundle.is_dir():
        raise _fail(f"{bundle}: no such evidence bundle (optimize prints its folder, under .kernellsp/runs/)")
    runner, problem = _make_runner(_settings(bundle, gpu_host), f"replay of {bundle.name}")
    if runner is None:
        # The bundle and the scope gate are checked without a GPU first; the GPU gates then say why not.
        runner = _no_runner(f"cannot replay: {problem}")
    assert isinstance(runner, Runner)
    try:
        v, recorded = run_replay(bundle, runner)
    except (OptimizeError, VerifyError, RunnerError, OSError) as exc:
        raise _fail(str(exc)) from None
    same = v.kind == recorded.get("kind")
    typer.echo(replay_text(v, recorded, same))
    raise typer.Exit(0 if same else 1)


@app.command("revert")
def revert_cmd(
    file: Annotated[Path, typer.Argument(help="A file kernellsp rewrote with --apply.")],
    force: Annotated[bool, typer.Option("--force", help="Restore even if the file changed since.")] = False,
) -> None:
    """Restore the file from the backup kept by `optimize --apply`."""
    from kernellsp.optimize.apply import ApplyError, revert

    try:
        backup = revert(file, force)
    except (ApplyError, OSError) as exc:
        raise _fail(str(exc)) from None
    typer.echo(f"restored {file} from {backup}")


@rules_app.callback()
def rules_list(ctx: typer.Context) -> None:
    """List every rule: code, severity, scope and title."""
    if ctx.invoked_subcommand is not None:
        return
    from kernellsp.rules.engine import RuleError, load_rules
    from kernellsp.source.spec import find_workspace_root

    try:
        rs = load_rules(find_workspace_root(Path.cwd()))
    except RuleError as exc:
        raise _fail(f"malformed rule file: {exc}") from None
    for r in rs.sorted():
        typer.echo(rule_line(r))


@rules_app.command("show")
def rules_show(code: Annotated[str, typer.Argument(help="Rule code, e.g. KL101.")]) -> None:
    """Print one rule: metadata, condition, message, fix and guidance."""
    from kernellsp.rules.engine import RuleError, load_rules
    from kernellsp.source.spec import find_workspace_root

    try:
        rs = load_rules(find_workspace_root(Path.cwd()))
    except RuleError as exc:
        raise _fail(f"malformed rule file: {exc}") from None
    r = rs.get(code.upper())
    if r is None:
        raise _fail(f"no rule {code!r} (see `kernellsp rules`)")
    typer.echo(rule_text(r))


@app.command()
def doctor() -> None:
    """Report nvcc, ptxas, nvdisasm, ncu, the GPU, counter permission, the settings, arch and LLM, with fixes.

    Exit 0 when everything is there, 1 when something optional is missing ([MISS]: profiling, verification or the LLM cannot run here), 2 when kernellsp cannot check files (no nvcc, a broken kernellsp.toml, an arch the installed nvcc does not build).
    """
    from kernellsp.doctor import exit_code, run_checks
    from kernellsp.source.spec import find_workspace_root

    checks = run_checks(find_workspace_root(Path.cwd()))
    if checks:
        typer.echo(doctor_text(checks))
    raise typer.Exit(exit_code(checks))


spec_app = typer.Typer(help="Launch specs: draft one from a kernel's signature and indexing.")
app.add_typer(spec_app, name="spec")


@spec_app.command("draft")
def spec_draft(
    file: Annotated[Path, typer.Argument(help="A CUDA file.", show_default=False)],
    kernel: Annotated[
        list[str] | None,
        typer.Option(
            "--kernel", "-k", help="Draft for these kernels (default: every kernel without a spec)."
        ),
    ] = None,
    write: Annotated[
        bool,
        typer.Option(
            "--write", help="Insert the drafts above their kernels (backup kept: `kernellsp revert FILE`)."
        ),
    ] = False,
) -> None:
    """Draft a launch spec from each kernel's signature, launch sites and indexing, as the editor's "Add launch spec"
    does: printed, or inserted into FILE with --write. What could not be inferred is marked `# CHECK:`."""
    run_spec_draft_command(file, kernel or [], write)


cache_app = typer.Typer(help="Manage the content-hash cache.")
app.add_typer(cache_app, name="cache")


@cache_app.command("clear")
def cache_clear() -> None:
    """Remove every cached build and profile."""
    from kernellsp import cache

    cache.clear()
    typer.echo(f"cleared {cache.cache_dir()}")


@app.command("settings-schema")
def settings_schema() -> None:
    """Print the JSON schema of the editors' `kernellsp` settings section (generated from the settings model)."""
    import json

    from kernellsp.lsp.config import section_schema

    typer.echo(json.dumps(section_schema(), indent=2))


class LogLevel(StrEnum):
    debug = "debug"
    info = "info"
    warning = "warning"
    error = "error"


@app.command()
def serve(
    tcp: Annotated[
        bool, typer.Option("--tcp", help="Listen on TCP instead of stdio (for debugging).")
    ] = False,
    host: Annotated[str, typer.Option(help="Host to listen on with --tcp.")] = "127.0.0.1",
    port: Annotated[int, typer.Option(min=1, max=65535, help="Port to listen on with --tcp.")] = 2087,
    log_file: Annotated[
        Path | None, typer.Option("--log-file", help="Write the server log here (default: stderr).")
    ] = None,
    log_level: Annotated[LogLevel, typer.Option("--log-level", help="Server log level.")] = LogLevel.info,
) -> None:
    """Run the language server (stdio by default; stdout carries only LSP messages)."""
    from kernellsp.lsp.main import run

    raise typer.Exit(run(tcp=tcp, host=host, port=port, log_file=log_file, log_level=log_level.value))


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
        err_console.print(
            f"kernellsp: internal error: {type(exc).__name__}: {exc} "
            "(set KERNELLSP_DEBUG=1 for the traceback and please report it)",
            markup=False,
        )
        sys.exit(2)
