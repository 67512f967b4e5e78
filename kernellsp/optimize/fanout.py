"""Optimize every spec'd entry of a tree: ``kernellsp optimize PATH... --all``.

Each entry gets its own run of the loop (:func:`kernellsp.optimize.loop.optimize`): its own proposers, bundle
and final verification. With the pool runner the runs go side by side, each bound to one GPU model group of
the pool (so its verdicts are compared only with verdicts from GPUs of that model), and their candidates
queue for the pool's GPUs together: more entries in flight than GPUs keeps every GPU busy while a run
waits for the slowest candidate of its round. With a local or ssh runner the entries run one after another
(one GPU: parallel runs would only take turns on it).

The outcome of each entry is one :class:`EntryOutcome` (baseline and best time, speedup, verdict, wall
time); :func:`summary_text`, :func:`summary_json` and :func:`summary_html` render the table.
"""

from __future__ import annotations

import html
import json
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from kernellsp.findings import Finding
from kernellsp.optimize.loop import optimize
from kernellsp.optimize.propose.base import Proposer
from kernellsp.optimize.result import OptimizeError, OptimizeOptions, OptimizeResult
from kernellsp.run.runner import Runner, RunnerError


@dataclass
class EntryJob:
    """One spec'd entry of one file."""

    path: Path
    entry: str
    text: str

    @property
    def label(self) -> str:
        return f"{self.path}:{self.entry}"


def find_entries(files: list[Path]) -> tuple[list[EntryJob], list[str]]:
    """Every entry with a valid launch spec in ``files`` (from :func:`kernellsp.source.files.collect_files`), and a
    note for each file that cannot be read or defines kernels none of which has a spec."""
    from kernellsp.source.files import read_source
    from kernellsp.source.model import parse_source
    from kernellsp.source.spec import specs_from_source

    jobs: list[EntryJob] = []
    notes: list[str] = []
    for f in files:
        text, err = read_source(f)
        if text is None:
            notes.append(f"{f}: skipped: {err}")
            continue
        model = parse_source(text, str(f))
        bound = specs_from_source(model)[0]
        if not bound and any(fn.kind == "global" for fn in model.functions):
            notes.append(
                f"{f}: no spec'd entry (add a /* kernellsp ... */ launch spec above a kernel to include it)"
            )
        seen: set[str] = set()
        for b in bound:
            if b.entry not in seen:  # the first spec bound to an entry is the one that runs it
                seen.add(b.entry)
                jobs.append(EntryJob(f, b.entry, text))
    return jobs, notes


