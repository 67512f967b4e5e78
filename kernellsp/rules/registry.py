"""The metric registry: every name a rule may use, where it comes from, and what it means.

Rules are data; their conditions and messages may only mention names registered here, so a typo in
a rule file fails when the rule loads, naming the file and the field, not silently at check time.
Kernel-scope metrics describe a whole kernel; line-scope metrics describe one source line of a
kernel (line rules may read both). Profile metrics (source ``ncu``) are registered by
:mod:`kernellsp.profile` when it is importable.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal

Scope = Literal["kernel", "line"]


@dataclass(frozen=True)
class MetricDef:
    """One registered metric."""

    name: str
    scope: Scope
    source: str  # ptxas | occupancy | sass | source | spec | ncu
    unit: str
    description: str


_REGISTRY: dict[str, MetricDef] = {}


def register(name: str, scope: Scope, source: str, unit: str, description: str) -> None:
    """Register (or re-register) a metric."""
    _REGISTRY[name] = MetricDef(name, scope, source, unit, description)


def get(name: str) -> MetricDef | None:
    _ensure_profile_metrics()
    return _REGISTRY.get(name)


def all_metrics() -> list[MetricDef]:
    _ensure_profile_metrics()
    return sorted(_REGISTRY.values(), key=lambda m: (m.source, m.name))


_profile_loaded = False


def _ensure_profile_metrics() -> None:
    global _profile_loaded
    if _profile_loaded:
        return
    _profile_loaded = True
    for d in _profile_metric_defs():
        _REGISTRY.setdefault(d.name, d)


def _profile_metric_defs() -> list[MetricDef]:
    """Kernel-scope profile metrics: the names and units the profile stage documents for its values."""
    from kernellsp.profile.derive import DERIVED_DOC, STALL_REASONS

    out: list[MetricDef] = []
    for name, doc in DERIVED_DOC.items():
        m = re.search(r"\[([^\]]+)\]\s*$", doc)
        unit = m.group(1) if m else ""
        out.append(MetricDef(name, "kernel", "ncu", unit, doc))
    for reason, doc in STALL_REASONS.items():
        name = f"stall_{reason}_share"
        if name not in DERIVED_DOC:
            out.append(
                MetricDef(
                    name, "kernel", "ncu", "fraction", f"share of warp latency stalled on {reason}: {doc}"
                )
            )
    return out


# fmt: off
_K: list[tuple[str, str, str, str]] = [
    # name, source, unit, description
    ("kernel", "source", "name", "kernel name"),
    ("arch", "ptxas", "name", "target architecture of the build (sm_90)"),
    ("registers", "ptxas", "registers/thread", "registers per thread (worst template instantiation)"),
    ("spill_stores", "ptxas", "bytes", "bytes of register spill stores per thread"),
    ("spill_loads", "ptxas", "bytes", "bytes of register spill loads per thread"),
    ("stack_frame", "ptxas", "bytes", "per-thread stack frame in local memory (local arrays, spills)"),
    ("smem_static", "ptxas", "bytes", "static shared memory per block"),
    ("smem_dynamic", "spec", "bytes", "dynamic shared memory per block from the launch spec (0 if none)"),
    ("cmem", "ptxas", "bytes", "constant memory used (all banks)"),
    ("barriers", "ptxas", "count", "named barriers used"),
    ("instantiations", "ptxas", "count", "entry functions (template instantiations) built for this kernel"),
    ("block_size", "spec", "threads", "threads per block, from the spec, a launch site or __launch_bounds__"),
    ("block_source", "spec", "name", "where block_size came from: spec, launch site or launch_bounds"),
    ("grid_can_overshoot", "spec", "bool", "launched threads can exceed the elements of every buffer (some shape)"),
    ("has_spec", "spec", "bool", "the kernel has a launch spec"),
    ("occupancy_pct", "occupancy", "%", "theoretical occupancy: active warps / max warps per SM"),
    ("occupancy_limiter", "occupancy", "name", "registers, shared_memory, warps or blocks"),
    ("blocks_per_sm", "occupancy", "blocks", "resident blocks per SM at that occupancy"),
    ("limit_registers", "occupancy", "blocks", "blocks per SM the register file admits"),
    ("limit_shared_memory", "occupancy", "blocks", "blocks per SM shared memory admits"),
    ("limit_warps", "occupancy", "blocks", "blocks per SM the warp slots admit"),
    ("max_blocks_per_sm", "occupancy", "blocks", "the architecture's cap on resident blocks per SM"),
    ("max_warps_per_sm", "occupancy", "warps", "the architecture's warp slots per SM"),
    ("readonly_unqualified", "source", "count", "pointer parameters only read but not const __restrict__"),
    ("readonly_names", "source", "names", "those parameters' names"),
    ("uses_double_params", "source", "bool", "a parameter is double (fp64 is then intended)"),
    ("sass_available", "sass", "bool", "nvdisasm ran, so SASS metrics are exact"),
    ("fp64_insts", "sass", "instructions", "fp64 SASS instructions in the kernel (static count)"),
    ("local_insts", "sass", "instructions", "local-memory SASS instructions (LDL/STL) in the kernel"),
]
_L: list[tuple[str, str, str, str]] = [
    ("line", "source", "line", "1-based source line"),
    ("sync_in_divergent_branch", "source", "count", "__syncthreads() under a thread-dependent condition"),
    ("sync_after_divergent_return", "source", "count", "__syncthreads() after a thread-dependent early return"),
    ("unguarded_accesses", "source", "count", "thread-indexed pointer accesses with no bounds check on the index"),
    ("unguarded_access_text", "source", "text", "the unguarded accesses"),
    ("atomic_same_address", "source", "count", "atomics on global memory whose address ignores threadIdx"),
    ("atomic_target", "source", "text", "the contended address"),
    ("atomic_in_loop", "source", "count", "such atomics inside a loop"),
    ("atomic_scope", "source", "text", "who shares the address: every thread of a block or of the grid"),
    ("strided_access", "source", "bool", "a pointer index advances by more than one element per threadIdx.x"),
    ("access_stride", "source", "elements", "that stride for a sample of sizes"),
    ("stride_text", "source", "text", "the stride in words (the sizes it scales with, or a constant)"),
    ("strided_pointer", "source", "name", "the pointer accessed with a stride"),
    ("stride_depends_on", "source", "names", "names the stride scales with"),
    ("local_array_runtime_index", "source", "count", "local arrays indexed by a run-time value"),
    ("local_array_access", "source", "text", "the access"),
    ("double_literals", "source", "count", "unsuffixed floating literals (double) on the line"),
    ("double_decls", "source", "count", "double declarations on the line"),
    ("fp64_ops", "sass", "instructions", "fp64 instructions on the line (SASS; source literals without nvdisasm)"),
    ("local_ops", "sass", "instructions", "LDL/STL instructions on the line"),
    ("atomic_insts", "sass", "instructions", "global atomic/reduction instructions on the line"),
]
# Composite profile values computed by kernellsp.profile.ncu on top of the ncu-derived metrics.
_PK: list[tuple[str, str, str, str]] = [
    ("top_pipe", "ncu", "name", "busiest SM pipe (fma, alu, fp64, tensor, shared)"),
    ("top_pipe_pct", "ncu", "%", "its utilisation, % of peak"),
    ("dominant_stall", "ncu", "name", "the warp-stall reason with the largest share of latency"),
    ("dominant_stall_share", "ncu", "fraction", "that reason's share of the average warp latency"),
    ("tail_idle_pct", "ncu", "%", "share of SM slots idle in the last wave (100 × (ceil(w) - w) / ceil(w))"),
    ("footprint_bytes", "spec", "bytes", "fewest DRAM bytes the spec implies: inputs read once, outputs written once"),
    ("footprint_mb", "spec", "MB", "footprint_bytes in MB"),
    ("dram_mb", "ncu", "MB", "DRAM bytes moved, MB"),
    ("dram_excess_ratio", "ncu", "ratio", "DRAM bytes moved / minimal footprint"),
    ("hot_lines_text", "ncu", "text", "the hottest source lines by stall samples, with their shares"),
]
_PL: list[tuple[str, str, str, str]] = [
    ("line_stall_share", "ncu", "fraction", "the line's share of the kernel's warp-stall samples"),
    ("line_dominant_stall", "ncu", "name", "the line's most sampled stall reason"),
    ("line_dominant_stall_share", "ncu", "fraction", "that reason's share of the line's samples"),
    ("line_l2_sectors", "ncu", "sectors", "theoretical L2 sectors of the line's global accesses"),
    ("line_ideal_sectors", "ncu", "sectors", "sectors a perfectly coalesced access would need"),
    ("line_excess_sector_pct", "ncu", "%", "excessive share of the line's global sectors (uncoalesced)"),
    ("line_sector_share", "ncu", "fraction", "the line's share of the kernel's global sectors"),
    ("line_sectors_per_ideal", "ncu", "ratio", "actual / ideal sectors on the line"),
    ("line_shared_nway", "ncu", "ways", "worst shared-memory bank-conflict degree on the line"),
    ("line_shared_excess_pct", "ncu", "%", "excessive share of the line's shared-memory wavefronts"),
    ("line_avg_threads", "ncu", "threads", "average active threads per executed warp instruction on the line"),
    ("line_inst_share", "ncu", "fraction", "the line's share of executed warp instructions"),
    ("line_divergent_branches", "ncu", "count", "divergent branch targets on the line"),
]
# fmt: on
for _n, _s, _u, _d in _PK:
    register(_n, "kernel", _s, _u, _d)
for _n, _s, _u, _d in _PL:
    register(_n, "line", _s, _u, _d)
for _n, _s, _u, _d in _K:
    register(_n, "kernel", _s, _u, _d)
for _n, _s, _u, _d in _L:
    register(_n, "line", _s, _u, _d)
