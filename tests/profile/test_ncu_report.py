"""kernellsp.profile.report against real Nsight Compute reports (tests/fixtures/ncu, recorded on an H200).

``fast-h200.ncu-rep`` (the reference probe report, recorded on an H200): the six kernels of ``kinds.cu`` with SpeedOfLight, LaunchStats, Occupancy,
WarpStateStats, SchedulerStats, MemoryWorkloadAnalysis_Tables and SourceCounters (sources imported);
``basic.ncu-rep``: the same program with SpeedOfLight, LaunchStats and Occupancy only.
"""

from __future__ import annotations

from pathlib import Path

import pytest

pytest.importorskip("ncu_report")

from kernellsp.profile import (
    DERIVED_DOC,
    KernelProfile,
    ProfileReport,
    ReportError,
    derive,
    hot_lines,
    load_report,
)

FIXTURES = Path(__file__).parents[1] / "fixtures" / "ncu"
KINDS = FIXTURES / "kinds.cu"
ORDER = ["copy_f4", "transpose_smem_conflicts", "divergent", "spills", "matmul_naive", "reduce_atomic"]


def _line_of(text: str) -> int:
    """1-based line of the first line of kinds.cu containing ``text``."""
    for i, line in enumerate(KINDS.read_text().splitlines(), 1):
        if text in line:
            return i
    raise AssertionError(f"{text!r} not in kinds.cu")


# Line numbers checked against the source rather than hard-coded blindly.
TRANSPOSE_READ = _line_of("out[y * n + x] = tile[threadIdx.x][threadIdx.y];")  # 18
SPILLS_LOAD = _line_of("acc[k] = in[(i + k) % n];")  # 32
MATMUL_LOOP = _line_of("acc += A[row * N + k] * B[k * N + col]")  # 39
COPY_BODY = _line_of("out[i] = in[i];")  # 9


@pytest.fixture(scope="module")
def fast() -> ProfileReport:
    return load_report(FIXTURES / "fast-h200.ncu-rep")


@pytest.fixture(scope="module")
def basic() -> ProfileReport:
    return load_report(FIXTURES / "basic.ncu-rep")


def kernel(report: ProfileReport, name: str) -> KernelProfile:
    found = report.kernels_named(name)
    assert len(found) == 1, name
    return found[0]


def test_line_numbers_match_fixture_source() -> None:
    assert (TRANSPOSE_READ, SPILLS_LOAD, MATMUL_LOOP, COPY_BODY) == (18, 32, 39, 9)


def test_kernels_in_order(fast: ProfileReport) -> None:
    assert [k.name for k in fast.kernels] == ORDER
    assert [k.index for k in fast.kernels] == list(range(6))
    assert fast.kernels[0].demangled_name == "copy_f4(const float4 *, float4 *, unsigned long)"
    assert fast.kernels[0].mangled_name.startswith("_Z7copy_f4")
    assert fast.kernels_named("copy_f4(const float4 *, float4 *, unsigned long)") == [fast.kernels[0]]
    assert fast.kernels_named("nope") == []


def test_report_header(fast: ProfileReport) -> None:
    assert fast.gpu_name == "NVIDIA H200"
    assert fast.sm_count == 132
    assert fast.compute_capability == "9.0"
    assert fast.ncu_version == "2025.3.1.0"
    assert fast.cuda_version == "13.0"
    assert fast.reader_version
    assert fast.max_sm_clock_hz == pytest.approx(1.98e9)
    assert fast.sm_clock_hz is not None and 1.0e9 < fast.sm_clock_hz < 2.0e9
    assert fast.dram_clock_hz is not None and fast.dram_clock_hz > 1e9
    # --import-source yes: the program and the CUDA header atomicAdd comes from
    assert fast.source_files["kinds.cu"] == KINDS.read_text()
    assert "sm_20_atomic_functions.hpp" in fast.source_files
    assert fast.source_paths["kinds.cu"] == "/src/probe/kinds.cu"


