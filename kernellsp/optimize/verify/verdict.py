"""What a verification answers: the verdict kinds, the options, the verdict and the error that is none."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any

Progress = Callable[[str, float | None], None]

VERDICTS = (
    "accepted",
    "scope_violation",
    "compile_error",
    "timing_dependent",
    "precision_downgrade",
    "runtime_error",
    "timeout",
    "input_mutated",
    "unwritten_output",
    "mismatch",
    "degenerate_reference",
    "sanitizer",
    "sanitizer_unavailable",
    "not_faster",
    # The loop's rounds only: faster than the baseline, but its interval lies below the speedup of a
    # candidate already accepted in the round, so it cannot become champion and is not checked further.
    "outpaced",
    "suspect_speedup",
    "timing_anomaly",
    "sandbox_violation",
)


class VerifyError(RuntimeError):
    """The verification could not run (baseline broken, no spec, runner problem): not a verdict."""


@dataclass
class VerifyOptions:
    """How hard to check and time."""

    arch: str = "sm_90"
    seeds: int = 3
    min_gain_pct: float = 2.0
    rounds: int = 5
    reps: int = 15
    warmup: int = 3
    timeout_s: float = 120.0
    build_timeout_s: float = 240.0
    sanitize: bool = True
    #: compute-sanitizer tools, each run where it applies (racecheck: shared memory; synccheck: barriers
    #: or warp primitives; initcheck: host launchers, whose scratch allocations nobody else initialises).
    sanitizer_tools: tuple[str, ...] = ("memcheck", "racecheck", "synccheck", "initcheck")
    #: Sanitize every distinct shape (the final verification); False: the smallest only (cheap rounds).
    sanitize_all_shapes: bool = True
    sanitizer_timeout_s: float = 300.0
    #: compute-sanitizer runs side by side on the GPU (each holds it in shared mode; the tools' findings do
    #: not depend on the GPU being quiet, unlike timing).
    sanitizer_parallel: int = 4
    #: The candidate's correctness runs hold the GPU alone (True, the final verification): nothing else's
    #: kernels run between the harness's shared-memory poison and the candidate's launch, so a read of
    #: shared memory the candidate never wrote sees the poison and nothing else. False (the loop's rounds,
    #: which only select a champion): they run beside the other candidates' and baselines' checks.
    exclusive_checks: bool = True
    #: racecheck and synccheck instrument every shared-memory access, so on a heavy main shape (a 4096^3
    #: GEMM) they run for many minutes. Past this many seconds on a shape larger than one where the same
    #: tool already passed, the run is stopped and recorded as bounded (memcheck and the guard pages
    #: still cover that shape); on the smallest such shape, or for memcheck/initcheck, the limit is
    #: ``sanitizer_timeout_s`` and running out of it refuses the candidate.
    hazard_check_budget_s: float = 90.0
    #: Sequential timing: the interval is looked at after each round from this one on (never before it),
    #: and timing stops once it clears the minimum gain or lies below it (:func:`timing.decision`).
    min_rounds: int = 3
    #: The loop's rounds only: one A/B timing round before correctness, refusing a candidate whose interval
    #: lies wholly below this speedup over the baseline (it could not become champion) without checking
    #: it (:func:`kernellsp.optimize.verify.timing_gate.screen_candidate`). None: no screen (the default,
    #: and always in the final verification).
    screen_speedup: float | None = None
    time_candidate: bool = True
    #: Skip correctness and sanitizer (A/A timing studies only; never used for acceptance).
    timing_only: bool = False
    #: Structured input patterns checked beside the spec's distribution (one input set each, every shape).
    patterns: tuple[str, ...] = ("spikes", "alternating", "ramp", "wide", "tail", "offset")
    #: Check the patterns and the alternate poison on the main shape too (the final verification). The
    #: rounds, which only select a champion, check the patterns on the edge shapes and the spec's seeds on
    #: the main one: on a large main shape each input set costs a second per side.
    main_shape_patterns: bool = True
    #: Error budget factor (:func:`kernellsp.optimize.verify.correctness.error_budget`); 0 turns it off.
    error_budget: float = 10.0
    #: Timed launches per candidate timing round whose outputs are compared with the baseline's.
    check_launches: int = 2
    #: A time this much below the spec's bytes at the measured copy bandwidth is ``suspect_speedup``.
    bandwidth_margin: float = 1.25
    #: The run seed all input seeds derive from; None draws one from the OS (the verdict records it).
    run_seed: int | None = None
    #: "strict": approximate or reduced-precision math the baseline does not use is refused
    #: (:mod:`kernellsp.optimize.verify.precision_ops`); "fast": allowed, with a wider error budget.
    precision: str = "strict"
    #: Shapes nobody declared, drawn within the spec's sizes and checked beside the declared ones
    #: (:mod:`kernellsp.optimize.verify.drawn_shapes`); 0 turns them off.
    drawn_shapes: int = 3
    #: The seed the drawn shapes come from; None: the run seed. The optimize loop gives one per run, so its
    #: rounds and final verification build the same harnesses.
    shape_seed: int | None = None


@dataclass
class Verdict:
    """The outcome of one verification."""

    kind: str
    accepted: bool
    message: str
    entry: str
    details: dict[str, Any] = field(default_factory=dict)
    stats: dict[str, Any] | None = None
    environment: dict[str, Any] = field(default_factory=dict)
    timings: dict[str, Any] = field(default_factory=dict)
    seconds: float = 0.0

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @property
    def speedup(self) -> float | None:
        return self.stats["speedup"] if self.stats else None


def reject(kind: str, entry: str, message: str, **details: Any) -> Verdict:
    return Verdict(kind=kind, accepted=False, message=message, entry=entry, details=details)
