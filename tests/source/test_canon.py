"""The canonicalisation passes, one at a time and together (kernellsp.source.ir.canon).

Each case is a kernel in a user's spelling and what its normal form must say; every canonical text
also compiles with the real nvcc (one translation unit holding all cases), so a pass never hands a
recipe code that is not CUDA.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest

from kernellsp.source.ir import kernel_ir
from kernellsp.source.ir.canon import PASS_ORDER, canonicalize, pass_summaries
from kernellsp.source.model import parse_source

SPEC_1D = """/* kernellsp
sizes = {{ N = 4096 }}
launch = {{ grid = "{grid}", block = {block} }}
shapes = [{{ N = {odd} }}]
[args]
{args}
*/
"""


def _canon(src: str, entry: str, only: set[str] | None = None) -> tuple[str, list[str]]:
    model = parse_source(src, "case.cu")
    c = canonicalize(model, entry, only=only)
    fn = c.model.function(entry)
    assert fn is not None and not c.dropped, c.dropped
    return c.model.text[fn.span.start_byte : fn.span.end_byte], [str(f) for f in c.fired]


def _flat(text: str) -> str:
    return re.sub(r"\s+", " ", text)


def _spec(args: str, grid: str = "ceil_div(N, 256)", block: str = "256", odd: int = 1000) -> str:
    return SPEC_1D.format(args=args, grid=grid, block=block, odd=odd)


ARGS_AB = 'a = { dtype = "f32", dir = "in", count = "N" }\nb = { dtype = "f32", dir = "out", count = "N" }\nn = { value = "N" }'

CASES: dict[str, tuple[str, str, str, list[str], list[str]]] = {
    # name: (pass, source, entry, must appear in the normal form, must not appear)
    "arch_select": (
        "arch-select",
        _spec(ARGS_AB)
        + """__global__ void k_arch(const float* a, float* b, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
#if __CUDA_ARCH__ >= 800
    if (i < n) b[i] = 2.0f * a[i];
#else
    if (i < n) b[i] = a[i];
#endif
}
""",
        "k_arch",
        ["b[i] = 2.0f * a[i];"],
        ["#if", "b[i] = a[i];"],
    ),
    "pragma_attach": (
        "pragma-attach",
        _spec(ARGS_AB)
        + """__global__ void k_pragma(const float* a, float* b, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    float s = 0.0f;
    for (int r = 0; r < 4; r++)
#pragma unroll
        for (int j = 0; j < 4; j++)
            s += a[(i * 16 + r * 4 + j) % n];
    if (i < n) b[i] = s;
}
""",
        "k_pragma",
        ["for (int j = 0; j < 4; j++)"],
        ["#pragma"],
    ),
    "const_fold": (
        "const-fold",
        _spec(ARGS_AB)
        + """constexpr int kScale = 3;
namespace cfg { const int kShift = 2 * kScale; }
enum { kPad = 7 };
__global__ void k_const(const float* a, float* b, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i + kShift < n) b[i] = a[i + kShift] * kScale + kPad;
}
""",
        "k_const",
        ["a[i + 6] * 3 + 7", "i + 6 < n"],
        ["kShift", "kScale", "kPad"],
    ),
    "cast_form": (
        "cast-form",
        _spec(ARGS_AB)
        + """__global__ void k_cast(const float* a, float* b, int n) {
    int i = static_cast<int>(blockIdx.x * blockDim.x + threadIdx.x);
    float zero = float(0);
    if (i < n) b[i] = a[i] + zero;
}
""",
        "k_cast",
        ["int i = ((int)(blockIdx.x * blockDim.x + threadIdx.x));", "float zero = ((float)(0));"],
        ["static_cast"],
    ),
    "launch_dims": (
        "launch-dims",
        _spec(ARGS_AB + '\ntile = { value = "256" }', odd=1000)
        + """__global__ void k_dims(const float* a, float* b, int n, int tile) {
    int i = blockIdx.x * tile + threadIdx.x;
    if (i < n) b[i] = a[i] + (float)(i % tile);
}
""",
        "k_dims",
        ["int i = blockIdx.x * blockDim.x + threadIdx.x;", "(float)(i % tile)"],
        [],
    ),
    "inline_helpers": (
        "inline-helpers",
        _spec(
            'x = { dtype = "f32", dir = "in", count = "N" }\ny = { dtype = "f32", dir = "out", count = "N" }\nn = { value = "N" }'
        )
        + """#define IDX(r, c, ld) ((r) * (ld) + (c))
