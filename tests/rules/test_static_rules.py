"""Every static rule on a small realistic kernel: it fires where it should, quoting the real numbers, and stays
silent on a close variant. Builds use the real nvcc (and nvdisasm) through ``check_text``."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from helpers.common import SAMPLES_DIR, requires_nvcc

from kernellsp.build import occupancy
from kernellsp.check import CheckOptions, FileReport, check_text
from kernellsp.findings import Finding, Severity
from kernellsp.rules.engine import RuleSet, load_rules

pytestmark = requires_nvcc


@pytest.fixture(scope="module")
def ruleset() -> RuleSet:
    return load_rules(None)


def spec(
    block: int | str = 256, smem: int | None = None, flags: str = "", shapes: str = "[{ N = 1000 }]"
) -> str:
    launch = f'grid = "ceil_div(N, {block})", block = {block}' + (
        f", smem = {smem}" if smem is not None else ""
    )
    return (
        "/* kernellsp\n"
        "sizes = { N = 1048576 }\n"
        f"launch = {{ {launch} }}\n"
        f"shapes = {shapes}\n" + (f"flags = {flags}\n" if flags else "") + "[args]\n"
        'x = { dtype = "f32", dir = "in", count = "N" }\n'
        'y = { dtype = "f32", dir = "out", count = "N" }\n'
        'n = { value = "N" }\n'
        "*/\n"
    )


def check(tmp_path: Path, ruleset: RuleSet, src: str, name: str = "kernel.cu") -> FileReport:
    path = tmp_path / name
    path.write_text(src, encoding="utf-8")
    report = check_text(path, src, CheckOptions(use_cache=False), ruleset)
    assert report.error is None
    return report


def line_of(src: str, needle: str) -> int:
    hits = [i for i, ln in enumerate(src.split("\n")) if needle in ln]
    assert len(hits) == 1, (needle, hits)
    return hits[0]


def only(report: FileReport, code: str) -> Finding:
    hits = [f for f in report.findings if f.code == code]
    assert len(hits) == 1, (
        f"expected one {code}, got {[(f.code, f.range.start_line, f.message) for f in report.findings]}"
    )
    return hits[0]


def codes(report: FileReport) -> set[str]:
    return {f.code for f in report.findings}


def metrics(report: FileReport) -> dict:  # type: ignore[type-arg]
    assert len(report.kernels) == 1
    return report.kernels[0].metrics


def resources(report: FileReport):  # type: ignore[no-untyped-def]
    assert report.build is not None and report.build.ok, report.build and report.build.messages
    assert len(report.build.resources) == 1
    return report.build.resources[0]


# --------------------------------------------------------------------------------------------------
# KL101 register spills

SPILLER = """\
__global__ void spiller(const float* __restrict__ x, float* __restrict__ y, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    float v[64];
#pragma unroll
    for (int k = 0; k < 64; ++k) v[k] = x[(i + k * 977) % n];
    float s = 0.0f;
#pragma unroll
    for (int k = 0; k < 64; ++k) s += v[k] * v[(k * 7) % 64];
#pragma unroll
    for (int k = 0; k < 64; ++k) s += v[k] * s;
    y[i] = s;
}
"""


@pytest.mark.parametrize(
    ("how", "src_of"),
    [
        ("maxrregcount", lambda: spec(flags='["-maxrregcount=32"]') + SPILLER),
        (
            "launch_bounds",
            lambda: (
                spec(block=1024)
                + SPILLER.replace(
                    "__global__ void spiller", "__global__ void __launch_bounds__(1024, 2) spiller"
                )
            ),
        ),
    ],
)
def test_kl101_fires_on_real_spills(tmp_path: Path, ruleset: RuleSet, how: str, src_of) -> None:  # type: ignore[no-untyped-def]
    src = src_of()
    report = check(tmp_path, ruleset, src)
    r = resources(report)
    assert r.registers <= 32
    assert r.spill_stores > 0 and r.spill_loads > 0, "ptxas must really spill under the cap"
    f = only(report, "KL101")
    assert f.severity == Severity.warning and f.kernel == "spiller"
    assert f.range.start_line == line_of(src, "void ") and src.split("\n")[f.range.start_line][
        f.range.start_col :
    ].startswith("spiller")
    assert (
        f"spiller spills registers: {r.spill_stores} B of spill stores and {r.spill_loads} B of spill loads "
        f"per thread to local memory ({r.registers} registers per thread, sm_90)"
    ) == f.message
    assert f.evidence["spill_stores"] == r.spill_stores and f.evidence["registers"] == r.registers


def test_kl101_silent_without_the_cap(tmp_path: Path, ruleset: RuleSet) -> None:
    report = check(tmp_path, ruleset, spec() + SPILLER)
    r = resources(report)
    assert r.spill_stores == 0 and r.spill_loads == 0 and r.registers > 32
    assert "KL101" not in codes(report)


# --------------------------------------------------------------------------------------------------
# KL102 local-memory stack frame and KL402 local array indexed at run time

LOCAL_BINS = """\
__global__ void bins(const float* __restrict__ x, float* __restrict__ y, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    float counts[32];
    for (int k = 0; k < 32; ++k) counts[k] = 0.0f;
    for (int k = 0; k < 64; ++k) {
        int b = (int)x[(i + k) % n] & 31;
        counts[b] += 1.0f;
    }
    y[i] = counts[i & 31];
}
"""

REGISTER_BINS = """\
__global__ void bins(const float* __restrict__ x, float* __restrict__ y, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    float counts[4];
#pragma unroll
    for (int c = 0; c < 4; ++c) counts[c] = 0.0f;
    for (int k = 0; k < 64; ++k) {
        float v = x[(i + k) % n];
#pragma unroll
        for (int c = 0; c < 4; ++c) counts[c] += v * c;
    }
    y[i] = counts[0] + counts[1] + counts[2] + counts[3];
}
"""


def test_kl102_and_kl402_fire_on_a_runtime_indexed_local_array(tmp_path: Path, ruleset: RuleSet) -> None:
    src = spec() + LOCAL_BINS
    report = check(tmp_path, ruleset, src)
    r = resources(report)
    assert r.stack_frame >= 32 * 4 and r.spill_stores == 0
    f = only(report, "KL102")
    assert f.range.start_line == line_of(src, "void bins")
    assert f.message.startswith(f"bins keeps a {r.stack_frame} B per-thread stack frame in local memory")
    kl402 = [f for f in report.findings if f.code == "KL402"]
    assert {f.range.start_line for f in kl402} >= {
        line_of(src, "counts[b] += 1.0f;"),
        line_of(src, "y[i] = counts[i & 31];"),
    }
    f = next(f for f in kl402 if f.range.start_line == line_of(src, "counts[b] += 1.0f;"))
    assert f.message == (
        f"counts[b] in bins indexes a per-thread array with a run-time value, so the array is placed "
        f"in local memory ({r.stack_frame} B stack frame per thread)"
    )
    # The finding's range covers the statement without its indentation.
    line = src.split("\n")[f.range.start_line]
    assert line[f.range.start_col : f.range.end_col] == "counts[b] += 1.0f;"


def test_kl102_and_kl402_silent_when_the_array_stays_in_registers(tmp_path: Path, ruleset: RuleSet) -> None:
    report = check(tmp_path, ruleset, spec() + REGISTER_BINS)
    assert resources(report).stack_frame == 0
    assert not codes(report) & {"KL102", "KL402"}


# --------------------------------------------------------------------------------------------------
# KL103 occupancy limited by registers

HEAVY = SPILLER.replace("spiller", "heavy")
LIGHT = SPILLER.replace("spiller", "heavy").replace("64", "8")


def test_kl103_fires_when_registers_limit_occupancy(tmp_path: Path, ruleset: RuleSet) -> None:
    src = spec() + HEAVY
    report = check(tmp_path, ruleset, src)
    r = resources(report)
    occ = occupancy.compute("sm_90", 256, r.registers, r.smem_static)
    assert occ.limiter == "registers" and occ.occupancy_pct < 50
    f = only(report, "KL103")
    assert f.range.start_line == line_of(src, "void heavy")
    assert f.message == (
        f"heavy: theoretical occupancy {occ.occupancy_pct:.0f}% at 256 threads per block, limited by "
        f"{r.registers} registers per thread ({occ.limit_registers} blocks per SM fit the register file)"
    )
    m = metrics(report)
    assert (m["occupancy_pct"], m["occupancy_limiter"], m["block_source"]) == (
        occ.occupancy_pct,
        "registers",
        "spec",
    )


def test_kl103_silent_for_a_lighter_variant(tmp_path: Path, ruleset: RuleSet) -> None:
    report = check(tmp_path, ruleset, spec() + LIGHT)
    m = metrics(report)
    assert m["occupancy_pct"] >= 50
    assert "KL103" not in codes(report)


# --------------------------------------------------------------------------------------------------
# KL104 occupancy limited by shared memory

TILED = """\
__global__ void tiled(const float* __restrict__ x, float* __restrict__ y, int n)
{
    extern __shared__ float buf[];
    __shared__ float small[512];
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    small[threadIdx.x] = (i < n) ? x[i] : 0.0f;
    buf[threadIdx.x] = small[threadIdx.x] * 2.0f;
    __syncthreads();
    if (i < n) y[i] = buf[blockDim.x - 1 - threadIdx.x] + small[threadIdx.x];
}
"""


def test_kl104_fires_when_shared_memory_limits_occupancy(tmp_path: Path, ruleset: RuleSet) -> None:
    src = spec(block=128, smem=65536) + TILED
    report = check(tmp_path, ruleset, src)
    r = resources(report)
    assert r.smem_static == 2048
    occ = occupancy.compute("sm_90", 128, r.registers, 2048, 65536)
    assert (occ.limiter, occ.blocks_per_sm) == ("shared_memory", 3)
    f = only(report, "KL104")
    assert f.range.start_line == line_of(src, "void tiled")
    assert f.message == (
        "tiled: theoretical occupancy 19% at 128 threads per block, limited by 2048 B static + "
        "65536 B dynamic shared memory per block (3 blocks per SM)"
    )


def test_kl104_silent_with_a_small_tile(tmp_path: Path, ruleset: RuleSet) -> None:
    report = check(tmp_path, ruleset, spec(block=128, smem=4096) + TILED)
    assert metrics(report)["occupancy_pct"] == 100.0
    assert "KL104" not in codes(report)


# --------------------------------------------------------------------------------------------------
# KL201 block size not a multiple of 32, KL202 block too small

SCALE = """\
__global__ void scale(const float* __restrict__ x, float* __restrict__ y, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = 2.0f * x[i];
}
"""


def test_kl201_fires_for_100_threads(tmp_path: Path, ruleset: RuleSet) -> None:
    src = spec(block=100) + SCALE
    report = check(tmp_path, ruleset, src)
    f = only(report, "KL201")
    assert f.range.start_line == line_of(src, "void scale")
    assert f.message.startswith(
        "scale launches 100 threads per block (spec): not a multiple of the 32-thread warp"
    )


def test_kl201_from_a_launch_site_without_spec(tmp_path: Path, ruleset: RuleSet) -> None:
    src = (
        SCALE
        + "#define THREADS 48\nvoid run(const float* x, float* y, int n) { scale<<<(n + THREADS - 1) / THREADS, THREADS>>>(x, y, n); }\n"
    )
    report = check(tmp_path, ruleset, src)
    f = only(report, "KL201")
    assert f.message.startswith(
        f"scale launches 48 threads per block (launch site line {line_of(src, 'scale<<<') + 1})"
    )


def test_kl201_silent_for_128_threads(tmp_path: Path, ruleset: RuleSet) -> None:
    report = check(tmp_path, ruleset, spec(block=128) + SCALE)
    assert "KL201" not in codes(report)
    assert "KL202" not in codes(report)


def test_kl202_fires_for_32_thread_blocks(tmp_path: Path, ruleset: RuleSet) -> None:
    src = spec(block=32) + SCALE
    report = check(tmp_path, ruleset, src)
    m = metrics(report)
    assert (m["occupancy_limiter"], m["occupancy_pct"]) == ("blocks", 50.0)
    f = only(report, "KL202")
    assert f.range.start_line == line_of(src, "void scale")
    assert f.message == (
        "scale launches 32 threads per block (spec): an SM holds at most 32 blocks, so only 50% of "
        "its 64 warp slots can be used"
    )
    assert "KL201" not in codes(report)


def test_kl202_silent_for_64_thread_blocks(tmp_path: Path, ruleset: RuleSet) -> None:
    report = check(tmp_path, ruleset, spec(block=64) + SCALE)
    assert metrics(report)["occupancy_pct"] == 100.0
    assert "KL202" not in codes(report)


# --------------------------------------------------------------------------------------------------
# KL301 / KL302 barriers under divergence

BLOCKSUM_BAD = """\
__global__ void blocksum(const float* __restrict__ x, float* __restrict__ y, int n)
{
    __shared__ float s[256];
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    s[threadIdx.x] = (i < n) ? x[i] : 0.0f;
    __syncthreads();
    for (int stride = blockDim.x / 2; stride > 0; stride /= 2) {
        if (threadIdx.x < stride) {
            s[threadIdx.x] += s[threadIdx.x + stride];
            __syncthreads(); // inside the branch
        }
    }
    if (i < n) y[i] = s[0];
}
"""
BLOCKSUM_OK = BLOCKSUM_BAD.replace(
    "            __syncthreads(); // inside the branch\n        }\n", "        }\n        __syncthreads();\n"
)


def test_kl301_fires_for_a_barrier_in_a_thread_dependent_branch(tmp_path: Path, ruleset: RuleSet) -> None:
    src = spec() + BLOCKSUM_BAD
    report = check(tmp_path, ruleset, src)
    f = only(report, "KL301")
    assert f.range.start_line == line_of(src, "// inside the branch")
    assert f.message.startswith("__syncthreads() in blocksum is reached only by the threads for which")


def test_kl301_silent_when_the_barrier_is_hoisted(tmp_path: Path, ruleset: RuleSet) -> None:
    assert "__syncthreads();\n    }" in BLOCKSUM_OK
    report = check(tmp_path, ruleset, spec() + BLOCKSUM_OK)
    assert not codes(report) & {"KL301", "KL302"}


SHIFT_BAD = """\
__global__ void shifted(const float* __restrict__ x, float* __restrict__ y, int n)
{
    __shared__ float s[256];
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    s[threadIdx.x] = x[i];
    __syncthreads();
    y[i] = s[(threadIdx.x + 1) % blockDim.x];
}
"""
SHIFT_OK = """\
__global__ void shifted(const float* __restrict__ x, float* __restrict__ y, int n)
{
    __shared__ float s[256];
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    s[threadIdx.x] = (i < n) ? x[i] : 0.0f;
    __syncthreads();
    if (i >= n) return;
    y[i] = s[(threadIdx.x + 1) % blockDim.x];
}
"""


def test_kl302_fires_for_a_barrier_after_an_early_return(tmp_path: Path, ruleset: RuleSet) -> None:
    src = spec() + SHIFT_BAD
    report = check(tmp_path, ruleset, src)
    f = only(report, "KL302")
    assert f.range.start_line == line_of(src, "__syncthreads();")
    assert f.message == (
        "__syncthreads() in shifted follows an early return taken by only some threads; the "
        "returned threads never reach this barrier"
    )
    assert "KL301" not in codes(report)


def test_kl302_silent_when_the_return_follows_the_barrier(tmp_path: Path, ruleset: RuleSet) -> None:
    report = check(tmp_path, ruleset, spec() + SHIFT_OK)
    assert not codes(report) & {"KL301", "KL302"}


# --------------------------------------------------------------------------------------------------
# KL303 unguarded access

UNGUARDED = """\
__global__ void scale(const float* __restrict__ x, float* __restrict__ y, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    y[i] = 2.0f * x[i];
}
"""


def test_kl303_fires_without_a_bounds_check(tmp_path: Path, ruleset: RuleSet) -> None:
    src = spec() + UNGUARDED
    report = check(tmp_path, ruleset, src)
    assert metrics(report)["grid_can_overshoot"] is True
    f = only(report, "KL303")
    assert f.range.start_line == line_of(src, "y[i] = 2.0f * x[i];")
    assert f.message.startswith(
        "y[i], x[i] in scale is indexed by the thread's global index with no bounds check"
    )


def test_kl303_silent_with_a_guard(tmp_path: Path, ruleset: RuleSet) -> None:
    report = check(tmp_path, ruleset, spec() + SCALE)
    assert "KL303" not in codes(report)


def test_kl303_silent_when_the_grid_never_overshoots(tmp_path: Path, ruleset: RuleSet) -> None:
    # Every declared shape is a multiple of the block: no thread can run past the end.
    report = check(tmp_path, ruleset, spec(shapes="[{ N = 1024 }]") + UNGUARDED)
    assert metrics(report)["grid_can_overshoot"] is False
    assert "KL303" not in codes(report)


# --------------------------------------------------------------------------------------------------
# KL401 fp64 in a float kernel

FP64 = """\
__global__ void scale(const float* __restrict__ x, float* __restrict__ y, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        y[i] = x[i] * 0.1;
    }
}
"""


def test_kl401_fires_for_a_double_literal(tmp_path: Path, ruleset: RuleSet) -> None:
    src = spec() + FP64
    report = check(tmp_path, ruleset, src)
    assert report.build is not None and report.build.sass_available
    f = only(report, "KL401")
    ln = line_of(src, "x[i] * 0.1;")
    assert f.range.start_line == ln
    fp64 = f.evidence["fp64_ops"]
    assert fp64 >= 2  # F2F.F64.F32 + DMUL (+ F2F back), counted from the real SASS
    assert f.message.startswith(f"line {ln + 1} of scale executes {fp64} double-precision operation(s)")
    assert metrics(report)["fp64_insts"] == fp64


def test_kl401_lands_on_the_statement_with_the_double(tmp_path: Path, ruleset: RuleSet) -> None:
    """Issue 31 item 5.3: ptxas attributes part of a promoted loop body's fp64 work to the loop header and the
    closing brace; the finding goes to the one line with the double literal, with all of the kernel's fp64."""
    src = (Path(__file__).resolve().parents[2] / "samples" / "softmax_row.cu").read_text()
    report = check(tmp_path, ruleset, src, "softmax_row.cu")
    assert report.build is not None and report.build.sass_available
    f = only(report, "KL401")
    assert f.range.start_line == line_of(src, "* (1.0 / sum);")
    assert f.evidence["fp64_ops"] == metrics(report)["fp64_insts"] > 0


