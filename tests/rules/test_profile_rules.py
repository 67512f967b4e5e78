"""The profile rules (KL501-KL511, KL590, KL601-KL604) on real Nsight Compute reports, no GPU needed.

``tests/fixtures/ncu/fast-h200.ncu-rep`` holds the six probe kernels of ``tests/fixtures/ncu/kinds.cu``
(copy_f4, transpose_smem_conflicts, divergent, spills, matmul_naive, reduce_atomic), recorded on an
H200 with the fast section set and source counters. The ground truth is the rule table of
``/work/shared/reference/ncu.md`` §4; the values quoted here are this report's (the H200 run: e.g.
copy_f4 DRAM 81% of peak, transpose line 18 32-way bank conflicted, reduce_atomic's busiest L2
atomic unit 33% against 0.4% on average).

``tests/fixtures/ncu/fast-h100.ncu-rep`` is the same program and command recorded on an H100 80GB
HBM3 (``tests/bench/record_probe.sh``): every rule fires on the same kernels and lines there (the
last section of this file), with the H100's own values (e.g. copy_f4 DRAM 85% of a lower peak).

Every rule gets a kernel where it fires and one where it must not. Three rules have no firing
probe kernel, so their firing case evaluates the rule (:func:`kernellsp.rules.engine.applies`) on a copy
of a real kernel's metrics with one value changed, and the real kernels are the silent cases:

* KL502 (L2-bound): no probe kernel is L2-bound (copy_f4's L2 88% is the DRAM traffic passing
  through, within 10 points of DRAM 81%); transpose's metrics with ``l2_pct`` raised to 85 fire.
* KL507 (tail effect): spills runs 3.88 waves, whose last wave leaves only 3% of the block slots
  idle (ncu's own Tail Effect rule says 25%): silent; the same kernel at 1.5 and 0.5 waves fires.
* KL510 (DRAM traffic above the footprint) needs a launch spec for the footprint: copy_f4 with the
  sizes of ``kinds.cu`` main() (2 x 2^26 floats) moves 0.96x its footprint (silent), matmul_naive at
  N = 4096 (inputs 2 x 64 MB, output 64 MB) reads 16.9 GB from DRAM, 84x (fires).
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("ncu_report")

from kernellsp.findings import Finding
from kernellsp.profile import KernelProfile, ProfileReport, load_report
from kernellsp.profile.findings import (
    KernelSummary,
    bottleneck,
    footprint_bytes,
    kernel_profile_metrics,
    line_profile_metrics,
    profile_findings,
)
from kernellsp.rules import engine as rules
from kernellsp.source.model import SourceModel, parse_source
from kernellsp.source.spec import BoundSpec, spec_from_dict

FIXTURES = Path(__file__).parents[1] / "fixtures" / "ncu"
KINDS = FIXTURES / "kinds.cu"
KERNELS = ["copy_f4", "transpose_smem_conflicts", "divergent", "spills", "matmul_naive", "reduce_atomic"]
PROFILE_RULES = [f"KL5{n:02d}" for n in range(1, 12)] + ["KL590", "KL601", "KL602", "KL603", "KL604"]


def line_of(text: str) -> int:
    """1-based line of the first line of kinds.cu containing ``text``."""
    for i, line in enumerate(KINDS.read_text().splitlines(), 1):
        if text in line:
            return i
    raise AssertionError(f"{text!r} not in kinds.cu")


COPY_BODY = line_of("out[i] = in[i];")  # 9
TRANSPOSE_STORE = line_of("tile[threadIdx.y][threadIdx.x] = in[y * n + x];")  # 15
TRANSPOSE_READ = line_of("out[y * n + x] = tile[threadIdx.x][threadIdx.y];")  # 18
DIVERGENT_ODD = line_of("if (threadIdx.x % 2) { for")  # 24
DIVERGENT_EVEN = line_of("else { for (int k = 0; k < 64; ++k) v = cosf(v)")  # 25
SPILLS_LOAD = line_of("acc[k] = in[(i + k) % n];")  # 32
SPILLS_SUM = line_of("s += acc[(k * j) & 255];")  # 34
MATMUL_LOOP = line_of("acc += A[row * N + k] * B[k * N + col]")  # 39


@pytest.fixture(scope="module")
def report() -> ProfileReport:
    return load_report(FIXTURES / "fast-h200.ncu-rep")


@pytest.fixture(scope="module")
def model() -> SourceModel:
    return parse_source(KINDS.read_text(), str(KINDS))


@pytest.fixture(scope="module")
def ruleset() -> rules.RuleSet:
    return rules.load_rules(None)


@pytest.fixture(scope="module")
def profiled(
    report: ProfileReport, model: SourceModel, ruleset: rules.RuleSet
) -> tuple[list[Finding], list[KernelSummary]]:
    return profile_findings(report, model, str(KINDS), ruleset, {}, {})


@pytest.fixture(scope="module")
def findings(profiled: tuple[list[Finding], list[KernelSummary]]) -> list[Finding]:
    return profiled[0]


@pytest.fixture(scope="module")
def summaries(profiled: tuple[list[Finding], list[KernelSummary]]) -> dict[str, KernelSummary]:
    return {s.name: s for s in profiled[1]}


def kernel(report: ProfileReport, name: str) -> KernelProfile:
    (kp,) = report.kernels_named(name)
    return kp


def metrics(report: ProfileReport, name: str, bound: BoundSpec | None = None) -> dict[str, Any]:
    return kernel_profile_metrics(kernel(report, name), report, bound)


def of(findings: list[Finding], code: str, kernel_name: str | None = None) -> list[Finding]:
    return [f for f in findings if f.code == code and (kernel_name is None or f.kernel == kernel_name)]


def lines(found: list[Finding]) -> list[int]:
    """1-based source lines of findings (Finding.range is 0-based)."""
    return sorted(f.range.start_line + 1 for f in found)


def rule(ruleset: rules.RuleSet, code: str) -> rules.Rule:
    r = ruleset.get(code)
    assert r is not None, code
    return r


def fires_on(findings: list[Finding], code: str) -> set[str]:
    return {f.kernel for f in of(findings, code) if f.kernel}


# --------------------------------------------------------------------------------------------------
# The whole picture


def test_every_profile_rule_is_loaded(ruleset: rules.RuleSet) -> None:
    for code in PROFILE_RULES:
        r = rule(ruleset, code)
        assert r.source == "profile", code
    assert {r.code for r in ruleset.conditional("kernel", "profile")} == {f"KL5{n:02d}" for n in range(1, 12)}
    assert {r.code for r in ruleset.conditional("line", "profile")} == {"KL601", "KL602", "KL603", "KL604"}
    emitter = ruleset.by_emitter("ncu-rule")
    assert emitter is not None and emitter.code == "KL590"


#: Which probe kernels each rule fires on: the same on the H200 and on the H100.
EXPECTED_FIRES: dict[str, set[str]] = {
    "KL501": {"copy_f4", "spills"},
    "KL502": set(),
    "KL503": {"matmul_naive", "transpose_smem_conflicts"},
    "KL504": {"divergent"},
    "KL505": {"reduce_atomic"},
    "KL506": {"transpose_smem_conflicts", "spills", "reduce_atomic"},
    "KL507": set(),
    "KL508": {"copy_f4", "spills", "matmul_naive", "reduce_atomic"},
    "KL509": {"reduce_atomic", "transpose_smem_conflicts"},
    "KL510": set(),  # needs a spec; see test_kl510_*
    "KL511": {"reduce_atomic"},
    "KL590": set(KERNELS),
    "KL601": {"spills"},
    "KL602": {"transpose_smem_conflicts"},
    "KL603": {"copy_f4", "transpose_smem_conflicts", "spills", "matmul_naive", "reduce_atomic"},
    "KL604": {"divergent"},
}


def test_which_kernels_each_rule_fires_on(findings: list[Finding]) -> None:
    """One table, straight from ncu.md §4 (rules without a firing probe kernel: see the module doc)."""
    assert {code: fires_on(findings, code) for code in PROFILE_RULES} == EXPECTED_FIRES
    assert {f.code for f in findings} <= set(PROFILE_RULES)


def test_findings_ranked_by_impact_descending(findings: list[Finding]) -> None:
    impacts = [f.impact for f in findings]
    assert impacts == sorted(impacts, reverse=True)
    assert impacts[0] > 100  # KL511 on reduce_atomic: 100 x drain share + 50
    assert findings[0].code == "KL511" and findings[0].kernel == "reduce_atomic"
    for f in findings:
        assert f.source == "profile"
        assert "duration_ns" in f.evidence


def test_messages_are_rendered_with_real_values(findings: list[Finding]) -> None:
    for f in findings:
        if f.code == "KL590":
            continue
        assert "{" not in f.message and "?" not in f.message, f.message
        assert f.kernel in KERNELS
        assert f.fix and f.title


def test_kernel_findings_point_at_the_kernel_name(findings: list[Finding], model: SourceModel) -> None:
    kernel_scope = {f"KL5{n:02d}" for n in range(1, 12)} | {"KL590"}
    for f in findings:
        if f.code not in kernel_scope:
            continue
        decl = line_of(f"__global__ void {f.kernel}(")
        assert f.range.start_line == decl - 1, (f.code, f.kernel)
        text = model.lines[f.range.start_line]
        assert text[f.range.start_col : f.range.end_col] == f.kernel


def test_line_findings_use_zero_based_lines(findings: list[Finding], model: SourceModel) -> None:
    for f in findings:
        if f.code not in ("KL601", "KL602", "KL603", "KL604"):
            continue
        one_based = f.range.start_line + 1
        # The message quotes the 1-based line; the range is that line - 1, without its indentation.
        assert f.message.startswith(f"line {one_based}"), f.message
        text = model.lines[f.range.start_line]
        assert f.range.start_col == len(text) - len(text.lstrip())
        assert f.range.end_col == len(text.rstrip())


# --------------------------------------------------------------------------------------------------
# Kernel rules, one by one


def test_kl501_dram_bound(findings: list[Finding]) -> None:
    (f,) = of(findings, "KL501", "copy_f4")
    assert f.range.start_line == line_of("__global__ void copy_f4(") - 1
    assert (
        "copy_f4 is DRAM-bound: 81% of peak DRAM bandwidth (3885 GB/s) against 8% SM throughput" in f.message
    )
    assert f.evidence["dram_pct"] == pytest.approx(80.75, abs=0.01)
    assert f.impact == pytest.approx(100 - 80.75, abs=0.01)
    assert not of(findings, "KL501", "matmul_naive")  # L1-bound: DRAM only 11%
    assert not of(findings, "KL501", "divergent")


def test_kl502_l2_bound(report: ProfileReport, ruleset: rules.RuleSet, findings: list[Finding]) -> None:
    """No probe kernel is L2-bound: the firing case is transpose's real metrics with l2_pct raised to 85."""
    kl502 = rule(ruleset, "KL502")
    assert not of(findings, "KL502")
    copy = metrics(report, "copy_f4")
    # copy_f4: L2 88% is high, but it is DRAM traffic passing through L2 (DRAM 81%): not L2-bound.
    assert copy["l2_pct"] > 85 and copy["l2_pct"] < copy["dram_pct"] + 10
    assert not rules.applies(kl502, copy)
    tr = metrics(report, "transpose_smem_conflicts")
    assert not rules.applies(kl502, tr)
    raised = {**tr, "l2_pct": 85.0}
    assert rules.applies(kl502, raised)
    msg = rules.render(kl502.message, raised)
    assert "L2 throughput 85% of peak while DRAM runs at 16%" in msg
    assert f"hottest lines {TRANSPOSE_READ} (41%)" in msg
    assert rules.impact(kl502, raised) == pytest.approx(85 - tr["dram_pct"])
    assert bottleneck(raised) == "memory-bound (L2)"


