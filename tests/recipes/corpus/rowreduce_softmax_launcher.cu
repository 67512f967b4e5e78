// Row-wise softmax behind solve(): one thread per row, three passes over the
// row (max, sum of exp, normalise), exp recomputed in the last pass.
#include <cuda_runtime.h>
#include <math.h>

__global__ void softmax_rows(const float* input, float* output, int N, int D)
{
    int row = blockIdx.x * blockDim.x + threadIdx.x;
    if (row < N) {
        const float* x = input + (size_t)row * D;
        float* y = output + (size_t)row * D;
        float m = -INFINITY;
        for (int j = 0; j < D; j++) m = fmaxf(m, x[j]);
        float s = 0.0f;
        for (int j = 0; j < D; j++) s += expf(x[j] - m);
        for (int j = 0; j < D; j++) y[j] = expf(x[j] - m) / s;
    }
}

/* kernellsp
sizes = { ROWS = 16384, COLS = 1024 }
tolerance = { rtol = 1e-3, atol = 1e-6, norm_rtol = 1e-4 }
shapes = [{ ROWS = 1000, COLS = 100 }, { ROWS = 33, COLS = 1023 }, { ROWS = 3, COLS = 2 }]
[args]
input = { dtype = "f32", dir = "in", count = "ROWS * COLS", dist = "normal(0, 3)" }
output = { dtype = "f32", dir = "out", count = "ROWS * COLS" }
N = { value = "ROWS" }
D = { value = "COLS" }
*/
extern "C" void solve(const float* input, float* output, int N, int D)
{
    int threads = 128;
    int blocks = (N + threads - 1) / threads;
    softmax_rows<<<blocks, threads>>>(input, output, N, D);
}