def test_kl401_silent_with_a_float_literal(tmp_path: Path, ruleset: RuleSet) -> None:
    report = check(tmp_path, ruleset, spec() + FP64.replace("0.1;", "0.1f;"))
    assert metrics(report)["fp64_insts"] == 0
    assert "KL401" not in codes(report)


def test_kl401_silent_when_the_kernel_is_meant_to_be_double(tmp_path: Path, ruleset: RuleSet) -> None:
    src = spec().replace('"f32"', '"f64"') + FP64.replace("float", "double")
    report = check(tmp_path, ruleset, src)
    assert metrics(report)["fp64_insts"] > 0 and metrics(report)["uses_double_params"] is True
    assert "KL401" not in codes(report)


# --------------------------------------------------------------------------------------------------
# KL403 atomics on one address, KL404 strided access, KL405 read-only pointers

ATOMIC = """\
__global__ void total(const float* __restrict__ x, float* __restrict__ y, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        atomicAdd(y, x[i]);
    }
}
"""


def test_kl403_fires_for_one_global_address(tmp_path: Path, ruleset: RuleSet) -> None:
    src = spec() + ATOMIC
    report = check(tmp_path, ruleset, src)
    f = only(report, "KL403")
    assert f.range.start_line == line_of(src, "atomicAdd(y, x[i]);")
    assert f.message.startswith(
        "atomic on y in total: the address does not depend on threadIdx, so every thread of the grid"
    )


