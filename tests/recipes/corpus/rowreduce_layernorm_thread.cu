// LayerNorm with one thread per row: mean pass, variance pass, normalise pass
// (three sweeps of the row from global memory). eps is an argument.
#include <cuda_runtime.h>
#include <math.h>

/* kernellsp
sizes = { ROWS = 16384, COLS = 1024 }
launch = { grid = "ceil_div(ROWS, 128)", block = 128 }
tolerance = { rtol = 1e-3, atol = 1e-4, norm_rtol = 1e-4 }
shapes = [{ ROWS = 1000, COLS = 100 }, { ROWS = 7, COLS = 1001 }, { ROWS = 129, COLS = 2 }]
[args]
x = { dtype = "f32", dir = "in", count = "ROWS * COLS", dist = "normal(1, 2)" }
y = { dtype = "f32", dir = "out", count = "ROWS * COLS" }
gamma = { dtype = "f32", dir = "in", count = "COLS", dist = "uniform(0.5, 1.5)" }
beta = { dtype = "f32", dir = "in", count = "COLS" }
rows = { value = "ROWS" }
cols = { value = "COLS" }
eps = { value = 1e-5 }
*/
__global__ void layernorm_rows(const float* x, float* y, const float* gamma, const float* beta,
                               int rows, int cols, float eps)
{
    int r = blockIdx.x * blockDim.x + threadIdx.x;
    if (r < rows) {
        float mean = 0.0f;
        for (int c = 0; c < cols; c++) mean += x[r * cols + c];
        mean /= cols;
        float var = 0.0f;
        for (int c = 0; c < cols; c++) {
            float d = x[r * cols + c] - mean;
            var += d * d;
        }
        var /= cols;
        float rstd = 1.0f / sqrtf(var + eps);
        for (int c = 0; c < cols; c++) {
            y[r * cols + c] = (x[r * cols + c] - mean) * rstd * gamma[c] + beta[c];
        }
    }
}