def test_kl503_l1_bound(findings: list[Finding]) -> None:
    (f,) = of(findings, "KL503", "matmul_naive")
    assert "L1 throughput 99% of peak (L2 20%, DRAM 11%), stalls mostly long_scoreboard" in f.message
    assert f"hottest lines {MATMUL_LOOP} (100%)" in f.message
    (t,) = of(findings, "KL503", "transpose_smem_conflicts")
    assert "L1 throughput 67% of peak" in t.message and "short_scoreboard" in t.message
    assert not of(findings, "KL503", "copy_f4")  # DRAM-bound, L1 36%


def test_kl504_compute_bound(findings: list[Finding]) -> None:
    (f,) = of(findings, "KL504", "divergent")
    assert (
        f.message
        == "divergent is compute-bound: SM throughput 96% of peak, the fma pipe is 55% busy (memory 1%)"
    )
    assert f.impact == pytest.approx(54.9, abs=0.05)
    assert not of(findings, "KL504", "copy_f4")
    assert not of(findings, "KL504", "matmul_naive")  # SM 66% but memory 99%


def test_kl505_latency_bound(findings: list[Finding]) -> None:
    (f,) = of(findings, "KL505", "reduce_atomic")
    assert "SM 0% and memory 1% of peak; warps mostly wait on drain (52% of latency)" in f.message
    assert f.impact == pytest.approx(100 - 0.851, abs=0.01)
    assert not of(findings, "KL505", "divergent")
    assert not of(findings, "KL505", "copy_f4")


