"""Job steps that run in worker processes (see :mod:`kernellsp.lsp.procpool`).

:func:`check_document` checks one buffer and converts the findings to LSP diagnostics in wire
format (plain dicts), so the server process only unpickles the result and writes it out.
:func:`parse_document` parses a buffer for commands. Both return models without their tree-sitter
tree (it cannot be pickled; nothing in the server needs it). Nothing here imports pygls or
lsprotocol, so worker processes start quickly.

``KERNELLSP_TEST_JOB_DELAY`` (seconds) makes every check wait that long, cancellably, before it
starts: a test hook for exercising slow jobs. It only delays; results are always real.
"""

from __future__ import annotations

import os
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast

from kernellsp.build import toolchain
from kernellsp.build.nvcc import Cancelled
from kernellsp.check import (
    CheckError,
    CheckOptions,
    FileReport,
    check_text,
    project_options,
    spec_issue_findings,
)
from kernellsp.lsp.convert import RangeMapper, diagnostic
from kernellsp.rules import engine as rules_mod
from kernellsp.settings import Settings
from kernellsp.source import spec
from kernellsp.source.model import SourceModel, parse_source

TEST_DELAY_ENV = "KERNELLSP_TEST_JOB_DELAY"


@dataclass
class ClientOptions:
    """What the diagnostics may contain for this client."""

    position_encoding: str = "utf-16"
    code_description: bool = True
    related_information: bool = True


@dataclass
class CheckOutcome:
    """A finished check: the report (model without tree), rules, diagnostics (wire format), notes."""

    report: FileReport
    rules: rules_mod.RuleSet
    diagnostics: list[dict[str, Any]]
    notes: list[str] = field(default_factory=list)
    seconds: float = 0.0
    #: Diagnostics of other files, by path: the workspace spec file's (kernellsp.toml), even when empty, so that
    #: fixed problems disappear there too.
    other_files: dict[str, list[dict[str, Any]]] = field(default_factory=dict)


def _test_delay() -> float:
    try:
        return max(0.0, float(os.environ.get(TEST_DELAY_ENV, "0") or 0))
    except ValueError:
        return 0.0


def check_document(
    uri: str,
    path: Path,
    text: str,
    settings: Settings,
    workspace: Path | None,
    client: ClientOptions,
    cancel: Any = None,
) -> CheckOutcome:
    """Check ``text`` as the content of ``path`` and build its diagnostics.

    ``cancel`` is a :class:`threading.Event` or a :class:`~kernellsp.lsp.procpool.CancelFlag`;
    raises :class:`kernellsp.build.nvcc.Cancelled` when it is set before or during the build.
    """
    t0 = time.monotonic()
    flag = cast(threading.Event | None, cancel)
    delay = _test_delay()
    if flag is not None and ((delay and flag.wait(delay)) or flag.is_set()):
        raise Cancelled("check")
    notes: list[str] = []
    root = (spec.find_workspace_root(path) if path.parent.is_dir() else None) or workspace
    ruleset = rules_mod.load_rules(root)
    ws_specs, issues, origin = spec.load_workspace_specs(root) if root else ({}, [], None)
    if root is not None:
        issues += spec.unknown_workspace_entries(root, origin, ws_specs)
    notes.extend(i.message for i in issues if not i.path)
    nvcc = toolchain.find_tool("nvcc") is not None
    if not nvcc:
        notes.append(f"nvcc not found, so only source-level rules ran: {toolchain.INSTALL_HINTS['nvcc']}")
    try:
        flags, selection = project_options(settings, root)
    except (
        CheckError
    ) as exc:  # a bad flag or rule code: said once, and the file is still checked without them
        notes.append(str(exc))
        flags, selection = None, None
    options = CheckOptions(
        arch=settings.arch,
        build=nvcc,
        build_timeout_s=settings.build_timeout_s,
        workspace=root,
        cancel=flag,
        flags=flags,
        selection=selection,
    )
    report = check_text(
        path, text, options, ruleset, ws_specs, origin, ws_invalid={i.entry for i in issues if i.entry}
    )
    if report.build is not None and report.build.error:
        notes.append(f"build of {path.name}: {report.build.error}")
    # Findings on kernellsp.toml (a bad [kernels.X] table, a kernel name no file defines) go to that file.
    elsewhere = [f for f in report.findings if f.path != str(path)]
    elsewhere += spec_issue_findings(ruleset, [i for i in issues if i.path], str(path))
    report.findings = [f for f in report.findings if f.path == str(path)]
    other: dict[str, list[dict[str, Any]]] = {origin: []} if origin else {}
    for opath in {f.path for f in elsewhere}:
        try:
            olines = Path(opath).read_text(encoding="utf-8", errors="replace").split("\n")
        except OSError:
            olines = []
        omapper = RangeMapper(client.position_encoding, olines)
        other[opath] = [
            diagnostic(
                f,
                Path(opath).as_uri(),
                omapper,
                ruleset,
                code_description=client.code_description,
                related_information=client.related_information,
            )
            for f in sorted(
                {(f.range.start_line, f.code, f.message): f for f in elsewhere if f.path == opath}.values(),
                key=lambda f: f.sort_key(),
            )
        ]
    lines = report.model.lines if report.model is not None else []
    mapper = RangeMapper(client.position_encoding, lines)
    diags = [
        diagnostic(
            f,
            uri,
            mapper,
            ruleset,
            code_description=client.code_description,
            related_information=client.related_information,
        )
        for f in report.findings
    ]
    if report.model is not None:
        report.model.tree = None
    return CheckOutcome(
        report=report,
        rules=ruleset,
        diagnostics=diags,
        notes=notes,
        seconds=time.monotonic() - t0,
        other_files=other,
    )


def parse_document(text: str, path: str) -> SourceModel:
    """Parse a buffer (for commands); the model comes back without its tree."""
    model = parse_source(text, path)
    model.tree = None
    return model