def test_kl403_silent_for_per_thread_addresses(tmp_path: Path, ruleset: RuleSet) -> None:
    report = check(
        tmp_path, ruleset, spec() + ATOMIC.replace("atomicAdd(y, x[i]);", "atomicAdd(&y[i], x[i]);")
    )
    assert "KL403" not in codes(report)


def test_kl403_silent_for_shared_memory_atomics(tmp_path: Path, ruleset: RuleSet) -> None:
    src = (
        spec()
        + """\
__global__ void total(const float* __restrict__ x, float* __restrict__ y, int n)
{
    __shared__ float acc;
    if (threadIdx.x == 0) acc = 0.0f;
    __syncthreads();
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) atomicAdd(&acc, x[i]);
    __syncthreads();
    if (threadIdx.x == 0) y[blockIdx.x] = acc;
}
"""
    )
    report = check(tmp_path, ruleset, src)
    assert "KL403" not in codes(report)


STRIDED = """\
__global__ void gather(const float* __restrict__ x, float* __restrict__ y, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n / 4) {
        y[i * 4] = x[i * 4] * 2.0f;
    }
}
"""


def test_kl404_fires_for_a_constant_stride(tmp_path: Path, ruleset: RuleSet) -> None:
    src = spec() + STRIDED
    report = check(tmp_path, ruleset, src)
    f = only(report, "KL404")
    assert f.range.start_line == line_of(src, "y[i * 4] = x[i * 4] * 2.0f;")
    assert f.message.startswith("y is indexed with a stride of 4 elements per threadIdx.x in gather")
    assert f.evidence["strided_pointer"] == "y" and f.evidence["stride_text"] == "4"


