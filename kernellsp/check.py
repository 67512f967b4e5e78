"""``check``: static findings for CUDA files, the core the CLI and the language server share.

For each file: parse the source model, bind and validate launch specs, build with nvcc (in
parallel across files, cached by content hash), compute kernel and line metrics, and evaluate the
rule matrix. Missing tools degrade the result (no nvcc: source-level rules only) and leave one
note; bad input never raises: unreadable or binary files become file errors with a clear message.
"""

from __future__ import annotations

import contextlib
import os
import re
import threading
import time
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kernellsp.build import toolchain
from kernellsp.build.flags import BuildFlags
from kernellsp.build.nvcc import DEFAULT_ARCH, BuildResult, Cancelled, build, include_graph
from kernellsp.findings import Finding, Severity, line_range
from kernellsp.rules import engine as rules
from kernellsp.rules import selection as rule_selection
from kernellsp.rules.evaluate import _builtin, _span_range, evaluate_rules
from kernellsp.rules.static_metrics import kernel_metrics
from kernellsp.source import facts as analysis
from kernellsp.source import spec
from kernellsp.source.files import (
    CheckError,
    collect_files,
    read_source,
    utf8_problem,
)
from kernellsp.source.model import SourceModel, parse_source


@dataclass
class CheckOptions:
    """How to check: target arch, caching, build on/off, timeouts, parallelism, rule locations."""

    arch: str = DEFAULT_ARCH
    use_cache: bool = True
    build: bool = True
    build_timeout_s: float = 120.0
    jobs: int | None = None
    workspace: Path | None = None
    extra_rule_dirs: list[Path] = field(default_factory=list)
    cancel: threading.Event | None = None
    #: The project's include folders, defines and compile_commands.json (``None``: none of them).
    flags: BuildFlags | None = None
    #: Which rules report (``None``: every rule); suppression comments apply either way.
    selection: rule_selection.Selection | None = None


@dataclass
class KernelReport:
    """What the check learned about one kernel (the data behind its findings)."""

    name: str
    line: int
    has_spec: bool
    metrics: dict[str, Any]


@dataclass
class FileReport:
    """Findings and facts for one file; ``error`` is set when the file could not be checked at all."""

    path: str
    findings: list[Finding] = field(default_factory=list)
    kernels: list[KernelReport] = field(default_factory=list)
    error: str | None = None
    build: BuildResult | None = None
    specs: list[spec.BoundSpec] = field(default_factory=list)
    model: SourceModel | None = None


@dataclass
class CheckReport:
    """The result of a check run over several files."""

    files: list[FileReport]
    notes: list[str]
    seconds: float = 0.0

    @property
    def findings(self) -> list[Finding]:
        return [f for fr in self.files for f in fr.findings]

    @property
    def errors(self) -> list[str]:
        return [f"{fr.path}: {fr.error}" for fr in self.files if fr.error]


# --------------------------------------------------------------------------------------------------
# Findings


def bind_specs(
    model: SourceModel, ws_specs: dict[str, spec.KernelSpec], ws_origin: str | None
) -> tuple[list[spec.BoundSpec], list[spec.SpecIssue]]:
    """Comment-block specs plus workspace specs for entries defined in this file (comments win)."""
    bound, issues = spec.specs_from_source(model)
    have = {b.entry for b in bound}
    tables = spec.workspace_tables(ws_origin) if ws_origin and ws_specs else {}
    for entry, s in ws_specs.items():
        if entry not in have and model.function(entry) is not None:
            bound.append(
                spec.BoundSpec(
                    spec=s, entry=entry, origin="workspace", origin_path=ws_origin, table=tables.get(entry)
                )
            )
    for b in bound:
        issues.extend(spec.validate_against(b, model.function(b.entry), model))
    return bound, issues


def spec_issue_findings(
    ruleset: rules.RuleSet, issues: Iterable[spec.SpecIssue], path: str, lines: list[str] | None = None
) -> list[Finding]:
    """KL003 findings for spec issues: on ``path`` (whose ``lines`` they are), or on the workspace file an issue
    names (a ``[kernels.NAME]`` table's line in kernellsp.toml)."""
    out = []
    for iss in issues:
        where = iss.path or path
        src = lines if iss.path is None else None
        text_line = src[iss.line] if src is not None and 0 <= iss.line < len(src) else None
        f = _builtin(
            ruleset, "spec-error", where, line_range(iss.line, text_line), {"message": iss.message}, iss.entry
        )
        if f is not None:
            if iss.severity == "warning":
                f.severity = Severity.warning
            out.append(f)
    return out


