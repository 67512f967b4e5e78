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
from pathlib import Path
from typing import Any

from kernellsp.profile.derive import NOT_ISSUED, STALL_ALIASES, derive
from kernellsp.profile.models import (
    LINE_FIELDS,
    FocusMetric,
    KernelProfile,
    LineMetrics,
    NcuRuleResult,
    ProfileReport,
    ReportError,
    RuleType,
    SourceMarker,
    SpeedupType,
)

__all__ = ["load_report"]

#: ``rule_message.type`` / marker ``message_type`` of the report API → the CSV's rule type.
_RULE_TYPES: dict[int, RuleType] = {1: "INF", 2: "OPT", 3: "WRN"}
#: ``speedup_estimation.type`` → estimate kind.
_SPEEDUP_TYPES: dict[int, SpeedupType] = {1: "local", 2: "global"}

_PCSAMP_PREFIX = "smsp__pcsamp_warps_issue_stalled_"
#: Per-PC metrics whose kernel total (their top-level value) is not a meaningful sum: averages,
#: enumerations and the n-way conflict degree. They are kept per line only (or not at all).
_PC_NON_SUMMABLE = re.compile(r"(^|_)(avg|derivative)_|_type$|_nway$")
_NWAY = "derived__memory_l1_conflicts_shared_nway"


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
        elif n == 0 and (name.startswith("smsp__pcsamp_") or name in LINE_FIELDS):
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
    values = _values_by_pc(per_pc)

    files: dict[str, dict[int, LineMetrics]] = {}
    total_samples = 0.0
    for pc in sorted(values):
        vals = values[pc]
        stalls = {
            _reason(n): v
            for n, v in vals.items()
            if n.startswith(_PCSAMP_PREFIX) and not n.endswith(NOT_ISSUED)
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
        _add_pc_values(lm, vals)
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
    _set_source_file(action, kernel)


def _values_by_pc(per_pc: dict[str, Any]) -> dict[int, dict[str, float]]:
    """The finite values of every per-PC metric, by PC (correlation id)."""
    values: dict[int, dict[str, float]] = {}
    for name, m in per_pc.items():
        ids = m.correlation_ids()
        for i in range(m.num_instances()):
            v = float(m.as_double(i))
            if not math.isfinite(v):
                continue
            slot = values.setdefault(int(ids.as_uint64(i)), {})
            slot[name] = v
    return values


def _add_pc_values(lm: LineMetrics, vals: dict[str, float]) -> None:
    """Add one PC's metric values to its line's counters."""
    for name, v in vals.items():
        if name in LINE_FIELDS:
            attr = LINE_FIELDS[name]
            setattr(lm, attr, getattr(lm, attr) + v)
        elif name == _NWAY:
            if v > 0:  # 0 on instructions that do not touch shared memory
                lm.shared_nway_max = v if lm.shared_nway_max is None else max(lm.shared_nway_max, v)
        elif name.startswith(_PCSAMP_PREFIX):
            if name.endswith(NOT_ISSUED):
                lm.stall_samples_not_issued += v
            elif v:
                r = _reason(name)
                lm.stalls[r] = lm.stalls.get(r, 0.0) + v
        elif name == "smsp__pcsamp_sample_count" or _PC_NON_SUMMABLE.search(name):
            continue
        elif v:
            lm.counters[name] = lm.counters.get(name, 0.0) + v


def _set_source_file(action: Any, kernel: KernelProfile) -> None:
    """The kernel's own file and line: its entry PC's, else the file with most instructions."""
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
    return STALL_ALIASES.get(r, r)


def _entry_pc(action: Any) -> int | None:
    m = action.metric_by_name("launch__function_pcs")
    if m is None or not m.has_value() or m.num_instances() < 1:
        return None
    try:
        return int(m.as_uint64(0))
    except Exception:
        return None


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