def test_kl404_names_a_size_dependent_stride(tmp_path: Path, ruleset: RuleSet) -> None:
    src = (
        spec()
        + """\
__global__ void rows(const float* __restrict__ x, float* __restrict__ y, int n)
{
    int r = blockIdx.x * blockDim.x + threadIdx.x;
    if (r < n / 64) {
        y[r] = x[r * n];
    }
}
"""
    )
    report = check(tmp_path, ruleset, src)
    f = only(report, "KL404")
    assert f.message.startswith("x is indexed with a stride of `n` elements per threadIdx.x in rows")


def test_kl404_silent_for_an_offset(tmp_path: Path, ruleset: RuleSet) -> None:
    report = check(tmp_path, ruleset, spec() + STRIDED.replace("i * 4", "i + 4"))
    assert "KL404" not in codes(report)


def test_kl405_fires_for_an_unqualified_input(tmp_path: Path, ruleset: RuleSet) -> None:
    src = spec() + SCALE.replace("const float* __restrict__ x", "const float* x")
    report = check(tmp_path, ruleset, src)
    f = only(report, "KL405")
    assert f.severity == Severity.info
    assert f.range.start_line == line_of(src, "void scale")
    assert f.message.startswith("scale only reads x, declared without const __restrict__")


def test_kl405_silent_for_const_restrict(tmp_path: Path, ruleset: RuleSet) -> None:
    report = check(tmp_path, ruleset, spec() + SCALE)
    assert "KL405" not in codes(report)


