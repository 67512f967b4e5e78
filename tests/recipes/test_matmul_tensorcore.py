"""The tensor-core matmul recipe on the corpus's 16-bit products: binding, declining, scope and real nvcc.

CPU only: every candidate is checked by the real scope gate (with the ``#include <mma.h>`` it adds) and
compiled by the real nvcc for sm_90. Whether the kernels compute the right numbers fast is the GPU
bench's and the gate's job (tests/bench/results/optimize-h100.md).
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from kernellsp.build import nvcc
from kernellsp.optimize.propose.base import add_includes, splice_kernel
from kernellsp.optimize.propose.recipes import _mma_codegen as mc
from kernellsp.optimize.propose.recipes import recipe
from kernellsp.optimize.propose.recipes.base import Match, contexts_for
from kernellsp.optimize.verify.scope import check_scope, edit_targets
from kernellsp.source import spec as specmod
from kernellsp.source.model import parse_source

ROOT = Path(__file__).resolve().parents[2]
CORPUS = ROOT / "tests" / "recipes" / "corpus"
NVCC = shutil.which("nvcc") is not None
CASES = [("matmul_f16_f32acc.cu", "hgemm_f32acc"), ("matmul_bf16_nt_alpha_beta.cu", "gemm_nt_bf16")]


def _match(text: str, entry: str, name: str = "k.cu") -> object:
    r = recipe("matmul-tensorcore")
    assert r is not None, "matmul-tensorcore is not loaded"
    return r.match(contexts_for(parse_source(text, name), entry)[0])


def test_f16_product_with_conversions_binds_row_major_operands() -> None:
    m = _match((CORPUS / "matmul_f16_f32acc.cu").read_text(), "hgemm_f32acc")
    assert isinstance(m, Match), m
    b = m.data.binding
    assert (b.a.name, b.a.layout, b.a.ld) == ("A", "row", "K")
    assert (b.b.name, b.b.layout, b.b.ld) == ("B", "row", "N")
    assert (b.c.name, b.c.layout) == ("C", "row")
    assert m.data.elem == "__half" and b.epilogue == "{acc}"
    assert (m.data.m_spec, m.data.n_spec) == ("(M)", "(N)")


def test_bf16_nt_product_binds_the_transposed_weight_and_alpha_beta() -> None:
    m = _match((CORPUS / "matmul_bf16_nt_alpha_beta.cu").read_text(), "gemm_nt_bf16")
    assert isinstance(m, Match), m
    b = m.data.binding
    assert (b.a.name, b.a.layout) == ("X", "row")
    assert (b.b.name, b.b.layout, b.b.ld) == ("W", "col", "K")
    assert b.epilogue == "alpha * {acc} + beta * {c}"
    assert m.data.elem == "__nv_bfloat16"


def test_declines_name_what_is_wrong() -> None:
    sgemm = (ROOT / "samples" / "sgemm_naive.cu").read_text()
    m = _match(sgemm, "sgemm_naive")
    assert not isinstance(m, Match) and "__half or __nv_bfloat16" in m.reason  # type: ignore[attr-defined]
    f16 = (CORPUS / "matmul_f16_f32acc.cu").read_text()
    # An accumulator in half precision: summing in fp32 would change what the kernel computes.
    half_acc = f16.replace("float acc = 0.0f;", "__half acc = 0.0f;").replace(
        "acc += __half2float(A[row * K + k]) * __half2float(B[k * N + col]);",
        "acc += A[row * K + k] * B[k * N + col];",
    )
    m = _match(half_acc, "hgemm_f32acc")
    assert not isinstance(m, Match) and "accumulates in fp32" in m.reason  # type: ignore[attr-defined]
    exact = f16.replace(
        "tolerance = { rtol = 1e-3, atol = 1e-3, norm_rtol = 1e-5 }", "tolerance = { rtol = 0, atol = 0 }"
    )
    m = _match(exact, "hgemm_f32acc")
    assert not isinstance(m, Match) and "exact" in m.reason  # type: ignore[attr-defined]
    mixed = f16.replace("const __half* B", "const __nv_bfloat16* B").replace(
        "__half2float(B[", "__bfloat162float(B["
    )
    m = _match("#include <cuda_bf16.h>\n" + mixed, "hgemm_f32acc")
    assert not isinstance(m, Match) and "different types" in m.reason  # type: ignore[attr-defined]


def test_the_fp32_recipes_leave_16_bit_products_to_this_one() -> None:
    for name, entry in CASES:
        model = parse_source((CORPUS / name).read_text(), name)
        ctx = contexts_for(model, entry)[0]
        got = recipe("matmul-tiled").match(ctx)  # type: ignore[union-attr]
        assert not isinstance(got, Match) and "matmul-tensorcore" in got.reason


def test_tile_problems_are_named() -> None:
    b = _match((CORPUS / "matmul_f16_f32acc.cu").read_text(), "hgemm_f32acc").data.binding  # type: ignore[attr-defined]
    assert any("multiple of 16" in p for p in mc.MmaTile(wm=24).problems(b.a, b.b))
    assert any("48 KB" in p for p in mc.MmaTile(bk=64).problems(b.a, b.b))
    with pytest.raises(ValueError, match="multiple of 16"):
        mc.mma_body(b, mc.MmaTile(bn=72), "__half")


@pytest.mark.skipif(not NVCC, reason="needs nvcc")
@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_every_candidate_passes_the_scope_gate_and_compiles_without_spills(case: tuple[str, str]) -> None:
    name, entry = case
    path = CORPUS / name
    text = path.read_text()
    model = parse_source(text, str(path))
    ctx = contexts_for(model, entry)[0]
    r = recipe("matmul-tensorcore")
    assert r is not None
    m = r.match(ctx)
    assert isinstance(m, Match), m.reason
    pts = r.points(ctx, m)
    assert len(pts) >= 3
    targets = edit_targets(model, entry)
    for p in pts:
        rw = r.generate(ctx, m, p)
        assert rw.includes == ["<mma.h>"]
        cand = add_includes(splice_kernel(text, rw.kernel, rw.code, rw.launch), rw.includes)
        assert cand.count("#include <mma.h>") == 1
        sc = check_scope(text, cand, targets, entry=entry)
        assert sc.ok, f"{name} {p}: {sc.reason}"
        bound = specmod.entry_spec(parse_source(cand), entry)
        assert bound is not None and bound.spec.launch is not None and bound.spec.launch.block == 256
        res = nvcc.build(path, cand, parse_source(cand, str(path)), use_cache=False)
        assert res.ok, f"{name} {p}: {[str(x) for x in res.messages if x.severity == 'error'][:3]}"
        (k,) = [x for x in res.resources if nvcc.match_kernel(x.mangled, entry)]
        assert k.spill_stores == 0 and k.registers * 256 <= 65536, (p, k)


HOST_LAUNCHED = """#include <cuda_fp16.h>
#include <cuda_runtime.h>

