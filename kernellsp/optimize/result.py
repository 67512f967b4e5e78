"""What an optimize run is given and what it gives back: its budgets and gates (:class:`OptimizeOptions`),
one record per verified candidate (:class:`CandidateRecord`), the run's result with its summary and diff
(:class:`OptimizeResult`), and :class:`OptimizeError` when the loop cannot run."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from kernellsp.optimize.verify.gate import Verdict, VerifyOptions, unified_diff


class OptimizeError(RuntimeError):
    """The loop could not run (no spec, runner down, nothing to propose); the message names the fix."""


@dataclass
class OptimizeOptions:
    """Budgets and gates of one optimize run."""

    rounds: int = 4
    candidates: int = 4
    patience: int = 2
    min_gain_pct: float = 2.0
    near_roofline_pct: float = 90.0
    time_budget_s: float = 1800.0
    #: Candidates verified at once (builds overlap; GPU steps take turns).
    parallel: int = 4
    #: Gates of the final verification against the original: this verdict alone decides.
    verify: VerifyOptions = field(default_factory=VerifyOptions)
    #: Seeds per candidate during the rounds (selection only; the final check uses ``verify.seeds``).
    round_seeds: int = 1
    #: Run compute-sanitizer on every round's candidates too (the final check always does).
    round_sanitize: bool = False
    #: Time a round's candidate for one A/B round before checking it, and refuse it unchecked when it cannot
    #: become the round's champion (``VerifyOptions.screen_speedup``; the final check never screens).
    round_screen: bool = True


@dataclass
class CandidateRecord:
    """One verified candidate, for the bundle, the memory and the progress display."""

    round: int
    index: int
    key: str
    description: str
    proposer: str
    rules: list[str]
    predicted_gain_pct: float | None
    verdict: str
    message: str
    speedup_vs_champion: float | None
    seconds: float
    baseline_ms: float | None = None
    candidate_ms: float | None = None
    #: Seconds per gate of this candidate's verification (build, correctness, timing, ...).
    phase_seconds: dict[str, float] = field(default_factory=dict)


@dataclass
class OptimizeResult:
    """What the loop produced."""

    path: str
    entry: str
    original_text: str
    champion_text: str
    accepted: bool
    final: Verdict | None
    candidates: list[CandidateRecord]
    rounds_run: int
    stop_reason: str
    bundle: str | None
    wall_s: float
    environment: dict[str, Any]
    #: The candidate chosen as champion in each round that found a gain, in order.
    winners: list[str] = field(default_factory=list)
    #: The gate settings of the final verification (``replay`` re-runs it with these).
    verify_options: dict[str, Any] = field(default_factory=dict)
    #: Wall seconds per step of the run: prepare, ``roundN_propose``, ``roundN_verify``, ``final_verify``.
    phases: dict[str, float] = field(default_factory=dict)

    @property
    def speedup(self) -> float | None:
        return self.final.speedup if self.final is not None and self.final.accepted else None

    def diff(self) -> str:
        return unified_diff(self.original_text, self.champion_text, Path(self.path).name)

    def summary(self) -> dict[str, Any]:
        return {
            "path": self.path,
            "entry": self.entry,
            "accepted": self.accepted,
            "speedup": self.speedup,
            "final_verdict": self.final.kind if self.final else None,
            "final_message": self.final.message if self.final else None,
            "final_stats": self.final.stats if self.final else None,
            "roofline": {
                k: v for k, v in (self.final.details if self.final else {}).items() if "roofline" in k
            },
            "rounds": self.rounds_run,
            "stop_reason": self.stop_reason,
            "bundle": self.bundle,
            "winners": self.winners,
            "wall_s": self.wall_s,
            "phases": self.phases,
            "candidates": [asdict(c) for c in self.candidates],
            "environment": self.environment,
            "verify_options": self.verify_options,
        }
