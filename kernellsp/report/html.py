"""The profile report as one self-contained HTML page (``kernellsp profile FILE --html``).

For each kernel: a roofline chart (achieved FP32 FLOP/s against arithmetic intensity, FLOP per DRAM
byte, under this GPU's DRAM, L2 and FP32 ceilings), the kernel's source with each line's share of the
warp-stall samples and its dominant stall reason beside it, and the kernel's findings. ``optimize``
writes the same page with two runs, the baseline and the winner, as two points on each chart.

The charts are drawn by plotly (the optional ``report`` extra: ``pip install 'kernellsp[report]'``),
whose JavaScript is embedded once in the page: it opens from a file, offline, and in an editor's
webview. Without plotly, :func:`profile_page` raises :class:`HtmlReportError` saying so.

Ceilings (:func:`ceilings`), each labelled on the chart with how it was obtained:

* FP32: ncu's per-cycle FFMA peak × 2 FLOP × the SM clock measured while profiling when the report has
  it; otherwise the device's specs: SMs × FP32 lanes per SM (by compute capability) × 2 × that clock.
* DRAM: ncu's DRAM peak, read off the kernels (achieved bandwidth ÷ their ``% of peak``, when a kernel
  used at least 10% of it) or from ncu's per-cycle peak × the measured DRAM clock; otherwise the
  device's specs: 2 transfers per clock × the memory clock × the bus width.
* L2: ncu's per-cycle L2 peak × the L2 clock when the report has them; otherwise an estimate from the
  device's specs: L2 slices × bytes per slice and clock (:data:`L2_BYTES_PER_SLICE_CLK`) × the SM clock
  (the L2 clock is not in older reports; on an H100 it ran about 7% above the SM clock under ncu).

The point of a kernel with no FP32 work cannot sit on a FLOP/s axis: its chart says so and gives its
DRAM throughput instead.
"""

from __future__ import annotations

import html
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from kernellsp.profile.findings import KernelSummary
from kernellsp.profile.ncu import ProfileOutcome
from kernellsp.source.model import SourceModel, parse_source

#: What to tell the user when plotly is missing.
PLOTLY_HINT = (
    "the HTML report draws its charts with plotly: pip install 'kernellsp[report]' (or pip install plotly)"
)

#: FP32 lanes per SM by compute capability (CUDA C++ Programming Guide, "Arithmetic Instructions").
FP32_LANES_PER_SM: dict[str, int] = {
    "7.0": 64,
    "7.2": 64,
    "7.5": 64,
    "8.0": 64,
    "8.6": 128,
    "8.7": 128,
    "8.9": 128,
    "9.0": 128,
    "10.0": 128,
    "10.3": 128,
    "11.0": 128,
    "12.0": 128,
    "12.1": 128,
}
#: L2 bytes per slice and clock by compute capability major: 96 on Hopper (an H100's ncu peak,
#: lts__t_bytes.sum.peak_sustained, is 7680 B/clk over its 80 slices), 64 on Ampere/Ada (A100: 5120 B/clk,
#: 80 slices) and Blackwell until measured, 32 before.
L2_BYTES_PER_SLICE_CLK: dict[str, int] = {"8": 64, "9": 96, "10": 64, "12": 64}
#: Colours of the runs' points (baseline, winner, ...) and of the ceilings.
_RUN_COLOURS = ["#d62728", "#2ca02c", "#1f77b4", "#9467bd"]
_CEILING_COLOURS = {"DRAM": "#1f77b4", "L2": "#9467bd", "FP32": "#444444"}
#: No logo, no "edit in Chart Studio" link: nothing on the page points at the network.
_PLOTLY_CONFIG = {
    "displaylogo": False,
    "responsive": True,
    "showSendToCloud": False,
    "modeBarButtonsToRemove": ["sendDataToCloud", "lasso2d", "select2d"],
}
#: Lines shown around a kernel's function when its span is unknown (a kernel not found in the source).
_CONTEXT = 2


