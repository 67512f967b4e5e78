"""Read Nsight Compute reports (``.ncu-rep``) into typed models, through NVIDIA's ``ncu-report`` wheel.

Nothing here runs ncu or needs a GPU: ``load_report`` opens a saved report with the ``ncu_report``
Python package (imported lazily; it is NVIDIA-licensed and installed through pip, never vendored) and
returns a :class:`ProfileReport` with one :class:`KernelProfile` per profiled launch, in profiling
order. No CSV is parsed anywhere.

Per kernel it keeps

* ``metrics``: every scalar numeric metric in the report, in the base units the API gives
  (``gpu__time_duration.sum`` in ns, throughputs in %, bytes in bytes), plus the kernel totals of the
  per-PC source counters (``inst_executed``, ``memory_l2_theoretical_sectors_global``, ...);
* ``strings``: the useful string-valued metrics (GPU name, cache config, ...);
* ``ncu_rules``: NVIDIA's own rule results (type, title, message, estimated speedup, focus metrics);
* ``source_markers``: the rules' line/SASS markers, resolved to file and line;
* ``files``: per source file and line, the per-PC source counters (instructions, warp-stall samples
  by reason, theoretical L2 sectors, shared-memory conflicts, divergent branches, SASS opcodes), summed
  per ``IAction.source_info(pc)`` line exactly as the ncu source page does. ``lines`` is the map of the
  kernel's own file (the file of its entry PC); :meth:`KernelProfile.lines_for` matches any other file
  by basename, since reports record the profiling host's absolute paths;
* ``derived``: :func:`derive`'s values (names and units in :data:`DERIVED_DOC`).

Per-line data exists only when the report was collected with the ``SourceCounters`` section (and the
program built with ``-lineinfo``); otherwise ``files`` is empty.
"""

from __future__ import annotations

import math
import mmap
import os
import re
from collections.abc import Iterable
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, Field

__all__ = [
    "DERIVED_DOC",
    "STALL_REASONS",
    "FocusMetric",
    "HotLine",
    "KernelProfile",
    "LineMetrics",
    "NcuRuleResult",
    "ProfileReport",
    "ReportError",
    "RuleType",
    "SourceMarker",
    "derive",
    "hot_lines",
    "load_report",
]

RuleType = Literal["OPT", "WRN", "INF", ""]
SpeedupType = Literal["local", "global"]

#: ``rule_message.type`` / marker ``message_type`` of the report API → the CSV's rule type.
_RULE_TYPES: dict[int, RuleType] = {1: "INF", 2: "OPT", 3: "WRN"}
#: ``speedup_estimation.type`` → estimate kind.
_SPEEDUP_TYPES: dict[int, SpeedupType] = {1: "local", 2: "global"}

_PCSAMP_PREFIX = "smsp__pcsamp_warps_issue_stalled_"
_NOT_ISSUED = "_not_issued"
#: Per-PC metrics whose kernel total (their top-level value) is not a meaningful sum: averages,
#: enumerations and the n-way conflict degree. They are kept per line only (or not at all).
_PC_NON_SUMMABLE = re.compile(r"(^|_)(avg|derivative)_|_type$|_nway$")