def test_kl506_achieved_occupancy(findings: list[Finding]) -> None:
    gaps = {f.kernel: f.evidence["occupancy_gap_pct"] for f in of(findings, "KL506")}
    assert set(gaps) == {"transpose_smem_conflicts", "spills", "reduce_atomic"}
    assert gaps["reduce_atomic"] == pytest.approx(20.03, abs=0.01)
    (ra,) = of(findings, "KL506", "reduce_atomic")
    assert "achieves 80% occupancy of a theoretical 100% (20 points lost" in ra.message
    assert not of(findings, "KL506", "copy_f4")  # gap 5.8 points


def test_kl507_tail_effect(report: ProfileReport, ruleset: rules.RuleSet, findings: list[Finding]) -> None:
    """spills: 3.88 waves, 3% idle in the last wave: silent (ncu's Tail Effect says 25%). A firing case
    recomputes spills' metrics with 1.5 and 0.5 waves."""
    kl507 = rule(ruleset, "KL507")
    assert not of(findings, "KL507")
    sp = metrics(report, "spills")
    assert sp["waves"] == pytest.approx(3.88, abs=0.01)
    assert sp["tail_idle_pct"] == pytest.approx(3.03, abs=0.01)
    assert not rules.applies(kl507, sp)
    ncu_tail = [f for f in of(findings, "KL590", "spills") if f.evidence["ncu_rule"] == "LaunchConfiguration"]
    assert len(ncu_tail) == 1 and ncu_tail[0].estimated_speedup_pct == pytest.approx(25.0)
    kp = kernel(report, "spills")
    for waves, idle in ((1.5, 25.0), (0.5, 50.0)):
        changed = kp.model_copy(update={"derived": {**kp.derived, "waves": waves}})
        values = kernel_profile_metrics(changed, report, None)
        assert values["tail_idle_pct"] == pytest.approx(idle)
        assert rules.applies(kl507, values)
        assert rules.render(kl507.message, values) == (
            f"spills launches {waves:.2f} waves of blocks per SM: {idle:.0f}% of the SMs' block slots sit idle "
            "in the last wave"
        )
        assert rules.impact(kl507, values) == pytest.approx(idle)
    # Plenty of waves: even a half-empty last wave is not worth a finding.
    assert not rules.applies(kl507, {**sp, "waves": 8.5, "tail_idle_pct": 5.6})


