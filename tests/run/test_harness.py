"""Tests of kernellsp.run.harness: planning, generation, compilation with the real nvcc, the Python mirror
of the harness PRNG (checked against the compiled program's ``--mode inputs``, which needs no GPU),
and the result reader. One ``gpu``-marked test runs the vector-add harness end to end on a GPU."""

from __future__ import annotations

import array
import json
import math
import shutil
import struct
import subprocess
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from kernellsp.run.harness import (
    EXIT_BAD_ARGS,
    PATTERNS,
    RESULT_FORMAT,
    HarnessError,
    HarnessPlan,
    decode_buffer,
    digest_bytes,
    draw,
    fill_reference,
    fnv1a64,
    generate_harness,
    harness_argv,
    harness_compile_command,
    input_set,
    launch_seed,
    mix64,
    plan_harness,
    poison_byte,
    read_result,
    reference_elements,
    set_inputs,
)
from kernellsp.source.model import parse_source
from kernellsp.source.spec import KernelSpec, parse_spec_text, specs_from_source

NVCC = shutil.which("nvcc")
needs_nvcc = pytest.mark.skipif(NVCC is None, reason="nvcc not on PATH")

# --------------------------------------------------------------------------------------------------
# Kernels under test (each file carries its spec in a kernellsp comment block)

VADD = """\
#include <cuda_runtime.h>
/* kernellsp
sizes = { N = 4096 }
launch = { grid = "ceil_div(N, 256)", block = 256 }
shapes = [{ N = 1000 }, { N = 1 }]
[args]
a = { dtype = "f32", dir = "in", count = "N" }
b = { dtype = "f32", dir = "in", count = "N", dist = "normal(0.5, 2)" }
c = { dtype = "f32", dir = "out", count = "N" }
n = { value = "N" }
*/
__global__ void vadd(const float* __restrict__ a, const float* __restrict__ b, float* __restrict__ c, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) c[i] = a[i] + b[i];
}
"""

FLOAT4 = """\
#include <cuda_runtime.h>
/* kernellsp
sizes = { N = 8192 }
launch = { grid = "ceil_div(N / 4, 128)", block = 128 }
shapes = [{ N = 4 }]
[args]
x = { dtype = "f32", dir = "in", count = "N", dist = "uniform(-4, 4)" }
y = { dtype = "f32", dir = "out", count = "N" }
s = { value = 0.25 }
n4 = { value = "N / 4" }
*/
__global__ void scale4(const float4* __restrict__ x, float4* __restrict__ y, float s, int n4) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n4) {
    float4 v = x[i];
    y[i] = make_float4(v.x * s, v.y * s, v.z * s, v.w * s);
  }
}
"""

TRANSPOSE_2D = """\
/* kernellsp
sizes = { ROWS = 512, COLS = 384, TILE = 32 }
launch = { grid = ["ceil_div(COLS, TILE)", "ceil_div(ROWS, TILE)"], block = ["TILE", 8], smem = "TILE * (TILE + 1) * 4" }
shapes = [{ ROWS = 33, COLS = 65 }]
[args]
src = { dtype = "f32", dir = "in", count = "ROWS * COLS", dist = "arange()" }
dst = { dtype = "f32", dir = "out", count = "ROWS * COLS" }
rows = { value = "ROWS" }
cols = { value = "COLS" }
*/
__global__ void transpose(const float* src, float* dst, int rows, int cols) {
  extern __shared__ float tile[];
  const int T = blockDim.x;
  int x = blockIdx.x * T + threadIdx.x;
  for (int j = threadIdx.y; j < T; j += blockDim.y) {
    int y = blockIdx.y * T + j;
    if (x < cols && y < rows) tile[j * (T + 1) + threadIdx.x] = src[y * cols + x];
  }
  __syncthreads();
  x = blockIdx.y * T + threadIdx.x;
  for (int j = threadIdx.y; j < T; j += blockDim.y) {
    int y = blockIdx.x * T + j;
    if (x < rows && y < cols) dst[y * rows + x] = tile[threadIdx.x * (T + 1) + j];
  }
}
"""

BIG_SMEM = """\
/* kernellsp
sizes = { ROWS = 64, COLS = 1000 }
launch = { grid = "ROWS", block = 256, smem = 65536 }
[args]
x = { dtype = "f64", dir = "in", count = "ROWS * COLS", dist = "uniform(-1e3, 1e3)" }
out = { dtype = "f64", dir = "out", count = "ROWS" }
cols = { value = "COLS" }
*/
__global__ void rowsum(const double* x, double* out, int cols) {
  extern __shared__ double part[];
  double s = 0.0;
  for (int c = threadIdx.x; c < cols; c += blockDim.x) s += x[blockIdx.x * cols + c];
  part[threadIdx.x] = s;
  __syncthreads();
  for (int k = blockDim.x / 2; k > 0; k >>= 1) {
    if (threadIdx.x < k) part[threadIdx.x] += part[threadIdx.x + k];
    __syncthreads();
  }
  if (threadIdx.x == 0) out[blockIdx.x] = part[0];
}
"""

HISTOGRAM = """\
/* kernellsp
sizes = { N = 100000, BINS = 256 }
launch = { grid = "ceil_div(N, 256)", block = 256 }
shapes = [{ N = 17 }]
[args]
data = { dtype = "u8", dir = "in", count = "N", dist = "randint(0, 256)" }
weights = { dtype = "i32", dir = "in", count = "N", dist = "choice(-3, 1, 7)" }
bins = { dtype = "i32", dir = "inout", count = "BINS", dist = "choice(0)" }
n = { value = "N" }
nbins = { value = "BINS" }
*/
__global__ void hist(const unsigned char* data, const int* weights, int* bins, int n, int nbins) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) atomicAdd(&bins[data[i] % nbins], weights[i]);
}
"""

MIXED = """\
#include <cstdint>
#include <cuda_fp16.h>
#include <cuda_bf16.h>
enum class Mode : int { Add = 0, Mul = 1 };
/* kernellsp
sizes = { N = 3000 }
launch = { grid = "ceil_div(N, 128)", block = 128 }
shapes = [{ N = 5 }]
[args]
a = { dtype = "i8", dir = "in", count = "N", dist = "uniform(-200, 200)" }
b = { dtype = "u16", dir = "in", count = "N", dist = "normal(100, 50)" }
c = { dtype = "i64", dir = "in", count = "N", dist = "arange(-5, 3)" }
d = { dtype = "f64", dir = "in", count = "N", dist = "uniform(-1e3, 1e3)" }
h = { dtype = "f16", dir = "in", count = "N", dist = "normal(0, 1)" }
g = { dtype = "bf16", dir = "inout", count = "N", dist = "arange(0.5, 0.25)" }
e = { dtype = "u32", dir = "in", count = "N" }
f = { dtype = "i16", dir = "in", count = "N", dist = "arange()" }
out = { dtype = "u64", dir = "out", count = "N" }
n = { value = "N" }
k = { value = 4000000000 }
off = { value = -12345678901 }
scale = { value = 0.5 }
hs = { value = 1.5 }
mode = { value = 1 }
flag = { value = true }
sz = { value = "N * 2" }
*/
__global__ void mixed(const int8_t* a, const uint16_t* b, const int64_t* c, const double* d, const __half* h,
                      __nv_bfloat16* g, const unsigned int* e, const short* f, unsigned long long* out, int n,
                      unsigned int k, long long off, double scale, __half hs, Mode mode, bool flag, size_t sz) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  double v = a[i] + b[i] + (double)c[i] + d[i] * scale + __half2float(h[i]) * __half2float(hs) + e[i] + f[i];
  if (mode == Mode::Mul && flag) v *= 2.0;
  g[i] = __float2bfloat16((float)v);
  out[i] = (unsigned long long)(v + (double)k + (double)off + (double)sz);
}
"""

HOST_LAUNCHER = """\
#include <cuda_runtime.h>
__global__ void relu_kernel(const float* in, float* out, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = in[i] > 0.f ? in[i] : 0.f;
}
/* kernellsp
sizes = { N = 5000 }
shapes = [{ N = 3 }]
[args]
in = { dtype = "f32", dir = "in", count = "N", dist = "normal(0, 1)" }
out = { dtype = "f32", dir = "out", count = "N" }
n = { value = "N" }
*/
extern "C" void solve(const float* in, float* out, int n) {
  relu_kernel<<<(n + 255) / 256, 256>>>(in, out, n);
}
"""

# A host launcher that returns cudaError_t and refuses the small shape: its refusal is a launch error.
HOST_LAUNCHER_ERR = HOST_LAUNCHER.replace(
    'extern "C" void solve(const float* in, float* out, int n) {\n  relu_kernel<<<(n + 255) / 256, 256>>>(in, out, n);\n}',
    'extern "C" cudaError_t solve(const float* in, float* out, int n) {\n  if (n < 4) return cudaErrorInvalidValue;\n'
    "  relu_kernel<<<(n + 255) / 256, 256>>>(in, out, n);\n  return cudaGetLastError();\n}",
)
assert HOST_LAUNCHER_ERR != HOST_LAUNCHER