#: Per-PC counters with a named :class:`LineMetrics` field (summed per line).
_LINE_FIELDS: dict[str, str] = {
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
_NWAY = "derived__memory_l1_conflicts_shared_nway"

#: The warp stall reasons, named as in the per-PC sampling metrics
#: (``smsp__pcsamp_warps_issue_stalled_<reason>``) and the ncu source page's ``stall_*`` columns.
#: The kernel-level ratios spell one differently (``no_instruction``); :func:`derive` uses these names.
STALL_REASONS: dict[str, str] = {
    "barrier": "waiting at a block barrier (__syncthreads)",
    "branch_resolving": "waiting for a branch target or the branch unit",
    "dispatch_stall": "dispatcher could not issue the selected instruction",
    "drain": "after EXIT, waiting for outstanding memory writes to drain",
    "gmma": "waiting on warpgroup MMA (wgmma) resources",
    "imc_miss": "immediate-constant cache miss",
    "lg_throttle": "local/global memory instruction queue full",
    "long_scoreboard": "waiting on an L1TEX result (global, local, texture, surface memory)",
    "math_pipe_throttle": "math pipe busy",
    "membar": "waiting at a memory barrier (fence)",
    "mio_throttle": "MIO queue full (shared memory, special math, branches)",
    "misc": "miscellaneous hardware reason",
    "no_instructions": "instruction cache miss or no fetched instruction",
    "not_selected": "eligible but another warp was selected",
    "selected": "selected and issuing (not a stall)",
    "short_scoreboard": "waiting on an MIO result (shared memory, special math)",
    "sleeping": "warp sleeping (nanosleep, yield)",
    "tex_throttle": "texture queue full",
    "wait": "fixed-latency dependency wait",
    "warpgroup_arrive": "waiting at a warpgroup arrive barrier",
}
_STALL_ALIASES = {"no_instruction": "no_instructions"}


class ReportError(Exception):
    """A report could not be read (missing file, not a report, or the ncu-report package is absent)."""


# ---------------------------------------------------------------------------------------------------
# Models
# ---------------------------------------------------------------------------------------------------


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
                merged[ln] = _merge_lines(merged[ln], lm) if ln in merged else lm
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


# ---------------------------------------------------------------------------------------------------
# Loading
# ---------------------------------------------------------------------------------------------------


def _ncu_report() -> Any:
    try:
        import ncu_report
    except ImportError as e:  # pragma: no cover - depends on the environment
        raise ReportError("reading ncu reports needs the ncu-report package: pip install ncu-report") from e
    return ncu_report


def load_report(path: str | os.PathLike[str], *, sass: bool = True) -> ProfileReport:
    """Read a ``.ncu-rep`` (or ``.ncu-repz``) file into a :class:`ProfileReport`.

    ``sass=False`` skips the per-line SASS opcodes (``LineMetrics.opcodes``): disassembling costs about
    0.5 s once per process plus about 0.15 ms per instruction.

    Raises :class:`ReportError` when the file is missing, is not an Nsight Compute report, holds no
    profiled launch, or when the ``ncu-report`` package is not installed.
    """
    p = Path(path)
    if not p.is_file():
        raise ReportError(f"no such report file: {p}")
    nr = _ncu_report()
    try:
        ctx = nr.load_report(str(p))
    except Exception as e:
        raise ReportError(f"cannot read {p} as an Nsight Compute report: {e}") from e
    num_ranges = ctx.num_ranges() if ctx is not None else None
    if not num_ranges:
        raise ReportError(f"{p} is not an Nsight Compute report (no profiling results in it)")

    kernels: list[KernelProfile] = []
    sources: dict[str, str] = {}
    paths: dict[str, str] = {}
    for ri in range(num_ranges):
        rng = ctx.range_by_idx(ri)
        for ai in range(rng.num_actions() or 0):
            action = rng.action_by_idx(ai)
            kernels.append(_read_action(nr, action, ai, ri, sass=sass))
            for fpath, text in _source_files(action).items():
                base = os.path.basename(fpath)
                if base not in sources:
                    sources[base] = text
                    paths[base] = fpath
    if not kernels:
        raise ReportError(f"{p} holds no profiled kernel launch")

    session = _session_info(p)
    target = session.get("Nsight Compute Target", "")
    first = kernels[0]

    def dev(name: str) -> float | None:
        return first.metrics.get(name)

    cc_major, cc_minor = (
        dev("device__attribute_compute_capability_major"),
        dev("device__attribute_compute_capability_minor"),
    )
    report = ProfileReport(
        path=str(p),
        ncu_version=target.split()[0] if target else None,
        reader_version=str(ctx.get_version()),
        cuda_version=session.get("CUDA Version"),
        session_info=session,
        gpu_name=first.strings.get("device__attribute_display_name"),
        compute_capability=f"{int(cc_major)}.{int(cc_minor)}"
        if cc_major is not None and cc_minor is not None
        else None,
        sm_count=_int_or_none(dev("device__attribute_multiprocessor_count") or dev("launch__sm_count")),
        max_sm_clock_hz=_scaled(dev("device__attribute_max_gpu_frequency_khz"), 1e3),
        max_mem_clock_hz=_scaled(dev("device__attribute_max_mem_frequency_khz"), 1e3),
        sm_clock_hz=dev("gpc__cycles_elapsed.avg.per_second"),
        dram_clock_hz=dev("dram__cycles_elapsed.avg.per_second"),
        kernels=kernels,
        source_files=sources,
        source_paths=paths,
    )
    return report


def _int_or_none(v: float | None) -> int | None:
    return None if v is None else int(v)


def _scaled(v: float | None, factor: float) -> float | None:
    return None if v is None else v * factor


def _source_files(action: Any) -> dict[str, str]:
    try:
        files = action.source_files()
        return {str(k): str(v) for k, v in dict(files).items()}
    except Exception:
        return {}


def _read_action(nr: Any, action: Any, index: int, range_index: int, *, sass: bool = True) -> KernelProfile:
    IAction, IMetric = nr.IAction, nr.IMetric
    string_kind = IMetric.ValueKind_STRING
    metrics: dict[str, float] = {}
    strings: dict[str, str] = {}
    per_pc: dict[str, Any] = {}
    opcode_mix: dict[str, float] = {}

    for name in action.metric_names():
        m = action.metric_by_name(name)
        if m is None or not m.has_value():
            continue
        kind = m.kind()
        if kind == string_kind:
            if not name.startswith(("breakdown:", "group:")):
                s = m.as_string()
                if s:
                    strings[name] = s
            continue
        if not m.has_correlation_ids():
            _put_number(metrics, name, m)
            continue
        n = m.num_instances()
        ids = m.correlation_ids() if n else None
        if ids is not None and ids.kind() == string_kind:
            if name == "sass__inst_executed_per_opcode":
                opcode_mix = {ids.as_string(i): float(m.as_double(i)) for i in range(n)}
            continue
        if ids is not None and _is_pc(action, ids.as_uint64(0)):
            per_pc[name] = m
            if not _PC_NON_SUMMABLE.search(name):
                _put_number(metrics, name, m)
        elif n == 0 and (name.startswith("smsp__pcsamp_") or name in _LINE_FIELDS):
            _put_number(metrics, name, m)  # per-PC counter with no instance: the total is 0
        elif n <= 1 and not _PC_NON_SUMMABLE.search(name):
            _put_number(metrics, name, m)  # launch__* scalars carry one instance with id 0

    def dim(prefix: str) -> tuple[int, int, int]:
        return (
            int(metrics.get(f"{prefix}_x", 0)),
            int(metrics.get(f"{prefix}_y", 0)),
            int(metrics.get(f"{prefix}_z", 0)),
        )

    kernel = KernelProfile(
        index=index,
        range_index=range_index,
        name=str(action.name()),
        demangled_name=str(action.name(IAction.NameBase_DEMANGLED)),
        mangled_name=str(action.name(IAction.NameBase_MANGLED)),
        grid=dim("launch__grid_dim"),
        block=dim("launch__block_dim"),
        sections=sorted(str(s.identifier()) for s in action.sections()),
        metrics=metrics,
        strings=strings,
        opcode_mix=opcode_mix,
        ncu_rules=_rules(action),
        source_markers=_markers(action),
    )
    _attribute_lines(action, kernel, per_pc, sass=sass)
    kernel.derived = derive(kernel)
    return kernel


def _put_number(out: dict[str, float], name: str, m: Any) -> None:
    try:
        v = float(m.as_double())
    except Exception:
        return
    if math.isfinite(v):
        out[name] = v


def _is_pc(action: Any, cid: int) -> bool:
    if cid == 0:
        return False
    return action.source_info(cid) is not None or bool(action.sass_by_pc(cid))


_MARKUP = re.compile(r"@(\w+):([^@]*)@")


def _flatten(message: str) -> str:
    """Replace ncu's ``@section:Id:Label@`` by ``Label`` and ``@url:Label:URL@`` by ``Label (URL)``."""

    def sub(m: re.Match[str]) -> str:
        kind, body = m.group(1), m.group(2)
        if kind == "url":
            label, _, url = body.partition(":")
            return f"{label} ({url})" if url else label
        return body.rsplit(":", 1)[-1] if ":" in body else body

    return _MARKUP.sub(sub, message)


def _rules(action: Any) -> list[NcuRuleResult]:
    out: list[NcuRuleResult] = []
    for d in action.rule_results_as_dicts():
        msg = d.get("rule_message") or {}
        raw = str(msg.get("message") or "")
        title = str(msg.get("title") or "")
        rtype = _RULE_TYPES.get(int(msg.get("type") or 0), "")
        if not raw and not title and not rtype:
            continue  # placeholder results with no content
        sp = d.get("speedup_estimation") or {}
        speedup = sp.get("speedup")
        out.append(
            NcuRuleResult(
                rule_identifier=str(d.get("rule_identifier") or ""),
                name=str(d.get("name") or ""),
                section=str(d.get("section_identifier") or ""),
                title=title,
                type=rtype,
                message=_flatten(raw),
                raw_message=raw,
                speedup_type=_SPEEDUP_TYPES.get(int(sp.get("type") or 0)),
                estimated_speedup_pct=float(speedup) if speedup is not None else None,
                focus_metrics=[
                    FocusMetric(
                        name=str(f.get("name") or ""),
                        value=_float_or_none(f.get("value")),
                        severity=int(f.get("severity") or 0),
                        info=str(f.get("info") or ""),
                    )
                    for f in d.get("focus_metrics") or []
                ],
            )
        )
    return out


def _float_or_none(v: Any) -> float | None:
    try:
        f = float(v)
    except (TypeError, ValueError):
        return None
    return f if math.isfinite(f) else None


def _markers(action: Any) -> list[SourceMarker]:
    out: list[SourceMarker] = []
    for d in action.source_markers():
        path: str | None = None
        line: int | None = None
        pc: int | None = None
        if "source_location" in d:
            loc = d["source_location"] or {}
            path = str(loc.get("file_name") or "") or None
            line = int(loc["line"]) if loc.get("line") is not None else None
        if "source_address" in d:
            pc = int(d["source_address"])
            si = action.source_info(pc)
            if si is not None:
                path, line = str(si.file_name()), int(si.line())
        out.append(
            SourceMarker(
                rule_identifier=str(d.get("rule_identifier") or ""),
                section=str(d.get("section_identifier") or ""),
                kind="sass" if int(d.get("kind") or 0) == 0 else "source",
                type=_RULE_TYPES.get(int(d.get("message_type") or 0), ""),
                message=_flatten(str(d.get("message") or "")),
                path=path,
                file=os.path.basename(path) if path else None,
                line=line,
                pc=pc,
            )
        )
    return out


def _opcode(sass: str) -> str:
    toks = sass.split()
    if toks and toks[0].startswith("@"):
        toks = toks[1:]
    return toks[0] if toks else ""


def _attribute_lines(
    action: Any, kernel: KernelProfile, per_pc: dict[str, Any], *, sass: bool = True
) -> None:
    """Sum the per-PC metrics per ``source_info(pc)`` line into ``kernel.files``."""
    values: dict[int, dict[str, float]] = {}
    for name, m in per_pc.items():
        ids = m.correlation_ids()
        for i in range(m.num_instances()):
            v = float(m.as_double(i))
            if not math.isfinite(v):
                continue
            slot = values.setdefault(int(ids.as_uint64(i)), {})
            slot[name] = v

    files: dict[str, dict[int, LineMetrics]] = {}
    total_samples = 0.0
    for pc in sorted(values):
        vals = values[pc]
        stalls = {
            _reason(n): v
            for n, v in vals.items()
            if n.startswith(_PCSAMP_PREFIX) and not n.endswith(_NOT_ISSUED)
        }
        samples = sum(stalls.values())
        total_samples += samples
        si = action.source_info(pc)
        path = str(si.file_name()) if si is not None else ""
        if not path:
            kernel.unattributed_stall_samples += samples
            kernel.unattributed_inst_executed += vals.get("inst_executed", 0.0)
            continue
        line = int(si.line())
        lm = files.setdefault(path, {}).get(line)
        if lm is None:
            lm = files[path][line] = LineMetrics(line=line)
        for name, v in vals.items():
            if name in _LINE_FIELDS:
                attr = _LINE_FIELDS[name]
                setattr(lm, attr, getattr(lm, attr) + v)
            elif name == _NWAY:
                if v > 0:  # 0 on instructions that do not touch shared memory
                    lm.shared_nway_max = v if lm.shared_nway_max is None else max(lm.shared_nway_max, v)
            elif name.startswith(_PCSAMP_PREFIX):
                if name.endswith(_NOT_ISSUED):
                    lm.stall_samples_not_issued += v
                elif v:
                    r = _reason(name)
                    lm.stalls[r] = lm.stalls.get(r, 0.0) + v
            elif name == "smsp__pcsamp_sample_count" or _PC_NON_SUMMABLE.search(name):
                continue
            elif v:
                lm.counters[name] = lm.counters.get(name, 0.0) + v
        lm.stall_samples += samples
        op = _opcode(str(action.sass_by_pc(pc) or "")) if sass else ""
        if op:
            lm.opcodes[op] = lm.opcodes.get(op, 0) + 1
            lm.sass_count += 1

    for lines in files.values():
        for lm in lines.values():
            if lm.inst_executed > 0:
                lm.avg_threads_executed = lm.thread_inst_executed / lm.inst_executed
    kernel.files = {path: dict(sorted(lines.items())) for path, lines in files.items()}
    kernel.stall_samples = total_samples

    entry = _entry_pc(action)
    si = action.source_info(entry) if entry else None
    if si is not None and str(si.file_name()):
        kernel.source_file, kernel.source_line = str(si.file_name()), int(si.line())
    elif kernel.files:  # no entry PC: the file with most instructions
        kernel.source_file = max(
            kernel.files, key=lambda f: sum(lm.inst_executed for lm in kernel.files[f].values())
        )


def _reason(metric_name: str) -> str:
    r = metric_name[len(_PCSAMP_PREFIX) :]
    return _STALL_ALIASES.get(r, r)


def _entry_pc(action: Any) -> int | None:
    m = action.metric_by_name("launch__function_pcs")
    if m is None or not m.has_value() or m.num_instances() < 1:
        return None
    try:
        return int(m.as_uint64(0))
    except Exception:
        return None


def _merge_lines(a: LineMetrics, b: LineMetrics) -> LineMetrics:
    out = a.model_copy(deep=True)
    for attr in (*_LINE_FIELDS.values(), "stall_samples", "stall_samples_not_issued"):
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


_SESSION_RECORD = re.compile(rb"\x1a([\x04-\x7f])B([\x02-\x7f])\n([\x01-\x7f])")


def _session_info(path: Path) -> dict[str, str]:
    """Best effort: the session key/values (tool version, CUDA version) the report file records.

    The ``ncu_report`` API exposes only its own version, so this looks for the small length-prefixed
    ``key → value`` records ncu writes with the session (``Nsight Compute Target`` → ``2025.3.1.0
    (build …)``). A record is accepted only if all its length fields agree; anything else yields ``{}``.
    """
    out: dict[str, str] = {}
    try:
        with open(path, "rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as mm:
            for m in _SESSION_RECORD.finditer(mm):
                outer, inner, klen = m.group(1)[0], m.group(2)[0], m.group(3)[0]
                k0 = m.end()
                key = mm[k0 : k0 + klen]
                if k0 + klen + 2 > len(mm) or mm[k0 + klen : k0 + klen + 1] != b"\x12":
                    continue
                vlen = mm[k0 + klen + 1]
                value = mm[k0 + klen + 2 : k0 + klen + 2 + vlen]
                if inner != klen + vlen + 4 or outer != inner + 2 or len(value) != vlen:
                    continue
                if not (
                    key.isascii()
                    and value.isascii()
                    and key.decode().isprintable()
                    and value.decode().isprintable()
                ):
                    continue
                out.setdefault(key.decode(), value.decode())
    except (OSError, ValueError):
        return {}
    return out


# ---------------------------------------------------------------------------------------------------
# Derived values and hot lines
# ---------------------------------------------------------------------------------------------------

DERIVED_DOC: dict[str, str] = {
    "duration_ns": "kernel duration, gpu__time_duration.sum [ns]",
    "sm_pct": "SM (compute) throughput, sm__throughput.avg.pct_of_peak_sustained_elapsed [% of peak]",
    "mem_pct": "memory throughput, max of L1/L2/DRAM, gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed [% of peak]",
    "dram_pct": "DRAM throughput, gpu__dram_throughput.avg.pct_of_peak_sustained_elapsed (or dram__throughput) [% of peak]",
    "l1_pct": "L1/TEX throughput, l1tex__throughput.avg.pct_of_peak_sustained_elapsed (the _active variant when elapsed was not collected) [% of peak]",
    "l2_pct": "L2 throughput, lts__throughput.avg.pct_of_peak_sustained_elapsed [% of peak]",
    "achieved_occupancy_pct": "achieved occupancy, sm__warps_active.avg.pct_of_peak_sustained_active [% of max warps]",
    "theoretical_occupancy_pct": "theoretical occupancy, sm__maximum_warps_per_active_cycle_pct [% of max warps]",
    "occupancy_gap_pct": "theoretical minus achieved occupancy [percentage points]",
    "waves": "waves of blocks per SM, launch__waves_per_multiprocessor [waves]",
    "registers_per_thread": "registers per thread, launch__registers_per_thread [registers]",
    "smem_per_block_bytes": "static + dynamic shared memory per block, launch__shared_mem_per_block_{static,dynamic} [bytes]",
    "issue_active": "issue-slot use, smsp__issue_active.avg.per_cycle_active [instructions per scheduler per active cycle, 0-1]",
    "ipc": "sm__inst_executed.avg.per_cycle_active, or smsp__inst_executed.sum / (sm__cycles_active.avg × SMs) [warp instructions per SM per active cycle, max 4]",
    "eligible_warps": "eligible warps per scheduler, smsp__warps_eligible.avg.per_cycle_active [warps]",
    "warp_cycles_per_inst": "average warp latency between issues, smsp__average_warp_latency_per_inst_issued.ratio [cycles]",
    "dram_bytes": "DRAM bytes read + written, dram__bytes_read.sum + dram__bytes_write.sum [bytes]",
    "dram_gbps": "DRAM bandwidth achieved, dram_bytes / duration_ns [GB/s]",
    "uncoalesced_excess_pct": "excessive / total theoretical L2 sectors of global accesses, from the per-PC source counters [% of sectors]",
    "shared_conflict_pct": "shared-memory bank conflicts / shared wavefronts, l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_{ld,st}.sum / l1tex__data_pipe_lsu_wavefronts_mem_shared_op_{ld,st}.sum, when the kernel executes shared loads/stores [% of wavefronts]",
    "shared_excess_wavefront_pct": "excessive / total shared wavefronts, from the per-PC source counters [% of wavefronts]",
    "thread_efficiency": "active threads per executed warp instruction, smsp__thread_inst_executed_per_inst_executed.ratio [threads, 0-32]",
    "thread_efficiency_pred_on": "predicated-on threads per executed warp instruction, smsp__thread_inst_executed_pred_on_per_inst_executed.ratio [threads, 0-32]",
    "divergent_branches": "divergent branch targets, smsp__sass_branch_targets_threads_divergent.sum [branch targets]",
    "global_ld_bytes_per_sector": "bytes used per 32-byte sector by global loads, smsp__sass_average_data_bytes_per_sector_mem_global_op_ld.ratio [bytes, max 32]",
    "global_st_bytes_per_sector": "bytes used per 32-byte sector by global stores, smsp__sass_average_data_bytes_per_sector_mem_global_op_st.ratio [bytes, max 32]",
    "local_inst": "local-memory load + store warp instructions, smsp__sass_inst_executed_op_local_{ld,st}.sum [instructions]",
    "spill_inst": "register-spill instructions, sass__inst_executed_register_spilling (stack arrays are not counted) [instructions]",
    "atomic_inst": "global reduction/atomic warp instructions, smsp__inst_executed_op_global_red.sum + smsp__inst_executed_op_generic_atom_dot_{alu,cas}.sum [instructions]",
    "atomic_l2_max_pct": "busiest L2 slice's atomic-unit input, lts__d_atomic_input_cycles_active.max.pct_of_peak_sustained_elapsed [% of peak]",
    "atomic_l2_avg_pct": "average L2 slice's atomic-unit input, lts__d_atomic_input_cycles_active.avg.pct_of_peak_sustained_elapsed [% of peak]",
    "l2_read_hit_pct": "L2 sector hit rate for reads, lts__t_sector_op_read_hit_rate.pct [%]",
    "fma_pipe_pct": "FMA pipe use, sm__pipe_fma_cycles_active.avg.pct_of_peak_sustained_elapsed [% of peak]",
    "alu_pipe_pct": "ALU pipe use, sm__pipe_alu_cycles_active.avg.pct_of_peak_sustained_elapsed [% of peak]",
    "fp64_pipe_pct": "FP64 pipe use, sm__pipe_fp64_cycles_active.avg.pct_of_peak_sustained_elapsed [% of peak]",
    "tensor_pipe_pct": "tensor pipe use, sm__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_elapsed [% of peak]",
    "shared_pipe_pct": "shared pipe use, sm__pipe_shared_cycles_active.avg.pct_of_peak_sustained_elapsed [% of peak]",
    "fp32_flop": "FP32 operations, 2 × ffma + fadd + fmul from smsp__sass_thread_inst_executed_op_{ffma,fadd,fmul}_pred_on.sum [FLOP]",
    "fp32_gflops": "FP32 rate, fp32_flop / duration_ns [GFLOP/s]",
    "fp32_pct_of_peak": "FP32 rate against the peak, (fadd + fmul + 2 × ffma per cycle) / (2 × sm__sass_thread_inst_executed_op_ffma_pred_on.sum.peak_sustained) [% of peak]",
    "sm_clock_hz": "measured SM clock, gpc__cycles_elapsed.avg.per_second [Hz]",
    "dram_clock_hz": "measured DRAM clock, dram__cycles_elapsed.avg.per_second [Hz]",
    "stall_samples": "warp-stall samples over all PCs (per-PC sampling) [samples]",
}
for _r, _what in STALL_REASONS.items():
    DERIVED_DOC[f"stall_{_r}_share"] = (
        f"share of warp latency stalled on {_r} ({_what}): "
        f"smsp__average_warps_issue_stalled_{_r}_per_issue_active.ratio / "
        "smsp__average_warp_latency_per_inst_issued.ratio [fraction, shares sum to about 1]"
    )
del _r, _what

_STALL_RATIO = re.compile(r"^smsp__average_warps_issue_stalled_(\w+?)_per_issue_active\.ratio$")


def derive(kernel: KernelProfile) -> dict[str, float]:
    """Derived per-kernel values (see :data:`DERIVED_DOC`); a value whose inputs are missing is absent."""
    m = kernel.metrics
    out: dict[str, float] = {}

    def get(*names: str) -> float | None:
        for n in names:
            if n in m:
                return m[n]
        return None

    def put(name: str, value: float | None) -> None:
        if value is not None and math.isfinite(value):
            out[name] = float(value)

    def total(*names: str) -> float | None:
        vals = [m[n] for n in names if n in m]
        return sum(vals) if vals else None

    def ratio(num: float | None, den: float | None, scale: float = 1.0) -> float | None:
        if num is None or den is None or den <= 0:
            return None
        return scale * num / den

    duration = get("gpu__time_duration.sum")
    put("duration_ns", duration)
    put("sm_pct", get("sm__throughput.avg.pct_of_peak_sustained_elapsed"))
    put("mem_pct", get("gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed"))
    put(
        "dram_pct",
        get(
            "gpu__dram_throughput.avg.pct_of_peak_sustained_elapsed",
            "dram__throughput.avg.pct_of_peak_sustained_elapsed",
        ),
    )
    put(
        "l1_pct",
        get(
            "l1tex__throughput.avg.pct_of_peak_sustained_elapsed",
            "l1tex__throughput.avg.pct_of_peak_sustained_active",
        ),
    )
    put("l2_pct", get("lts__throughput.avg.pct_of_peak_sustained_elapsed"))

    achieved = get("sm__warps_active.avg.pct_of_peak_sustained_active")
    theoretical = get("sm__maximum_warps_per_active_cycle_pct")
    put("achieved_occupancy_pct", achieved)
    put("theoretical_occupancy_pct", theoretical)
    if achieved is not None and theoretical is not None:
        put("occupancy_gap_pct", theoretical - achieved)
    put("waves", get("launch__waves_per_multiprocessor"))
    put("registers_per_thread", get("launch__registers_per_thread"))
    put(
        "smem_per_block_bytes",
        total("launch__shared_mem_per_block_static", "launch__shared_mem_per_block_dynamic"),
    )

    put("issue_active", get("smsp__issue_active.avg.per_cycle_active"))
    ipc = get("sm__inst_executed.avg.per_cycle_active")
    if ipc is None:
        sms = get("launch__sm_count", "device__attribute_multiprocessor_count")
        cycles = get("sm__cycles_active.avg")
        ipc = ratio(get("smsp__inst_executed.sum"), cycles * sms if cycles is not None and sms else None)
    put("ipc", ipc)
    put("eligible_warps", get("smsp__warps_eligible.avg.per_cycle_active"))
    latency = get("smsp__average_warp_latency_per_inst_issued.ratio")
    put("warp_cycles_per_inst", latency)

    rd, wr = get("dram__bytes_read.sum"), get("dram__bytes_write.sum")
    if rd is None and wr is None:
        srd, swr = get("dram__sectors_read.sum"), get("dram__sectors_write.sum")
        rd = srd * 32 if srd is not None else None
        wr = swr * 32 if swr is not None else None
    if rd is not None and wr is not None:
        put("dram_bytes", rd + wr)
        put("dram_gbps", ratio(rd + wr, duration))

    put(
        "uncoalesced_excess_pct",
        ratio(
            get("derived__memory_l2_theoretical_sectors_global_excessive"),
            get("memory_l2_theoretical_sectors_global"),
            100.0,
        ),
    )
    shared_inst = total(
        "smsp__sass_inst_executed_op_shared_ld.sum", "smsp__sass_inst_executed_op_shared_st.sum"
    )
    if shared_inst:
        put(
            "shared_conflict_pct",
            ratio(
                total(
                    "l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ld.sum",
                    "l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_st.sum",
                ),
                total(
                    "l1tex__data_pipe_lsu_wavefronts_mem_shared_op_ld.sum",
                    "l1tex__data_pipe_lsu_wavefronts_mem_shared_op_st.sum",
                ),
                100.0,
            ),
        )
    put(
        "shared_excess_wavefront_pct",
        ratio(
            get("derived__memory_l1_wavefronts_shared_excessive"), get("memory_l1_wavefronts_shared"), 100.0
        ),
    )

    put("thread_efficiency", get("smsp__thread_inst_executed_per_inst_executed.ratio"))
    put("thread_efficiency_pred_on", get("smsp__thread_inst_executed_pred_on_per_inst_executed.ratio"))
    put("divergent_branches", get("smsp__sass_branch_targets_threads_divergent.sum"))
    put("global_ld_bytes_per_sector", get("smsp__sass_average_data_bytes_per_sector_mem_global_op_ld.ratio"))
    put("global_st_bytes_per_sector", get("smsp__sass_average_data_bytes_per_sector_mem_global_op_st.ratio"))
    put(
        "local_inst",
        total("smsp__sass_inst_executed_op_local_ld.sum", "smsp__sass_inst_executed_op_local_st.sum"),
    )
    put("spill_inst", get("sass__inst_executed_register_spilling"))
    put(
        "atomic_inst",
        total(
            "smsp__inst_executed_op_global_red.sum",
            "smsp__inst_executed_op_generic_atom_dot_alu.sum",
            "smsp__inst_executed_op_generic_atom_dot_cas.sum",
        ),
    )
    put("atomic_l2_max_pct", get("lts__d_atomic_input_cycles_active.max.pct_of_peak_sustained_elapsed"))
    put("atomic_l2_avg_pct", get("lts__d_atomic_input_cycles_active.avg.pct_of_peak_sustained_elapsed"))
    put("l2_read_hit_pct", get("lts__t_sector_op_read_hit_rate.pct"))

    for pipe in ("fma", "alu", "fp64", "tensor", "shared"):
        put(f"{pipe}_pipe_pct", get(f"sm__pipe_{pipe}_cycles_active.avg.pct_of_peak_sustained_elapsed"))

    ffma = get("smsp__sass_thread_inst_executed_op_ffma_pred_on.sum")
    fadd = get("smsp__sass_thread_inst_executed_op_fadd_pred_on.sum")
    fmul = get("smsp__sass_thread_inst_executed_op_fmul_pred_on.sum")
    if ffma is not None or fadd is not None or fmul is not None:
        flop = 2 * (ffma or 0.0) + (fadd or 0.0) + (fmul or 0.0)
        put("fp32_flop", flop)
        put("fp32_gflops", ratio(flop, duration))
    peak = get("sm__sass_thread_inst_executed_op_ffma_pred_on.sum.peak_sustained")
    per_cycle = [
        get(f"smsp__sass_thread_inst_executed_op_{op}_pred_on.sum.per_cycle_elapsed")
        for op in ("ffma", "fadd", "fmul")
    ]
    if peak and all(v is not None for v in per_cycle):
        f_ffma, f_fadd, f_fmul = (v or 0.0 for v in per_cycle)
        put("fp32_pct_of_peak", ratio(2 * f_ffma + f_fadd + f_fmul, 2 * peak, 100.0))
    elif peak and ffma is not None:
        cycles = get("sm__cycles_elapsed.avg")
        put("fp32_pct_of_peak", ratio(out.get("fp32_flop"), 2 * peak * cycles if cycles else None, 100.0))

    put("sm_clock_hz", get("gpc__cycles_elapsed.avg.per_second"))
    put("dram_clock_hz", get("dram__cycles_elapsed.avg.per_second"))
    if kernel.stall_samples > 0:
        put("stall_samples", kernel.stall_samples)

    if latency:
        for name, value in m.items():
            hit = _STALL_RATIO.match(name)
            if hit and not hit.group(1).endswith(_NOT_ISSUED):
                reason = _STALL_ALIASES.get(hit.group(1), hit.group(1))
                put(f"stall_{reason}_share", value / latency)
    return out


def hot_lines(
    kernel: KernelProfile, n: int = 5, source: str | os.PathLike[str] | None = None
) -> list[HotLine]:
    """The ``n`` source lines with most warp-stall samples, highest first.

    ``share`` is the line's part of all the kernel's samples; ``dominant_stall`` the reason with most
    of the line's samples. ``source`` restricts the search to files with that basename; by default
    every file the kernel's code came from (CUDA headers included) is searched.
    """
    items: Iterable[tuple[str, dict[int, LineMetrics]]] = kernel.files.items()
    if source is not None:
        base = os.path.basename(os.fspath(source))
        items = [(p, lines) for p, lines in kernel.files.items() if os.path.basename(p) == base]
    candidates = [(path, lm) for path, lines in items for lm in lines.values() if lm.stall_samples > 0]
    candidates.sort(key=lambda c: (-c[1].stall_samples, -c[1].inst_executed, c[0], c[1].line))
    total = kernel.stall_samples or sum(lm.stall_samples for _, lm in candidates)
    out: list[HotLine] = []
    for path, lm in candidates[: max(n, 0)]:
        dom = lm.dominant_stall()
        out.append(
            HotLine(
                path=path,
                file=os.path.basename(path),
                line=lm.line,
                samples=lm.stall_samples,
                share=lm.stall_samples / total if total else 0.0,
                dominant_stall=dom[0] if dom else None,
                dominant_stall_share=dom[1] if dom else None,
                metrics=lm,
            )
        )
    return out
