"""The typed models of a profiled run: one :class:`KernelProfile` per launch, its per-line counters, NVIDIA's rule
results and source markers (read by :mod:`kernellsp.profile.report`, derived by :mod:`kernellsp.profile.derive`)."""

from __future__ import annotations

import os
from typing import Literal

from pydantic import BaseModel, Field

RuleType = Literal["OPT", "WRN", "INF", ""]
SpeedupType = Literal["local", "global"]

#: Per-PC counters with a named :class:`LineMetrics` field (summed per line).
LINE_FIELDS: dict[str, str] = {
    "inst_executed": "inst_executed",
    "thread_inst_executed": "thread_inst_executed",
    "thread_inst_executed_true": "thread_inst_executed_pred_on",
    "memory_l2_theoretical_sectors_global": "l2_sectors_global",
    "memory_l2_theoretical_sectors_global_ideal": "l2_sectors_global_ideal",
    "derived__memory_l2_theoretical_sectors_global_excessive": "l2_sectors_global_excessive",
    "memory_l2_theoretical_sectors_local": "l2_sectors_local",
    "memory_l1_tag_requests_global": "l1_requests_global",
    "memory_l1_wavefronts_shared": "shared_wavefronts",
    "memory_l1_wavefronts_shared_ideal": "shared_wavefronts_ideal",
    "derived__memory_l1_wavefronts_shared_excessive": "shared_wavefronts_excessive",
    "smsp__branch_targets_threads_divergent": "divergent_branches",
}


class ReportError(Exception):
    """A report could not be read (missing file, not a report, or the ncu-report package is absent)."""


class FocusMetric(BaseModel):
    """A metric a rule result points at (``focus_metrics`` of a rule result)."""

    name: str
    value: float | None = None
    severity: int = 0
    info: str = ""


class NcuRuleResult(BaseModel):
    """One result of an NVIDIA rule (what the CSV details page prints as a rule row)."""

    rule_identifier: str
    #: Display name of the rule ("Shared Memory Conflicts").
    name: str = ""
    #: Section identifier (``SpeedOfLight``, ``WarpStateStats``, ...).
    section: str = ""
    #: Often empty (IssueSlotUtilization, AchievedOccupancy, ThreadDivergence never set one).
    title: str = ""
    type: RuleType = ""
    #: Message with ncu's ``@section:…@`` / ``@url:…@`` markup flattened to text.
    message: str = ""
    raw_message: str = ""
    speedup_type: SpeedupType | None = None
    estimated_speedup_pct: float | None = None
    focus_metrics: list[FocusMetric] = Field(default_factory=list)

    @property
    def focus_metric_names(self) -> list[str]:
        """The names of the focus metrics."""
        return [f.name for f in self.focus_metrics]


class SourceMarker(BaseModel):
    """A rule's marker on a source line (``kind='source'``) or a SASS instruction (``kind='sass'``)."""

    rule_identifier: str
    section: str = ""
    kind: Literal["sass", "source"]
    type: RuleType = ""
    message: str = ""
    #: Source path as recorded on the profiling host, and its basename.
    path: str | None = None
    file: str | None = None
    line: int | None = None
    #: Absolute virtual address of the instruction (SASS markers); changes from run to run.
    pc: int | None = None