def test_kl508_dominant_stall(findings: list[Finding]) -> None:
    stalls = {f.kernel: f.evidence["dominant_stall"] for f in of(findings, "KL508")}
    assert stalls == {
        "copy_f4": "long_scoreboard",
        "spills": "long_scoreboard",
        "matmul_naive": "long_scoreboard",
        "reduce_atomic": "drain",
    }
    (cp,) = of(findings, "KL508", "copy_f4")
    assert cp.message.startswith(
        "copy_f4: 97% of warp latency is long_scoreboard stalls (schedulers issue in 7% of cycles)"
    )
    assert f"hottest lines {COPY_BODY} (100%)" in cp.message
    assert not of(findings, "KL508", "divergent")  # dominant 'not_selected' at 96% issue
    assert not of(findings, "KL508", "transpose_smem_conflicts")  # no reason above 30%


def test_kl509_low_issue(findings: list[Finding], report: ProfileReport) -> None:
    (ra,) = of(findings, "KL509", "reduce_atomic")
    assert "issues an instruction in only 0% of scheduler cycles (IPC 0.00 of 4 per SM)" in ra.message
    assert of(findings, "KL509", "transpose_smem_conflicts")
    assert not of(findings, "KL509", "divergent")  # issues in 96% of cycles
    # copy_f4 issues in 7% of cycles but memory is saturated: that is DRAM-bound, not low IPC.
    cp = metrics(report, "copy_f4")
    assert cp["issue_active"] < 0.25 and cp["mem_pct"] >= 80
    assert not of(findings, "KL509", "copy_f4")