__global__ void hgemm_1d(const __half* A, const __half* B, float* C, int M, int N, int K)
{
    int idx = blockIdx.x * blockDim.x + threadIdx.x;
    if (idx < M * N) {
        int row = idx / N, col = idx % N;
        float sum = 0.0f;
        for (int k = 0; k < K; k++) sum += (float)A[row * K + k] * (float)B[k * N + col];
        C[row * N + col] = sum;
    }
}

/* kernellsp
sizes = { M = 512, N = 512, K = 512 }
tolerance = { rtol = 1e-3, atol = 1e-3 }
[args]
A = { dtype = "f16", dir = "in", count = "M * K" }
B = { dtype = "f16", dir = "in", count = "K * N" }
C = { dtype = "f32", dir = "out", count = "M * N" }
M = { value = "M" }
N = { value = "N" }
K = { value = "K" }
*/
extern "C" void solve(const __half* A, const __half* B, float* C, int M, int N, int K)
{
    int threads = THREADS;
    hgemm_1d<<<(M * N + threads - 1) / threads, threads>>>(A, B, C, M, N, K);
}
"""


def test_host_launcher_with_256_thread_blocks_keeps_its_launch_and_loops_over_tiles(tmp_path: Path) -> None:
    text = HOST_LAUNCHED.replace("THREADS", "256")
    m = _match(text, "solve")
    assert isinstance(m, Match), m
    assert m.data.host_block == 256 and m.binding["launch"] == "kept (host block of 256 threads)"
    r = recipe("matmul-tensorcore")
    assert r is not None
    ctx = contexts_for(parse_source(text, "k.cu"), "solve")[0]
    rw = r.generate(ctx, m, {"tile": "128x128x32/w64x32"})
    assert (
        rw.launch is None
        and "for (int kl_tile = blockIdx.x; kl_tile < kl_ntotal; kl_tile += gridDim.x)" in rw.code
    )
    cand = add_includes(splice_kernel(text, rw.kernel, rw.code), rw.includes)
    model = parse_source(text, "k.cu")
    assert check_scope(text, cand, edit_targets(model, "solve"), entry="solve").ok
    if NVCC:
        path = tmp_path / "k.cu"
        res = nvcc.build(path, cand, parse_source(cand, str(path)), use_cache=False)
        assert res.ok, [str(x) for x in res.messages if x.severity == "error"][:3]
    # Another block size: the tensor-core kernels need 256 threads, so the launcher's launch is rewritten
    # (grid and block only): a persistent grid whose blocks loop over the tiles.
    text128 = HOST_LAUNCHED.replace("THREADS", "128")
    got = _match(text128, "solve")
    assert isinstance(got, Match) and got.data.relaunch and "relaunched" in got.binding["launch"]
    ctx128 = contexts_for(parse_source(text128, "k.cu"), "solve")[0]
    rw128 = r.generate(ctx128, got, {"tile": "128x128x32/w64x32"})
    assert rw128.host_config == ("528", "256")
    cand128 = add_includes(
        splice_kernel(text128, rw128.kernel, rw128.code, None, rw128.host_config, "solve"), rw128.includes
    )
    assert "hgemm_1d<<<528, 256>>>(A, B, C, M, N, K);" in cand128
    assert check_scope(
        text128, cand128, edit_targets(parse_source(text128, "k.cu"), "solve"), entry="solve"
    ).ok
