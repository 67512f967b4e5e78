"""The command line's side of the commands in :mod:`kernellsp.cli`: the stderr console and usage errors, the
settings and the runner as a command resolves them, the files a command reads and the HTML pages it writes
(the rich displays of long runs are in :mod:`kernellsp.cli_runs`). Only the CLI imports this module (it uses
typer and rich, which the core never does)."""

from __future__ import annotations

import atexit
import contextvars
import json
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer
import typer.core
from rich.console import Console
from rich.markup import escape

from kernellsp.report.text import explain_text

if TYPE_CHECKING:
    from kernellsp.run.gpu_lock import GpuLock
    from kernellsp.run.runner import Runner
    from kernellsp.settings import Settings


def _hide_redundant_help_types() -> None:
    """Typer (0.29+) prints "<bool>" beside every flag and "<list[Path]>" beside named arguments: drop those.

    Typer's own hook is patched only where it exists (older typers, e.g. on a GPU image, lack it and are
    left as they are: a help page with the types beats an import error).
    """
    option_cls, argument_cls = typer.core.TyperOption, typer.core.TyperArgument
    option_type = getattr(option_cls, "display_type_rich", None)
    argument_type = getattr(argument_cls, "display_type_rich", None)
    if option_type is None or argument_type is None:
        return

    def flag_type(self: typer.core.TyperOption, ctx: Any) -> str | None:
        # A flag takes no value, so no type is shown beside it.
        return None if self.is_flag else option_type(self, ctx)

    def named_argument_type(self: typer.core.TyperArgument, ctx: Any) -> str | None:
        # An argument given a metavar (PATH) is described by it.
        return None if self.metavar is not None else argument_type(self, ctx)

    setattr(option_cls, "display_type_rich", flag_type)  # noqa: B010  (a hook typer may not have)
    setattr(argument_cls, "display_type_rich", named_argument_type)  # noqa: B010


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


#: The running command was asked for JSON: its errors go to stdout as a JSON object too (a script reading
#: stdout gets an answer it can parse, not nothing). Reset by the root callback for every command.
errors_as_json: contextvars.ContextVar[bool] = contextvars.ContextVar("errors_as_json", default=False)


def _fail(message: str, code: int = 2) -> typer.Exit:
    if err_console.is_terminal:
        err_console.print(f"[bold red]error:[/] {escape(message)}")
    else:
        err_console.print(f"error: {message}", markup=False)
    if errors_as_json.get():
        typer.echo(json.dumps({"error": {"message": message, "exit_code": code}}))
    return typer.Exit(code)


def _project_options(
    anchor: Path,
    settings: Settings,
    include_dirs: list[str],
    defines: list[str],
    select: list[str] | None,
    ignore: list[str],
) -> tuple[Any, Any]:
    """The build flags and the rule selection for ``anchor``'s workspace (settings, then -I/-D/--select/--ignore);
    a bad flag or a code that names no rule is a usage error."""
    from kernellsp.check import CheckError, project_options
    from kernellsp.source.spec import find_workspace_root

    try:
        return project_options(settings, find_workspace_root(anchor), include_dirs, defines, select, ignore)
    except CheckError as exc:
        raise _fail(str(exc)) from None


def _settings(anchor: Path, gpu_host: str | None = None) -> Settings:
    """The settings of ``anchor``'s workspace (its kernellsp.toml / pyproject.toml, then KERNELLSP_*), with
    ``--gpu-host`` on top, as the editor resolves them for that file; a bad settings file is a usage error."""
    from kernellsp.settings import SettingsError, load_settings
    from kernellsp.source.spec import find_workspace_root

    try:
        return load_settings(find_workspace_root(anchor), {"gpu_host": gpu_host} if gpu_host else None)
    except SettingsError as exc:
        raise _fail(str(exc)) from None