def _plan_problems(model: SourceModel, b: spec.BoundSpec) -> list[spec.SpecIssue]:
    """What the harness would refuse in a spec the signature check passed (a reversed uniform(5, -5), a negative
    std, 2.5 for an int): said by check, not first by a profile or a verification."""
    from kernellsp.run import harness

    try:
        harness.plan_harness(model, b.spec, b.entry)
    except harness.HarnessError as exc:
        out = []
        for p in exc.problems:
            m = re.match(r"^((?:args|sizes|shapes|launch|tunables|tolerance)(?:\.[\w]+)*)[\s:(]", p)
            fld = m.group(1) if m else "entry"
            out.append(
                spec.SpecIssue(
                    fld,
                    f"spec of {b.entry}: {p}",
                    b.line_of(fld) if m else b.line_of("entry"),
                    path=b.issue_path,
                    entry=b.entry,
                )
            )
        return out
    except Exception:  # the harness planner must never break a static check
        return []
    return []


def check_text(
    path: Path,
    text: str,
    options: CheckOptions,
    ruleset: rules.RuleSet,
    ws_specs: dict[str, spec.KernelSpec] | None = None,
    ws_origin: str | None = None,
    build_result: BuildResult | None = None,
    ws_invalid: Iterable[str] = (),
) -> FileReport:
    """Check one file's text (the editor buffer or the file on disk).

    ``ws_invalid``: entries whose workspace spec is invalid (reported on the TOML file): they have a spec,
    so no "has no launch spec" for them.
    """
    spath = str(path)
    report = FileReport(path=spath)
    model = parse_source(text, spath)
    report.model = model
    bound, issues = bind_specs(model, ws_specs or {}, ws_origin)
    report.specs = bound
    for b in bound:
        if not any(i.entry == b.entry and i.severity == "error" for i in issues):
            issues.extend(_plan_problems(model, b))
    if ws_origin:
        for entry in ws_invalid:
            issues.extend(spec.partial_workspace_issues(ws_origin, entry, model))
    report.findings.extend(spec_issue_findings(ruleset, issues, spath, model.lines))
    has_spec = {i.entry for i in issues if i.entry} | set(ws_invalid)
    # Every file is compiled, with or without kernels: a .cuh header in a unit of its own, a file of
    # __device__ helpers or host code as it is. A file nvcc never saw must not read as "no findings".
    file_flags = options.flags.for_file(path, options.workspace) if options.flags is not None else None
    search_dirs = list(file_flags.include_dirs) if file_flags is not None else []
    if build_result is None and options.build:
        flags: list[str] = list(file_flags.args) if file_flags is not None else []
        for b in bound:
            flags.extend(x for x in b.spec.flags if x not in flags)
        build_result = build(
            path,
            text,
            model,
            options.arch,
            flags,
            options.build_timeout_s,
            options.use_cache,
            options.cancel,
            search_dirs=search_dirs,
        )
    report.build = build_result
    if build_result is not None and build_result.timed_out:
        f = _builtin(
            ruleset,
            "build-timeout",
            spath,
            line_range(0, model.lines[0] if model.lines else None),
            {"message": build_result.error or "nvcc ran out of time"},
        )
        if f is not None:
            report.findings.append(f)
    if build_result is not None:
        report.findings.extend(_compiler_findings(ruleset, path, model, build_result, search_dirs))
    spec_by_entry = {b.entry: b for b in bound}
    launched_by_entry = {
        s.kernel for b in bound for s in model.launch_sites if s.caller in model.launchers(b.entry)
    }
    facts = analysis.analyse(model)
    for fn in model.kernels:
        kf = facts.get(fn.name) or analysis.KernelFacts(fn.name)
        kspec = spec_by_entry.get(fn.name)
        km, lines = kernel_metrics(fn, model, kf, build_result, kspec, options.arch)
        report.kernels.append(KernelReport(fn.name, fn.name_span.start_line, kspec is not None, km))
        report.findings.extend(evaluate_rules(ruleset, model, spath, fn, km, lines))
        if kspec is None and fn.name not in launched_by_entry and fn.name not in has_spec:
            f = _builtin(
                ruleset, "missing-spec", spath, _span_range(fn.name_span), {"kernel": fn.name}, fn.name
            )
            if f is not None:
                report.findings.append(f)
    for line, code in rule_selection.unknown_codes(model.lines, ruleset.rules):
        f = _builtin(
            ruleset, "suppression-code", spath, line_range(line, model.lines[line]), {"code_text": code}
        )
        if f is not None:
            report.findings.append(f)
    annotate_fixes(report.findings, model, bound, path)
    report.findings = rule_selection.apply(report.findings, options.selection, model.lines)
    report.findings.sort(key=lambda f: f.sort_key())
    return report


