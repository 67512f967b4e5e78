"""The HTML profile report, rendered from the real H100 reports of the samples (no GPU needed).

The outcomes are rebuilt from ``tests/fixtures/ncu/samples-h100/`` the way ``profile_file`` builds them
(:func:`kernellsp.profile.findings.profile_findings` + :func:`~kernellsp.profile.environment.device_facts`), the page
is written by :func:`kernellsp.report.html.profile_page`, and headless Chromium (Debian's ``chromium``,
network off) renders it: plotly must have drawn the roofline, and the screenshot lands in
``$KERNELLSP_TEST_ARTIFACTS/report`` (``tests/fixtures/screens/profile-report.png`` is one of them).
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from kernellsp.cli import app
from kernellsp.profile import load_report
from kernellsp.profile.environment import device_facts
from kernellsp.profile.findings import KernelSummary, profile_findings
from kernellsp.profile.ncu import ProfileOutcome
from kernellsp.report.html import Run, ceilings, profile_page, roofline_figure
from kernellsp.rules.engine import load_rules
from kernellsp.source.model import parse_file
from kernellsp.source.spec import specs_from_source

pytest.importorskip("plotly", reason="the HTML report needs plotly (the 'report' extra; in the test extras)")

ROOT = Path(__file__).resolve().parents[2]
H100 = ROOT / "tests" / "fixtures" / "ncu" / "samples-h100"


def outcome_of(sample: str) -> tuple[ProfileOutcome, str]:
    """The outcome ``profile_file`` would have produced for ``sample`` on the H100 (from its real report)."""
    src = H100 / f"{sample}.cu"
    report = load_report(next(H100.glob(f"{sample}.*.ncu-rep")), sass=False)
    model = parse_file(src)
    bound = {b.entry: b for b in specs_from_source(model)[0]}
    entry = next(iter(bound))
    entry_of: dict[str, str | None] = {k.name: entry for k in report.kernels}
    findings, kernels = profile_findings(report, model, str(src), load_rules(None), bound, entry_of)
    env = {
        "gpu": report.gpu_name,
        "report_ncu_version": report.ncu_version,
        "clocks_under_ncu_hz": report.sm_clock_hz,
        "device": device_facts(report),
    }
    return ProfileOutcome(
        path=str(src), findings=findings, kernels=kernels, environment=env, notes=[], wall_s=0.0
    ), (src.read_text())


def test_ceilings_of_the_h100() -> None:
    out, _ = outcome_of("vector_add")
    roofs = {c.name: c for c in ceilings(out.environment["device"], out.kernels)}
    clock = out.environment["device"]["sm_clock_hz"]
    assert roofs["FP32"].value == pytest.approx(132 * 128 * 2 * clock / 1e9)
    assert "132 SMs" in roofs["FP32"].how
    # ncu's DRAM peak read off the kernel agrees with the HBM3 specs (2 × 2.62 GHz × 5120 bit = 3.35 TB/s).
    assert roofs["DRAM"].value == pytest.approx(3352, rel=0.01) and "ncu" in roofs["DRAM"].how
    spec_only = {**out.environment["device"]}
    spec_dram = next(c for c in ceilings(spec_only, []) if c.name == "DRAM")
    assert spec_dram.value == pytest.approx(roofs["DRAM"].value, rel=0.01) and "specs" in spec_dram.how
    assert roofs["L2"].value == pytest.approx(80 * 96 * clock / 1e9) and "estimate" in roofs["L2"].how


def test_ceilings_from_ncu_peaks() -> None:
    """The device facts of a real H100 profile (2026-11-24), which has ncu's per-cycle peaks (ROOFLINE_METRICS)."""
    device = {
        "compute_capability": "9.0",
        "sm_count": 132,
        "sm_clock_hz": 1589253743.5,
        "dram_clock_hz": 2618804824.6,
        "ffma_peak_per_cycle": 16896.0,
        "dram_bytes_peak_per_cycle": 1280.0,
        "l2_bytes_peak_per_cycle": 7680.0,
        "l2_clock_hz": 1705048142.8,
        "l2_slices": 80.0,
        "memory_bus_width_bits": 5120.0,
    }
    roofs = {c.name: c for c in ceilings(device, [])}
    assert roofs["FP32"].value == pytest.approx(53704, rel=1e-3) and roofs["FP32"].how.startswith("ncu's")
    assert roofs["DRAM"].value == pytest.approx(3352, rel=1e-3) and roofs["DRAM"].how.startswith("ncu's")
    assert roofs["L2"].value == pytest.approx(13095, rel=1e-3) and roofs["L2"].how.startswith("ncu's")