__device__ __forceinline__ float sq_h(float v) { return v * v; }
__device__ int gidx_h() { return blockIdx.x * blockDim.x + threadIdx.x; }
__device__ void acc_h(float &acc, const float* p, int i) { float t = p[i]; acc += t; }
__global__ void k_inline(const float* x, float* y, int n) {
    int i = gidx_h();
    float s = 0.0f;
    acc_h(s, x, IDX(0, i, 1));
    if (i < n) y[i] = sq_h(s);
}
""",
        "k_inline",
        ["blockIdx.x * blockDim.x + threadIdx.x", "x[", "(0) * (1) + (i)", "s += t;"],
        ["gidx_h(", "acc_h(", "IDX("],
    ),
    "inline_helpers_template": (
        "inline-helpers",
        _spec(ARGS_AB, block="128")
        + """template <const int kLanes = 32>
__device__ __forceinline__ float lane_sum_t(float v) {
#pragma unroll
    for (int m = kLanes >> 1; m >= 1; m >>= 1) v += __shfl_xor_sync(0xffffffff, v, m);
    return v;
}
template <const int kThreads = 128>
__device__ float block_sum_t(float v) {
    static __shared__ float partial[kThreads / 32];
    int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
    v = lane_sum_t<32>(v);
    if (lane == 0) partial[warp] = v;
    __syncthreads();
    v = lane < kThreads / 32 ? partial[lane] : 0.0f;
    v = lane_sum_t<kThreads / 32>(v);
    return v;
}
__global__ void k_template(const float* a, float* b, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    float s = block_sum_t<128>(i < n ? a[i] : 0.0f);
    if (i < n) b[i] = s;
}
""",
        "k_template",
        ["static __shared__ float partial[128 / 32]", "m = 32 >> 1", "m_1 = (128 / 32) >> 1", "v = (v_2);"],
        ["block_sum_t<", "lane_sum_t<"],
    ),
    "inline_helpers_tail_return": (
        "inline-helpers",
        _spec(ARGS_AB)
        + """__device__ void body_h(const float* a, float* b, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    b[i] = 2.0f * a[i];
}
__global__ void k_tail(const float* a, float* b, int n) {
    body_h(a, b, n);
}
""",
        "k_tail",
        ["if (i >= n) return;", "b[i] = 2.0f * a[i];"],
        ["body_h("],
    ),
    "loop_form": (
        "loop-form",
        _spec(ARGS_AB)
        + """__global__ void k_while(const float* a, float* b, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    while (i < n) {
        float acc = 0.0f;
        int k = 0;
        while (k < 4) {
            if (k == 2) { k += 1; continue; }
            acc += a[i];
            k++;
        }
        int j = 0;
        while (j < 3) { acc *= 0.5f; j++; }
        int u = 0;
        while (u < 2) {
            int v = 0;
            while (v < 2) { acc += 1.0f; v++; }
            u++;
        }
        b[i] = acc + j;
        i += blockDim.x * gridDim.x;
    }
}
""",
        "k_while",
        [
            "for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += blockDim.x * gridDim.x) {",
            "for (int u = 0; u < 2; u++)",
            "for (int v = 0; v < 2; v++)",
            "while (k < 4)",
            "int j = 0;",
            "while (j < 3)",
        ],
        ["for (int k", "for (int j"],
    ),
    "flat_blocks": (
        "flat-blocks",
        _spec(ARGS_AB)
        + """__global__ void k_blocks(const float* a, float* b, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        float s = 0.0f;
        { for (int k = 0; k < 4; ++k) s += a[i]; }
        { float t = s * 2.0f; s = t; }
        float t = s;
        b[i] = t;
    }
}
""",
        "k_blocks",
        ["float s = 0.0f; for (int k = 0; k < 4; ++k) s += a[i];", "{ float t = s * 2.0f; s = t; }"],
        ["{ for (int k"],
    ),
    "update_fold": (
        "update-fold",
        _spec(ARGS_AB)
        + """__global__ void k_fold(const float* a, float* b, int n) {
    int idx = blockIdx.x * blockDim.x + threadIdx.x;
    idx += 3;
    int j = idx;
    j = j * 2;
    float v = a[0];
    v = v * v;
    if (idx < n && j < n) b[idx] = v;
}
""",
        "k_fold",
        [
            "int idx = (blockIdx.x * blockDim.x + threadIdx.x) + 3;",
            "int j = idx * 2;",
            "float v = a[0];",
            "v = v * v;",
        ],
        ["idx += 3;"],
    ),
    "ssa_locals_inner_block": (
        "ssa-locals",
        _spec(ARGS_AB)
        + """__global__ void k_inner(const float* a, float* b, int n) {
    int p, q;
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        p = i;
        q = i + 0;
        b[p] = a[q];
    }
}
""",
        "k_inner",
        ["int p = i;", "int q = i + 0;"],
        ["int p, q;"],
    ),
    "collectives": (
        "collectives",
        _spec(ARGS_AB, block="128")
        + """#include <cooperative_groups.h>
