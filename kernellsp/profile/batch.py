"""Profiling many files in one run (``kernellsp check --profile``): each file with something to profile, one
GPU host failure said once instead of once per file."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

from kernellsp.profile.environment import runner_environment
from kernellsp.profile.ncu import ProfileError, ProfileOptions, ProfileOutcome, Progress, profile_file
from kernellsp.rules import engine as rules
from kernellsp.run.process import RunnerError
from kernellsp.run.runner import Runner
from kernellsp.source import spec
from kernellsp.source.model import parse_source

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
