"""Values derived from a kernel's metrics (:func:`derive`, named in :data:`DERIVED_DOC`) and its hottest source
lines (:func:`hot_lines`)."""

from __future__ import annotations

import math
import os
import re
from collections.abc import Iterable

from kernellsp.profile.models import HotLine, KernelProfile, LineMetrics

NOT_ISSUED = "_not_issued"

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
STALL_ALIASES = {"no_instruction": "no_instructions"}


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


class _Derivation:
    """A kernel's metrics and the values derived from them so far (the steps of :func:`derive` share it)."""

    def __init__(self, metrics: dict[str, float]) -> None:
        self.m = metrics
        self.out: dict[str, float] = {}

    def get(self, *names: str) -> float | None:
        for n in names:
            if n in self.m:
                return self.m[n]
        return None

    def put(self, name: str, value: float | None) -> None:
        if value is not None and math.isfinite(value):
            self.out[name] = float(value)

    def total(self, *names: str) -> float | None:
        vals = [self.m[n] for n in names if n in self.m]
        return sum(vals) if vals else None

    @staticmethod
    def ratio(num: float | None, den: float | None, scale: float = 1.0) -> float | None:
        if num is None or den is None or den <= 0:
            return None
        return scale * num / den


def derive(kernel: KernelProfile) -> dict[str, float]:
    """Derived per-kernel values (see :data:`DERIVED_DOC`); a value whose inputs are missing is absent."""
    m = kernel.metrics
    d = _Derivation(m)
    get, put = d.get, d.put

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

    _derive_occupancy(d)
    latency = _derive_issue(d)
    _derive_memory(d, duration)
    _derive_fp32(d, duration)
    put("sm_clock_hz", get("gpc__cycles_elapsed.avg.per_second"))
    put("dram_clock_hz", get("dram__cycles_elapsed.avg.per_second"))
    if kernel.stall_samples > 0:
        put("stall_samples", kernel.stall_samples)

    if latency:
        for name, value in m.items():
            hit = _STALL_RATIO.match(name)
            if hit and not hit.group(1).endswith(NOT_ISSUED):
                reason = STALL_ALIASES.get(hit.group(1), hit.group(1))
                put(f"stall_{reason}_share", value / latency)
    return d.out


def _derive_occupancy(d: _Derivation) -> None:
    """Occupancy (achieved against theoretical), waves, registers and shared memory per block."""
    get, put, total = d.get, d.put, d.total
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


def _derive_issue(d: _Derivation) -> float | None:
    """Issue rates and IPC; returns the warp latency per issued instruction (the stall shares' denominator)."""
    get, put, ratio = d.get, d.put, d.ratio
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
    return latency


def _derive_memory(d: _Derivation, duration: float | None) -> None:
    """DRAM traffic, coalescing, shared-memory conflicts, divergence, local memory, atomics and L2 hits."""
    get, put, total, ratio = d.get, d.put, d.total, d.ratio
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


def _derive_fp32(d: _Derivation, duration: float | None) -> None:
    """Pipe utilisation and FP32 work against the chip's peak."""
    get, put, ratio, out = d.get, d.put, d.ratio, d.out
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