def _compiler_findings(
    ruleset: rules.RuleSet, path: Path, model: SourceModel, build_result: BuildResult, search_dirs: list[Path]
) -> list[Finding]:
    """nvcc's errors and warnings (not its remarks) as findings on the lines they name."""
    spath = str(path)
    out: list[Finding] = []
    # A message about a project header lands on the #include that brings the header in.
    headers = (
        include_graph(path, model.lines, search_dirs) if any(m.file for m in build_result.messages) else {}
    )
    for msg in build_result.messages:
        if msg.severity == "remark":
            continue
        emitter = "nvcc-error" if msg.severity == "error" else "nvcc-warning"
        ln = msg.line if msg.line is not None and msg.line < max(1, len(model.lines)) else 0
        where = ""
        if msg.line is None and msg.file is not None:
            with contextlib.suppress(OSError, ValueError):
                ln = headers.get(Path(msg.file).resolve(), ln)
            where = f"in {_near(msg.file, path)}:{msg.file_line}: "
        text_line = model.lines[ln] if ln < len(model.lines) else None
        f = _builtin(
            ruleset,
            emitter,
            spath,
            line_range(ln, text_line),
            {"message": f"{msg.tool}: {where}{msg.message}" + (f" [#{msg.code}]" if msg.code else "")},
        )
        if f is not None:
            out.append(f)
    return out


def annotate_fixes(
    findings: list[Finding], model: SourceModel, bound: list[spec.BoundSpec], path: Path
) -> None:
    """Say ``fix available: recipe NAME`` on findings whose rule a matching recipe answers.

    When the workspace memory holds a verified figure for that recipe, the message adds it
    (``— measured 4.9× on NVIDIA H100``). Cheap by construction: recipes are matched only for kernels
    that have such a finding, on the IR already cached on the model (no build, no GPU).
    """
    if not findings or not bound:
        return
    from kernellsp.optimize.propose.recipes import explain, recipes

    answered = {code for r in recipes() for code in r.rules}
    wanted = {(f.kernel, f.code) for f in findings if f.code in answered and f.kernel}
    if not wanted:
        return
    kernels = {k for k, _ in wanted}
    available: dict[tuple[str, str], str] = {}
    for b in bound:
        targets = {b.entry} | {s.kernel for s in model.launch_sites if s.caller in model.launchers(b.entry)}
        if not targets & kernels:
            continue
        for row in explain(model, b.entry, b):
            if row.matched:
                for code in row.rules:
                    available.setdefault((row.kernel, code), row.recipe)
    if not available:
        return
    from kernellsp.optimize.propose.recipes.proposer import memory_records

    records = memory_records(str(path))
    for f in findings:
        name = available.get((f.kernel or "", f.code))
        if name is None:
            continue
        note = f"fix available: recipe {name}"
        best = max(
            (
                r
                for r in records
                if str(r.get("transform", "")).startswith(f"recipe:{name}(")
                and r.get("verdict") == "accepted"
                and isinstance(r.get("measured_speedup"), int | float)
            ),
            key=lambda r: r["measured_speedup"],
            default=None,
        )
        if best is not None:
            note += f" — measured {best['measured_speedup']:.1f}×" + (
                f" on {best['gpu']}" if best.get("gpu") else ""
            )
        f.message = f"{f.message} ({note})"
        f.evidence["fix_recipe"] = name


def project_options(
    settings: Any,
    root: Path | None,
    include_dirs: Iterable[str] = (),
    defines: Iterable[str] = (),
    select: Iterable[str] | None = None,
    ignore: Iterable[str] = (),
) -> tuple[BuildFlags, rule_selection.Selection]:
    """The build flags and rule selection of a workspace: its settings (``include_dirs``, ``defines``,
    ``extra_flags``, ``compile_commands``, ``select``, ``ignore``), then the command line's. Raises
    :class:`CheckError` naming the setting for a flag kernellsp sets itself or a code that names no rule."""
    from kernellsp.build.flags import FlagsError

    sel = rule_selection
    try:
        flags = BuildFlags.from_settings(settings, root, list(include_dirs), list(defines))
        known = rules.load_rules(root).rules
        project = sel.Selection(sel.parse_codes(settings.select), sel.parse_codes(settings.ignore))
        project.validate(known)
        select_l = list(select) if select is not None else None
        cli = sel.Selection(sel.parse_codes(select_l or []), sel.parse_codes(ignore))
        cli.validate(known, command_line=True)
    except (FlagsError, sel.SelectionError) as exc:
        raise CheckError(str(exc)) from None
    except rules.RuleError as exc:
        raise CheckError(f"malformed rule file: {exc}") from None
    return flags, project.combined(cli.select if select_l else None, cli.ignore)


def _near(other: str, path: Path) -> str:
    """``other`` relative to ``path``'s folder when that is shorter (``../include/x.cuh``), else as it is."""
    try:
        rel = os.path.relpath(other, path.resolve().parent)
    except ValueError:
        return other
    return rel if len(rel) < len(other) else other