def test_launch_config_and_metrics(fast: ProfileReport) -> None:
    cp = kernel(fast, "copy_f4")
    assert cp.grid == (132 * 16, 1, 1) and cp.block == (256, 1, 1)
    ts = kernel(fast, "transpose_smem_conflicts")
    assert ts.grid == (128, 128, 1) and ts.block == (32, 32, 1)
    assert ts.metric("launch__shared_mem_per_block_static") == 4096
    assert cp.metric("gpu__time_duration.sum") == pytest.approx(cp.derived["duration_ns"])
    assert cp.metric("no__such_metric") is None and cp.metric("no__such_metric", 1.5) == 1.5
    assert cp.metric("dram_pct") == cp.derived["dram_pct"]  # derived names resolve too
    assert cp.strings["device__attribute_display_name"] == "NVIDIA H200"
    assert "SourceCounters" in cp.sections
    # per-PC totals are kept; per-PC averages / n-way degrees / occupancy curves are not
    assert cp.metrics["inst_executed"] > 0
    assert "derived__memory_l1_conflicts_shared_nway" not in ts.metrics
    assert "derived__avg_thread_executed" not in ts.metrics
    assert "launch__occupancy_per_block_size" not in ts.metrics
    assert all(isinstance(v, float) for v in cp.metrics.values())
    assert cp.opcode_mix and sum(cp.opcode_mix.values()) == pytest.approx(cp.metrics["inst_executed"])


def test_kernel_source_location(fast: ProfileReport) -> None:
    for k in fast.kernels:
        assert k.source_file == "/src/probe/kinds.cu"
    assert kernel(fast, "transpose_smem_conflicts").source_line == _line_of(
        "__global__ void transpose_smem_conflicts"
    )
    assert kernel(fast, "reduce_atomic").source_line == _line_of("__global__ void reduce_atomic")


def test_lines_sum_to_kernel_totals(fast: ProfileReport) -> None:
    for k in fast.kernels:
        lines = [lm for per_file in k.files.values() for lm in per_file.values()]
        inst = sum(lm.inst_executed for lm in lines) + k.unattributed_inst_executed
        assert inst == pytest.approx(k.metrics["inst_executed"])
        samples = sum(lm.stall_samples for lm in lines) + k.unattributed_stall_samples
        assert (
            samples == pytest.approx(k.metrics["smsp__pcsamp_sample_count"]) == pytest.approx(k.stall_samples)
        )
        for lm in lines:
            assert sum(lm.stalls.values()) == pytest.approx(lm.stall_samples)


def test_transpose_shared_bank_conflicts(fast: ProfileReport) -> None:
    ts = kernel(fast, "transpose_smem_conflicts")
    line = ts.lines[TRANSPOSE_READ]
    assert line.shared_nway_max == pytest.approx(32, abs=0.5)
    assert line.shared_wavefronts_excessive > 0.9 * line.shared_wavefronts
    assert line.has_opcode("LDS") and line.opcodes.get("LDS") == 1
    assert ts.lines[_line_of("tile[threadIdx.y][threadIdx.x] = in[y * n + x];")].shared_nway_max == 1
    assert ts.derived["shared_conflict_pct"] > 80
    assert ts.derived["shared_excess_wavefront_pct"] > 80
    assert ts.lines_for("some/other/dir/kinds.cu") is ts.lines
    assert ts.lines_for("other.cu") == {}
    # kernels without shared-memory instructions get no conflict percentage
    assert "shared_conflict_pct" not in kernel(fast, "copy_f4").derived


def test_ncu_rules(fast: ProfileReport) -> None:
    ts = kernel(fast, "transpose_smem_conflicts")
    (smc,) = ts.rules("SharedMemoryConflicts")
    assert smc.type == "OPT"
    assert smc.section == "MemoryWorkloadAnalysis_Tables"
    assert smc.title == "Shared Load Bank Conflicts"
    assert smc.speedup_type == "global"
    assert smc.estimated_speedup_pct is not None and smc.estimated_speedup_pct > 30
    assert "l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ld.sum" in smc.focus_metric_names
    assert "32.2 - way bank conflict" in smc.message
    assert "@" not in smc.message  # @section:…@ markup flattened
    sol = ts.rules("SOLBottleneck")[0]
    assert "Memory Workload Analysis section" in sol.message and "@section:" in sol.raw_message
    isu = ts.rules("IssueSlotUtilization")[0]
    assert isu.title == "" and isu.speedup_type == "local"
    assert all(r.type in ("OPT", "WRN", "INF") for k in fast.kernels for r in k.ncu_rules)
    assert kernel(fast, "divergent").rules("ThreadDivergence")[0].type == "OPT"
    assert kernel(fast, "copy_f4").rules("SOLBottleneck")[0].type == "INF"
    assert kernel(fast, "spills").rules("LaunchConfiguration")[0].title == "Tail Effect"


