"""Plain-text renderings of the results the command line prints, one function per object: a verdict, an
optimize run, a replay, the loop's history, ``optimize --explain``'s recipe checks, a rule and the doctor's
checks. Each returns the text without its final newline (the caller prints it as one line would be)."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Any


def verdict_text(v: Any) -> str:
    """``verify``'s verdict: kind and message, where it was decided, and the sandbox that confined the run."""
    lines = [f"{v.kind}: {v.message}"]
    env = v.environment
    if not env.get("gpu"):
        lines.append(f"  decided before any GPU work (scope and launch checks), {v.seconds:.1f} s")
    else:
        lines.append(
            f"  on {env.get('gpu', '?')} (driver {env.get('driver', '?')}, nvcc {env.get('nvcc_version', '?')}, "
            f"ncu {env.get('ncu_version', '?')}), {v.seconds:.1f} s"
        )
    box = env.get("sandbox")
    if isinstance(box, dict) and box.get("summary"):
        lines.append(f"  {box['summary']}")
    return "\n".join(lines)


def optimize_text(file: Path, entry: str, result: Any, apply: bool, applied: str | None) -> str:
    """An optimize run: the verified gain with the diff (or the backup, when applied), or why there is none;
    then the evidence bundle."""
    lines = []
    if result.accepted and result.final is not None:
        lines.append(f"{file}:{entry}: verified {result.final.message}")
        if not apply:
            lines.append(result.diff())
        else:
            lines.append(f"applied; backup {applied} (undo with `kernellsp revert {file}`)")
    else:
        why = f"{result.final.kind}: {result.final.message}" if result.final else result.stop_reason
        lines.append(f"{file}:{entry}: no verified improvement ({why}); the file is unchanged")
    lines.append(f"evidence: {result.bundle}")
    return "\n".join(lines)


def replay_text(v: Any, recorded: dict[str, Any], same: bool) -> str:
    """A replayed verdict beside the recorded one."""
    return "\n".join(
        [
            f"recorded: {recorded.get('kind')}: {recorded.get('message')}",
            f"replayed: {v.kind}: {v.message}",
            "same verdict" if same else "DIFFERENT verdict",
        ]
    )


def history_text(records: Iterable[dict[str, Any]]) -> str:
    """The loop's memory, one line per candidate: idea, proposer, verdict, predicted vs measured gain."""
    lines = []
    for r in records:
        pred = f"{r['predicted_gain_pct']:.0f}%" if r.get("predicted_gain_pct") is not None else "-"
        meas = f"{r['measured_speedup']:.3f}x" if r.get("measured_speedup") else "-"
        lines.append(
            f"{r.get('time', '')} {r['file']}:{r['entry']} [{r.get('proposer')}] {r.get('description')}: "
            f"{r.get('verdict')} (predicted {pred}, measured {meas})"
        )
    return "\n".join(lines)


def explain_text(file: Path, entry: str, rows: list[Any], fired: list[Any] | None = None) -> str:
    """``optimize --explain``: the canonicalisation passes that fired, then every recipe check, matched ones
    first (with the binding), then the declined."""
    lines = [f"{file}:{entry}: {sum(r.matched for r in rows)} of {len(rows)} recipe checks match"]
    for f in fired or []:
        where = f" on {f.kernel}" if f.kernel != entry else ""
        lines.append(f"  after    {f.name}{where}: " + "; ".join(f.notes))
    for r in sorted(rows, key=lambda r: (not r.matched, r.kernel, r.recipe)):
        where = f" on {r.kernel}" if r.kernel and r.kernel != entry else ""
        if r.matched:
            binding = ", ".join(f"{k}={v}" for k, v in r.binding.items())
            lines.append(f"  matched  {r.recipe}{where} [{r.archetype}; {', '.join(r.rules)}]: {binding}")
        else:
            lines.append(f"  declined {r.recipe}{where}: {r.reason}")
    return "\n".join(lines)


def rule_line(r: Any) -> str:
    """A rule in the rule matrix: code, severity, scope, source, name and title."""
    return f"{r.code}  {r.severity.value:<7}  {r.scope:<6}  {r.source:<7}  {r.name}: {r.title}"


def rule_text(r: Any) -> str:
    """One rule in full: metadata, condition, message, fix, how to silence it, and its guidance."""
    lines = [
        f"{r.code} {r.name}: {r.title}",
        f"  severity: {r.severity.value}   scope: {r.scope}   category: {r.category}   source: {r.source}",
        f"  when:     {r.when}" if r.when else f"  emitter:  {r.emitter}",
        f"  message:  {r.message}",
        f"  fix:      {r.fix}",
        f'  silence:  `// kernellsp: ignore[{r.code}]` on the line or the line above; ignore = ["{r.code}"] in '
        f"kernellsp.toml [settings]; --ignore {r.code}",
        f"  file:     {r.origin}",
        "",
        r.guidance.strip(),
    ]
    if r.references:
        lines += ["", *[f"  see {u}" for u in r.references]]
    return "\n".join(lines)


def doctor_text(checks: Iterable[Any]) -> str:
    """The doctor's checks, one line each, with the fix under each that is not ok."""
    mark = {"ok": "ok  ", "missing": "MISS", "warn": "warn"}
    lines = []
    for c in checks:
        lines.append(f"[{mark[c.status]}] {c.name:<18} {c.detail}")
        if c.fix and c.status != "ok":
            lines.append(f"       fix: {c.fix}")
    return "\n".join(lines)