def _bound(entry: str, data: dict[str, Any]) -> BoundSpec:
    spec, errors = spec_from_dict(data)
    assert spec is not None, errors
    return BoundSpec(spec=spec, entry=entry, origin="workspace")


#: Launch specs with the sizes kinds.cu main() uses (n = 2^26 floats; matmul N = 4096).
COPY_SPEC = _bound(
    "copy_f4",
    {
        "sizes": {"N": 1 << 26},
        "launch": {"grid": 132 * 16, "block": 256},
        "args": {
            "in": {"dtype": "f32", "dir": "in", "count": "N"},
            "out": {"dtype": "f32", "dir": "out", "count": "N"},
            "n4": {"value": "N / 4"},
        },
    },
)
MATMUL_SPEC = _bound(
    "matmul_naive",
    {
        "sizes": {"N": 4096},
        "launch": {"grid": ["N / 16", "N / 16"], "block": [16, 16]},
        "args": {
            "A": {"dtype": "f32", "dir": "in", "count": "N * N"},
            "B": {"dtype": "f32", "dir": "in", "count": "N * N"},
            "C": {"dtype": "f32", "dir": "out", "count": "N * N"},
            "N": {"value": "N"},
        },
    },
)


def test_kl510_footprint_from_spec() -> None:
    assert footprint_bytes(COPY_SPEC) == 2 * (1 << 26) * 4
    assert footprint_bytes(MATMUL_SPEC) == 3 * 4096 * 4096 * 4  # 2 x 64 MB in, 64 MB out
    assert footprint_bytes(None) is None
    inout = _bound("k", {"sizes": {"N": 10}, "args": {"x": {"dtype": "f64", "dir": "inout", "count": "N"}}})
    assert footprint_bytes(inout) == 2 * 10 * 8  # read once and written once


def test_kl510_dram_excess(report: ProfileReport, model: SourceModel, ruleset: rules.RuleSet) -> None:
    specs = {"copy_f4": COPY_SPEC, "matmul_naive": MATMUL_SPEC}
    found, _ = profile_findings(report, model, str(KINDS), ruleset, specs, {})
    assert fires_on(found, "KL510") == {"matmul_naive"}
    (f,) = of(found, "KL510", "matmul_naive")
    assert f.message == (
        "matmul_naive moves 16892 MB through DRAM, 83.9x the 201 MB the spec's buffers need "
        "(inputs read once, outputs written once)"
    )
    assert f.evidence["dram_excess_ratio"] == pytest.approx(16892250112 / 201326592)
    assert f.impact == pytest.approx(100 * (1 - 1 / f.evidence["dram_excess_ratio"]) * 10.66 / 100, abs=0.01)
    # copy_f4 moves what it must: 515 MB against a 537 MB footprint.
    cp = metrics(report, "copy_f4", COPY_SPEC)
    assert cp["dram_excess_ratio"] == pytest.approx(0.96, abs=0.01)
    assert not rules.applies(rule(ruleset, "KL510"), cp)
    # The other rules do not depend on the spec.
    plain, _ = profile_findings(report, model, str(KINDS), ruleset, {}, {})
    assert [(g.code, g.kernel, g.range) for g in found if g.code != "KL510"] == [
        (g.code, g.kernel, g.range) for g in plain
    ]


def test_kl511_atomic_contention(findings: list[Finding], report: ProfileReport) -> None:
    (f,) = of(findings, "KL511", "reduce_atomic")
    assert (
        "the busiest L2 slice's atomic unit is 33% busy against 0.4% on average (131072 atomic instructions)"
        in f.message
    )
    assert "warps wait on drain 52% of the time" in f.message
    assert f.impact == pytest.approx(100 * 0.525 + 50, abs=0.1)
    assert not of(findings, "KL511", "copy_f4")
    assert metrics(report, "copy_f4")["atomic_inst"] == 0


# --------------------------------------------------------------------------------------------------
# Line rules