def test_kl405_sees_through_values_passed_to_functions(tmp_path: Path, ruleset: RuleSet) -> None:
    """Issue 31 item 5.7: ``out[i] = sq(in[i])`` passes a loaded value, not the pointer: ``in`` is still only
    read. Handing over the pointer or an address (``p + i``, ``&p[i]``) may let the callee write: silent."""
    head = (
        "__device__ float sq(float v) { return v * v; }\n__device__ void put(float* p, float v) { *p = v; }\n"
    )
    body = """\
__global__ void scale(float* x, float* __restrict__ y, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) { CALL; }
}
"""
    by_value = check(
        tmp_path, ruleset, head + spec() + body.replace("CALL", "y[i] = sq(x[i]) + sq(*(x + i))")
    )
    assert only(by_value, "KL405").message.startswith("scale only reads x,")
    for escapes in ("put(x + i, 1.0f); y[i] = 0.0f", "put(&x[i], 2.0f); y[i] = x[i]"):
        report = check(tmp_path, ruleset, head + spec() + body.replace("CALL", escapes))
        assert "KL405" not in codes(report), escapes


def test_kl405_silent_for_a_pointer_that_is_written(tmp_path: Path, ruleset: RuleSet) -> None:
    src = (
        spec().replace('x = { dtype = "f32", dir = "in"', 'x = { dtype = "f32", dir = "inout"')
        + """\
__global__ void scale(float* x, float* __restrict__ y, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) { y[i] = 2.0f * x[i]; x[i] = 0.0f; }
}
"""
    )
    report = check(tmp_path, ruleset, src)
    assert "KL405" not in codes(report)


