"""Theoretical occupancy on sm_90, checked against NVIDIA's occupancy calculator / ncu's Occupancy section."""

from __future__ import annotations

import pytest

from kernellsp.build.occupancy import ARCHS, arch_limits, compute

# (threads, registers, smem bytes) -> (blocks/SM, occupancy %, limiter, block limits by registers, smem, warps)
# Values as the CUDA occupancy calculator (and ncu's "Block Limit *" metrics) give them for
# compute capability 9.0: 64 warps, 32 blocks, 64K registers in 4 partitions allocated per warp in
# units of 256, 228 KiB of shared memory with 1 KiB reserved per block in 128 B units.
CASES = [
    ((1024, 16, 4096), (2, 100.0, "warps", 4, 45, 2)),
    ((256, 32, 0), (8, 100.0, "registers", 8, 32, 8)),  # registers and warps tie at 8 blocks
    ((256, 128, 0), (2, 25.0, "registers", 2, 32, 8)),
    ((256, 64, 0), (4, 50.0, "registers", 4, 32, 8)),
    ((256, 40, 0), (6, 75.0, "registers", 6, 32, 8)),  # 40 regs -> 1280 per warp -> 12 warps per partition
    ((128, 255, 0), (2, 12.5, "registers", 2, 32, 16)),
    ((32, 10, 0), (32, 50.0, "blocks", 128, 32, 64)),
    ((64, 32, 0), (32, 100.0, "registers", 32, 32, 32)),  # three-way tie: registers named first
    ((256, 32, 65536), (3, 37.5, "shared_memory", 8, 3, 8)),
    ((128, 12, 2048 + 65536), (3, 18.75, "shared_memory", 32, 3, 16)),
    ((64, 32, 49152), (4, 12.5, "shared_memory", 32, 4, 32)),
    ((96, 32, 0), (21, 98.4375, "registers", 21, 32, 21)),
]


@pytest.mark.parametrize(("inputs", "want"), CASES, ids=[f"{t}t-{r}r-{s}B" for (t, r, s), _ in CASES])
def test_sm90_matches_the_calculator(
    inputs: tuple[int, int, int], want: tuple[int, float, str, int, int, int]
) -> None:
    threads, regs, smem = inputs
    o = compute("sm_90", threads, regs, smem)
    blocks, pct, limiter, lim_regs, lim_smem, lim_warps = want
    assert o.blocks_per_sm == blocks
    assert o.occupancy_pct == pytest.approx(pct)
    assert o.limiter == limiter
    assert (o.limit_registers, o.limit_shared_memory, o.limit_warps, o.limit_blocks) == (
        lim_regs,
        lim_smem,
        lim_warps,
        32,
    )
    assert o.active_warps == blocks * ((threads + 31) // 32)
    assert o.max_warps == 64 and o.reason == ""


def test_brief_examples() -> None:
    o = compute("sm_90", 1024, 16, 4096)
    assert (o.limit_warps, o.limit_registers) == (2, 4)
    assert compute("sm_90", 256, 32, 0).occupancy_pct == 100.0
    o = compute("sm_90", 256, 128, 0)
    assert (o.occupancy_pct, o.limiter) == (25.0, "registers")
    o = compute("sm_90", 32, 32, 0)
    assert (o.occupancy_pct, o.limiter) == (50.0, "blocks")
    o = compute("sm_90", 256, 32, 64 * 1024)
    assert o.limiter == "shared_memory" and o.occupancy_pct < 50


def test_without_shared_memory_it_is_never_the_limiter() -> None:
    for threads in (32, 64, 96, 128, 256, 512, 1024):
        for regs in (8, 16, 32, 64, 128, 255):
            assert compute("sm_90", threads, regs, 0).limiter != "shared_memory", (threads, regs)


def test_dynamic_shared_memory_adds_to_static() -> None:
    a = compute("sm_90", 128, 32, 40000, 30000)
    b = compute("sm_90", 128, 32, 70000)
    assert a.smem_per_block == 70000
    assert (a.blocks_per_sm, a.limit_shared_memory, a.limiter) == (
        b.blocks_per_sm,
        b.limit_shared_memory,
        b.limiter,
    )


def test_more_registers_never_raise_occupancy() -> None:
    prev = 101.0
    for regs in range(8, 256, 8):
        pct = compute("sm_90", 256, regs, 0).occupancy_pct
        assert pct <= prev
        prev = pct


@pytest.mark.parametrize(
    ("threads", "regs", "smem", "why"),
    [
        (0, 32, 0, "block size 0 is outside 1..1024"),
        (-32, 32, 0, "outside 1..1024"),
        (1025, 32, 0, "block size 1025 is outside 1..1024"),
        (256, 256, 0, "256 registers per thread exceed 255"),
        (256, 32, 232449, "232449 bytes of shared memory per block exceed 232448"),
    ],
)
def test_invalid_inputs(threads: int, regs: int, smem: int, why: str) -> None:
    o = compute("sm_90", threads, regs, smem)
    assert o.limiter == "invalid"
    assert o.occupancy_pct == 0.0 and o.blocks_per_sm == 0 and o.active_warps == 0
    assert why in o.reason


def test_max_shared_memory_per_block_is_valid() -> None:
    o = compute("sm_90", 128, 32, 232448)
    assert o.limiter == "shared_memory" and o.blocks_per_sm == 1


def test_other_architectures() -> None:
    # sm_86: 48 warps, 16 blocks, 100 KiB shared memory.
    o = compute("sm_86", 256, 32, 0)
    assert (o.blocks_per_sm, o.max_warps, o.occupancy_pct, o.limiter) == (6, 48, 100.0, "warps")
    o = compute("sm_86", 32, 16, 0)
    assert (o.blocks_per_sm, o.limiter) == (16, "blocks")
    assert o.occupancy_pct == pytest.approx(100 * 16 / 48)
    # sm_80: 164 KiB usable.
    assert compute("sm_80", 256, 32, 100_000).blocks_per_sm == 1


@pytest.mark.parametrize(
    ("given", "name"),
    [
        ("sm_90", "sm_90"),
        ("90", "sm_90"),
        ("compute_90", "sm_90"),
        ("SM_80", "sm_80"),
        ("sm_91", "sm_90a"),
        ("sm_87", "sm_87"),
        ("sm_121", "sm_120"),
        ("sm_60", "sm_70"),
    ],
)
def test_arch_limits_lookup(given: str, name: str) -> None:
    assert arch_limits(given).name == name


def test_arch_table_is_consistent() -> None:
    for name, lim in ARCHS.items():
        assert lim.name == name
        assert lim.max_smem_per_block <= lim.smem_per_sm
        assert lim.max_warps in (32, 48, 64) and lim.max_blocks in (16, 24, 32)