@dataclass
class EntryOutcome:
    """One row of the summary."""

    path: str
    entry: str
    #: The final verdict (``accepted``, ``not_faster``, ...), or ``no_candidates``, ``no_gain``, ``error``, ``cancelled``.
    verdict: str
    accepted: bool
    baseline_ms: float | None
    best_ms: float | None
    speedup: float | None
    wall_s: float
    gpu: str | None
    message: str
    bundle: str | None = None
    candidates: int = 0
    rounds: int = 0

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def outcome_of(
    job: EntryJob, result: OptimizeResult | None, error: str | None, wall_s: float, gpu: str | None = None
) -> EntryOutcome:
    """The summary row of one entry's run (``error``: it could not run)."""
    if result is None:
        kind = "cancelled" if error == "cancelled" else "error"
        return EntryOutcome(str(job.path), job.entry, kind, False, None, None, None, wall_s, gpu, error or "")
    final = result.final
    gpu = result.environment.get("gpu") or gpu
    base_ms = best_ms = None
    if final is not None and final.stats:
        base_ms, best_ms = final.stats.get("baseline_median_ms"), final.stats.get("candidate_median_ms")
    else:
        # No champion to verify: the baseline time the first round measured (every candidate of round 1 was
        # timed against the original), and no better one.
        timed = [c.baseline_ms for c in result.candidates if c.round == 1 and c.baseline_ms is not None]
        base_ms = sorted(timed)[len(timed) // 2] if timed else None
    if final is not None:
        verdict, message = final.kind, final.message
        if not final.accepted:
            best_ms = base_ms
    elif result.candidates and all(c.verdict == "error" for c in result.candidates):
        # Not one candidate could be verified (a baseline that fails on the GPU, no worker left): say why.
        verdict, message = "error", result.candidates[0].message
    else:
        verdict = {"no new candidates": "no_candidates", "cancelled": "cancelled"}.get(
            result.stop_reason, "no_gain"
        )
        message = f"stopped: {result.stop_reason}"
        best_ms = base_ms
    return EntryOutcome(
        str(job.path),
        job.entry,
        verdict,
        result.accepted,
        base_ms,
        best_ms,
        result.speedup,
        wall_s,
        gpu,
        message,
        result.bundle,
        len(result.candidates),
        result.rounds_run,
    )


def _assign_groups(jobs: list[EntryJob], groups: dict[str, int]) -> list[str]:
    """A GPU model per job: each to the group with the fewest jobs per GPU so far (the largest group first)."""
    load = dict.fromkeys(groups, 0)
    out = []
    for _ in jobs:
        m = min(groups, key=lambda g: ((load[g] + 1) / groups[g], -groups[g], g))
        load[m] += 1
        out.append(m)
    return out


def optimize_all(
    jobs: list[EntryJob],
    runner: Runner,
    proposers: Callable[[EntryJob], list[Proposer]],
    options: Callable[[EntryJob], OptimizeOptions],
    findings: Callable[[EntryJob], list[Finding]] | None = None,
    cancel: threading.Event | None = None,
    progress: Callable[[EntryJob, str], None] | None = None,
    on_done: Callable[[EntryOutcome], None] | None = None,
    parallel: int | None = None,
) -> list[EntryOutcome]:
    """Run the loop on every job; outcomes in the order of ``jobs``.

    ``proposers`` and ``options`` are called once per job (a proposer may hold per-run state, such as an LLM
    token budget). ``parallel``: entries in flight at once (default: twice the pool's GPUs; 1 off the pool).
    An entry that fails (no GPU worker, a broken baseline) is an ``error`` row; the others go on.
    """
    cancel = cancel if cancel is not None else threading.Event()
    groups_of = getattr(runner, "groups", None)
    if callable(groups_of):
        groups = {m: len(ws) for m, ws in groups_of().items()}
        models: list[str | None] = list(_assign_groups(jobs, groups))
        width = parallel or max(1, 2 * sum(groups.values()))
    else:
        models = [None] * len(jobs)
        width = parallel or 1

    # Each entry runs under an event of its own that the caller's cancel sets: the loop sets its run's event
    # when one of its candidates fails (to stop the others), which must stop that entry, not the whole fan-out.
    entry_cancel = [threading.Event() for _ in jobs]
    finished = threading.Event()

    def relay() -> None:
        while not finished.is_set():
            if cancel.wait(0.2):
                for e in entry_cancel:
                    e.set()
                return

    threading.Thread(target=relay, name="kernellsp-fanout-cancel", daemon=True).start()

    def one(i: int) -> EntryOutcome:
        job = jobs[i]
        t0 = time.monotonic()
        if cancel.is_set():
            return outcome_of(job, None, "cancelled", 0.0)
        run_on = runner.for_model(models[i]) if models[i] is not None else runner  # type: ignore[attr-defined]
        say = (lambda m, _p: progress(job, m)) if progress is not None else None
        try:
            result = optimize(
                job.path,
                job.text,
                job.entry,
                run_on,
                proposers(job),
                options(job),
                findings(job) if findings is not None else None,
                cancel=entry_cancel[i],
                progress=say,
            )
            out = outcome_of(job, result, None, time.monotonic() - t0, models[i])
        except Exception as exc:
            from kernellsp.build.nvcc import Cancelled
            from kernellsp.optimize.verify.gate import VerifyError

            # An error is named as itself, even when the loop then cancelled the entry's other candidates.
            if isinstance(exc, OptimizeError | VerifyError | RunnerError):
                out = outcome_of(job, None, str(exc), time.monotonic() - t0, models[i])
            elif isinstance(exc, Cancelled) or cancel.is_set():
                out = outcome_of(job, None, "cancelled", time.monotonic() - t0, models[i])
            else:
                raise
        if on_done is not None:
            on_done(out)
        return out

    try:
        with ThreadPoolExecutor(max_workers=max(1, min(width, len(jobs)))) as ex:
            futures = [ex.submit(one, i) for i in range(len(jobs))]
            try:
                return [f.result() for f in futures]
            except BaseException:
                cancel.set()  # Ctrl-C: stop every run now, not after each finishes
                raise
    finally:
        finished.set()


# --------------------------------------------------------------------------------------------------
# The summary table


def _ms(v: float | None) -> str:
    return f"{v:.4f}" if v is not None else "-"


def _x(v: float | None) -> str:
    return f"{v:.2f}x" if v is not None else "-"


def _totals(outcomes: list[EntryOutcome]) -> dict[str, Any]:
    accepted = [o for o in outcomes if o.accepted]
    return {
        "entries": len(outcomes),
        "accepted": len(accepted),
        "errors": sum(o.verdict == "error" for o in outcomes),
        "wall_s_sum": round(sum(o.wall_s for o in outcomes), 1),
    }


def summary_text(outcomes: list[EntryOutcome], wall_s: float | None = None) -> str:
    """The table as aligned text (one row per entry) with a totals line."""
    head = ("entry", "GPU", "baseline ms", "best ms", "speedup", "verdict", "wall s")
    rows = [
        (
            f"{o.path}:{o.entry}",
            o.gpu or "-",
            _ms(o.baseline_ms),
            _ms(o.best_ms),
            _x(o.speedup),
            o.verdict,
            f"{o.wall_s:.1f}",
        )
        for o in outcomes
    ]
    widths = [max(len(r[i]) for r in [head, *rows]) for i in range(len(head))]
    right = {2, 3, 4, 6}

    def line(r: tuple[str, ...]) -> str:
        return "  ".join(
            c.rjust(w) if i in right else c.ljust(w) for i, (c, w) in enumerate(zip(r, widths, strict=True))
        )

    t = _totals(outcomes)
    out = [line(head), *(line(r) for r in rows)]
    tail = f"{t['accepted']} of {t['entries']} entries faster (verified)"
    if t["errors"]:
        tail += f", {t['errors']} could not run"
    if wall_s is not None:
        tail += f"; {wall_s:.1f} s in all"
    why = [f"  {o.path}:{o.entry}: {o.message}" for o in outcomes if o.verdict == "error"]
    return "\n".join([*(ln.rstrip() for ln in out), tail, *why]) + "\n"


def summary_json(
    outcomes: list[EntryOutcome], wall_s: float | None = None, extra: dict[str, Any] | None = None
) -> str:
    """The table as JSON: ``{"entries": [...], "totals": {...}}`` (plus ``extra``, e.g. the pool)."""
    doc: dict[str, Any] = {
        "entries": [o.to_dict() for o in outcomes],
        "totals": {**_totals(outcomes), "wall_s": wall_s},
    }
    doc.update(extra or {})
    return json.dumps(doc, indent=2, default=str) + "\n"


def summary_html(outcomes: list[EntryOutcome], title: str, wall_s: float | None = None) -> str:
    """One self-contained page with the table (the HTML profile report's style; no scripts)."""
    from kernellsp.report.html import _CSS

    esc = html.escape
    t = _totals(outcomes)
    rows = []
    for o in outcomes:
        cls = "ok" if o.accepted else "err" if o.verdict == "error" else ""
        rows.append(
            f"<tr class='{cls}'><td><code>{esc(o.path)}</code></td><td><code>{esc(o.entry)}</code></td>"
            f"<td>{esc(o.gpu or '-')}</td><td class='n'>{_ms(o.baseline_ms)}</td><td class='n'>{_ms(o.best_ms)}</td>"
            f"<td class='n'>{_x(o.speedup)}</td><td>{esc(o.verdict)}</td><td class='n'>{o.wall_s:.1f}</td>"
            f"<td class='muted'>{esc(o.message[:300])}</td></tr>"
        )
    sub = f"{t['accepted']} of {t['entries']} entries faster (verified)" + (
        f"; {wall_s:.1f} s in all" if wall_s else ""
    )
    css = (
        _CSS + "td.n{text-align:right;font-variant-numeric:tabular-nums}tr.ok td{background:#eef8ee}"
        "tr.err td{background:#fdf0f0}table.summary td{border-bottom:1px solid #eee}"
    )
    return (
        "<!doctype html><html><head><meta charset='utf-8'>"
        f"<title>{esc(title)}</title><style>{css}</style></head><body>"
        f"<header><h1>{esc(title)}</h1><p>{esc(sub)}</p></header><main><table class='summary'>"
        "<tr><th>file</th><th>entry</th><th>GPU</th><th>baseline ms</th><th>best ms</th><th>speedup</th>"
        "<th>verdict</th><th>wall s</th><th>message</th></tr>" + "".join(rows) + "</table></main>"
        "<footer>Every speedup is the final verification of the entry's champion against its original file "
        "(every seed and shape, compute-sanitizer, A/B timing on one GPU); evidence bundles in "
        ".kernellsp/runs/.</footer></body></html>\n"
    )


__all__ = [
    "EntryJob",
    "EntryOutcome",
    "find_entries",
    "optimize_all",
    "outcome_of",
    "summary_html",
    "summary_json",
    "summary_text",
]
