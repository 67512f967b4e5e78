"""Profile rules on the real reports of the samples, recorded on an H100 and on an H200 (bench_profile.py).

CI has no GPU: these tests read the committed .ncu-rep files of tests/fixtures/ncu/samples-h100/ and
samples-h200/ (each with the exact sources it was recorded from), and check, on both GPUs,
that the findings an expert expects land on the right source lines of the sample, and that rules that
must stay silent do: the uncoalesced store of the naive transpose, the atomic contention of the atomic
reduction, the L1/LSU-bound inner loop of the naive SGEMM, the DRAM-bound vector add, the strided saxpy.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from kernellsp.findings import Finding
from kernellsp.profile import load_report
from kernellsp.profile.findings import bottleneck, kernel_profile_metrics, profile_findings
from kernellsp.rules.engine import load_rules
from kernellsp.source.model import parse_file
from kernellsp.source.spec import specs_from_source

NCU = Path(__file__).resolve().parents[1] / "fixtures" / "ncu"
GPUS = {"h100": "NVIDIA H100 80GB HBM3", "h200": "NVIDIA H200"}


@pytest.fixture(params=sorted(GPUS))
def gpu(request: pytest.FixtureRequest) -> str:
    return str(request.param)


def _findings(gpu: str, sample: str) -> tuple[list[Finding], list[str], object]:
    fix = NCU / f"samples-{gpu}"
    src = fix / f"{sample}.cu"
    rep = next(fix.glob(f"{sample}.*.ncu-rep"))
    report = load_report(rep, sass=False)
    model = parse_file(src)
    bound = {b.entry: b for b in specs_from_source(model)[0]}
    entry = next(iter(bound))
    entry_of = {k.name: entry for k in report.kernels}
    assert report.gpu_name == GPUS[gpu]
    findings, _ = profile_findings(report, model, str(src), load_rules(None), bound, entry_of)
    return findings, model.lines, report


def _line(lines: list[str], needle: str) -> int:
    return next(i for i, t in enumerate(lines) if needle in t)


def test_transpose_flags_the_uncoalesced_store_line(gpu: str) -> None:
    f, lines, _ = _findings(gpu, "transpose_naive")
    store = _line(lines, "out[")
    kl601 = [x for x in f if x.code == "KL601"]
    assert [x.range.start_line for x in kl601] == [store]
    assert "excessive" in kl601[0].message and kl601[0].evidence["line_excess_sector_pct"] > 50
    assert "KL502" in {x.code for x in f}  # L2-bound, not DRAM-bound
    assert "KL501" not in {x.code for x in f}


def test_atomic_reduction_flags_contention_not_bandwidth(gpu: str) -> None:
    f, _, report = _findings(gpu, "reduce_atomic")
    codes = {x.code for x in f}
    assert {"KL511", "KL505"} <= codes
    assert not codes & {"KL501", "KL502", "KL503", "KL601"}
    assert f[0].code == "KL511", "contention ranks first"
    assert bottleneck(kernel_profile_metrics(report.kernels[0], report, None)) == "latency-bound"


def test_sgemm_flags_l1_bound_inner_loop(gpu: str) -> None:
    f, lines, _ = _findings(gpu, "sgemm_naive")
    codes = {x.code for x in f}
    assert "KL503" in codes and "KL501" not in codes
    loop = _line(lines, "+=")
    hot = [x for x in f if x.code == "KL603"]
    assert hot and hot[0].range.start_line == loop and hot[0].evidence["line_stall_share"] > 0.9


def test_vector_add_is_dram_bound_and_coalesced(gpu: str) -> None:
    f, _, report = _findings(gpu, "vector_add")
    codes = {x.code for x in f}
    assert "KL501" in codes
    assert not codes & {"KL502", "KL503", "KL601", "KL602", "KL604", "KL511"}
    assert bottleneck(kernel_profile_metrics(report.kernels[0], report, None)) == "memory-bound (DRAM)"


def test_strided_saxpy_flags_its_access_line(gpu: str) -> None:
    f, lines, _ = _findings(gpu, "saxpy_strided")
    line = _line(lines, "y[i] = a * x[i] + y[i]")
    assert [x.range.start_line for x in f if x.code == "KL601"] == [line]


def test_softmax_small_grid(gpu: str) -> None:
    f, _, _ = _findings(gpu, "softmax_row")
    kl507 = [x for x in f if x.code == "KL507"]
    assert kl507 and kl507[0].evidence["waves"] < 1


@pytest.mark.parametrize(
    "rep", sorted(NCU.glob("samples-*/*.ncu-rep")), ids=lambda p: f"{p.parent.name}/{p.name}"
)
def test_every_sample_report_reads_and_ranks(rep: Path) -> None:
    sample = rep.name.split(".")[0]
    f, _, report = _findings(rep.parent.name.removeprefix("samples-"), sample)
    assert report.gpu_name and report.kernels and report.kernels[0].lines
    impacts = [x.impact for x in f]
    assert impacts == sorted(impacts, reverse=True)
    assert all(x.source == "profile" for x in f)


def test_both_gpus_recorded_every_sample() -> None:
    names = {g: sorted(p.name for p in (NCU / f"samples-{g}").glob("*.ncu-rep")) for g in GPUS}
    assert names["h100"] == names["h200"] and len(names["h100"]) == len(
        list((NCU.parent.parent.parent / "samples").glob("*.cu"))
    )
