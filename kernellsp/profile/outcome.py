"""What a profile run is given (:class:`ProfileOptions`) and gives back (:class:`ProfileOutcome`), and the
error that names what stopped it (:class:`ProfileError`)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kernellsp.findings import Finding
from kernellsp.profile.findings import KernelSummary

#: The on-save set. MemoryWorkloadAnalysis_Tables is left to the deep set: it cost 2.0 of 5.4 s on an
#: H200 (tests/bench/results/ncu-sections-h200.md) and the line rules take bank conflicts from SourceCounters.
FAST_SECTIONS = ["SpeedOfLight", "LaunchStats", "Occupancy", "WarpStateStats", "SourceCounters"]


class ProfileError(RuntimeError):
    """Profiling could not run; the message names the problem and the fix."""

    def __init__(self, message: str, kind: str = "profile") -> None:
        super().__init__(message)
        self.kind = kind


@dataclass
class ProfileOptions:
    """What to collect and how."""

    arch: str = "sm_90"
    sections: list[str] = field(default_factory=lambda: list(FAST_SECTIONS))
    deep: bool = False
    deep_set: str = "full"
    timeout_s: float = 300.0
    build_timeout_s: float = 180.0
    seed: int = 1
    shape: int = 0
    max_launches: int = 20
    use_cache: bool = True
    save_report_dir: Path | None = None
    kernels: list[str] | None = None
    #: ``time.monotonic()`` before which ncu must not start (the editor's debounce: a burst of saves builds at
    #: once, in parallel with the wait, but only the newest save reaches the GPU). ``None``: no wait.
    gpu_not_before: float | None = None
    #: Build a ``__global__`` entry device-only (a cubin, with a host harness built once per plan) where it can
    #: (:mod:`kernellsp.run.harness.cubin`); ``KERNELLSP_NO_CUBIN=1`` turns it off too.
    device_only: bool = True

    @classmethod
    def from_settings(cls, settings: Any, **overrides: Any) -> ProfileOptions:
        """The options the settings ask for (arch, section sets, timeouts); ``overrides`` win (command-line flags)."""
        base = dict(
            arch=settings.arch,
            sections=list(settings.ncu_fast_sections),
            deep_set=settings.ncu_deep_set,
            timeout_s=settings.profile_timeout_s,
            build_timeout_s=settings.build_timeout_s,
        )
        return cls(**{**base, **overrides})


@dataclass
class ProfileOutcome:
    """Everything one profile run produced."""

    path: str
    findings: list[Finding]
    kernels: list[KernelSummary]
    environment: dict[str, Any]
    notes: list[str]
    wall_s: float
    cached: bool = False
    reports: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {
            "path": self.path,
            "findings": [f.model_dump(mode="json") for f in self.findings],
            "kernels": [k.__dict__ for k in self.kernels],
            "environment": self.environment,
            "notes": self.notes,
            "wall_s": self.wall_s,
            "reports": self.reports,
        }

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> ProfileOutcome:
        return cls(
            path=d["path"],
            findings=[Finding.model_validate(f) for f in d["findings"]],
            kernels=[KernelSummary(**k) for k in d["kernels"]],
            environment=d["environment"],
            notes=d["notes"],
            wall_s=d["wall_s"],
            reports=d.get("reports", []),
        )


# --------------------------------------------------------------------------------------------------
# The job
