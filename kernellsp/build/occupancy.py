"""Theoretical occupancy, as the CUDA occupancy calculator computes it, and what limits it.

Per architecture: warps and blocks per SM, the register file (split over four SM sub-partitions,
allocated per warp in units of 256 registers) and shared memory (allocated per block in units, with
1 KiB reserved per block on sm_80 and later). The limiter is the resource that admits the fewest
blocks; ties go to registers, then shared memory, then warps, then the block-count cap.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal


@dataclass(frozen=True)
class ArchLimits:
    """Per-SM resource limits of one compute capability."""

    name: str
    max_warps: int
    max_blocks: int
    regs_per_sm: int = 65536
    reg_alloc_unit: int = 256
    max_regs_per_thread: int = 255
    smem_per_sm: int = 233472
    max_smem_per_block: int = 232448
    smem_alloc_unit: int = 128
    smem_reserved_per_block: int = 1024
    sub_partitions: int = 4


ARCHS: dict[str, ArchLimits] = {
    "sm_70": ArchLimits(
        "sm_70",
        64,
        32,
        smem_per_sm=98304,
        max_smem_per_block=98304,
        smem_alloc_unit=256,
        smem_reserved_per_block=0,
    ),
    "sm_75": ArchLimits(
        "sm_75",
        32,
        16,
        smem_per_sm=65536,
        max_smem_per_block=65536,
        smem_alloc_unit=256,
        smem_reserved_per_block=0,
    ),
    "sm_80": ArchLimits("sm_80", 64, 32, smem_per_sm=167936, max_smem_per_block=166912),
    "sm_86": ArchLimits("sm_86", 48, 16, smem_per_sm=102400, max_smem_per_block=101376),
    "sm_87": ArchLimits("sm_87", 48, 16, smem_per_sm=167936, max_smem_per_block=166912),
    "sm_89": ArchLimits("sm_89", 48, 24, smem_per_sm=102400, max_smem_per_block=101376),
    "sm_90": ArchLimits("sm_90", 64, 32),
    "sm_90a": ArchLimits("sm_90a", 64, 32),
    "sm_100": ArchLimits("sm_100", 64, 32),
    "sm_120": ArchLimits("sm_120", 48, 24, smem_per_sm=102400, max_smem_per_block=101376),
}

Limiter = Literal["registers", "shared_memory", "warps", "blocks", "invalid"]


@dataclass(frozen=True)
class Occupancy:
    """Result of the calculation for one kernel and block size."""

    arch: str
    block_size: int
    registers: int
    smem_per_block: int
    blocks_per_sm: int
    active_warps: int
    max_warps: int
    occupancy_pct: float
    limiter: Limiter
    limit_registers: int
    limit_shared_memory: int
    limit_warps: int
    limit_blocks: int
    reason: str = ""


def arch_limits(arch: str) -> ArchLimits:
    """Limits of ``arch`` (``sm_90``, ``90``, ``compute_90``); unknown archs fall back to the nearest older one."""
    key = arch.lower().replace("compute_", "sm_")
    if not key.startswith("sm_"):
        key = "sm_" + key
    if key in ARCHS:
        return ARCHS[key]
    digits = int("".join(ch for ch in key if ch.isdigit()) or 90)
    # Sort on the number only: sm_90 and sm_90a share one, and ArchLimits do not order.
    known = sorted(
        ((int("".join(c for c in k if c.isdigit())), v) for k, v in ARCHS.items()), key=lambda kv: kv[0]
    )
    best = known[0][1]
    for num, lim in known:
        if num <= digits:
            best = lim
    return best


def compute(arch: str, block_size: int, registers: int, static_smem: int, dynamic_smem: int = 0) -> Occupancy:
    """Theoretical occupancy of a kernel using ``registers`` per thread at ``block_size`` threads."""
    lim = arch_limits(arch)
    warps_per_block = max(1, math.ceil(block_size / 32))
    smem = static_smem + dynamic_smem
    invalid = ""
    if block_size <= 0 or block_size > 1024:
        invalid = f"block size {block_size} is outside 1..1024"
    elif registers > lim.max_regs_per_thread:
        invalid = f"{registers} registers per thread exceed {lim.max_regs_per_thread}"
    elif smem > lim.max_smem_per_block:
        invalid = f"{smem} bytes of shared memory per block exceed {lim.max_smem_per_block}"
    if invalid:
        return Occupancy(
            arch, block_size, registers, smem, 0, 0, lim.max_warps, 0.0, "invalid", 0, 0, 0, 0, invalid
        )

    limit_warps = lim.max_warps // warps_per_block
    regs_per_warp = math.ceil(max(registers, 1) * 32 / lim.reg_alloc_unit) * lim.reg_alloc_unit
    warps_per_partition = (lim.regs_per_sm // lim.sub_partitions) // regs_per_warp
    limit_registers = (warps_per_partition * lim.sub_partitions) // warps_per_block
    if smem > 0:
        alloc = math.ceil((smem + lim.smem_reserved_per_block) / lim.smem_alloc_unit) * lim.smem_alloc_unit
        limit_smem = lim.smem_per_sm // alloc
    else:
        limit_smem = lim.max_blocks
    limit_blocks = lim.max_blocks
    blocks = min(limit_warps, limit_registers, limit_smem, limit_blocks)
    order: list[tuple[Limiter, int]] = [
        ("registers", limit_registers),
        ("shared_memory", limit_smem),
        ("warps", limit_warps),
        ("blocks", limit_blocks),
    ]
    if smem == 0:
        # No shared memory: its "limit" is only the block cap repeated, never the limiter.
        order = [o for o in order if o[0] != "shared_memory"]
    limiter: Limiter = next(name for name, value in order if value == blocks)
    active = blocks * warps_per_block
    return Occupancy(
        arch=lim.name,
        block_size=block_size,
        registers=registers,
        smem_per_block=smem,
        blocks_per_sm=blocks,
        active_warps=active,
        max_warps=lim.max_warps,
        occupancy_pct=100.0 * active / lim.max_warps,
        limiter=limiter,
        limit_registers=limit_registers,
        limit_shared_memory=limit_smem,
        limit_warps=limit_warps,
        limit_blocks=limit_blocks,
    )