class HtmlReportError(RuntimeError):
    """The page cannot be written (plotly missing); the message says what to install."""


@dataclass(frozen=True)
class Ceiling:
    """One roof: ``value`` in GFLOP/s (compute) or GB/s (memory), and how it was obtained."""

    name: str
    kind: str  # "compute" | "memory"
    value: float
    how: str


@dataclass(frozen=True)
class Run:
    """One profile on the page: its label ("profile", "baseline", "winner"), outcome and source text."""

    label: str
    outcome: ProfileOutcome
    text: str


def _num(value: Any) -> float | None:
    try:
        out = float(value)
    except (TypeError, ValueError):
        return None
    return out if math.isfinite(out) else None


def ceilings(device: dict[str, Any], kernels: Sequence[KernelSummary]) -> list[Ceiling]:
    """The FP32, DRAM and L2 ceilings of the GPU a profile ran on (see the module docstring)."""
    out: list[Ceiling] = []
    measured_clock = _num(device.get("sm_clock_hz"))
    clock = measured_clock or _num(device.get("max_sm_clock_hz"))
    clock_note = ""
    if clock:
        which = "the SM clock measured under ncu" if measured_clock else "the maximum SM clock"
        clock_note = f"{which}, {clock / 1e9:.2f} GHz"
    sms = _num(device.get("sm_count"))
    cc = str(device.get("compute_capability") or "")
    ffma = _num(device.get("ffma_peak_per_cycle"))
    if ffma and clock:
        out.append(
            Ceiling(
                "FP32", "compute", ffma * 2 * clock / 1e9, f"ncu's FFMA peak per cycle × 2 × {clock_note}"
            )
        )
    elif sms and clock:
        lanes = FP32_LANES_PER_SM.get(cc, 128)
        out.append(
            Ceiling(
                "FP32",
                "compute",
                sms * lanes * 2 * clock / 1e9,
                f"device specs: {int(sms)} SMs × {lanes} FP32 lanes × 2 FLOP × {clock_note}",
            )
        )
    measured = []
    for k in kernels:
        gbps, pct = _num(k.metrics.get("dram_gbps")), _num(k.dram_pct)
        if gbps and pct and pct >= 10:
            measured.append(gbps / (pct / 100))
    dram_clock = _num(device.get("dram_clock_hz")) or _num(device.get("max_mem_clock_hz"))
    per_cycle = _num(device.get("dram_bytes_peak_per_cycle"))
    bus = _num(device.get("memory_bus_width_bits"))
    if measured:
        measured.sort()
        out.append(
            Ceiling(
                "DRAM",
                "memory",
                measured[len(measured) // 2],
                "ncu's DRAM peak (achieved bandwidth ÷ its % of peak)",
            )
        )
    elif per_cycle and dram_clock:
        out.append(
            Ceiling("DRAM", "memory", per_cycle * dram_clock / 1e9, "ncu's DRAM peak per cycle × DRAM clock")
        )
    elif bus and dram_clock:
        out.append(
            Ceiling(
                "DRAM",
                "memory",
                2 * dram_clock * bus / 8 / 1e9,
                f"device specs: 2 × {dram_clock / 1e9:.2f} GHz memory clock × {int(bus)}-bit bus",
            )
        )
    l2_cycle, l2_clock = _num(device.get("l2_bytes_peak_per_cycle")), _num(device.get("l2_clock_hz"))
    slices = _num(device.get("l2_slices"))
    if l2_cycle and l2_clock:
        out.append(Ceiling("L2", "memory", l2_cycle * l2_clock / 1e9, "ncu's L2 peak per cycle × L2 clock"))
    elif slices and clock:
        width = L2_BYTES_PER_SLICE_CLK.get(cc.split(".")[0], 32)
        out.append(
            Ceiling(
                "L2",
                "memory",
                slices * width * clock / 1e9,
                f"estimate from device specs: {int(slices)} L2 slices × {width} B/clk × {clock_note}",
            )
        )
    return out


def _point(k: KernelSummary) -> tuple[float, float] | None:
    """(FLOP per DRAM byte, GFLOP/s) of a kernel, or None without FP32 work or DRAM traffic."""
    flop, dram, dur = (_num(k.metrics.get(n)) for n in ("fp32_flop", "dram_bytes", "duration_ns"))
    if not flop or not dram or not dur:
        return None
    return flop / dram, flop / dur


def _attainable(ai: float, roofs: Sequence[Ceiling]) -> float | None:
    compute = [c.value for c in roofs if c.kind == "compute"]
    dram = [c.value for c in roofs if c.name == "DRAM"]
    if not compute or not dram:
        return None
    return min(compute[0], dram[0] * ai)


def roofline_figure(title: str, points: Sequence[tuple[str, KernelSummary]], roofs: Sequence[Ceiling]) -> Any:
    """A plotly figure: the ceilings and one point per (label, kernel) that has FP32 work."""
    import plotly.graph_objects as go

    fig = go.Figure()
    placed = [(label, k, p) for label, k in points if (p := _point(k)) is not None]
    peak = next((c.value for c in roofs if c.kind == "compute"), None)
    mems = [c for c in roofs if c.kind == "memory"]
    ais = [p[0] for _, _, p in placed]
    ridges = [peak / m.value for m in mems] if peak else []
    x_lo = 10 ** math.floor(math.log10(min([*ais, 0.05]) / 2))
    x_hi = 10 ** math.ceil(math.log10(max([*ais, *ridges, 10.0]) * 4))
    ys = [p[1] for _, _, p in placed]
    y_hi = (peak or max([*ys, 1.0])) * 3
    y_lo = 10 ** math.floor(
        math.log10(max(min([*ys, *(m.value * x_lo for m in mems), y_hi / 1e4]), 1e-6) / 2)
    )
    for m in mems:
        x_top = peak / m.value if peak else x_hi
        xs = [x_lo, min(x_top, x_hi)]
        fig.add_trace(
            go.Scatter(
                x=xs,
                y=[m.value * x for x in xs],
                mode="lines",
                name=f"{m.name} {m.value:,.0f} GB/s",
                line={
                    "color": _CEILING_COLOURS.get(m.name, "#777"),
                    "dash": "dash" if m.name == "L2" else "solid",
                },
                hovertemplate=f"{m.name} roof: {m.value:,.0f} GB/s<br>{html.escape(m.how)}<extra></extra>",
            )
        )
    if peak:
        x0 = min(peak / m.value for m in mems) if mems else x_lo
        fp32 = next(c for c in roofs if c.kind == "compute")
        fig.add_trace(
            go.Scatter(
                x=[x0, x_hi],
                y=[peak, peak],
                mode="lines",
                name=f"FP32 {peak / 1000:,.1f} TFLOP/s",
                line={"color": _CEILING_COLOURS["FP32"]},
                hovertemplate=f"FP32 roof: {peak:,.0f} GFLOP/s<br>{html.escape(fp32.how)}<extra></extra>",
            )
        )
    for i, (label, k, (ai, gflops)) in enumerate(placed):
        roof = _attainable(ai, roofs)
        share = f" = {100 * gflops / roof:.1f}% of the roof at this intensity" if roof else ""
        dur = _num(k.duration_ns)
        text = (
            f"<b>{html.escape(label)}</b>: {html.escape(k.name)}<br>{gflops:,.1f} GFLOP/s at {ai:.3g} FLOP/B{share}"
            + (
                f"<br>{dur / 1000:,.1f} µs, DRAM {k.dram_pct:.0f}% of peak"
                if dur and k.dram_pct is not None
                else ""
            )
        )
        fig.add_trace(
            go.Scatter(
                x=[ai],
                y=[gflops],
                mode="markers+text",
                name=f"{label}: {gflops:,.0f} GFLOP/s",
                text=[label],
                textposition="top center",
                marker={
                    "size": 14,
                    "color": _RUN_COLOURS[i % len(_RUN_COLOURS)],
                    "line": {"width": 1, "color": "#000"},
                },
                hovertemplate=text + "<extra></extra>",
            )
        )
    missing = [(label, k) for label, k in points if _point(k) is None]
    for label, k in missing:
        dram = f"DRAM {k.dram_pct:.0f}% of peak" if k.dram_pct is not None else "no DRAM figure"
        fig.add_annotation(
            text=f"{html.escape(label)}: no FP32 work to place on this chart ({dram})",
            xref="paper",
            yref="paper",
            x=0.02,
            y=0.98 - 0.07 * missing.index((label, k)),
            showarrow=False,
            align="left",
            xanchor="left",
            font={"size": 12, "color": "#a00"},
        )
    fig.update_layout(
        title={"text": html.escape(title), "font": {"size": 15}},
        xaxis={
            "title": "arithmetic intensity [FLOP / DRAM byte]",
            "type": "log",
            "range": [math.log10(x_lo), math.log10(x_hi)],
        },
        yaxis={"title": "FP32 [GFLOP/s]", "type": "log", "range": [math.log10(y_lo), math.log10(y_hi)]},
        height=420,
        margin={"l": 70, "r": 20, "t": 50, "b": 60},
        template="plotly_white",
        legend={"orientation": "h", "y": -0.2},
        paper_bgcolor="#ffffff",
    )
    return fig


def _esc(value: Any) -> str:
    return html.escape(str(value), quote=True)


def _kernel_lines(model: SourceModel, name: str, stalls: dict[int, dict[str, Any]]) -> list[int]:
    """1-based line numbers to show for kernel ``name``: its definition, or the sampled lines with context."""
    fn = model.function(name)
    if fn is not None:
        span = fn.outer_span or fn.span
        return list(range(span.start_line + 1, span.end_line + 2))
    near: set[int] = set()
    for ln in stalls:
        near.update(range(max(1, ln - _CONTEXT), min(len(model.lines), ln + _CONTEXT) + 1))
    return sorted(near)


def _line_stalls(k: KernelSummary) -> dict[int, dict[str, Any]]:
    rows = k.line_stalls or [
        {"line": h["line"], "share": h["share"], "stall": h.get("stall"), "stall_share": h.get("stall_share")}
        for h in k.hot_lines
    ]
    return {int(r["line"]): r for r in rows if r.get("line") is not None}


def _source_table(run: Run, model: SourceModel, k: KernelSummary) -> str:
    stalls = _line_stalls(k)
    lines = _kernel_lines(model, k.name, stalls)
    marks: dict[int, list[str]] = {}
    for f in run.outcome.findings:
        if f.kernel in (k.name, None):
            marks.setdefault(f.range.start_line + 1, []).append(f.code)
    top = max((float(r["share"]) for r in stalls.values()), default=0.0) or 1.0
    rows = []
    for ln in lines:
        code = model.lines[ln - 1] if 0 < ln <= len(model.lines) else ""
        r = stalls.get(ln)
        share = float(r["share"]) if r else 0.0
        stall = ""
        if r and r.get("stall"):
            stall = str(r["stall"]) + (
                f" {100 * float(r['stall_share']):.0f}%" if r.get("stall_share") else ""
            )
        badges = "".join(f'<span class="badge">{_esc(c)}</span>' for c in sorted(set(marks.get(ln, []))))
        bar = f'<div class="bar" style="width:{100 * share / top:.1f}%"></div>' if share else ""
        cell = (
            f'<td class="share">{bar}<span>{100 * share:.1f}%</span></td>'
            if share
            else '<td class="share"></td>'
        )
        rows.append(
            f'<tr class="{"hot" if share >= 0.1 else ""}"><td class="ln">{ln}</td>{cell}'
            f'<td class="stall">{_esc(stall)}</td><td class="code"><code>{_esc(code)}</code>{badges}</td></tr>'
        )
    head = "<tr><th>line</th><th>stall samples</th><th>dominant stall</th><th>source</th></tr>"
    return f'<table class="src">{head}{"".join(rows)}</table>'


def _findings_table(run: Run, k: KernelSummary) -> str:
    mine = [f for f in run.outcome.findings if f.kernel in (k.name, None) or f.kernel == k.entry]
    if not mine:
        return '<p class="muted">no profile findings</p>'
    rows = "".join(
        f'<tr><td class="sev {_esc(f.severity.value)}">{_esc(f.severity.value)}</td><td>{_esc(f.code)}</td>'
        f"<td>{f.range.start_line + 1}</td><td>{_esc(f.message)}</td></tr>"
        for f in mine
    )
    return f'<table class="findings"><tr><th>severity</th><th>rule</th><th>line</th><th>finding</th></tr>{rows}</table>'


def _kernel_facts(k: KernelSummary) -> str:
    dur = _num(k.duration_ns)
    parts = [f"{dur / 1000:,.1f} µs" if dur else "duration ?"]
    if k.dram_pct is not None:
        parts.append(f"DRAM {k.dram_pct:.0f}% of peak")
    if k.fp32_pct is not None:
        parts.append(f"FP32 {k.fp32_pct:.1f}% of peak")
    parts.append(k.bottleneck)
    return " · ".join(_esc(p) for p in parts)


_CSS = """
body{font:14px/1.45 system-ui,-apple-system,'Segoe UI',sans-serif;margin:0;background:#fff;color:#1b1b1b}
header{padding:14px 24px;background:#0f2a3d;color:#fff}header h1{margin:0;font-size:20px}
header p{margin:4px 0 0;color:#cfe3f1;font-size:13px}main{padding:8px 24px 32px}
section.kernel{border:1px solid #ddd;border-radius:6px;margin:18px 0;padding:12px 16px}
section.kernel h2{margin:0 0 4px;font-size:17px}.facts{color:#444;margin:0 0 8px}
.chart{max-width:1100px}.sources{overflow-x:auto}.run-label{font-weight:600;margin:6px 0 2px}
table{border-collapse:collapse;width:100%}th{text-align:left;font-weight:600;border-bottom:1px solid #ccc;padding:2px 6px}
td{padding:1px 6px;vertical-align:top}table.src td.code code{white-space:pre;font:12px/1.35 ui-monospace,Menlo,Consolas,monospace}
table.src td.ln{color:#888;text-align:right;font:12px ui-monospace,monospace}
table.src td.share{position:relative;width:120px;font:12px ui-monospace,monospace}
table.src td.share .bar{position:absolute;left:0;top:2px;bottom:2px;background:#f4a261;opacity:.55}
table.src td.share span{position:relative}table.src td.stall{color:#7a3b00;font-size:12px;white-space:nowrap}
table.src tr.hot td.code code{font-weight:600}.badge{background:#e8eefc;color:#1a3d8f;border-radius:3px;padding:0 4px;
margin-left:8px;font-size:11px}table.findings td{border-bottom:1px solid #eee}.sev.warning{color:#b36b00}
.sev.error{color:#c00}.sev.info{color:#1a5fb4}.muted{color:#777}footer{color:#666;font-size:12px;padding:0 24px 24px}
"""


def require_plotly() -> None:
    """Raise :class:`HtmlReportError` naming the extra to install when plotly is missing (check before GPU work)."""
    try:
        import plotly.graph_objects  # noqa: F401
    except ImportError:
        raise HtmlReportError(PLOTLY_HINT) from None


def profile_page(runs: Sequence[Run], title: str) -> str:
    """The HTML page for one profile (one run) or an optimize result (baseline and winner)."""
    require_plotly()
    import plotly.offline

    if not runs:
        raise ValueError("no profile to render")
    first = runs[0].outcome
    env = first.environment
    device = env.get("device") or {}
    roofs = ceilings(device, [k for r in runs for k in r.outcome.kernels])
    models = [parse_source(r.text, r.outcome.path) for r in runs]
    names: list[str] = []
    for r in runs:
        names.extend(k.name for k in r.outcome.kernels if k.name not in names)
    clock = _num(env.get("clocks_under_ncu_hz")) or _num(device.get("sm_clock_hz"))
    subtitle = " · ".join(
        _esc(p)
        for p in (
            env.get("gpu") or device.get("gpu") or "GPU ?",
            f"driver {env['driver']}" if env.get("driver") else "",
            f"ncu {env.get('ncu_version') or env.get('report_ncu_version')}"
            if env.get("ncu_version") or env.get("report_ncu_version")
            else "",
            f"SM clock under ncu {clock / 1e9:.2f} GHz" if clock else "",
            " vs ".join(r.label for r in runs) if len(runs) > 1 else "",
        )
        if p
    )
    sections = []
    for i, name in enumerate(names):
        present = [
            (r, m, k) for r, m in zip(runs, models, strict=True) for k in r.outcome.kernels if k.name == name
        ]
        fig = roofline_figure(f"{name}: roofline", [(r.label, k) for r, _, k in present], roofs)
        chart = fig.to_html(
            full_html=False,
            include_plotlyjs=False,
            div_id=f"roofline-{i}",
            config=_PLOTLY_CONFIG,
        )
        facts = "".join(
            f'<p class="facts"><b>{_esc(r.label)}</b>: {_kernel_facts(k)}</p>' for r, _, k in present
        )
        sources = "".join(
            (f'<div class="run-label">{_esc(r.label)}</div>' if len(runs) > 1 else "")
            + _source_table(r, m, k)
            for r, m, k in present
        )
        findings = "".join(
            (f'<div class="run-label">{_esc(r.label)}</div>' if len(runs) > 1 else "") + _findings_table(r, k)
            for r, _, k in present
        )
        entry = next((k.entry for _, _, k in present if k.entry and k.entry != name), None)
        sections.append(
            f'<section class="kernel" id="kernel-{i}"><h2>{_esc(name)}'
            + (f' <span class="muted">(entry {_esc(entry)})</span>' if entry else "")
            + f'</h2>{facts}<div class="chart">{chart}</div><h3>Source: share of warp-stall samples per line</h3>'
            f'<div class="sources">{sources}</div>'
            f"<h3>Findings</h3>{findings}</section>"
        )
    roof_notes = "".join(
        f"<li>{_esc(c.name)}: {c.value:,.0f} {'GFLOP/s' if c.kind == 'compute' else 'GB/s'} — {_esc(c.how)}</li>"
        for c in roofs
    )
    notes = "".join(f"<li>{_esc(n)}</li>" for r in runs for n in r.outcome.notes)
    plotly_js = plotly.offline.get_plotlyjs()
    return (
        '<!DOCTYPE html><html lang="en"><head><meta charset="utf-8">'
        f"<title>{_esc(title)}</title><style>{_CSS}</style>"
        f'<script type="text/javascript">{plotly_js}</script></head><body>'
        f"<header><h1>{_esc(title)}</h1><p>{subtitle}</p></header><main>"
        + ("".join(sections) or '<p class="muted">no kernel was profiled</p>')
        + f"<h3>Ceilings</h3><ul>{roof_notes or '<li>unknown: the report has no device facts</li>'}</ul>"
        + (f"<h3>Notes</h3><ul>{notes}</ul>" if notes else "")
        + "</main><footer>Written by kernellsp from Nsight Compute data; the page loads nothing from the network."
        "</footer></body></html>"
    )