# A program with its own main, and macros that would break any harness code placed after it.
OWN_MAIN = """\
#include <cstdio>
#include <cstdlib>
#include <cuda_runtime.h>
#define N 1024
#define BLOCK 128
#define CHECK(x) do { cudaError_t e_ = (x); if (e_ != cudaSuccess) { printf("%s\\n", cudaGetErrorString(e_)); exit(1); } } while (0)
#define min(a, b) ((a) < (b) ? (a) : (b))
#define block 256
#define grid 4
#define count 7
#define P 3
#define I 2
#define type int
/* kernellsp
sizes = { N = 1024 }
launch = { grid = "ceil_div(N, 128)", block = 128 }
shapes = [{ N = 100 }]
[args]
x = { dtype = "f32", dir = "inout", count = "N", dist = "uniform(0, 10)" }
n = { value = "N" }
*/
__global__ void square(float* x, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < min(n, N)) x[i] = x[i] * x[i];
}
int main(int argc, char** argv) {
  float* d = nullptr;
  CHECK(cudaMalloc(&d, N * sizeof(float)));
  square<<<N / BLOCK, BLOCK>>>(d, N);
  CHECK(cudaDeviceSynchronize());
  printf("passed\\n");
  return 0;
}
"""

# What the gate's at-speed defences must catch: shape k (M = k) does one wrong thing.
GUARD_PROBE = """\
/* kernellsp
sizes = { N = 4097, M = 0 }
launch = { grid = "ceil_div(N, 128)", block = 128 }
shapes = [{ M = 1 }, { M = 2 }, { M = 3 }, { M = 4 }]
[args]
a = { dtype = "f32", dir = "in", count = "N" }
c = { dtype = "f32", dir = "out", count = "N" }
n = { value = "N" }
mode = { value = "M" }
*/
__global__ void probe(const float* a, float* c, int n, int mode) {
  __shared__ volatile float never_written[128];
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  float v = 2.0f * a[i];
  if (mode == 1 && i == n - 1) v += a[i + 4096] * 0.0f;    // 16 KiB past the end of a: the guard page
  if (mode == 2 && i == n - 1) c[n] = 1.0f;                 // 4 bytes past the end of c, inside its 16-byte rounding
  if (mode == 3) v = never_written[threadIdx.x];            // shared memory no thread wrote
  if (mode == 4 && i == 0) ((float*)a)[-1] = 1.0f;          // 4 bytes before the start of a
  c[i] = v;
}
"""

# Buffers above the harness's parallel-fill threshold (2^20 elements): filled in chunks on several threads.
BIG_FILL = """\
/* kernellsp
sizes = { N = 3000007 }
launch = { grid = "ceil_div(N, 256)", block = 256 }
[args]
a = { dtype = "f32", dir = "in", count = "N", dist = "uniform(-2, 3)" }
b = { dtype = "i32", dir = "in", count = "N", dist = "randint(-7, 9)" }
c = { dtype = "f16", dir = "in", count = "N", dist = "normal(0, 1)" }
out = { dtype = "f32", dir = "out", count = "N" }
n = { value = "N" }
*/
__global__ void big(const float* a, const int* b, const __half* c, float* out, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = a[i] + b[i] + __half2float(c[i]);
}
"""

KERNELS: dict[str, tuple[str, str]] = {
    "vadd": (VADD, "vadd"),
    "guard": (GUARD_PROBE, "probe"),
    "float4": (FLOAT4, "scale4"),
    "transpose": (TRANSPOSE_2D, "transpose"),
    "bigsmem": (BIG_SMEM, "rowsum"),
    "hist": (HISTOGRAM, "hist"),
    "mixed": (MIXED, "mixed"),
    "host": (HOST_LAUNCHER, "solve"),
    "host_err": (HOST_LAUNCHER_ERR, "solve"),
    "own_main": (OWN_MAIN, "square"),
    "big": ("#include <cuda_fp16.h>\n" + BIG_FILL, "big"),
}


def _plan_of(text: str, entry: str, path: str = "/tmp/kernel.cu") -> HarnessPlan:
    model = parse_source(text, path)
    bound, issues = specs_from_source(model)
    assert not issues, issues
    spec = next(b.spec for b in bound if b.entry == entry)
    return plan_harness(model, spec, entry)


@dataclass
class Built:
    name: str
    source: Path
    harness_cu: Path
    exe: Path
    plan: HarnessPlan
    returncode: int
    stderr: str


@pytest.fixture(scope="module")
def built(
    tmp_path_factory: pytest.TempPathFactory, harness_runtime_object: Path
) -> Iterator[dict[str, Built]]:
    """Every kernel above: planned, generated and compiled with nvcc (in parallel), the way verify and profile
    build harnesses (the split build: the entry unit compiled and linked with the runtime object the run built
    once; kernellsp never builds the single-unit form, which `_build_one` and the GPU tests still cover)."""
    from kernellsp.run import harness_build as hb

    if NVCC is None:
        pytest.skip("nvcc not on PATH")
    root = tmp_path_factory.mktemp("harness")

    def build(name: str) -> Built:
        text, entry = KERNELS[name]
        d = root / name
        d.mkdir()
        src = d / f"{name}.cu"
        src.write_text(text)
        plan = _plan_of(text, entry, str(src))
        hcu = d / "harness.cu"
        hcu.write_text(generate_harness(plan, str(src), split=True))
        exe = d / "harness"
        obj = str(d / "harness.o")
        for cmd in (
            hb.unit_compile_command(str(hcu), obj, "sm_90", plan.flags),
            hb.link_command([obj, str(harness_runtime_object)], str(exe), "sm_90", plan.flags),
        ):
            proc = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
            if proc.returncode != 0:
                break
        return Built(name, src, hcu, exe, plan, proc.returncode, proc.stderr)

    with ThreadPoolExecutor(max_workers=4) as pool:
        results = list(pool.map(build, KERNELS))
    yield {b.name: b for b in results}


def _run(exe: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(exe), *args], capture_output=True, text=True, timeout=120)


# --------------------------------------------------------------------------------------------------
# Compilation (real nvcc) and the no-GPU modes of the compiled program


@needs_nvcc
@pytest.mark.slow
@pytest.mark.parametrize("name", list(KERNELS))
def test_harness_compiles(built: dict[str, Built], name: str) -> None:
    b = built[name]
    assert b.returncode == 0, f"nvcc failed for {name}:\n{b.stderr[-4000:]}"
    assert b.exe.is_file()


@needs_nvcc
@pytest.mark.slow
# "big" is checked at chosen positions (test_parallel_fill_of_large_buffers_matches_the_mirror): the pure
# Python mirror of all its 9M elements takes a minute.
@pytest.mark.parametrize("name", [k for k in KERNELS if k != "big"])
def test_inputs_mode_matches_python_mirror(built: dict[str, Built], name: str, tmp_path: Path) -> None:
    """``--mode inputs`` needs no GPU: the C++ fills must equal fill_reference bit for bit."""
    b = built[name]
    assert b.returncode == 0, b.stderr[-2000:]
    for shape in range(len(b.plan.shapes)):
        for seed in (0, 12345678901234567):
            out = tmp_path / f"s{shape}_{seed}"
            proc = _run(
                b.exe, "--mode", "inputs", "--shape", str(shape), "--seed", str(seed), "--out", str(out)
            )
            assert proc.returncode == 0, proc.stderr
            assert proc.stdout == ""
            res = read_result(out)
            assert res.ok and res.mode == "inputs" and res.shape == shape and res.seed == seed
            assert res.sizes == json.loads(json.dumps(b.plan.shapes[shape].sizes))
            for a in b.plan.inputs:
                got = res.read_input_bytes(a.name)
                want = fill_reference(b.plan, shape, seed, a.name)
                assert res.buffer(a.name).hash_before == fnv1a64(got)
                assert a.dtype is not None
                if b.plan.shapes[shape].dists[a.name].kind == "normal":
                    # libm's log/cos: identical on one host, within an ulp across hosts.
                    g, w = decode_buffer(got, a.dtype), decode_buffer(want, a.dtype)
                    assert all(
                        math.isclose(x, y, rel_tol=1e-2, abs_tol=1e-3) for x, y in zip(g, w, strict=True)
                    )
                else:
                    assert got == want, f"{name}.{a.name} shape {shape} seed {seed}"


@needs_nvcc
@pytest.mark.slow
def test_fills_honour_distributions(built: dict[str, Built], tmp_path: Path) -> None:
    b = built["mixed"]
    assert b.returncode == 0, b.stderr[-2000:]
    out = tmp_path / "o"
    assert _run(b.exe, "--mode", "inputs", "--seed", "5", "--out", str(out)).returncode == 0
    res = read_result(out)
    a = res.read_input("a")  # i8 uniform(-200, 200): floored then clamped to -128..127
    assert min(a) == -128 and max(a) == 127
    c = res.read_input("c")  # i64 arange(-5, 3)
    assert list(c[:4]) == [-5, -2, 1, 4]
    f = res.read_input("f")  # i16 arange()
    assert list(f[:3]) == [0, 1, 2]
    g = res.read_input("g")  # bf16 arange(0.5, 0.25)
    assert list(g[:3]) == [0.5, 0.75, 1.0]
    e = res.read_input("e")  # u32 default randint(0, 100)
    assert min(e) >= 0 and max(e) < 100 and len(set(e)) > 50
    d = res.read_input("d")  # f64 uniform(-1e3, 1e3)
    assert min(d) >= -1e3 and max(d) < 1e3
    h = res.read_input("h")  # f16 normal(0, 1)
    mean = sum(h) / len(h)
    var = sum((x - mean) ** 2 for x in h) / len(h)
    assert abs(mean) < 0.1 and 0.8 < var < 1.2
    hist = built["hist"]
    out2 = tmp_path / "h"
    assert _run(hist.exe, "--mode", "inputs", "--out", str(out2)).returncode == 0
    r2 = read_result(out2)
    assert set(r2.read_input("weights")) == {-3, 1, 7}
    assert set(r2.read_input("bins")) == {0}
    data = r2.read_input("data")
    assert min(data) == 0 and max(data) == 255