def check_paths(
    paths: Iterable[str | Path],
    options: CheckOptions | None = None,
    progress: Callable[[int, int, str], None] | None = None,
) -> CheckReport:
    """Check files and directories. Raises :class:`CheckError` only for usage problems."""
    opts = options or CheckOptions()
    t0 = time.monotonic()
    notes: list[str] = []
    files = collect_files(paths, notes)
    if not files:
        raise CheckError(
            "no CUDA files (.cu, .cuh) found in the given paths" + "".join(f"; {n}" for n in notes)
        )
    first_root = spec.find_workspace_root(files[0])
    workspace = opts.workspace or first_root
    ruleset = rules.load_rules(workspace, opts.extra_rule_dirs)
    if opts.build and toolchain.find_tool("nvcc") is None:
        notes.append(f"nvcc not found, so only source-level rules ran: {toolchain.INSTALL_HINTS['nvcc']}")
        opts = CheckOptions(**{**opts.__dict__, "build": False})
    elif opts.build and toolchain.find_tool("nvdisasm") is None:
        notes.append(
            "nvdisasm not found: fp64 and local-memory rules use source heuristics "
            f"({toolchain.INSTALL_HINTS['nvdisasm']})"
        )
    texts: list[tuple[Path, str | None, str | None]] = [(p, *read_source(p)) for p in files]

    def one(item: tuple[Path, str | None, str | None]) -> FileReport:
        return _check_one_file(item, opts, ruleset, ws_cache)

    jobs = opts.jobs or max(1, min(len(texts), os.cpu_count() or 1))
    results: list[FileReport] = []
    done = 0
    # Workspace specs are read once per root before the pool starts, so the threads only read ws_cache. Their
    # problems (a bad table, a kernel name no file defines) are findings on kernellsp.toml's own lines.
    ws_cache, ws_findings = _workspace_specs(texts, ruleset, notes)
    with ThreadPoolExecutor(max_workers=jobs) as pool:
        for res in pool.map(one, texts):
            results.append(res)
            done += 1
            if progress is not None:
                progress(done, len(texts), res.path)
    if ws_findings and results:
        first = results[0]
        first.findings = sorted(
            [*first.findings, *rule_selection.apply(ws_findings, opts.selection, None)],
            key=lambda x: x.sort_key(),
        )
    return CheckReport(files=results, notes=notes, seconds=time.monotonic() - t0)


_WorkspaceSpecs = dict[Path | None, tuple[dict[str, spec.KernelSpec], str | None, set[str]]]


def _workspace_specs(
    texts: list[tuple[Path, str | None, str | None]], ruleset: rules.RuleSet, notes: list[str]
) -> tuple[_WorkspaceSpecs, list[Finding]]:
    """Each workspace root's specs, origin and invalid entries, and the findings on its kernellsp.toml."""
    ws_cache: _WorkspaceSpecs = {}
    ws_findings: list[Finding] = []
    for p, _t, _e in texts:
        root = spec.find_workspace_root(p)
        if root not in ws_cache:
            specs, issues, origin = spec.load_workspace_specs(root) if root else ({}, [], None)
            if root is not None:
                issues += spec.unknown_workspace_entries(root, origin, specs)
            ws_findings += spec_issue_findings(ruleset, [i for i in issues if i.path], str(p))
            notes.extend(iss.message for iss in issues if not iss.path)
            ws_cache[root] = (specs, origin, {i.entry for i in issues if i.entry})
    return ws_cache, ws_findings


def _check_one_file(
    item: tuple[Path, str | None, str | None],
    opts: CheckOptions,
    ruleset: rules.RuleSet,
    ws_cache: _WorkspaceSpecs,
) -> FileReport:
    """One file of :func:`check_paths`, read already: its report, or the reason it has none."""
    p, text, err = item
    if err is not None or text is None:
        return FileReport(path=str(p), error=err)
    if opts.cancel is not None and opts.cancel.is_set():
        return FileReport(path=str(p), error="cancelled")
    ws_specs, origin, invalid = ws_cache[spec.find_workspace_root(p)]
    try:
        fr = check_text(p, text, opts, ruleset, ws_specs, origin, ws_invalid=invalid)
    except Cancelled:
        return FileReport(path=str(p), error="cancelled")
    if not text.isascii():
        with contextlib.suppress(OSError):
            bad = utf8_problem(p.read_bytes())
            if bad is not None:
                lines = fr.model.lines if fr.model is not None else []
                f = _builtin(
                    ruleset,
                    "source-encoding",
                    str(p),
                    line_range(bad[0], lines[bad[0]] if bad[0] < len(lines) else None),
                    {"message": bad[1]},
                )
                if f is not None:
                    fr.findings = sorted(
                        [*fr.findings, *rule_selection.apply([f], opts.selection, lines)],
                        key=lambda x: x.sort_key(),
                    )
    return fr