# --------------------------------------------------------------------------------------------------
# Built-in rules: KL001 compile errors, KL002 warnings, KL003 bad specs, KL004 missing specs


def test_kl001_syntax_error_on_its_line(tmp_path: Path, ruleset: RuleSet) -> None:
    src = spec() + SCALE.replace("y[i] = 2.0f * x[i];", "y[i] = 2.0f * x[i] +;")
    report = check(tmp_path, ruleset, src)
    f = only(report, "KL001")
    assert f.severity == Severity.error and f.source == "nvcc"
    assert f.range.start_line == line_of(src, "x[i] +;")
    assert f.message == "nvcc: expected an expression"
    # No build, so no resource rules; the source-level rules still run.
    assert not codes(report) & {"KL101", "KL102", "KL103", "KL104"}
    assert "registers" not in metrics(report)


def test_kl002_real_nvcc_warning(tmp_path: Path, ruleset: RuleSet) -> None:
    src = spec() + SCALE.replace("    if (i < n)", "    int unused_counter = 0;\n    if (i < n)")
    report = check(tmp_path, ruleset, src)
    f = only(report, "KL002")
    assert f.severity == Severity.warning
    assert f.range.start_line == line_of(src, "int unused_counter = 0;")
    assert f.message == 'nvcc: variable "unused_counter" was declared but never referenced [#177-D]'
    assert "KL001" not in codes(report)