@needs_nvcc
@pytest.mark.slow
def test_seeds_and_args_give_independent_streams(built: dict[str, Built], tmp_path: Path) -> None:
    b = built["vadd"]
    assert b.returncode == 0
    hashes = set()
    for seed in (1, 2):
        out = tmp_path / f"s{seed}"
        assert _run(b.exe, "--mode", "inputs", "--seed", str(seed), "--out", str(out)).returncode == 0
        res = read_result(out)
        hashes |= {res.buffer("a").hash_before, res.buffer("b").hash_before}
    assert len(hashes) == 4


@needs_nvcc
@pytest.mark.slow
@pytest.mark.parametrize("name", ["vadd", "mixed", "hist", "float4", "bigsmem"])
def test_input_sets_match_the_python_mirror(built: dict[str, Built], name: str, tmp_path: Path) -> None:
    """Every structured pattern (with and without |x|), for every dtype and distribution, bit for bit."""
    b = built[name]
    assert b.returncode == 0, b.stderr[-2000:]
    sets = [input_set(s, p, abs=ab) for s in (11, 2**63 + 5) for p in PATTERNS for ab in (False, True)]
    for shape in range(len(b.plan.shapes)):
        out = tmp_path / f"s{shape}"
        proc = _run(
            b.exe, "--mode", "inputs", "--shape", str(shape), "--out", str(out), "--sets", ",".join(sets)
        )
        assert proc.returncode == 0, proc.stderr
        res = read_result(out)
        assert [s.spec for s in res.sets] == sets
        for s in res.sets:
            for a in b.plan.inputs:
                sb = s.buffers[a.name]
                assert sb.input_file is not None
                got = (out / sb.input_file).read_bytes()
                assert sb.hash_before == fnv1a64(got)
                want = fill_reference(b.plan, shape, s.seed, a.name, pattern=s.pattern, abs=s.abs)
                dist = b.plan.shapes[shape].dists[a.name]
                if dist.kind == "normal" and s.pattern == "spec":
                    continue  # libm's log/cos (test_inputs_mode_matches_python_mirror covers it)
                assert got == want, f"{name}.{a.name} shape {shape} set {s.spec}"
        # Set 0 is the legacy single set: same bytes and file as --seed alone.
        assert res.sets[0].buffers[b.plan.inputs[0].name].input_file == b.plan.inputs[0].in_file


@needs_nvcc
@pytest.mark.slow
def test_output_prefill_sets_parse_and_report(built: dict[str, Built], tmp_path: Path) -> None:
    """``~previous`` / ``~garbage`` sets keep their inputs (the prefill is about the outputs) and are reported;
    a prefill on the first set (no earlier call) or an unknown one is refused by the program with a reason."""
    b = built["vadd"]
    sets = [input_set(3), input_set(4, prefill="previous"), input_set(5, "ramp", prefill="garbage")]
    proc = _run(b.exe, "--mode", "inputs", "--out", str(tmp_path / "ok"), "--sets", ",".join(sets))
    assert proc.returncode == 0, proc.stderr
    res = read_result(tmp_path / "ok")
    assert [(s.spec, s.seed, s.pattern, s.prefill) for s in res.sets] == [
        ("3", 3, "spec", "poison"),
        ("4~previous", 4, "spec", "previous"),
        ("5:ramp~garbage", 5, "ramp", "garbage"),
    ]
    got = (tmp_path / "ok" / (res.sets[2].buffers["a"].input_file or "")).read_bytes()
    assert got == fill_reference(b.plan, 0, 5, "a", pattern="ramp")
    cov = input_set(3, prefill="coverage")
    first = _run(b.exe, "--mode", "inputs", "--out", str(tmp_path / "cov"), "--sets", cov)
    assert first.returncode == 0 and read_result(tmp_path / "cov").sets[0].prefill == "coverage"
    for bad, why in (
        ("4~previous", "first set has no earlier call"),
        ("3,4~zeros", "unknown prefill 'zeros'"),
    ):
        proc = _run(b.exe, "--mode", "inputs", "--out", str(tmp_path / "bad"), "--sets", bad)
        assert proc.returncode == EXIT_BAD_ARGS and why in read_result(tmp_path / "bad").error


@needs_nvcc
@pytest.mark.slow
def test_parallel_fill_of_large_buffers_matches_the_mirror(built: dict[str, Built], tmp_path: Path) -> None:
    """Above 2^20 elements the host fill runs in chunks on several threads: every element (checked at each
    possible chunk boundary for 2 to 16 threads, and at random) is still the mirror's, for every pattern."""
    import random

    b = built["big"]
    assert b.returncode == 0, b.stderr[-2000:]
    n = b.plan.shapes[0].counts["a"]
    edges = {0, 1, n - 2, n - 1}
    for threads in range(2, 17):
        step = (n + threads - 1) // threads
        edges |= {j for k in range(1, threads) for j in (k * step - 1, k * step) if 0 <= j < n}
    rng = random.Random(7)
    idx = sorted(edges | {rng.randrange(n) for _ in range(300)})
    sets = [input_set(91, p) for p in PATTERNS] + [input_set(92, "spikes", abs=True)]
    out = tmp_path / "big"
    proc = _run(b.exe, "--mode", "inputs", "--out", str(out), "--sets", ",".join(sets))
    assert proc.returncode == 0, proc.stderr
    res = read_result(out)
    for s in res.sets:
        for a in b.plan.inputs:
            assert a.dtype is not None
            sb = s.buffers[a.name]
            assert sb.input_file is not None
            got = (out / sb.input_file).read_bytes()
            assert sb.hash_before == fnv1a64(got)
            es = len(got) // n
            picked = b"".join(got[j * es : (j + 1) * es] for j in idx)
            want = reference_elements(b.plan, 0, s.seed, a.name, idx, pattern=s.pattern, abs=s.abs)
            if b.plan.shapes[0].dists[a.name].kind == "normal" and s.pattern == "spec":
                g, w = decode_buffer(picked, a.dtype), decode_buffer(want, a.dtype)
                assert all(math.isclose(x, y, rel_tol=1e-2, abs_tol=1e-3) for x, y in zip(g, w, strict=True))
            else:
                assert picked == want, f"{a.name} set {s.spec}"