def _json_format(output_format: OutputFormat, json_flag: bool, command: str) -> bool:
    """``--format json`` (or the older ``--json``) for commands that print text or JSON; sarif is refused."""
    if output_format == OutputFormat.sarif:
        raise _fail(f"--format sarif: {command} prints text or json (sarif is check's)")
    as_json = json_flag or output_format == OutputFormat.json
    errors_as_json.set(as_json)
    return as_json


def _no_runner(message: str) -> Any:
    """A runner for a host without a GPU: the steps that need none run, the first that needs one stops with
    ``message`` (why there is no GPU and how to get one)."""
    import threading

    from kernellsp.run.runner import Runner, RunnerError, RunResult

    class NoRunner(Runner):
        name = "no GPU"

        def _refuse(self) -> RunnerError:
            return RunnerError("no_gpu", message)

        def new_workdir(self) -> str:
            raise self._refuse()

        def put(self, files: dict[str, bytes], workdir: str) -> None:
            raise self._refuse()

        def get(self, workdir: str, rel_paths: list[str], dest: Path) -> list[Path]:
            raise self._refuse()

        def run(
            self,
            argv: list[str],
            workdir: str,
            timeout_s: float,
            cancel: threading.Event | None = None,
            env: dict[str, str] | None = None,
            gpu_lock: GpuLock = False,
        ) -> RunResult:
            raise self._refuse()

        def which(self, tool: str) -> str | None:
            raise self._refuse()

        def cleanup(self, workdir: str) -> None:
            return None

    return NoRunner()


def _make_runner(settings: Settings, job: str = "a kernellsp command") -> tuple[object | None, str | None]:
    """The runner for GPU work, or ``(None, reason)`` when this host cannot do it.

    ``job`` ("optimize of softmax.cu") is what other kernellsp jobs see while this one holds the GPU; while this
    one waits for the GPU, who holds it is shown on stderr. The wait lasts as long as it takes (Ctrl-C ends it)
    unless the gpu_wait_timeout_s setting limits it.
    """
    from kernellsp.profile.environment import profiling_runner

    runner, problem = profiling_runner(settings)
    if runner is not None:
        # An ssh runner's shared connection would otherwise outlive the command by its ControlPersist time.
        atexit.register(runner.close)
        runner.job_label = job
        runner.gpu_wait_s = settings.gpu_wait_timeout_s or None
        runner.on_gpu_wait = lambda m: err_console.print(m, markup=False, highlight=False)
    return runner, problem


def _require_runner(settings: Settings, job: str, refusal: str) -> Runner:
    """:func:`_make_runner`, or exit 2 with ``"{refusal}: {reason}"`` when this host cannot do GPU work."""
    from kernellsp.run.runner import Runner

    runner, problem = _make_runner(settings, job)
    if runner is None:
        raise _fail(f"{refusal}: {problem}")
    assert isinstance(runner, Runner)
    return runner


def _write_check_report(
    report: Any, paths: list[Path], output_format: OutputFormat, output: Path | None, show_fix: bool
) -> None:
    """The check report as text (coloured only on a terminal), JSON or SARIF, on stdout or into ``output``."""
    import os
    import sys

    from kernellsp.report.findings import format_json, format_sarif, format_text
    from kernellsp.rules.engine import load_rules

    if output_format == OutputFormat.json:
        text = format_json(report)
    elif output_format == OutputFormat.sarif:
        workspace = None
        from kernellsp.source.spec import find_workspace_root

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


def _check_html_target(path: Path) -> None:
    """Before any GPU work: plotly is there and the page's folder exists (usage errors, not lost profiles)."""
    from kernellsp.report.html import HtmlReportError, require_plotly

    try:
        require_plotly()
    except HtmlReportError as exc:
        raise _fail(f"--html: {exc}") from None
    if not path.parent.is_dir():
        raise _fail(f"--html {path}: no such folder {path.parent}")


def _write_html(path: Path, runs: list[Any], title: str) -> None:
    from kernellsp.report.html import profile_page

    try:
        path.write_text(profile_page(runs, title), encoding="utf-8")
    except OSError as exc:
        raise _fail(f"--html {path}: {exc.strerror or exc}") from None
    err_console.print(f"wrote {path}", markup=False)


