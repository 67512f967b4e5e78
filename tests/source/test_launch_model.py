"""The launch model, the C constant evaluator and the parser's view of spellings tree-sitter refuses."""

from __future__ import annotations

from kernellsp.optimize.verify.scope import check_scope, edit_targets
from kernellsp.source.ir.cexpr import evaluate_text, expand_macros, file_constants
from kernellsp.source.ir.launch import launch_model
from kernellsp.source.model import parse_source, parser_view

LAYERED = """#define TILE 16
#define CEIL_DIV(a, b) (((a) + (b) - 1) / (b))
static const unsigned int kBlocks = 240;
__global__ void scale(float* x, int n, int w) { int i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) x[i] *= w; }
__global__ void tile2d(float* x, int w, int h) { x[(blockIdx.y * TILE + threadIdx.y) * w + blockIdx.x * TILE + threadIdx.x] = 0; }
template <typename T> void launch_scale(T* x, size_t n) {
    dim3 const block{256U};
    dim3 grid(CEIL_DIV(n, block.x));
    scale<<<grid, block>>>(x, n, 3);
}
void launch_tile(float* x, int w, int h) {
    dim3 threads(TILE, TILE);
    dim3 blocks(w / threads.x, h / TILE);
    tile2d<<<blocks, threads>>>(x, w, h);
    scale<<<kBlocks, sizeof(float) * 64>>>(x, w * h, 1);
}
/* kernellsp
sizes = { N = 4096, W = 64, H = 32 }
shapes = [{ N = 1000, W = 16, H = 48 }]
[args]
x = { dtype = "f32", dir = "inout", count = "max(N, W * H)" }
n = { value = "N" }
w = { value = "W" }
h = { value = "H" }
*/
extern "C" void solve(float* x, int n, int w, int h) {
    launch_scale<float>(x, n);
    launch_tile(x, w, h);
}
"""


def test_kernels_launched_through_host_helpers_are_the_entrys_targets() -> None:
    model = parse_source(LAYERED)
    assert model.launchers("solve") == ["solve", "launch_scale", "launch_tile"]
    assert edit_targets(model, "solve") == ["scale", "tile2d"]


def test_launch_model_follows_the_calls_and_the_launchers_locals() -> None:
    lm = launch_model(parse_source(LAYERED), "solve")
    scale, tile = lm["scale"], lm["tile2d"]
    assert scale.complete and tile.complete
    assert [s.grid for s in scale.shapes] == [(16, 1, 1), (4, 1, 1)]
    assert [s.block for s in scale.shapes] == [(256, 1, 1), (256, 1, 1)]
    assert [dict(s.params) for s in scale.shapes] == [{"n": 4096, "w": 3}, {"n": 1000, "w": 3}]
    assert [s.grid for s in tile.shapes] == [(4, 2, 1), (1, 3, 1)]
    assert tile.block_dim(0) == 16 and tile.covers_exactly(0) == [64, 16]
    assert tile.params_equal_to([64, 16]) == ["w"]


def test_c_constants_follow_c() -> None:
    assert evaluate_text("-7 / 2") == -3 and evaluate_text("-7 % 2") == -1
    assert evaluate_text("n > 4 ? n : 4", {"n": 9}) == 9
    assert evaluate_text("sizeof(float4) * 2") == 32
    assert evaluate_text("(1U << 5) - 1") == 31
    assert evaluate_text("x / 0", {"x": 1}) is None
    model = parse_source(LAYERED)
    assert file_constants(model)["kBlocks"] == 240 and file_constants(model)["TILE"] == 16
    assert (
        expand_macros("CEIL_DIV(n, TILE)", model.defines, model.macros) == "((((n) + ((16)) - 1) / ((16))))"
    )


def test_the_parser_reads_pragmas_between_a_loop_and_its_body_and_align_specifiers() -> None:
    src = """__global__ void k(float* a, int n) {
  __shared__ __align__(16) float s[256];
  for (int i = 0; i < n; i++)
#pragma unroll
    for (int j = 0; j < 4; j++)
      a[i * 4 + j] = s[j];
}
"""
    model = parse_source(src)
    assert not model.syntax_errors and model.function("k") is not None
    view = parser_view(src.encode())
    assert len(view) == len(src.encode()) and b"#pragma" not in view
    # In a comment or a string, nothing is masked.
    assert (
        parser_view(b'/*\n#pragma once\n*/ const char* s = "#pragma x";')
        == b'/*\n#pragma once\n*/ const char* s = "#pragma x";'
    )


def test_a_changed_pragma_in_host_code_is_still_a_scope_violation() -> None:
    base = """__global__ void k(float* a) { a[threadIdx.x] = 0; }
void host(float* a) {
    for (int i = 0; i < 4; i++)
#pragma unroll 2
        for (int j = 0; j < 4; j++) a[i] += j;
}
"""
    cand = base.replace("#pragma unroll 2", "#pragma unroll 4")
    got = check_scope(base, cand, ["k"])
    assert not got.ok and "outside the targeted kernels" in got.reason
    assert check_scope(base, base, ["k"]).ok
