"""The bodies of the GPU commands, ``kernellsp profile``, ``optimize`` and ``verify`` (their options are declared in
:mod:`kernellsp.cli`): read the file, pick the entry, make the runner, run, print, and exit with the result."""

from __future__ import annotations

from pathlib import Path

import typer

from kernellsp.cli_runs import (
    _echo_optimize_result,
    _optimize_all,
    _run_optimize_loop,
    _run_profile,
    _run_verify,
)
from kernellsp.cli_support import (
    OutputFormat,
    _check_html_target,
    _explain_all,
    _fail,
    _make_runner,
    _no_runner,
    _optimize_html,
    _pick_entry,
    _print_explain,
    _read_cuda,
    _require_runner,
    _settings,
    _write_html,
    err_console,
)
from kernellsp.report.text import verdict_text


def run_profile_command(
    file: Path,
    kernel: list[str] | None,
    output_format: OutputFormat,
    gpu_host: str | None,
    deep: bool,
    save_report: Path | None,
    arch: str | None,
    no_cache: bool,
    top: int,
    html_out: Path | None,
) -> None:
    """``kernellsp profile``: FILE's kernels under Nsight Compute, as text or JSON (and an HTML page)."""
    import json

    from kernellsp.profile.ncu import ProfileOptions
    from kernellsp.source.spec import find_workspace_root, load_workspace_specs

    text = _read_cuda(file)
    if html_out is not None:
        _check_html_target(html_out)
    if save_report is not None:
        try:  # before the GPU work: a bad destination is a usage error, not a lost profile
            save_report.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise _fail(f"--save-report {save_report}: {exc.strerror or exc}") from None
    settings = _settings(file, gpu_host)
    runner = _require_runner(settings, f"profile of {file.name}", "cannot profile")
    root = find_workspace_root(file)
    ws_specs = load_workspace_specs(root)[0] if root else {}
    opts = ProfileOptions.from_settings(
        settings,
        deep=deep,
        use_cache=not no_cache,
        save_report_dir=save_report,
        kernels=kernel or None,
        **({"arch": arch} if arch else {}),
    )
    interactive = err_console.is_terminal and output_format == OutputFormat.text
    outcome = _run_profile(file, text, runner, opts, ws_specs, interactive)
    if html_out is not None:
        from kernellsp.report.html import Run

        _write_html(html_out, [Run("profile", outcome, text)], f"kernellsp profile: {file.name}")
    if output_format == OutputFormat.json:
        typer.echo(json.dumps(outcome.to_dict(), indent=2, sort_keys=True, default=str))
        raise typer.Exit(0)
    from kernellsp.report.profile_text import format_outcome

    typer.echo(format_outcome(outcome, str(file), top))
    for n in outcome.notes:
        err_console.print(f"note: {n}", markup=False)
    if outcome.reports:
        typer.echo("\nreports: " + ", ".join(outcome.reports))
    raise typer.Exit(0)


def run_optimize_command(
    files: list[Path],
    kernel: str | None,
    all_entries: bool,
    apply: bool,
    json_out: bool,
    rounds: int | None,
    candidates: int | None,
    proposer: str,
    explain: bool,
    min_gain: float | None,
    seeds: int,
    gpu_host: str | None,
    html_out: Path | None,
) -> None:
    """``kernellsp optimize``: one entry (or ``--all``), exits 0 when a rewrite was verified faster."""
    from kernellsp.optimize.apply import ApplyError, apply_result
    from kernellsp.optimize.loop import default_proposers
    from kernellsp.optimize.propose.base import ProposerError
    from kernellsp.optimize.result import OptimizeError, OptimizeOptions
    from kernellsp.optimize.verify.gate import VerifyOptions
    from kernellsp.rules.engine import load_rules
    from kernellsp.source.spec import find_workspace_root

    if proposer not in ("auto", "recipes", "tuner", "llm"):
        raise _fail(f"--proposer {proposer}: expected auto, recipes, tuner or llm")
    if explain and (all_entries or len(files) != 1 or files[0].is_dir()):
        if kernel or apply:
            raise _fail("--explain over several entries explains each of them: drop --kernel and --apply")
        _explain_all(files, json_out)
    if all_entries:
        if kernel or apply:
            raise _fail("--all optimizes every spec'd entry and writes no file: drop --kernel and --apply")
        _optimize_all(files, json_out, html_out, proposer, rounds, candidates, min_gain, seeds, gpu_host)
    if len(files) != 1:
        raise _fail(
            f"optimize takes one file ({len(files)} given); to optimize every entry of several, add --all"
        )
    file = files[0]
    text = _read_cuda(file)
    entry = _pick_entry(file, text, kernel)
    if explain:
        _print_explain(file, text, entry, json_out)
        raise typer.Exit(0)
    if html_out is not None:
        _check_html_target(html_out)
    root = find_workspace_root(file)
    settings = _settings(file, gpu_host)
    runner = _require_runner(settings, f"optimize of {file.name}", "cannot optimize")
    ruleset = load_rules(root)
    try:
        proposers = default_proposers(settings, ruleset, proposer)
    except (OptimizeError, ProposerError) as exc:
        raise _fail(str(exc)) from None
    from kernellsp.check import CheckOptions, check_text

    findings = check_text(file, text, CheckOptions(), ruleset).findings
    opts = OptimizeOptions(
        rounds=rounds or settings.optimize_rounds,
        candidates=candidates or settings.optimize_candidates,
        min_gain_pct=settings.min_gain_pct if min_gain is None else min_gain,
        verify=VerifyOptions(seeds=seeds, precision=settings.precision),
    )
    result = _run_optimize_loop(file, text, entry, runner, proposers, opts, findings, json_out)
    applied = None
    if apply and result.accepted:
        try:
            applied = str(apply_result(file, result))
        except ApplyError as exc:
            raise _fail(str(exc)) from None
    _echo_optimize_result(file, entry, result, apply, applied, json_out)
    if html_out is not None:
        _optimize_html(html_out, file, entry, result, runner, settings)
    raise typer.Exit(0 if result.accepted else 1)