def test_page_is_self_contained_and_has_chart_source_and_findings() -> None:
    out, text = outcome_of("saxpy_strided")
    page = profile_page([Run("profile", out, text)], "saxpy_strided.cu")
    assert page.startswith("<!DOCTYPE html>") and page.count("Plotly.newPlot") == 1
    # Nothing is fetched: no external scripts, styles or images.
    assert not re.search(r"<(script|link|img|iframe)[^>]+(src|href)=", page)
    kernel = out.kernels[0]
    assert kernel.line_stalls and sum(r["share"] for r in kernel.line_stalls) == pytest.approx(1.0, abs=0.01)
    hot = max(kernel.line_stalls, key=lambda r: r["share"])
    assert hot["line"] == 1 + next(
        i for i, t in enumerate(text.splitlines()) if "y[i] = a * x[i] + y[i];" in t
    )
    assert f"{100 * hot['share']:.1f}%" in page and "long_scoreboard" in page
    assert "y[i] = a * x[i] + y[i];" in page and "KL601" in page and "NVIDIA H100 80GB HBM3" in page


def test_optimize_page_puts_baseline_and_winner_on_one_chart() -> None:
    base, text = outcome_of("vector_add")
    k = base.kernels[0]
    faster = KernelSummary(
        **{
            **k.__dict__,
            "duration_ns": k.duration_ns / 2,
            "metrics": {**k.metrics, "duration_ns": k.duration_ns / 2},
        }
    )
    win = ProfileOutcome(**{**base.__dict__, "kernels": [faster]})
    fig = roofline_figure(
        "vector_add", [("baseline", k), ("winner", faster)], ceilings(base.environment["device"], [])
    )
    points = [t for t in fig.data if t.mode == "markers+text"]
    assert [t.text[0] for t in points] == ["baseline", "winner"]
    assert points[1].y[0] == pytest.approx(2 * points[0].y[0]) and points[1].x[0] == points[0].x[0]
    page = profile_page([Run("baseline", base, text), Run("winner", win, text)], "optimize vector_add")
    assert page.count('class="kernel"') == 1 and "baseline vs winner" in page


def test_kernel_without_fp32_work_says_so() -> None:
    out, _ = outcome_of("transpose_naive")
    fig = roofline_figure(
        "t", [("profile", out.kernels[0])], ceilings(out.environment["device"], out.kernels)
    )
    assert not [t for t in fig.data if t.mode == "markers+text"]
    assert "no FP32 work" in fig.layout.annotations[0].text


def test_cli_says_plotly_is_missing(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setitem(sys.modules, "plotly", None)
    monkeypatch.setitem(sys.modules, "plotly.graph_objects", None)
    res = CliRunner().invoke(
        app, ["profile", str(ROOT / "samples" / "vector_add.cu"), "--html", str(tmp_path / "r.html")]
    )
    assert res.exit_code == 2 and "pip install 'kernellsp[report]'" in res.output, res.output


def _chromium() -> str | None:
    for name in (os.environ.get("KERNELLSP_CHROMIUM"), "chromium", "chromium-browser"):
        if name and (found := shutil.which(name)):
            return found
    return None


@pytest.mark.skipif(
    _chromium() is None, reason="chromium not found (apt-get install chromium; .ci/run installs it)"
)
def test_report_renders_in_headless_chromium(tmp_path: Path) -> None:
    out, text = outcome_of("saxpy_strided")
    page = tmp_path / "report.html"
    page.write_text(profile_page([Run("profile", out, text)], "kernellsp profile: saxpy_strided.cu"))
    shots = Path(os.environ.get("KERNELLSP_TEST_ARTIFACTS") or tmp_path / "artifacts") / "report"
    shots.mkdir(parents=True, exist_ok=True)
    home = tmp_path / "home"
    home.mkdir()
    env = {**os.environ, "HOME": str(home), "XDG_CONFIG_HOME": str(home / ".config")}
    # Offline: every host name fails to resolve, so a page that needed the network would show no chart.
    base = [
        _chromium(),
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--hide-scrollbars",
        "--disable-background-networking",
        "--host-resolver-rules=MAP * ~NOTFOUND",
        "--virtual-time-budget=15000",
        "--window-size=1300,1500",
    ]
    dom = subprocess.run(
        [*base, "--dump-dom", page.as_uri()], capture_output=True, text=True, env=env, timeout=120
    )
    assert dom.returncode == 0, dom.stderr[-2000:]
    # plotly drew the chart: its SVG, the three ceilings and the kernel's point.
    assert 'class="main-svg"' in dom.stdout, "plotly did not draw (no main-svg in the DOM)"
    assert dom.stdout.count('class="trace scatter') >= 4
    assert "DRAM 3,352 GB/s" in dom.stdout and "FP32 54.2 TFLOP/s" in dom.stdout
    png = shots / "profile-report.png"
    shot = subprocess.run(
        [*base, f"--screenshot={png}", page.as_uri()], capture_output=True, text=True, env=env, timeout=120
    )
    assert shot.returncode == 0 and png.stat().st_size > 50_000, shot.stderr[-2000:]