def test_source_markers(fast: ProfileReport) -> None:
    sp = kernel(fast, "spills")
    unc = [m for m in sp.source_markers if m.rule_identifier == "UncoalescedGlobalAccess"]
    assert unc and all(m.file == "kinds.cu" and m.line == SPILLS_LOAD for m in unc)
    assert {m.kind for m in unc} == {"sass", "source"}
    assert all(m.pc is not None for m in unc if m.kind == "sass")
    ra = kernel(fast, "reduce_atomic")
    drain = [m for m in ra.source_markers if m.kind == "sass" and "drain" in m.message]
    assert drain and drain[0].type == "OPT" and drain[0].line == _line_of("if (i < n) atomicAdd") + 1


def test_spills_uncoalesced_line(fast: ProfileReport) -> None:
    sp = kernel(fast, "spills")
    line = sp.lines[SPILLS_LOAD]
    assert line.l2_sectors_global_excessive > 0
    assert line.l2_sectors_global == pytest.approx(
        line.l2_sectors_global_ideal + line.l2_sectors_global_excessive
    )
    assert line.has_opcode("LDG") and line.has_opcode("STL")  # the stack array is written here
    assert sp.lines[_line_of("s += acc[(k * j) & 255];")].l2_sectors_local > 0
    assert 5 < sp.derived["uncoalesced_excess_pct"] < 40
    assert sp.derived["local_inst"] > 0
    cp = kernel(fast, "copy_f4")
    assert sum(lm.l2_sectors_global_excessive for lm in cp.lines.values()) == 0
    assert cp.derived["uncoalesced_excess_pct"] == 0
    assert cp.lines[COPY_BODY].l2_sectors_global > 0
    assert cp.lines[COPY_BODY].has_opcode("LDG") and "LDG.E.128.CONSTANT" in cp.lines[COPY_BODY].opcodes


def test_divergence(fast: ProfileReport) -> None:
    dv = kernel(fast, "divergent")
    assert dv.derived["thread_efficiency"] < 24
    assert dv.derived["divergent_branches"] > 0
    branchy = [lm for lm in dv.lines.values() if lm.divergent_branches > 0]
    assert branchy and branchy[0].line == _line_of("if (threadIdx.x % 2)")
    assert branchy[0].avg_threads_executed is not None and branchy[0].avg_threads_executed < 24
    assert kernel(fast, "copy_f4").derived["thread_efficiency"] == pytest.approx(32)


def test_reduce_atomic_drain(fast: ProfileReport) -> None:
    ra = kernel(fast, "reduce_atomic")
    shares = {k: v for k, v in ra.derived.items() if k.startswith("stall_") and k.endswith("_share")}
    assert max(shares, key=lambda k: shares[k]) == "stall_drain_share"
    assert any(r.title == "Drain Stalls" for r in ra.rules("CPIStall"))
    assert ra.derived["atomic_inst"] > 0
    assert ra.derived["atomic_l2_max_pct"] > 10 * ra.derived["atomic_l2_avg_pct"]
    (top,) = hot_lines(ra, 1)
    assert top.dominant_stall == "drain" and top.share > 0.4


def test_hot_lines_matmul(fast: ProfileReport) -> None:
    mm = kernel(fast, "matmul_naive")
    hot = hot_lines(mm, 3)
    assert hot[0].line == MATMUL_LOOP and hot[0].file == "kinds.cu"
    assert hot[0].share > 0.9
    assert hot[0].dominant_stall == "long_scoreboard"
    assert hot[0].metrics.has_opcode("FFMA") and hot[0].metrics.has_opcode("LDG")
    assert [h.samples for h in hot] == sorted((h.samples for h in hot), reverse=True)
    assert len(hot_lines(mm, 100)) == len([lm for lm in mm.lines.values() if lm.stall_samples > 0])
    assert hot_lines(mm, 3, source="elsewhere/kinds.cu")[0].line == MATMUL_LOOP
    assert hot_lines(mm, 3, source="other.cu") == []