def test_kl601_uncoalesced_line(findings: list[Finding]) -> None:
    (f,) = of(findings, "KL601")
    assert f.kernel == "spills" and f.range.start_line == SPILLS_LOAD - 1
    assert f.message.startswith(f"line {SPILLS_LOAD}: 18% of this line's global-memory sectors are excessive")
    assert f.evidence["line_excess_sector_pct"] == pytest.approx(17.9, abs=0.1)
    assert not of(findings, "KL601", "copy_f4")  # float4 loads, fully coalesced


def test_kl602_bank_conflicts_line(findings: list[Finding]) -> None:
    (f,) = of(findings, "KL602")
    assert f.kernel == "transpose_smem_conflicts"
    assert f.range.start_line == TRANSPOSE_READ - 1 == 17
    assert f.message == (
        f"line {TRANSPOSE_READ}: shared-memory accesses are 32-way bank conflicted; "
        "97% of the line's shared wavefronts are replays"
    )
    assert f.evidence["line_shared_nway"] == 32
    # The row-wise store into the tile (line 15) is conflict-free.
    assert TRANSPOSE_STORE - 1 not in {g.range.start_line for g in of(findings, "KL602")}


def test_kl603_stall_hot_line(findings: list[Finding]) -> None:
    (mm,) = of(findings, "KL603", "matmul_naive")
    assert mm.range.start_line == MATMUL_LOOP - 1
    assert (
        mm.message
        == f"line {MATMUL_LOOP} holds 100% of matmul_naive's warp-stall samples, 57% of them long_scoreboard"
    )
    assert lines(of(findings, "KL603", "spills")) == [SPILLS_LOAD, SPILLS_SUM]
    assert lines(of(findings, "KL603", "copy_f4")) == [COPY_BODY]
    assert TRANSPOSE_READ in lines(of(findings, "KL603", "transpose_smem_conflicts"))
    # divergent's samples are mostly 'not_selected' (the schedulers are busy): no hot-line finding.
    assert not of(findings, "KL603", "divergent")


def test_kl604_divergence_line(findings: list[Finding]) -> None:
    found = of(findings, "KL604")
    assert {f.kernel for f in found} == {"divergent"}
    assert lines(found) == [DIVERGENT_ODD, DIVERGENT_EVEN] == [24, 25]
    assert [f.range.start_line for f in sorted(found, key=lambda f: f.range.start_line)] == [23, 24]
    for f in found:
        assert "only 16.0 of 32 threads are active per executed instruction" in f.message
        assert f.evidence["line_avg_threads"] == pytest.approx(16.0, abs=0.05)
    assert not of(findings, "KL604", "copy_f4")


def test_line_metrics_are_keyed_by_one_based_line(report: ProfileReport) -> None:
    lm = line_profile_metrics(kernel(report, "transpose_smem_conflicts"), KINDS.name)
    assert lm[TRANSPOSE_READ]["line_shared_nway"] == 32
    assert lm[TRANSPOSE_STORE]["line_shared_nway"] == 1  # the row-wise store: conflict-free
    assert lm[TRANSPOSE_STORE]["line_shared_excess_pct"] == 0
    assert line_profile_metrics(kernel(report, "copy_f4"), "other.cu") == {}


# --------------------------------------------------------------------------------------------------
# Nsight Compute's own rules (KL590)


def test_kl590_carries_ncu_estimated_speedup(findings: list[Finding]) -> None:
    by_rule = {f.evidence["ncu_rule"]: f for f in of(findings, "KL590", "transpose_smem_conflicts")}
    assert set(by_rule) == {
        "SOLBottleneck",
        "IssueSlotUtilization",
        "AchievedOccupancy",
        "SharedMemoryConflicts",
        "UncoalescedSharedAccess",
    }
    smem = by_rule["SharedMemoryConflicts"]
    assert smem.estimated_speedup_pct == pytest.approx(67.99, abs=0.01)
    assert smem.impact == smem.estimated_speedup_pct
    assert smem.severity == "info" and smem.source == "profile"
    assert smem.evidence["type"] == "OPT" and smem.evidence["section"] == "MemoryWorkloadAnalysis_Tables"
    assert smem.message.startswith("ncu SharedMemoryConflicts: Shared Load Bank Conflicts: ")
    assert "32.2 - way bank conflict" in smem.message
    assert smem.message.endswith("(ncu est. global speedup 68%)")
    assert "\n" not in smem.message and len(smem.message) < 600
    # A rule without an estimate ranks last and says nothing about a speedup.
    sol = by_rule["SOLBottleneck"]
    assert sol.estimated_speedup_pct is None and sol.impact == 0.0 and "speedup" not in sol.message
    (div,) = of(findings, "KL590", "divergent")
    assert div.evidence["ncu_rule"] == "ThreadDivergence" and div.estimated_speedup_pct == pytest.approx(
        51.0, abs=0.01
    )