namespace cg = cooperative_groups;
template <class T> struct SharedMemoryK { __device__ operator T*() { extern __shared__ int s_[]; return (T*)s_; } };
__global__ void k_cg(const float* a, float* b, int n) {
    cg::thread_block cta = cg::this_thread_block();
    float* sdata = SharedMemoryK<float>();
    int t = cta.thread_rank();
    int i = blockIdx.x * blockDim.x + t;
    sdata[t] = i < n ? a[i] : 0.0f;
    cg::sync(cta);
    if (i < n) b[i] = sdata[(t + 1) % blockDim.x];
}
""",
        "k_cg",
        ["extern __shared__ float sdata[];", "__syncthreads();", "int t = threadIdx.x;"],
        ["cg::sync", "cta", "SharedMemoryK<float>()"],
    ),
    "collectives_smem_object": (
        "collectives",
        _spec(ARGS_AB, block="128")
        + """template <class T> class SharedMemObj {
  public:
    __device__ inline T* getPointer() { extern __shared__ T s_obj[]; return s_obj; }
};
__global__ void k_obj(const float* a, float* b, int n) {
    SharedMemObj<float> shared;
    volatile float* vdata = shared.getPointer();
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    vdata[threadIdx.x] = i < n ? a[i] : 0.0f;
    __syncthreads();
    if (i < n) b[i] = vdata[(threadIdx.x + 1) % blockDim.x];
}
""",
        "k_obj",
        ["extern __shared__ volatile float vdata[];"],
        ["shared.getPointer()", "SharedMemObj<float> shared;"],
    ),
    "structured_exits": (
        "structured-exits",
        _spec(ARGS_AB)
        + """__global__ void k_exit(const float* a, float* b, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n || i < 0) return;
    float v = a[i];
    if (v < 0.0f) return;
    b[i] = v;
}
""",
        "k_exit",
        ["if (i < n && i >= 0) {", "if (!(v < 0.0f)) {"],
        ["return"],
    ),
    "ssa_locals": (
        "ssa-locals",
        _spec(ARGS_AB)
        + """__global__ void k_ssa(const float* a, float* b, int n) {
    int i, j;
    float s;
    s = 0.0f;
    i = blockIdx.x * blockDim.x + threadIdx.x;
    for (j = 0; j < 4; j++) s += a[(i + j) % n];
    { float t = s; s = t * 2.0f; }
    { float t = s; s = t + 1.0f; }
    if (i < n) b[i] = s;
}
""",
        "k_ssa",
        ["float s = 0.0f;", "int i = blockIdx.x", "for (int j = 0;", "float t_1 = s; s = t_1 + 1.0f;"],
        ["int i, j;"],
    ),
    "forward_subst": (
        "forward-subst",
        _spec(ARGS_AB)
        + """__global__ void k_fwd(const float* a, float* b, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    int idx = 2 * i + 1;
    float v = a[idx % n];
    if (i < n) b[i] = v * 3.0f;
}
""",
        "k_fwd",
        ["b[i] = (a[(2 * i + 1) % n]) * 3.0f;", "int i = blockIdx.x"],
        ["int idx", "float v"],
    ),
    "uniform_atoms": (
        "uniform-atoms",
        _spec(ARGS_AB)
        + """__global__ void k_atoms(const float* a, float* b, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n / 2) b[i + n / 2] = a[i];
}
""",
        "k_atoms",
        ["const auto n_div_2 = n / 2;", "b[i + n_div_2]", "i < n_div_2"],
        [],
    ),
    "digits": (
        "digits",
        _spec(ARGS_AB)
        + """__global__ void k_digits(const float* a, float* b, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) b[(i / 32) * 32 + i % 32] = a[i];
}
""",
        "k_digits",
        ["b[(i)] = a[i];"],
        ["/ 32"],
    ),
    "launch_guards": (
        "launch-guards",
        _spec(ARGS_AB, grid='"N / 256"'.strip('"'), odd=1024)
        + """__global__ void k_guard(const float* a, float* b, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    b[i] = a[i] + 1.0f;
}
""",
        "k_guard",
        ["if (i < n) {"],
        [],
    ),
    "parallel_loops": (
        "parallel-loops",
        _spec(
            'x = { dtype = "f32", dir = "in", count = "N * 64" }\ny = { dtype = "f32", dir = "out", count = "N" }\nrows = { value = "N" }',
            grid="N",
            block="32",
        )
        + """__global__ void k_rows(const float* x, float* y, int rows) {
    for (int row = blockIdx.x; row < rows; row += gridDim.x) {
        if (threadIdx.x == 0) {
            float s = 0.0f;
            for (int j = 0; j < 64; ++j) s += x[row * 64 + j];
            y[row] = s;
        }
    }
}
""",
        "k_rows",
        ["int row = blockIdx.x;", "if (row < rows) {"],
        ["gridDim"],
    ),
    "register_promote": (
        "register-promote",
        """/* kernellsp
sizes = { N = 64 }
launch = { grid = ["ceil_div(N, 16)", "ceil_div(N, 16)"], block = [16, 16] }
[args]
a = { dtype = "f32", dir = "in", count = "N * N" }
b = { dtype = "f32", dir = "in", count = "N * N" }
c = { dtype = "f32", dir = "out", count = "N * N" }
n = { value = "N" }
*/
__global__ void k_mm(const float* a, const float* b, float* c, int n) {
    int row = blockIdx.y * blockDim.y + threadIdx.y;
    int col = blockIdx.x * blockDim.x + threadIdx.x;
    if (row < n && col < n) {
        c[row * n + col] = 0.0f;
        for (int k = 0; k < n; ++k) c[row * n + col] += a[row * n + k] * b[k * n + col];
    }
}
""",
        "k_mm",
        ["float c_acc = 0.0f;", "c_acc += a[row * n + k] * b[k * n + col];", "c[row * n + col] = c_acc;"],
        [],
    ),
    "reroll": (
        "reroll",
        _spec(
            'x = { dtype = "f32", dir = "in", count = "N" }\nout = { dtype = "f32", dir = "out", count = "1" }\nn = { value = "N" }',
            grid="1",
            block="1",
        )
        + """__global__ void k_reroll(const float* x, float* out, int n) {
    float s = 0.0f;
    int k;
    for (k = 0; k + 3 < n; k += 4) {
        s += x[k];
        s += x[k + 1];
        s += x[k + 2];
        s += x[k + 3];
    }
    for (; k < n; k++) s += x[k];
    out[0] = s;
}
""",
        "k_reroll",
        ["; k < n; k++) {", "s += x[k];"],
        ["x[k + 3]", "k += 4"],
    ),
}


def test_every_pass_is_listed_with_a_summary() -> None:
    names = [n for n, _ in pass_summaries()]
    assert len(names) == len(PASS_ORDER) == len(set(names))
    assert {c[0] for c in CASES.values()} == set(names), "every pass has a case here"


@pytest.mark.parametrize("case", sorted(CASES))
def test_pass_on_its_own(case: str) -> None:
    name, src, entry, present, absent = CASES[case]
    text, fired = _canon(src, entry, only={name})
    assert fired and all(f.startswith(name + ":") for f in fired), fired
    flat = _flat(text)
    for s in present:
        assert _flat(s) in flat, (s, text)
    for s in absent:
        assert s not in text, (s, text)


@pytest.mark.parametrize("case", sorted(CASES))
def test_the_whole_pipeline_keeps_each_case_analysable(case: str) -> None:
    _name, src, entry, _present, _absent = CASES[case]
    model = parse_source(src, "case.cu")
    c = canonicalize(model, entry)
    assert not c.dropped
    ir = kernel_ir(c.model, entry)
    assert ir is not None and ir.stores(), "the kernel still writes its output"


def test_unsafe_spellings_are_left_alone() -> None:
    # A value read before a store to memory may not move past it; a float comparison is not flipped.
    src = (
        _spec(ARGS_AB)
        + """__global__ void k_unsafe(float* a, float* b, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    float v = a[i];
    a[i] = 0.0f;
    if (v != v) return;
    b[i] = v;
}
"""
    )
    text, _ = _canon(src, "k_unsafe")
    assert "float v = a[i];" in text and "!(v != v)" in text
    # Two pointer arguments a host launcher passes the same buffer: no register promotion.
    src2 = """__global__ void k_alias(const float* a, float* c, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) for (int k = 0; k < 4; ++k) c[i] += a[(i + k) % n];
}
/* kernellsp
sizes = { N = 1024 }
[args]
c = { dtype = "f32", dir = "inout", count = "N" }
n = { value = "N" }
*/
extern "C" void solve(float* c, int n) { k_alias<<<(n + 255) / 256, 256>>>(c, c, n); }
"""
    _text2, fired2 = _canon(src2, "solve")
    assert not any(f.startswith("register-promote") for f in fired2), fired2
    # A helper with a `static __shared__` array called twice: both calls share one array, so it stays a call.
    src3 = (
        _spec(ARGS_AB, block="32")
        + """__device__ float keep_h(float v) {
    static __shared__ float last[32];
    float prev = last[threadIdx.x];
    last[threadIdx.x] = v;
    return prev;
}
__global__ void k_static(const float* a, float* b, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    float x = keep_h(i < n ? a[i] : 0.0f);
    float y = keep_h(x);
    if (i < n) b[i] = y;
}
"""
    )
    text3, _ = _canon(src3, "k_static")
    assert text3.count("keep_h(") == 2, text3


def test_the_canonical_text_of_every_case_compiles(tmp_path: Path) -> None:
    nvcc = shutil.which("nvcc")
    if nvcc is None:
        pytest.skip("nvcc not on PATH")
    unit = ["#include <cuda_runtime.h>", "#include <cooperative_groups.h>"]
    for _name, src, entry, _p, _a in CASES.values():
        c = canonicalize(parse_source(src, "case.cu"), entry)
        unit.append(re.sub(r"#include <cooperative_groups.h>\n", "", c.model.text))
    path = tmp_path / "canon_cases.cu"
    path.write_text("\n".join(unit))
    got = subprocess.run(
        [nvcc, "-arch=sm_90", "-c", str(path), "-o", str(tmp_path / "canon_cases.o")],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert got.returncode == 0, got.stderr[-3000:]