def test_derived_values(fast: ProfileReport) -> None:
    cp = kernel(fast, "copy_f4")
    d = cp.derived
    for key in (
        "duration_ns",
        "dram_pct",
        "l1_pct",
        "l2_pct",
        "sm_pct",
        "mem_pct",
        "achieved_occupancy_pct",
        "theoretical_occupancy_pct",
        "waves",
        "issue_active",
        "ipc",
        "dram_bytes",
        "thread_efficiency",
    ):
        assert key in d, key
    assert d["dram_pct"] > 60 and d["sm_pct"] < 20
    assert d["dram_bytes"] > 2 * 2**28 * 0.9  # a 268 MB copy reads and writes it all
    assert d["stall_long_scoreboard_share"] > 0.8
    assert 0 < d["issue_active"] < 0.2 and 0 < d["ipc"] < 4 * d["issue_active"] * 1.05
    assert derive(cp) == d
    for k in fast.kernels:
        for key in k.derived:
            assert key in DERIVED_DOC, key
    # FP32 throughput needs instruction counters that these sections do not collect
    assert "fp32_pct_of_peak" not in d and "fp32_flop" not in d


def test_derive_fp32_from_counters() -> None:
    k = KernelProfile(
        index=0,
        name="k",
        metrics={
            "gpu__time_duration.sum": 1000.0,
            "smsp__sass_thread_inst_executed_op_ffma_pred_on.sum": 1000.0,
            "smsp__sass_thread_inst_executed_op_fadd_pred_on.sum": 100.0,
            "smsp__sass_thread_inst_executed_op_fmul_pred_on.sum": 100.0,
            "sm__sass_thread_inst_executed_op_ffma_pred_on.sum.peak_sustained": 10.0,
            "sm__cycles_elapsed.avg": 200.0,
        },
    )
    d = derive(k)
    assert d["fp32_flop"] == 2200.0
    assert d["fp32_gflops"] == pytest.approx(2.2)
    assert d["fp32_pct_of_peak"] == pytest.approx(100 * 2200 / (2 * 10 * 200))
    assert "dram_pct" not in d  # missing inputs: absent, not 0


def test_basic_report_without_source_counters(basic: ProfileReport) -> None:
    assert [k.name for k in basic.kernels] == ORDER
    assert basic.source_files == {}
    for k in basic.kernels:
        assert k.lines == {} and k.files == {}
        assert not k.has_source_counters
        assert k.derived["duration_ns"] > 0
        assert "sm_pct" in k.derived
        assert "uncoalesced_excess_pct" not in k.derived and "stall_samples" not in k.derived
        assert hot_lines(k) == []
    assert kernel(basic, "divergent").derived["sm_pct"] > 80


def test_without_sass() -> None:
    r = load_report(FIXTURES / "fast-h200.ncu-rep", sass=False)
    mm = kernel(r, "matmul_naive")
    assert mm.lines[MATMUL_LOOP].opcodes == {} and mm.lines[MATMUL_LOOP].inst_executed > 0


def test_missing_file(tmp_path: Path) -> None:
    with pytest.raises(ReportError, match="no such report file"):
        load_report(tmp_path / "absent.ncu-rep")
    with pytest.raises(ReportError, match="no such report file"):
        load_report(tmp_path)  # a directory


@pytest.mark.parametrize("content", [b"", b"hello", bytes(range(256)) * 64])
def test_garbage_file(tmp_path: Path, content: bytes) -> None:
    bad = tmp_path / "bad.ncu-rep"
    bad.write_bytes(content)
    with pytest.raises(ReportError, match="not an Nsight Compute report"):
        load_report(bad)


def test_json_round_trip(fast: ProfileReport) -> None:
    again = ProfileReport.model_validate_json(fast.model_dump_json())
    assert again.kernels[1].lines[TRANSPOSE_READ].shared_nway_max == 32
    assert again.kernels[4].derived == fast.kernels[4].derived