def _read_cuda(file: Path) -> str:
    """The file's text, or a usage error (exit 2) naming why it cannot be read."""
    from kernellsp.source.files import read_source

    if not file.exists():
        raise _fail(f"{file}: no such file")
    text, err = read_source(file)
    if text is None:
        raise _fail(f"{file}: {err}")
    return text


def _pick_entry(file: Path, text: str, kernel: str | None) -> str:
    from kernellsp.source.model import parse_source
    from kernellsp.source.spec import specs_from_source

    model = parse_source(text, str(file))
    entries = [b.entry for b in specs_from_source(model)[0]]
    if kernel:
        if kernel not in entries:
            known = ", ".join(entries) or "none"
            raise _fail(f"{file}: {kernel} has no launch spec (spec'd entries: {known}); add one above it")
        return kernel
    if len(entries) == 1:
        return entries[0]
    if not entries:
        raise _fail(
            f"{file}: no entry has a launch spec; add a /* kernellsp ... */ block above the kernel "
            "(the 'Add launch spec' code action drafts one)"
        )
    raise _fail(f"{file}: several spec'd entries ({', '.join(entries)}); pick one with --kernel")


def _explanation(file: Path, text: str, entry: str) -> tuple[dict[str, Any], str]:
    """One entry's ``--explain``: the JSON object and the text."""
    from kernellsp.optimize.propose.recipes import canonical_passes, explain
    from kernellsp.source.model import parse_source

    model = parse_source(text, str(file))
    rows = explain(model, entry)
    fired = canonical_passes(model, entry)
    passes = [{"pass": f.name, "kernel": f.kernel, "notes": list(f.notes)} for f in fired]
    data = {"path": str(file), "entry": entry, "passes": passes, "recipes": [r.to_dict() for r in rows]}
    return data, explain_text(file, entry, rows, fired)


def _print_explain(file: Path, text: str, entry: str, json_out: bool) -> None:
    """``optimize --explain``: every recipe against the entry's kernels, matched with its binding or declined."""
    data, text_out = _explanation(file, text, entry)
    typer.echo(json.dumps(data, indent=2) if json_out else text_out)


def _explain_all(paths: list[Path], json_out: bool) -> None:
    """``optimize DIR --explain`` (or several files, or ``--all --explain``): every spec'd entry explained, in
    file order; JSON: a list of the one-entry objects. No GPU needed; exits 0."""
    from kernellsp.check import CheckError, collect_files
    from kernellsp.optimize import fanout

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
    done = [_explanation(j.path, j.text, j.entry) for j in jobs]
    if json_out:
        typer.echo(json.dumps([d for d, _t in done], indent=2))
    else:
        typer.echo("\n\n".join(t.rstrip("\n") for _d, t in done))
    raise typer.Exit(0)


def _optimize_html(path: Path, file: Path, entry: str, result: Any, runner: Any, settings: Settings) -> None:
    """Profile the baseline and the winner (only the optimized entry) and write both on one page."""
    from kernellsp.profile.ncu import ProfileError, ProfileOptions, profile_file
    from kernellsp.report.html import Run
    from kernellsp.run.runner import RunnerError

    texts = [("baseline", result.original_text)]
    if result.accepted:
        texts.append(("winner", result.champion_text))
    runs = []
    opts = ProfileOptions.from_settings(settings, kernels=[entry])
    for label, text in texts:
        try:
            runs.append(Run(label, profile_file(file, text, runner, opts), text))
        except (ProfileError, RunnerError) as exc:
            err_console.print(f"note: no HTML report: profiling the {label} failed: {exc}", markup=False)
            return
    verdict = (
        f"verified {result.final.message}" if result.accepted and result.final else "no verified improvement"
    )
    _write_html(path, runs, f"kernellsp optimize: {file.name}:{entry} ({verdict})")