def test_kl590_keeps_only_opt_and_wrn(findings: list[Finding], report: ProfileReport) -> None:
    cp = {f.evidence["ncu_rule"] for f in of(findings, "KL590", "copy_f4")}
    # copy_f4's SOLBottleneck "High Throughput" is INF: not a finding.
    assert cp == {"IssueSlotUtilization", "CPIStall"}
    assert any(
        r.rule_identifier == "SOLBottleneck" and r.type == "INF" for r in kernel(report, "copy_f4").ncu_rules
    )
    assert "SharedMemoryConflicts" not in cp
    for name in KERNELS:
        want = [r for r in kernel(report, name).ncu_rules if r.type in ("OPT", "WRN")]
        assert len(of(findings, "KL590", name)) == len(want)


def test_without_the_ncu_rule_emitter(
    report: ProfileReport, model: SourceModel, ruleset: rules.RuleSet
) -> None:
    trimmed = rules.RuleSet(rules={c: r for c, r in ruleset.rules.items() if c != "KL590"})
    found, _ = profile_findings(report, model, str(KINDS), trimmed, {}, {})
    assert not of(found, "KL590") and of(found, "KL511")


# --------------------------------------------------------------------------------------------------
# Summaries and the bottleneck label


def test_bottleneck_labels(summaries: dict[str, KernelSummary]) -> None:
    assert {k: s.bottleneck for k, s in summaries.items()} == {
        "copy_f4": "memory-bound (DRAM)",
        "transpose_smem_conflicts": "memory-bound (L1)",
        "divergent": "compute-bound (fma pipe)",
        "spills": "memory-bound (DRAM)",
        "matmul_naive": "memory-bound (L1)",
        "reduce_atomic": "latency-bound",
    }


def test_bottleneck_edge_cases() -> None:
    assert bottleneck({}) == "unknown"
    assert bottleneck({"sm_pct": 10.0, "mem_pct": 20.0, "waves": 0.4}) == "small grid (latency-bound)"
    assert bottleneck({"sm_pct": 90.0, "mem_pct": 10.0}) == "compute-bound"
    # L2 just above DRAM (within 10 points) is DRAM traffic passing through L2.
    assert (
        bottleneck({"sm_pct": 10.0, "mem_pct": 85.0, "dram_pct": 80.0, "l2_pct": 85.0, "l1_pct": 30.0})
        == "memory-bound (DRAM)"
    )


def test_kernel_summaries(summaries: dict[str, KernelSummary], report: ProfileReport) -> None:
    assert list(summaries) == KERNELS
    cp = summaries["copy_f4"]
    assert cp.entry is None
    assert cp.duration_ns == pytest.approx(kernel(report, "copy_f4").derived["duration_ns"])
    assert cp.dram_pct == pytest.approx(80.75, abs=0.01)
    assert cp.hot_lines[0]["line"] == COPY_BODY and cp.hot_lines[0]["share"] > 0.99
    assert summaries["matmul_naive"].hot_lines[0]["line"] == MATMUL_LOOP
    assert {r["id"] for r in summaries["divergent"].ncu_rules} == {"ThreadDivergence"}
    # This report was recorded without the FP32 instruction counters: no roofline position.
    assert all(s.fp32_pct is None for s in summaries.values())
    for s in summaries.values():
        assert all(isinstance(v, int | float | str) for v in s.metrics.values())
        assert re.fullmatch(r"[\w ()-]+", s.bottleneck)