class LineMetrics(BaseModel):
    """Per-PC source counters of one source line, summed over the line's SASS instructions."""

    line: int
    #: Warp-level instructions executed (``inst_executed``).
    inst_executed: float = 0.0
    #: Thread-level instructions executed (``thread_inst_executed``) and predicated-on ones.
    thread_inst_executed: float = 0.0
    thread_inst_executed_pred_on: float = 0.0
    #: ``thread_inst_executed / inst_executed`` (32 = no divergence); None without instructions.
    avg_threads_executed: float | None = None
    #: Warp-stall samples: sum of ``smsp__pcsamp_warps_issue_stalled_<reason>`` over reasons
    #: (equals ``smsp__pcsamp_sample_count``, the source page's "Warp Stall Sampling (All Samples)").
    stall_samples: float = 0.0
    #: Sum of the ``..._not_issued`` variants ("Warp Stall Sampling (Not-issued Samples)").
    stall_samples_not_issued: float = 0.0
    #: Samples per stall reason (non-zero reasons only), keys as in :data:`STALL_REASONS`.
    stalls: dict[str, float] = Field(default_factory=dict)
    #: Theoretical L2 sectors for global accesses: total, ideal (fully coalesced) and excessive.
    l2_sectors_global: float = 0.0
    l2_sectors_global_ideal: float = 0.0
    l2_sectors_global_excessive: float = 0.0
    #: Theoretical L2 sectors for local memory (stack arrays, spills).
    l2_sectors_local: float = 0.0
    #: L1 tag requests for global accesses (``memory_l1_tag_requests_global``).
    l1_requests_global: float = 0.0
    #: Largest shared-memory bank-conflict degree of the line's instructions (1 = none, 32 = worst).
    shared_nway_max: float | None = None
    #: Shared-memory wavefronts: total, ideal and excessive.
    shared_wavefronts: float = 0.0
    shared_wavefronts_ideal: float = 0.0
    shared_wavefronts_excessive: float = 0.0
    #: Divergent branch targets (``smsp__branch_targets_threads_divergent``).
    divergent_branches: float = 0.0
    #: SASS opcode (first token after any predicate, modifiers kept: ``LDG.E.128``) → number of
    #: instructions of the line with that opcode (a static count, not an execution count).
    opcodes: dict[str, int] = Field(default_factory=dict)
    #: Number of SASS instructions attributed to the line (0 when loaded with ``sass=False``).
    sass_count: int = 0
    #: Other summable per-PC counters, by metric name (``smsp__sass_inst_executed_memdesc_*``, ...).
    counters: dict[str, float] = Field(default_factory=dict)

    def dominant_stall(self) -> tuple[str, float] | None:
        """The stall reason with most samples and its share of the line's samples, or None."""
        if not self.stalls or self.stall_samples <= 0:
            return None
        reason = max(self.stalls, key=lambda r: self.stalls[r])
        return reason, self.stalls[reason] / self.stall_samples

    def has_opcode(self, base: str) -> bool:
        """Whether an instruction of the line has this base opcode (``LDL`` matches ``LDL.64``)."""
        base = base.upper()
        return any(op.split(".", 1)[0] == base for op in self.opcodes)


class HotLine(BaseModel):
    """A source line ranked by its warp-stall samples (see :func:`hot_lines`)."""

    path: str
    file: str
    line: int
    samples: float
    #: Share of all the kernel's stall samples (0–1).
    share: float
    dominant_stall: str | None = None
    #: Share of the line's own samples taken by ``dominant_stall`` (0–1).
    dominant_stall_share: float | None = None
    metrics: LineMetrics