def test_kl002_silent_for_clean_code(tmp_path: Path, ruleset: RuleSet) -> None:
    report = check(tmp_path, ruleset, spec() + SCALE)
    assert report.findings == []


def test_kl003_bad_spec_on_its_own_line(tmp_path: Path, ruleset: RuleSet) -> None:
    src = (
        spec().replace(
            'y = { dtype = "f32", dir = "out", count = "N" }',
            'y = { dtype = "f64", dir = "out", count = "N" }',
        )
        + SCALE
    )
    report = check(tmp_path, ruleset, src)
    f = only(report, "KL003")
    assert f.severity == Severity.error and f.source == "spec"
    assert f.range.start_line == line_of(src, 'y = { dtype = "f64"')
    assert (
        f.message
        == "spec field 'args.y.dtype' of scale: 'y' is declared float*; expected dtype f32, got 'f64'"
    )


def test_kl004_kernel_without_spec(tmp_path: Path, ruleset: RuleSet) -> None:
    report = check(tmp_path, ruleset, SCALE)
    f = only(report, "KL004")
    assert f.severity == Severity.hint
    assert f.range.start_line == 0 and SCALE.split("\n")[0][f.range.start_col : f.range.end_col] == "scale"
    assert f.message.startswith("scale has no launch spec")
    assert "KL004" not in codes(check(tmp_path, ruleset, spec() + SCALE))


def test_kl004_not_emitted_for_a_kernel_launched_by_a_specd_host_launcher(
    tmp_path: Path, ruleset: RuleSet
) -> None:
    src = (SAMPLES_DIR / "relu_launcher.cu").read_text()
    report = check(tmp_path, ruleset, src, "relu_launcher.cu")
    assert [k.name for k in report.kernels] == ["relu_kernel"]
    assert "KL004" not in codes(report)
    # Without the launcher's spec, the kernel is reported.
    no_spec = re.sub(r"/\* kernellsp.*?\*/\n", "", src, flags=re.S)
    assert "KL004" in codes(check(tmp_path, ruleset, no_spec, "relu_launcher.cu"))


def test_findings_are_sorted_by_line(tmp_path: Path, ruleset: RuleSet) -> None:
    src = spec(block=100) + STRIDED.replace("const float* __restrict__ x", "const float* x") + ATOMIC
    report = check(tmp_path, ruleset, src)
    keys = [f.sort_key() for f in report.findings]
    assert keys == sorted(keys)
    assert {"KL201", "KL404", "KL405", "KL403", "KL004"} <= codes(report)