def test_roofline_position_from_fp32_counters(report: ProfileReport) -> None:
    """The FP32 counters (kernellsp's --metrics, absent from this report) give the roofline position:
    FLOP = fadd + fmul + 2 x ffma against SMs x 128 FMA/clk x 2 at the recorded SM clock."""
    kp = kernel(report, "divergent")
    assert "fp32_pct_of_peak" not in kernel_profile_metrics(kp, report, None)
    counters = {
        "smsp__sass_thread_inst_executed_op_fadd_pred_on.sum": 1e9,
        "smsp__sass_thread_inst_executed_op_fmul_pred_on.sum": 2e9,
        "smsp__sass_thread_inst_executed_op_ffma_pred_on.sum": 3e9,
    }
    values = kernel_profile_metrics(
        kp.model_copy(update={"metrics": {**kp.metrics, **counters}}), report, None
    )
    flops = 1e9 + 2e9 + 2 * 3e9
    assert values["fp32_flop"] == flops
    dur_s = kp.derived["duration_ns"] * 1e-9
    peak = report.sm_count * 128 * 2 * kp.derived["sm_clock_hz"]
    assert values["fp32_pct_of_peak"] == pytest.approx(100 * flops / dur_s / peak)
    assert values["fp32_gflops"] == pytest.approx(flops / kp.derived["duration_ns"])


# --------------------------------------------------------------------------------------------------
# The same probe program on an H100 (tests/bench/record_probe.sh on an H100 80GB HBM3)


@pytest.fixture(scope="module")
def h100_report() -> ProfileReport:
    return load_report(FIXTURES / "fast-h100.ncu-rep")


@pytest.fixture(scope="module")
def h100_findings(h100_report: ProfileReport, model: SourceModel, ruleset: rules.RuleSet) -> list[Finding]:
    return profile_findings(h100_report, model, str(KINDS), ruleset, {}, {})[0]


def test_h100_report_is_an_h100_run_of_the_same_program(h100_report: ProfileReport) -> None:
    assert h100_report.gpu_name == "NVIDIA H100 80GB HBM3"
    assert [k.name for k in h100_report.kernels] == KERNELS
    assert h100_report.source_files["kinds.cu"] == KINDS.read_text()


def test_h100_every_rule_fires_on_the_same_kernels(h100_findings: list[Finding]) -> None:
    assert {code: fires_on(h100_findings, code) for code in PROFILE_RULES} == EXPECTED_FIRES


def test_h100_findings_land_on_the_same_lines(h100_findings: list[Finding]) -> None:
    (f601,) = of(h100_findings, "KL601")
    assert f601.kernel == "spills" and f601.range.start_line == SPILLS_LOAD - 1
    (f602,) = of(h100_findings, "KL602")
    assert f602.range.start_line == TRANSPOSE_READ - 1 and f602.evidence["line_shared_nway"] == 32
    assert lines(of(h100_findings, "KL603", "matmul_naive")) == [MATMUL_LOOP]
    assert lines(of(h100_findings, "KL603", "spills")) == [SPILLS_LOAD, SPILLS_SUM]
    assert lines(of(h100_findings, "KL604")) == [DIVERGENT_ODD, DIVERGENT_EVEN]


def test_h100_values_and_ranking(h100_findings: list[Finding], h100_report: ProfileReport) -> None:
    impacts = [f.impact for f in h100_findings]
    assert impacts == sorted(impacts, reverse=True)
    assert h100_findings[0].code == "KL511" and h100_findings[0].kernel == "reduce_atomic"
    (copy,) = of(h100_findings, "KL501", "copy_f4")
    # H100 HBM3 peaks near 3.35 TB/s: 85% is about 2.84 TB/s (the H200's 81% was of 4.8 TB/s).
    assert "85% of peak DRAM bandwidth (2842 GB/s)" in copy.message
    assert metrics(h100_report, "copy_f4")["dram_pct"] == pytest.approx(84.8, abs=0.5)
    (f602,) = of(h100_findings, "KL602")
    assert "97% of the line's shared wavefronts are replays" in f602.message


def test_h100_kl510_with_the_specs(
    h100_report: ProfileReport, model: SourceModel, ruleset: rules.RuleSet
) -> None:
    specs = {"copy_f4": COPY_SPEC, "matmul_naive": MATMUL_SPEC}
    found, _ = profile_findings(h100_report, model, str(KINDS), ruleset, specs, {})
    assert fires_on(found, "KL510") == {"matmul_naive"}
    assert metrics(h100_report, "copy_f4", COPY_SPEC)["dram_excess_ratio"] < 1.05
    assert metrics(h100_report, "matmul_naive", MATMUL_SPEC)["dram_excess_ratio"] > 50