class KernelProfile(BaseModel):
    """One profiled kernel launch."""

    #: Launch index in profiling order (the action index; the CSV ``ID``).
    index: int
    range_index: int = 0
    #: Function base name (``copy_f4``), demangled signature and mangled name.
    name: str
    demangled_name: str = ""
    mangled_name: str = ""
    grid: tuple[int, int, int] = (0, 0, 0)
    block: tuple[int, int, int] = (0, 0, 0)
    #: Identifiers of the sections collected for this launch.
    sections: list[str] = Field(default_factory=list)
    metrics: dict[str, float] = Field(default_factory=dict)
    strings: dict[str, str] = Field(default_factory=dict)
    #: Warp-level instructions executed per SASS opcode (``sass__inst_executed_per_opcode``).
    opcode_mix: dict[str, float] = Field(default_factory=dict)
    ncu_rules: list[NcuRuleResult] = Field(default_factory=list)
    source_markers: list[SourceMarker] = Field(default_factory=list)
    #: Recorded path of the kernel's own source file and the line of its entry instruction.
    source_file: str | None = None
    source_line: int | None = None
    #: Recorded source path → line → counters. Includes CUDA headers the kernel's code came from.
    files: dict[str, dict[int, LineMetrics]] = Field(default_factory=dict)
    #: Stall samples of all PCs, and the part that no source line could take.
    stall_samples: float = 0.0
    unattributed_stall_samples: float = 0.0
    unattributed_inst_executed: float = 0.0
    #: :func:`derive`'s values, filled by :func:`load_report`.
    derived: dict[str, float] = Field(default_factory=dict)

    @property
    def lines(self) -> dict[int, LineMetrics]:
        """Per-line counters of the kernel's own source file (empty without source counters)."""
        if self.source_file is None:
            return {}
        return self.files.get(self.source_file, {})

    @property
    def has_source_counters(self) -> bool:
        """Whether the report holds per-PC data for this launch."""
        return bool(self.files) or self.stall_samples > 0

    def lines_for(self, source_path: str | os.PathLike[str]) -> dict[int, LineMetrics]:
        """Per-line counters of the file whose basename matches ``source_path``'s (merged if several)."""
        base = os.path.basename(os.fspath(source_path))
        matches = [lines for path, lines in self.files.items() if os.path.basename(path) == base]
        if len(matches) == 1:
            return matches[0]
        merged: dict[int, LineMetrics] = {}
        for lines in matches:
            for ln, lm in lines.items():
                merged[ln] = merge_lines(merged[ln], lm) if ln in merged else lm
        return merged

    def metric(self, name: str, default: float | None = None) -> float | None:
        """A metric's value: raw ncu metric names first, then :func:`derive` names; else ``default``."""
        if name in self.metrics:
            return self.metrics[name]
        return self.derived.get(name, default)

    def rules(self, rule_identifier: str) -> list[NcuRuleResult]:
        """The results of one NVIDIA rule (``CPIStall`` can have several)."""
        return [r for r in self.ncu_rules if r.rule_identifier == rule_identifier]


class ProfileReport(BaseModel):
    """A whole ``.ncu-rep`` report."""

    path: str
    #: Version of the ncu that recorded the report (``2025.3.1.0``), when the file says so.
    ncu_version: str | None = None
    #: Version of the ``ncu_report`` package that read it.
    reader_version: str = ""
    #: CUDA version recorded with the session, when present.
    cuda_version: str | None = None
    #: Session key/values found in the report (``Nsight Compute Target``, ``CUDA Version``, ...).
    session_info: dict[str, str] = Field(default_factory=dict)
    gpu_name: str | None = None
    compute_capability: str | None = None
    sm_count: int | None = None
    max_sm_clock_hz: float | None = None
    max_mem_clock_hz: float | None = None
    #: Measured during the first launch (ncu locks clocks to base unless ``--clock-control none``).
    sm_clock_hz: float | None = None
    dram_clock_hz: float | None = None
    kernels: list[KernelProfile] = Field(default_factory=list)
    #: Embedded sources (``--import-source yes``): basename → text, and basename → recorded path.
    source_files: dict[str, str] = Field(default_factory=dict)
    source_paths: dict[str, str] = Field(default_factory=dict)

    def kernels_named(self, name: str) -> list[KernelProfile]:
        """Launches whose base name, demangled or mangled name equals ``name``, in profiling order."""
        return [k for k in self.kernels if name in (k.name, k.demangled_name, k.mangled_name)]


def merge_lines(a: LineMetrics, b: LineMetrics) -> LineMetrics:
    out = a.model_copy(deep=True)
    for attr in (*LINE_FIELDS.values(), "stall_samples", "stall_samples_not_issued"):
        setattr(out, attr, getattr(out, attr) + getattr(b, attr))
    if b.shared_nway_max is not None:
        out.shared_nway_max = (
            b.shared_nway_max if out.shared_nway_max is None else max(out.shared_nway_max, b.shared_nway_max)
        )
    for src, dst in ((b.stalls, out.stalls), (b.counters, out.counters)):
        for k, v in src.items():
            dst[k] = dst.get(k, 0.0) + v
    for op, c in b.opcodes.items():
        out.opcodes[op] = out.opcodes.get(op, 0) + c
    out.sass_count += b.sass_count
    out.avg_threads_executed = out.thread_inst_executed / out.inst_executed if out.inst_executed > 0 else None
    return out