def run_verify_command(
    file: Path,
    candidate: Path,
    kernel: str | None,
    json_out: bool,
    seeds: int,
    min_gain: float | None,
    gpu_host: str | None,
    evidence: Path | None,
) -> None:
    """``kernellsp verify``: the gates on a rewrite from anywhere; exits 0 only if accepted."""
    import json

    from kernellsp.optimize.verify.gate import write_evidence
    from kernellsp.run.runner import Runner

    text = _read_cuda(file)
    ctext = _read_cuda(candidate)
    entry = _pick_entry(file, text, kernel)
    settings = _settings(file, gpu_host)
    min_gain = settings.min_gain_pct if min_gain is None else min_gain
    runner, problem = _make_runner(settings, f"verify of {file.name}")
    if runner is None:
        # Without a GPU the gates that need none still run first (scope, the candidate's spec and launch): a
        # candidate without the kernel is a scope_violation here too, not "no GPU".
        runner = _no_runner(f"cannot verify: {problem}")
    assert isinstance(runner, Runner)
    v = _run_verify(file, text, ctext, entry, runner, seeds, min_gain, json_out, precision=settings.precision)
    if evidence is not None:
        write_evidence(evidence, file, text, ctext, v)
    if json_out:
        typer.echo(json.dumps(v.to_dict(), indent=2, default=str))
    else:
        typer.echo(verdict_text(v))
    raise typer.Exit(0 if v.accepted else 1)


def run_spec_draft_command(file: Path, kernels: list[str], write: bool) -> None:
    """``kernellsp spec draft``: the draft spec of each named kernel (or of every kernel without one), printed or
    inserted above its kernel with a backup. Exit 0; 2 for a kernel that is not there or cannot be drafted."""
    from kernellsp.optimize.apply import replace_user_file
    from kernellsp.source import spec
    from kernellsp.source.draft import draft_problem
    from kernellsp.source.model import parse_source

    text = _read_cuda(file)
    model = parse_source(text, str(file))
    kernels_in_file = [f for f in model.functions if f.kind == "global" and f.has_body]
    specced = {b.entry for b in spec.specs_from_source(model)[0]}
    if kernels:
        unknown = [k for k in kernels if k not in {f.name for f in kernels_in_file}]
        if unknown:
            have = ", ".join(f.name for f in kernels_in_file) or "none"
            raise _fail(f"{file}: no kernel named {', '.join(unknown)} (kernels: {have})")
        chosen = [f for f in kernels_in_file if f.name in kernels]
    else:
        chosen = [f for f in kernels_in_file if f.name not in specced]
    blocks: list[tuple[int, str]] = []
    for fn in chosen:
        problem = draft_problem(fn, text)
        if problem is not None:
            raise _fail(f"{file}: {problem}")
        if fn.name in specced:
            err_console.print(
                f"note: {fn.name} already has a spec; this draft is one to compare", markup=False
            )
        blocks.append(spec.draft_block(fn, model))
    if not blocks:
        typer.echo(f"{file}: every kernel has a launch spec")
        raise typer.Exit(0)
    if not write:
        for (line, block), fn in zip(blocks, chosen, strict=True):
            typer.echo(f"// {file}:{line + 1}: above {fn.name}\n{block}", nl=False)
        raise typer.Exit(0)
    new = spec.insert_draft_blocks(text, blocks)
    backup = replace_user_file(file, text, new)
    names = ", ".join(f.name for f in chosen)
    typer.echo(
        f"{file}: inserted a draft spec above {names} (backup {backup}; `kernellsp revert {file}` restores it)"
    )
    raise typer.Exit(0)