def test_patterns_stay_in_the_spec_range_and_expose_partial_reads() -> None:
    """The patterns keep every value inside the distribution's range, and a half-read sum is far off on them."""
    text = VADD.replace('dist = "normal(0.5, 2)"', 'dist = "uniform(0, 1)"').replace("N = 4096", "N = 65536")
    plan = _plan_of(text, "vadd")
    spec_vals = decode_buffer(fill_reference(plan, 0, 3, "b"), "f32")
    half = 2 * sum(spec_vals[: len(spec_vals) // 2]) / sum(spec_vals)
    assert abs(half - 1) < 0.02  # on the spec's uniform inputs the half-read sum is close
    for pattern in PATTERNS[1:]:
        vals = decode_buffer(fill_reference(plan, 0, 3, "b", pattern=pattern), "f32")
        assert min(vals) >= 0.0 and max(vals) <= 1.0, pattern
        evens = 2 * sum(vals[0::2]) / sum(vals)
        first = 2 * sum(vals[: len(vals) // 2]) / sum(vals)
        # tail, offset: uniform inputs keep the spec's fill under them (they are for normal distributions)
        assert (
            abs(evens - 1) > 0.05 or abs(first - 1) > 0.05 or pattern in ("spikes", "wide", "tail", "offset")
        ), (
            pattern,
            evens,
            first,
        )
    spikes = decode_buffer(fill_reference(plan, 0, 3, "b", pattern="spikes"), "f32")
    big = [v for v in spikes if v >= 0.5]
    assert 0.5 * len(spikes) / 64 < len(big) < 2 * len(spikes) / 64  # about 1 in 64 elements is a spike
    assert sum(big) > 0.99 * sum(spikes)  # the sum is the spikes: a subset of the elements misses some
    ints = plan_harness(
        parse_source(HISTOGRAM, "/tmp/h.cu"),
        next(b.spec for b in specs_from_source(parse_source(HISTOGRAM, "/tmp/h.cu"))[0]),
        "hist",
    )
    for pattern in PATTERNS:
        data = decode_buffer(fill_reference(ints, 0, 9, "data", pattern=pattern), "u8")
        assert min(data) >= 0 and max(data) <= 255
    ramp = decode_buffer(fill_reference(ints, 0, 9, "data", pattern="ramp"), "u8")
    assert list(ramp[:3]) == [0, 1, 2]


def test_the_tail_pattern_reaches_far_into_a_normal_distribution() -> None:
    """Sparse spikes 4 to 256 standard deviations out, both signs: a softmax that takes its max over the first
    32 columns only overflows exp on such rows; a uniform distribution keeps the spec's fill."""
    import numpy as np

    text = VADD.replace('dist = "normal(0.5, 2)"', 'dist = "normal(0, 3)"').replace("N = 4096", "N = 65536")
    plan = _plan_of(text, "vadd")
    x = np.array(decode_buffer(fill_reference(plan, 0, 5, "b", pattern="tail"), "f32"), dtype=np.float64)
    far = x[x != 0.0]
    assert 0.5 * x.size / 64 < far.size < 2 * x.size / 64
    assert (
        np.all(np.abs(far) >= 4 * 3) and np.abs(far).max() > 100 * 3 and (far > 0).any() and (far < 0).any()
    )
    rows = x.reshape(64, 1024)
    prefix_max = rows[:, :32].max(axis=1)
    assert ((rows.max(axis=1) - prefix_max) > 88.7).sum() > 8  # exp(x - prefix max) overflows float32 there
    uniform = _plan_of(text.replace('dist = "normal(0, 3)"', 'dist = "uniform(0, 1)"'), "vadd")
    assert fill_reference(uniform, 0, 5, "b", pattern="tail") == fill_reference(uniform, 0, 5, "b")


def test_input_set_spelling() -> None:
    assert input_set(5) == "5"
    assert input_set(5, "spikes") == "5:spikes"
    assert input_set(5, launch=12) == "5@12"
    assert input_set(5, launch=12, abs=True) == "5@12+abs"
    assert input_set(5, "ramp", abs=True) == "5:ramp+abs"
    assert input_set(5, prefill="previous") == "5~previous"
    assert input_set(5, "ramp", abs=True, prefill="garbage") == "5:ramp+abs~garbage"
    assert set_inputs("5:ramp+abs~garbage") == "5:ramp+abs" and set_inputs("5@3") == "5@3"
    with pytest.raises(HarnessError, match="unknown output prefill"):
        input_set(5, prefill="zeros")
    with pytest.raises(HarnessError, match="unknown input pattern"):
        input_set(5, "zigzag")
    with pytest.raises(HarnessError, match="spec's distribution"):
        input_set(5, "ramp", launch=3)
    argv = harness_argv("./h", "check", "o", sets=["1", "2:wide"], alloc="plain")
    assert argv[argv.index("--sets") + 1] == "1,2:wide" and argv[argv.index("--alloc") + 1] == "plain"
    argv = harness_argv("./h", "time", "o", check_launches=3, fresh_inputs=True)
    assert argv[argv.index("--check-launches") + 1] == "3" and "--alloc" not in argv


@needs_nvcc
@pytest.mark.slow
def test_bad_input_sets_are_reported(built: dict[str, Built], tmp_path: Path) -> None:
    b = built["vadd"]
    assert b.returncode == 0
    cases = [
        (["--mode", "check", "--sets", "1,,2"], "SEED[:PATTERN]"),
        (["--mode", "check", "--sets", "1:zigzag"], "unknown pattern 'zigzag'"),
        (["--mode", "check", "--sets", "1:ramp@3"], "not a pattern"),
        (["--mode", "inputs", "--sets", "1@3"], "inputs mode has none"),
        (["--mode", "time", "--sets", "1"], "--mode check or inputs"),
        (["--mode", "time", "--check-launches", "65"], "--check-launches"),
        (["--mode", "check", "--alloc", "bump"], "--alloc"),
    ]
    for i, (args, needle) in enumerate(cases):
        out = tmp_path / f"c{i}"
        proc = _run(b.exe, *args, "--out", str(out))
        assert proc.returncode == 2, (args, proc.stderr)
        res = read_result(out)
        assert res.status == "bad_args" and res.error is not None and needle in res.error, (args, res.error)


@needs_nvcc
@pytest.mark.slow
def test_bad_arguments_are_reported_in_result_json(built: dict[str, Built], tmp_path: Path) -> None:
    b = built["vadd"]
    assert b.returncode == 0
    cases = [
        (["--mode", "check", "--shape", "3"], "--shape"),
        (["--mode", "bogus"], "--mode"),
        (["--mode", "time", "--reps", "0"], "--reps"),
        (["--mode", "check", "--seed", "-1"], "--seed"),
        (["--mode", "check", "--poison", "zero"], "--poison"),
        (["--mode", "check", "--frobnicate"], "unknown argument"),
        (["--shape", "0"], "--mode"),
    ]
    for i, (args, needle) in enumerate(cases):
        out = tmp_path / f"c{i}"
        proc = _run(b.exe, *args, "--out", str(out))
        assert proc.returncode == 2, (args, proc.stderr)
        res = read_result(out)
        assert res.status == "bad_args" and res.error is not None and needle in res.error, (args, res.error)
    proc = _run(b.exe, "--mode", "check")
    assert proc.returncode == 2 and "--out" in proc.stderr


@needs_nvcc
@pytest.mark.slow
def test_gpu_modes_report_cuda_errors_without_a_gpu(built: dict[str, Built], tmp_path: Path) -> None:
    """Here (no GPU) check mode must still write result.json: runtime_error, exit code 3."""
    b = built["vadd"]
    assert b.returncode == 0
    out = tmp_path / "o"
    proc = _run(b.exe, "--mode", "check", "--out", str(out), "--seed", "9")
    res = read_result(out)
    if res.status == "ok":
        pytest.skip("a GPU is present; the gpu-marked test covers this host")
    assert proc.returncode == 3
    assert res.status == "runtime_error" and res.error
    assert res.device is None and res.timings_ms == []
    assert res.grid == [16, 1, 1] and res.block == [256, 1, 1] and res.smem == 0


@needs_nvcc
@pytest.mark.slow
def test_relative_source_path_builds_from_elsewhere(tmp_path: Path) -> None:
    """The layout runners use: harness.cu next to src/<file>.cu, nvcc started in another directory."""
    work = tmp_path / "work"
    (work / "src").mkdir(parents=True)
    (work / "src" / "vadd.cu").write_text(VADD)
    plan = _plan_of(VADD, "vadd", str(work / "src" / "vadd.cu"))
    (work / "harness.cu").write_text(generate_harness(plan, "src/vadd.cu"))
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    cmd = harness_compile_command(str(work / "harness.cu"), str(work / "h"), "sm_90")
    proc = subprocess.run(cmd, capture_output=True, text=True, cwd=elsewhere, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = tmp_path / "o"
    assert _run(work / "h", "--mode", "inputs", "--out", str(out)).returncode == 0
    assert read_result(out).source == "src/vadd.cu"


@needs_nvcc
@pytest.mark.slow
def test_user_main_is_renamed(built: dict[str, Built]) -> None:
    b = built["own_main"]
    assert b.plan.has_main
    assert b.returncode == 0, b.stderr[-3000:]
    text = b.harness_cu.read_text()
    assert "#define main kernellsp_user_main_" in text
    nm = shutil.which("nm")
    if nm:
        syms = subprocess.run([nm, "-C", str(b.exe)], capture_output=True, text=True).stdout
        assert "kernellsp_user_main_" in syms


# --------------------------------------------------------------------------------------------------
# Generation details (no compiler needed)


def test_generated_text_is_deterministic_and_includes_the_source(tmp_path: Path) -> None:
    src = tmp_path / "v.cu"
    src.write_text(VADD)
    plan = _plan_of(VADD, "vadd", str(src))
    t1 = generate_harness(plan, str(src))
    t2 = generate_harness(plan, str(src))
    assert t1 == t2
    assert f'#include "{src}"' in t1
    assert "int main(int argc, char** argv) { return kernellsp_h::run(argc, argv); }" in t1
    assert t1.index("namespace kernellsp_h {") < t1.index(f'#include "{src}"')
    # A relative path stays relative: it is resolved from the generated file's directory.
    assert '#include "src/v.cu"' in generate_harness(plan, "src/v.cu")
    with pytest.raises(HarnessError, match="quote"):
        generate_harness(plan, str(tmp_path / 'bad"name.cu'))


def test_plan_evaluates_every_shape() -> None:
    plan = _plan_of(TRANSPOSE_2D, "transpose")
    assert plan.kind == "global"
    assert [a.name for a in plan.args] == ["src", "dst", "rows", "cols"]
    s0, s1 = plan.shapes
    assert s0.grid == (12, 16, 1) and s0.block == (32, 8, 1) and s0.smem == 32 * 33 * 4
    assert s1.grid == (3, 2, 1) and s1.counts == {"src": 33 * 65, "dst": 33 * 65}
    assert s1.scalars == {"rows": 33, "cols": 65}
    assert s1.dists["src"].kind == "arange"
    assert plan.arg("dst").file == "dst.bin" and plan.arg("src").in_file == "src.in.bin"
    host = _plan_of(HOST_LAUNCHER, "solve")
    assert host.kind == "host" and host.shapes[0].grid is None
    f4 = _plan_of(FLOAT4, "scale4")
    assert f4.arg("x").vector_width == 4 and f4.shapes[1].counts["x"] == 4
    assert f4.shapes[0].scalars["n4"] == 2048 and f4.shapes[0].scalars["s"] == 0.25


def test_plan_with_tunables_override() -> None:
    text = (
        VADD.replace("sizes = { N = 4096 }", "sizes = { N = 4096 }\ntunables = { BS = [256, 128] }")
        .replace("block = 256", 'block = "BS"')
        .replace('"ceil_div(N, 256)"', '"ceil_div(N, BS)"')
    )
    model = parse_source(text, "/tmp/t.cu")
    spec = specs_from_source(model)[0][0].spec
    assert plan_harness(model, spec, "vadd").shapes[0].block == (256, 1, 1)
    p = plan_harness(model, spec, "vadd", tunables={"BS": 128})
    assert p.shapes[0].block == (128, 1, 1) and p.shapes[0].grid == (32, 1, 1)
    with pytest.raises(HarnessError, match="not declared"):
        plan_harness(model, spec, "vadd", tunables={"XX": 1})


def test_reserved_file_names_are_avoided() -> None:
    text = """\
/* kernellsp
sizes = { N = 8 }
launch = { grid = 1, block = 8 }
[args]
timings = { dtype = "f32", dir = "out", count = "N" }
*/
__global__ void k(float* timings) { timings[threadIdx.x] = 1.f; }
"""
    plan = _plan_of(text, "k")
    assert plan.arg("timings").file == "arg_timings.bin"


def test_compile_command() -> None:
    cmd = harness_compile_command("h.cu", "h")
    assert cmd == ["nvcc", "-O3", "-arch=sm_90", "-lineinfo", "-std=c++17", "-o", "h", "h.cu"]
    cmd = harness_compile_command("h.cu", "h", "sm_80", ["-std=c++20", "-DX=1"])
    assert "-std=c++17" not in cmd and "-std=c++20" in cmd and "-DX=1" in cmd and "-arch=sm_80" in cmd
    argv = harness_argv(
        "./h", "time", "/o", shape=1, seed=2, reps=10, warmup=2, poison="alt", fresh_inputs=True
    )
    assert argv == [
        "./h",
        "--mode",
        "time",
        "--shape",
        "1",
        "--seed",
        "2",
        "--out",
        "/o",
        "--poison",
        "alt",
        "--reps",
        "10",
        "--warmup",
        "2",
        "--fresh-inputs",
    ]


# --------------------------------------------------------------------------------------------------
# Plan errors


def _spec(body: str) -> KernelSpec:
    spec, errors = parse_spec_text(body)
    assert spec is not None, errors
    return spec


def test_template_kernel_is_refused() -> None:
    text = "template <int B>\n__global__ void tk(float* y, int n) { y[0] = B; }\n"
    model = parse_source(text, "/tmp/t.cu")
    spec = _spec(
        "sizes = { N = 4 }\nlaunch = { grid = 1, block = 4 }\n[args]\n"
        'y = { dtype = "f32", dir = "out", count = "N" }\nn = { value = "N" }\n'
    )
    with pytest.raises(HarnessError, match="template"):
        plan_harness(model, spec, "tk")


def test_dtype_mismatch_is_refused() -> None:
    text = "__global__ void k(const float* x, float* y, int n) {}\n"
    model = parse_source(text, "/tmp/t.cu")
    spec = _spec(
        "sizes = { N = 4 }\nlaunch = { grid = 1, block = 4 }\n[args]\n"
        'x = { dtype = "i32", dir = "in", count = "N" }\ny = { dtype = "f32", dir = "out", count = "N" }\n'
        'n = { value = "N" }\n'
    )
    with pytest.raises(HarnessError, match=r"dtype.*f32.*i32|expected dtype f32, got 'i32'") as exc:
        plan_harness(model, spec, "k")
    assert "x" in str(exc.value)


def test_zero_count_is_refused() -> None:
    text = "__global__ void k(const float* x, float* y, int n) {}\n"
    model = parse_source(text, "/tmp/t.cu")
    spec = _spec(
        "sizes = { N = 4 }\nlaunch = { grid = 1, block = 4 }\nshapes = [{ N = 0 }]\n[args]\n"
        'x = { dtype = "f32", dir = "in", count = "N" }\ny = { dtype = "f32", dir = "out", count = "N" }\n'
        'n = { value = "N" }\n'
    )
    with pytest.raises(HarnessError, match="count") as exc:
        plan_harness(model, spec, "k")
    assert "positive" in str(exc.value) and "= 0" in str(exc.value)


@pytest.mark.parametrize(
    ("source", "body", "needle"),
    [
        (
            "__global__ void k(float* y, int n) {}\n",
            'sizes = { N = 4 }\nlaunch = { grid = 1, block = 4 }\n[args]\ny = { dtype = "f32", dir = "out", count = "N" }\n'
            'n = { value = "2**40" }\n',
            "does not fit int",
        ),
        (
            "__global__ void k(float* y, int n) {}\n",
            'sizes = { N = 4 }\nlaunch = { grid = 1, block = 4 }\n[args]\ny = { dtype = "f32", dir = "out", count = "N" }\n'
            "n = { value = 2.5 }\n",
            "not an integer",
        ),
        (
            "__global__ void k(const int* x, int* y) {}\n",
            "sizes = { N = 4 }\nlaunch = { grid = 1, block = 4 }\n[args]\n"
            'x = { dtype = "i32", dir = "in", count = "N", dist = "randint(5, 5)" }\ny = { dtype = "i32", dir = "out", count = "N" }\n',
            "lo < hi",
        ),
        (
            "__global__ void k(const unsigned char* x, int* y) {}\n",
            "sizes = { N = 4 }\nlaunch = { grid = 1, block = 4 }\n[args]\n"
            'x = { dtype = "u8", dir = "in", count = "N", dist = "randint(0, 1000)" }\ny = { dtype = "i32", dir = "out", count = "N" }\n',
            "do not fit u8",
        ),
        (
            "__global__ void k(const __half* x, __half* y) {}\n",
            "sizes = { N = 4 }\nlaunch = { grid = 1, block = 4 }\n[args]\n"
            'x = { dtype = "f16", dir = "in", count = "N", dist = "uniform(0, 1e6)" }\ny = { dtype = "f16", dir = "out", count = "N" }\n',
            "f16 can hold",
        ),
        (
            "__global__ void k(const float4* x, float4* y) {}\n",
            "sizes = { N = 6 }\nlaunch = { grid = 1, block = 4 }\n[args]\n"
            'x = { dtype = "f32", dir = "in", count = "N" }\ny = { dtype = "f32", dir = "out", count = "N" }\n',
            "multiple of 4",
        ),
        (
            "void host(const float* x, float* y) {}\n",
            "sizes = { N = 4 }\nlaunch = { grid = 1, block = 4 }\n[args]\n"
            'x = { dtype = "f32", dir = "in", count = "N" }\ny = { dtype = "f32", dir = "out", count = "N" }\n',
            "remove launch",
        ),
        (
            "__global__ void k(float** y) {}\n",
            'sizes = { N = 4 }\nlaunch = { grid = 1, block = 4 }\n[args]\ny = { dtype = "f32", dir = "out", count = "N" }\n',
            "pointers to pointers",
        ),
        (
            "__device__ void k(float* y) {}\n",
            'sizes = { N = 4 }\n[args]\ny = { dtype = "f32", dir = "out", count = "N" }\n',
            "device function",
        ),
        (
            "__global__ void k(float* y) {}\n__global__ void k(double* y) {}\n",
            'sizes = { N = 4 }\nlaunch = { grid = 1, block = 4 }\n[args]\ny = { dtype = "f32", dir = "out", count = "N" }\n',
            "overloaded",
        ),
        (
            "__global__ void k(float* y, int n) {}\n",
            'sizes = { N = 4 }\nlaunch = { grid = 1, block = 4 }\n[args]\ny = { dtype = "f32", dir = "out", count = "N" }\n',
            "missing argument",
        ),
        (
            "__global__ void k(float* y) {}\n",
            'sizes = { N = 4611686018427387904 }\nlaunch = { grid = 1, block = 4 }\n[args]\ny = { dtype = "f32", dir = "out", count = "N" }\n',
            r"needs 17,179,869,184 GiB; a buffer may hold at most 1024 GiB",
        ),
        (
            "__global__ void k(float* y, double v) {}\n",
            'sizes = { N = 4 }\nlaunch = { grid = 1, block = 4 }\n[args]\ny = { dtype = "f32", dir = "out", count = "N" }\n'
            'v = { value = "1' + "0" * 400 + '" }\n',
            "too large",
        ),
        (
            "__global__ void k(float* y, short int n) {}\n",
            'sizes = { N = 4 }\nlaunch = { grid = 1, block = 4 }\n[args]\ny = { dtype = "f32", dir = "out", count = "N" }\n'
            "n = { value = 70000 }\n",
            "does not fit",
        ),
    ],
)
def test_plan_errors_name_the_problem(source: str, body: str, needle: str) -> None:
    model = parse_source(source, "/tmp/t.cu")
    with pytest.raises(HarnessError, match=needle):
        plan_harness(model, _spec(body), "k" if "host(" not in source else "host")


def test_unknown_entry() -> None:
    with pytest.raises(HarnessError, match="no function named 'nope'"):
        plan_harness(parse_source(VADD, "/tmp/v.cu"), _spec("[args]\n"), "nope")


# --------------------------------------------------------------------------------------------------
# Python mirror primitives


def test_mirror_primitives_match_reference_values() -> None:
    # splitmix64 seeded with 0: first output 0xE220A8397B1DCDAF (Vigna's reference implementation).
    assert draw(0, 0) == 0xE220A8397B1DCDAF
    assert mix64(0) == 0
    assert fnv1a64(b"") == 0xCBF29CE484222325
    assert fnv1a64(b"a") == 0xAF63DC4C8601EC8C
    assert fnv1a64(b"foobar") == 0x85944171F73967E8
    assert poison_byte("f32") == 0xFF and poison_byte("bf16", alt=True) == 0xF7
    assert poison_byte("i32") == 0xA5 and poison_byte("u8", alt=True) == 0x5A
    # Every float poison is NaN (primary) or finite (alt) in every float dtype.
    for dt, fmt in (("f16", "<e"), ("f32", "<f"), ("f64", "<d")):
        size = struct.calcsize(fmt)
        assert math.isnan(struct.unpack(fmt, bytes([poison_byte(dt)]) * size)[0])
        assert math.isfinite(struct.unpack(fmt, bytes([poison_byte(dt, True)]) * size)[0])
    assert math.isnan(decode_buffer(b"\xff\xff", "bf16")[0])
    assert math.isfinite(decode_buffer(b"\xf7\xf7", "bf16")[0])
    # The digest is order-sensitive through the index term and differs when one element changes.
    one = struct.pack("<4f", 1, 2, 3, 4)
    assert digest_bytes(one, "f32") != digest_bytes(struct.pack("<4f", 2, 1, 3, 4), "f32")
    assert digest_bytes(one, "f32") == digest_bytes(bytearray(one), "f32")


def test_decode_buffer_dtypes() -> None:
    assert list(decode_buffer(struct.pack("<3e", 1.0, -2.5, 0.125), "f16")) == [1.0, -2.5, 0.125]
    assert list(decode_buffer(struct.pack("<2H", 0x3F80, 0xC040), "bf16")) == [1.0, -3.0]
    assert list(decode_buffer(struct.pack("<2q", -5, 7), "i64")) == [-5, 7]
    assert list(decode_buffer(struct.pack("<2Q", 2**64 - 1, 3), "u64")) == [2**64 - 1, 3]
    assert list(decode_buffer(bytes([0x80, 0x7F]), "i8")) == [-128, 127]
    assert list(decode_buffer(struct.pack("<2i", -1, 2), "i32")) == [-1, 2]
    with pytest.raises(HarnessError, match="whole number"):
        decode_buffer(b"\x00\x00\x00", "f32")


# --------------------------------------------------------------------------------------------------
# The reader, on a result directory written by hand in the documented format


def _write_result_dir(d: Path, **overrides: object) -> None:
    d.mkdir(parents=True, exist_ok=True)
    y = array.array("f", [1.5, float("nan"), -2.0, 4.0])
    (d / "y.bin").write_bytes(struct.pack("<4f", *y))
    (d / "x.in.bin").write_bytes(struct.pack("<4f", 0.5, 1.0, -1.0, 2.0))
    (d / "h.bin").write_bytes(struct.pack("<2e", 0.5, -1.0))
    (d / "timings.bin").write_bytes(struct.pack("<3d", 0.125, 0.25, 0.5))
    doc: dict[str, Any] = {
        "format": RESULT_FORMAT,
        "status": "ok",
        "error": None,
        "mode": "check",
        "entry": "k",
        "entry_kind": "global",
        "source": "/src/k.cu",
        "shape": 1,
        "num_shapes": 2,
        "seed": 18446744073709551615,
        "poison": "nan",
        "sizes": {"N": 4},
        "scalars": {"n": 4},
        "grid": [1, 1, 1],
        "block": [4, 1, 1],
        "smem": 0,
        "device": {
            "index": 0,
            "name": "NVIDIA H100 80GB HBM3",
            "cc": "9.0",
            "sm_count": 132,
            "l2_bytes": 52428800,
            "clock_khz": 1980000,
            "mem_clock_khz": 2619000,
            "driver_version": 12080,
            "runtime_version": 13000,
        },
        "kernel_attrs": {"num_regs": 16},
        "buffers": [
            {
                "name": "x",
                "index": 0,
                "ctype": "const float*",
                "dtype": "f32",
                "dir": "in",
                "count": 4,
                "bytes": 16,
                "file": None,
                "input_file": "x.in.bin",
                "hash_before": "0x00000000000000ff",
                "hash_after": "0x00000000000000fe",
                "digest": None,
                "unwritten": None,
                "poison_byte": None,
                "rep_digests": None,
                "rep_unwritten": None,
            },
            {
                "name": "y",
                "index": 1,
                "ctype": "float*",
                "dtype": "f32",
                "dir": "out",
                "count": 4,
                "bytes": 16,
                "file": "y.bin",
                "input_file": None,
                "hash_before": None,
                "hash_after": None,
                "digest": "0x0123456789abcdef",
                "unwritten": 1,
                "poison_byte": 255,
                "rep_digests": ["0x1", "0x2"],
                "rep_unwritten": [0, 0],
            },
            {
                "name": "h",
                "index": 2,
                "ctype": "__half*",
                "dtype": "f16",
                "dir": "inout",
                "count": 2,
                "bytes": 4,
                "file": "h.bin",
                "input_file": None,
                "hash_before": "0x10",
                "hash_after": None,
                "digest": "0x2",
                "unwritten": None,
                "poison_byte": None,
                "rep_digests": [],
                "rep_unwritten": None,
            },
        ],
        "timings_ms": [0.125, 0.25, 0.5],
        "timings_sync_ms": [0.2, 0.3, None],
        "warmup": 2,
        "reps": 3,
        "fresh_inputs": False,
        "l2_flush_bytes": 104857600,
        "persisting_l2_limit_set": True,
        "persisting_l2_error": None,
        "pad_bytes": 4096,
    }
    doc.update(overrides)
    (d / "result.json").write_text(json.dumps(doc, indent=2))


def test_read_result_hand_written(tmp_path: Path) -> None:
    _write_result_dir(tmp_path)
    r = read_result(tmp_path)
    assert r.ok and r.mode == "check" and r.entry == "k" and r.shape == 1 and r.seed == 2**64 - 1
    assert r.grid == [1, 1, 1] and r.device is not None and r.device["sm_count"] == 132
    y = r.read_buffer("y")
    assert isinstance(y, array.array) and y.typecode == "f"
    assert y[0] == 1.5 and math.isnan(y[1]) and list(y[2:]) == [-2.0, 4.0]
    assert r.read_list("h") == [0.5, -1.0]
    assert list(r.read_input("x")) == [0.5, 1.0, -1.0, 2.0]
    assert r.mutated_inputs() == ["x"]
    assert r.unwritten_outputs() == {"y": 1}
    assert r.buffer("y").digest == 0x0123456789ABCDEF and r.buffer("y").rep_digests == [1, 2]
    assert r.buffer("h").hash_before == 0x10
    assert list(r.read_timings()) == [0.125, 0.25, 0.5] == r.timings_ms
    assert math.isnan(r.timings_sync_ms[2])
    assert r.l2_flush_bytes == 104857600 and r.persisting_l2_limit_set
    with pytest.raises(HarnessError, match="no buffer 'zz'"):
        r.buffer("zz")
    with pytest.raises(HarnessError, match="not written"):
        r.read_bytes("x")
    with pytest.raises(HarnessError, match="not dumped"):
        r.read_input_bytes("y")
    (tmp_path / "y.bin").write_bytes(b"\x00" * 12)
    with pytest.raises(HarnessError, match="12 bytes"):
        r.read_buffer("y")


def test_read_result_errors(tmp_path: Path) -> None:
    with pytest.raises(HarnessError, match="crashed"):
        read_result(tmp_path / "missing")
    _write_result_dir(tmp_path / "fmt", format="something-else/9")
    with pytest.raises(HarnessError, match="format"):
        read_result(tmp_path / "fmt")
    _write_result_dir(tmp_path / "st", status="great")
    with pytest.raises(HarnessError, match="status"):
        read_result(tmp_path / "st")
    (tmp_path / "bad").mkdir()
    (tmp_path / "bad" / "result.json").write_text("{not json")
    with pytest.raises(HarnessError, match="not valid JSON"):
        read_result(tmp_path / "bad")
    _write_result_dir(
        tmp_path / "err", status="launch_error", error="vadd: cudaErrorInvalidConfiguration: bad"
    )
    r = read_result(tmp_path / "err")
    assert not r.ok and r.status == "launch_error" and "InvalidConfiguration" in (r.error or "")


# --------------------------------------------------------------------------------------------------
# End to end on a GPU (run with -m gpu on a GPU host)


def _build_one(text: str, entry: str, tmp_path: Path) -> tuple[HarnessPlan, Path]:
    """Plan, generate and compile one harness in ``tmp_path`` (for the GPU tests)."""
    if NVCC is None:
        pytest.skip("nvcc not on PATH")
    src = tmp_path / f"{entry}.cu"
    src.write_text(text)
    plan = _plan_of(text, entry, str(src))
    hcu = tmp_path / "harness.cu"
    hcu.write_text(generate_harness(plan, str(src)))
    exe = tmp_path / "harness"
    proc = subprocess.run(
        harness_compile_command(str(hcu), str(exe), "sm_90"), capture_output=True, text=True
    )
    assert proc.returncode == 0, proc.stderr[-4000:]
    return plan, exe


@pytest.mark.gpu
def test_vadd_end_to_end_on_gpu(tmp_path: Path) -> None:
    plan, exe = _build_one(VADD, "vadd", tmp_path)

    for shape in range(len(plan.shapes)):
        n = plan.shapes[shape].counts["c"]
        # check mode, NaN poison, inputs dumped
        out = tmp_path / f"check{shape}"
        p = _run(
            exe, "--mode", "check", "--shape", str(shape), "--seed", "3", "--out", str(out), "--dump-inputs"
        )
        assert p.returncode == 0, (p.stdout, p.stderr)
        assert p.stdout == ""
        r = read_result(out)
        assert r.status == "ok", r.error
        assert r.device is not None and r.device["name"] and r.device["sm_count"] > 0
        assert r.kernel_attrs is not None and r.kernel_attrs["num_regs"] > 0
        assert (out / "c.bin").stat().st_size == n * 4
        a, b, c = r.read_input("a"), r.read_input("b"), r.read_buffer("c")
        assert len(a) == len(b) == len(c) == n
        assert a.tobytes() == fill_reference(plan, shape, 3, "a")
        assert not any(math.isnan(x) for x in c)
        want = array.array(
            "f", [x + y for x, y in zip(a, b, strict=True)]
        )  # float32 rounding of the exact sum
        assert c.tobytes() == want.tobytes()
        assert r.mutated_inputs() == []
        for name in ("a", "b"):
            buf = r.buffer(name)
            assert buf.hash_before == buf.hash_after == fnv1a64(r.read_input_bytes(name))
        assert r.buffer("c").unwritten == 0
        assert r.buffer("c").digest == digest_bytes(r.read_bytes("c"), "f32")
        assert r.persisting_l2_limit_set or r.persisting_l2_error

        # the alternative poison gives the same output (no reads of unwritten memory)
        out_alt = tmp_path / f"alt{shape}"
        p = _run(
            exe,
            "--mode",
            "check",
            "--shape",
            str(shape),
            "--seed",
            "3",
            "--out",
            str(out_alt),
            "--poison",
            "alt",
        )
        assert p.returncode == 0, p.stderr
        r_alt = read_result(out_alt)
        assert r_alt.ok and r_alt.read_bytes("c") == r.read_bytes("c")

        # time mode
        out_t = tmp_path / f"time{shape}"
        p = _run(
            exe,
            "--mode",
            "time",
            "--shape",
            str(shape),
            "--seed",
            "3",
            "--out",
            str(out_t),
            "--reps",
            "20",
            "--warmup",
            "3",
        )
        assert p.returncode == 0, p.stderr
        rt = read_result(out_t)
        assert rt.status == "ok", rt.error
        assert rt.reps == 20 and rt.warmup == 3
        assert len(rt.timings_ms) == 20 and len(rt.timings_sync_ms) == 20
        assert all(0 <= t < 1000 and math.isfinite(t) for t in rt.timings_ms)
        assert sorted(rt.timings_ms)[10] > 0  # the median launch took measurable time
        assert all(s >= t for s, t in zip(rt.timings_sync_ms, rt.timings_ms, strict=True))
        assert list(rt.read_timings()) == rt.timings_ms
        assert (out_t / "timings.bin").stat().st_size == 20 * 8
        assert rt.l2_flush_bytes == 2 * rt.device["l2_bytes"] > 0  # type: ignore[index]
        c_t = rt.buffer("c")
        assert c_t.rep_unwritten == [0] * 20
        assert c_t.rep_digests == [r.buffer("c").digest] * 20  # every timed launch computed the same output

        # fresh inputs per launch: outputs still fully written, digests now differ between launches
        out_f = tmp_path / f"fresh{shape}"
        p = _run(
            exe,
            "--mode",
            "time",
            "--shape",
            str(shape),
            "--seed",
            "3",
            "--out",
            str(out_f),
            "--reps",
            "5",
            "--warmup",
            "1",
            "--fresh-inputs",
        )
        assert p.returncode == 0, p.stderr
        rf = read_result(out_f)
        assert rf.ok and rf.fresh_inputs and rf.buffer("c").rep_unwritten == [0] * 5
        if n > 1:
            assert len(set(rf.buffer("c").rep_digests or [])) == 5

        # profile mode: two launches, exit 0
        out_p = tmp_path / f"profile{shape}"
        p = _run(exe, "--mode", "profile", "--shape", str(shape), "--out", str(out_p))
        assert p.returncode == 0, p.stderr
        assert read_result(out_p).ok


@pytest.mark.parametrize(
    "content",
    [
        b"\xff\xfe not utf-8",
        b'{"format": "kernellsp-harness/1", "status": "ok", "seed": Infinity}',
        b"[" * 100_000,
    ],
)
def test_damaged_result_json_is_a_harness_error(tmp_path: Path, content: bytes) -> None:
    (tmp_path / "result.json").write_bytes(content)
    with pytest.raises(HarnessError, match=r"result\.json"):
        read_result(tmp_path)


@pytest.mark.gpu
def test_host_launcher_error_return_is_a_launch_error(tmp_path: Path) -> None:
    """``cudaError_t solve(...)`` refusing a shape: the run reports launch_error with the code, never "ok"."""
    _, exe = _build_one(HOST_LAUNCHER_ERR, "solve", tmp_path)
    ok = _run(exe, "--mode", "check", "--shape", "0", "--out", str(tmp_path / "ok"))
    assert ok.returncode == 0 and read_result(tmp_path / "ok").status == "ok"
    bad = _run(exe, "--mode", "check", "--shape", "1", "--out", str(tmp_path / "bad"))  # N = 3 is refused
    r = read_result(tmp_path / "bad")
    assert bad.returncode != 0 and r.status == "launch_error"
    assert "solve (its return value)" in (r.error or "") and "cudaErrorInvalidValue" in (r.error or "")


@pytest.mark.gpu
def test_guard_pages_canaries_and_shared_memory_poison_on_gpu(tmp_path: Path) -> None:
    """The at-speed defences: an access past a buffer's end faults (guard page), a write just outside it is
    counted (canary), shared memory no thread wrote reads as the poison, whatever the last kernel left."""
    _, exe = _build_one(GUARD_PROBE, "probe", tmp_path)
    ok = _run(
        exe, "--mode", "check", "--shape", "0", "--out", str(tmp_path / "ok"), "--seed", "4", "--dump-inputs"
    )
    r = read_result(tmp_path / "ok")
    assert ok.returncode == 0 and r.ok, r.error
    assert r.alloc["kind"] == "guard" and r.alloc["granularity"] >= 4096 and r.alloc["error"] is None
    assert all(b.guarded for b in r.buffers) and r.guard_damage() == {}
    assert (
        r.smem_poison["done"]
        and r.smem_poison["sms_covered"] == r.device["sm_count"] == r.smem_poison["sm_count"]
    )  # type: ignore[index]
    assert r.smem_poison["bytes_per_sm"] >= 48 * 1024
    a = r.read_input("a")
    assert list(r.read_buffer("c")) == [2.0 * x for x in a]

    far = _run(exe, "--mode", "check", "--shape", "1", "--out", str(tmp_path / "far"))
    rf = read_result(tmp_path / "far")
    assert far.returncode == 3 and rf.status == "runtime_error" and "IllegalAddress" in (rf.error or ""), (
        rf.error
    )

    tail = _run(exe, "--mode", "check", "--shape", "2", "--out", str(tmp_path / "tail"))
    rt = read_result(tmp_path / "tail")
    assert tail.returncode == 0 and rt.ok and rt.guard_damage() == {"c": 4}

    below = _run(exe, "--mode", "check", "--shape", "4", "--out", str(tmp_path / "below"))
    rb = read_result(tmp_path / "below")
    assert below.returncode == 0 and rb.ok and rb.guard_damage() == {"a": 4} and rb.mutated_inputs() == []

    for poison, byte in (("nan", 0xFF), ("alt", 0xF7)):
        out = tmp_path / f"smem-{poison}"
        p = _run(exe, "--mode", "check", "--shape", "3", "--out", str(out), "--poison", poison)
        assert p.returncode == 0, p.stderr
        raw = read_result(out).read_bytes("c")
        assert raw == bytes([byte]) * len(raw), (
            f"shared memory read back {raw[:8].hex()} under --poison {poison}"
        )

    # --alloc plain (what compute-sanitizer gets): cudaMalloc, exact sizes, no guard pages.
    plain = _run(exe, "--mode", "check", "--shape", "0", "--out", str(tmp_path / "plain"), "--alloc", "plain")
    rp = read_result(tmp_path / "plain")
    assert plain.returncode == 0 and rp.alloc["kind"] == "plain" and not any(b.guarded for b in rp.buffers)


ACCUMULATE = """\
#include <cuda_runtime.h>
/* kernellsp
sizes = { N = 1000 }
launch = { grid = "ceil_div(N, 256)", block = 256 }
[args]
a = { dtype = "f32", dir = "in", count = "N", dist = "randint(0, 100)" }
c = { dtype = "f32", dir = "out", count = "N" }
n = { value = "N" }
*/
__global__ void acc(const float* a, float* c, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) c[i] = (c[i] != c[i]) ? a[i] : c[i] + a[i];  // reads its output: NaN counts as empty
}
"""


@pytest.mark.gpu
def test_output_prefill_on_gpu(tmp_path: Path) -> None:
    """``~previous``: the outputs start as the previous set's results; ``~garbage``: as those results rotated to
    other elements; the default: poisoned. A kernel that adds into its output shows each exactly."""
    plan, exe = _build_one(ACCUMULATE, "acc", tmp_path)
    sets = [input_set(7), input_set(8, prefill="previous"), input_set(9, prefill="garbage"), input_set(10)]
    p = _run(exe, "--mode", "check", "--out", str(tmp_path / "o"), "--sets", ",".join(sets))
    r = read_result(tmp_path / "o")
    assert p.returncode == 0 and r.ok, r.error
    a = [list(decode_buffer(fill_reference(plan, 0, s, "a"), "f32")) for s in (7, 8, 9, 10)]
    c = [list(decode_buffer(r.read_set_bytes(k, "c"), "f32")) for k in range(4)]
    assert [s.prefill for s in r.sets] == ["poison", "previous", "garbage", "poison"]
    assert c[0] == a[0] and c[3] == a[3]
    assert c[1] == [x + y for x, y in zip(c[0], a[1], strict=True)]
    shifted = [c2 - y for c2, y in zip(c[2], a[2], strict=True)]
    k = next(k for k in range(1, len(shifted)) if shifted == c[1][k:] + c[1][:k])
    assert 1 <= k < len(shifted)


HALF_INOUT = """\
#include <cuda_runtime.h>
/* kernellsp
sizes = { N = 1000 }
launch = { grid = "ceil_div(N, 256)", block = 256 }
[args]
a = { dtype = "f32", dir = "in", count = "N" }
c = { dtype = "f32", dir = "inout", count = "N" }
n = { value = "N" }
*/
__global__ void half_inout(const float* a, float* c, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n / 2) c[i] = 2.0f * c[i] + a[i];
}
"""


@pytest.mark.gpu
def test_coverage_prefill_counts_inout_elements_never_written_on_gpu(tmp_path: Path) -> None:
    """``~coverage`` poisons inout buffers too: the elements a kernel never writes keep the poison and are
    counted; without it an inout buffer reports no count (its unwritten elements hold their inputs)."""
    _plan, exe = _build_one(HALF_INOUT, "half_inout", tmp_path)
    sets = [input_set(7), input_set(8, prefill="coverage")]
    p = _run(exe, "--mode", "check", "--out", str(tmp_path / "o"), "--sets", ",".join(sets))
    r = read_result(tmp_path / "o")
    assert p.returncode == 0 and r.ok, r.error
    assert r.sets[0].buffers["c"].unwritten is None
    assert r.sets[1].buffers["c"].unwritten == 500


@pytest.mark.gpu
def test_input_sets_and_checked_launches_on_gpu(tmp_path: Path) -> None:
    """check --sets runs one launch per set; time --check-launches keeps randomly picked timed launches whose
    inputs the set SEED@LAUNCH reproduces, so their outputs can be compared with another binary's."""
    plan, exe = _build_one(VADD, "vadd", tmp_path)
    sets = [
        input_set(7),
        input_set(8, "spikes"),
        input_set(9, "alternating", abs=True),
        input_set(10, "wide"),
    ]
    p = _run(
        exe, "--mode", "check", "--out", str(tmp_path / "sets"), "--sets", ",".join(sets), "--dump-inputs"
    )
    r = read_result(tmp_path / "sets")
    assert p.returncode == 0 and r.ok, r.error
    assert [s.spec for s in r.sets] == sets
    for s in r.sets:
        a = decode_buffer(fill_reference(plan, 0, s.seed, "a", pattern=s.pattern, abs=s.abs), "f32")
        bb = (tmp_path / "sets" / (s.buffers["b"].input_file or "")).read_bytes()
        b = decode_buffer(bb, "f32")
        want = array.array("f", [x + y for x, y in zip(a, b, strict=True)])
        assert r.read_set_bytes(s.index, "c") == want.tobytes(), s.spec
        assert s.buffers["a"].mutated is False and s.buffers["c"].unwritten == 0
    assert r.read_bytes("c") == r.read_set_bytes(0, "c")  # set 0 keeps the legacy files and fields

    t = _run(
        exe,
        "--mode",
        "time",
        "--seed",
        "21",
        "--out",
        str(tmp_path / "t"),
        "--reps",
        "12",
        "--warmup",
        "2",
        "--fresh-inputs",
        "--check-launches",
        "3",
    )
    rt = read_result(tmp_path / "t")
    assert t.returncode == 0 and rt.ok, rt.error
    assert len(rt.snapshots) == 3
    launches = [sn.launch for sn in rt.snapshots]
    assert launches == sorted(set(launches)) and all(2 <= k < 14 for k in launches)
    assert rt.copy_bandwidth is not None and 1e11 < rt.copy_bandwidth < 2e13
    assert rt.smem_poison["done"] and rt.guard_damage() == {}
    refs = [input_set(21, launch=k) for k in launches]
    p = _run(exe, "--mode", "check", "--out", str(tmp_path / "ref"), "--sets", ",".join(refs))
    rr = read_result(tmp_path / "ref")
    assert p.returncode == 0 and rr.ok, rr.error
    for sn in rt.snapshots:
        assert sn.input_seed == launch_seed(21, sn.launch)
        assert rt.read_snapshot_bytes(sn.index, "c") == rr.read_set_bytes(sn.index, "c")
    # The picks vary between runs (OS entropy after each launch), not with the seed.
    picks = {tuple(launches)}
    for k in range(4):
        _run(
            exe,
            "--mode",
            "time",
            "--seed",
            "21",
            "--out",
            str(tmp_path / f"t{k}"),
            "--reps",
            "12",
            "--warmup",
            "2",
            "--fresh-inputs",
            "--check-launches",
            "3",
        )
        picks.add(tuple(sn.launch for sn in read_result(tmp_path / f"t{k}").snapshots))
    assert len(picks) > 1, picks


@needs_nvcc
@pytest.mark.slow
def test_patterns_keep_a_naive_float32_sum_as_accurate_as_the_spec_inputs(tmp_path: Path) -> None:
    """The reference is the baseline: a naive float32 accumulation (one atomicAdd per element) must not be
    further off the exact sum on a pattern than on the spec's own inputs, or an honest tree reduction would
    'mismatch' (a dense ramp over 4 Mi elements put such a sum 1.5e-3 off); and a half-reading kernel must
    be far off on the ramp and alternating patterns. The inputs come from the compiled harness (mode inputs)."""
    import numpy as np

    text = VADD.replace('dist = "normal(0.5, 2)"', 'dist = "uniform(0, 1)"').replace(
        "N = 4096", "N = 4194304"
    )
    src = tmp_path / "vadd.cu"
    src.write_text(text)
    plan = _plan_of(text, "vadd", str(src))
    (tmp_path / "h.cu").write_text(generate_harness(plan, str(src)))
    proc = subprocess.run(
        harness_compile_command(str(tmp_path / "h.cu"), str(tmp_path / "h"), "sm_90"),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    sets = [input_set(17, p) for p in PATTERNS]
    assert (
        _run(
            tmp_path / "h", "--mode", "inputs", "--out", str(tmp_path / "o"), "--sets", ",".join(sets)
        ).returncode
        == 0
    )
    res = read_result(tmp_path / "o")
    n = plan.shapes[0].counts["b"]

    def errors(i: int) -> tuple[float, float, float]:
        x = np.fromfile(tmp_path / "o" / (res.sets[i].buffers["b"].input_file or ""), dtype="<f4")
        exact = float(np.sum(x.astype(np.float64)))
        naive = float(np.cumsum(x, dtype=np.float32)[-1])
        first_half = 2 * float(np.sum(x[: n // 2], dtype=np.float64))
        evens = 2 * float(np.sum(x[0::2], dtype=np.float64))
        return abs(naive - exact) / exact, abs(first_half - exact) / exact, abs(evens - exact) / exact

    spec_err = errors(0)[0]
    for i, pattern in enumerate(PATTERNS):
        naive, first_half, evens = errors(i)
        assert naive <= max(3 * spec_err, 1e-5), (pattern, naive, spec_err)
        if pattern == "ramp":
            assert first_half > 0.3, first_half  # the first half holds a quarter of the spikes
        if pattern == "alternating":
            assert evens > 0.5, evens  # the even elements carry every spike of the pairs
    # The same check fails for a dense ramp: what the sparse patterns avoid.
    dense = ((np.arange(n) + 0.5) / n).astype(np.float32)
    exact = float(np.sum(dense.astype(np.float64)))
    assert abs(float(np.cumsum(dense, dtype=np.float32)[-1]) - exact) / exact > 3 * max(spec_err, 1e-5) * 10


def test_the_offset_pattern_exposes_a_one_pass_variance() -> None:
    """A normal f32 buffer shifted 128-256 std to one side: a layernorm whose variance is E[x^2] - E[x]^2 in
    fp32 is far off there (1e-3 norm error, elements outside rtol 1e-3), while a two-pass one summed in
    another order stays within the error budget of the gate (1e-4); f16 and other distributions keep the
    spec's fill."""
    import numpy as np

    rows, cols = 16, 2048
    text = VADD.replace('dist = "normal(0.5, 2)"', 'dist = "normal(0, 1)"').replace(
        "N = 4096", f"N = {rows * cols}"
    )
    plan = _plan_of(text, "vadd")
    x = np.array(decode_buffer(fill_reference(plan, 0, 5, "b", pattern="offset"), "f32"), dtype=np.float32)
    centre = float(np.mean(x, dtype=np.float64))
    assert 128 <= abs(centre) <= 256 and float(np.ptp(x)) < 2 * 1.7321  # one centre, noise of one std
    x = x.reshape(rows, cols)

    def tree_sum(v: np.ndarray[Any, Any], lanes: int) -> np.ndarray[Any, Any]:
        # a strided per-lane float32 loop, then a float32 tree over the lanes (a block or warp reduction)
        p = np.zeros((rows, lanes), np.float32)
        for k in range(cols // lanes):
            p = (p + v[:, k * lanes : (k + 1) * lanes]).astype(np.float32)
        while lanes > 1:
            lanes //= 2
            p = (p[:, :lanes] + p[:, lanes : 2 * lanes]).astype(np.float32)
        return p[:, 0]

    def layernorm(lanes: int, one_pass: bool) -> np.ndarray[Any, Any]:
        mean = (tree_sum(x, lanes) / np.float32(cols))[:, None]
        d = (x - mean).astype(np.float32)
        if one_pass:
            q = (tree_sum(x * x, lanes) / np.float32(cols))[:, None]
            var = np.maximum(q - mean * mean, 0).astype(np.float32)
        else:
            var = (tree_sum(d * d, lanes) / np.float32(cols))[:, None]
        return (d / np.sqrt(var + np.float32(1e-5))).astype(np.float32).astype(np.float64)

    baseline = layernorm(256, one_pass=False)

    def norm_error(y: np.ndarray[Any, Any]) -> float:
        return float(np.linalg.norm(y - baseline) / np.linalg.norm(baseline))

    assert norm_error(layernorm(32, one_pass=False)) < 1e-4 / 5  # an honest re-association: well inside
    cheat = layernorm(256, one_pass=True)
    assert norm_error(cheat) > 1e-4 * 5
    assert (np.abs(cheat - baseline) > 1e-4 + 1e-3 * np.abs(baseline)).any()  # outside the spec's tolerance
    half_text = text.replace('b = { dtype = "f32"', 'b = { dtype = "f16"').replace(
        "const float* __restrict__ b", "const __half* __restrict__ b"
    )
    half = _plan_of(half_text.replace("<cuda_runtime.h>", "<cuda_fp16.h>"), "vadd")
    assert fill_reference(half, 0, 5, "b", pattern="offset") == fill_reference(half, 0, 5, "b")
    uniform = _plan_of(text.replace('dist = "normal(0, 1)"', 'dist = "uniform(0, 1)"'), "vadd")
    assert fill_reference(uniform, 0, 5, "b", pattern="offset") == fill_reference(uniform, 0, 5, "b")
