// rowsum_naive.cu: out[r] = sum of row r of a rows x cols matrix; naive: one thread per row, so the threads of a
// warp read addresses cols floats apart (uncoalesced).
#include <cuda_runtime.h>

/* kernellsp
sizes = { ROWS = 16384, COLS = 2048 }
launch = { grid = "ceil_div(ROWS, 128)", block = 128 }
tolerance = { rtol = 1e-4, atol = 1e-3 }
shapes = [{ ROWS = 1000, COLS = 100 }, { ROWS = 33, COLS = 1023 }, { ROWS = 1, COLS = 1 }]
[args]
x = { dtype = "f32", dir = "in", count = "ROWS * COLS", dist = "uniform(-1, 1)" }
out = { dtype = "f32", dir = "out", count = "ROWS" }
rows = { value = "ROWS" }
cols = { value = "COLS" }
*/
__global__ void rowsum(const float* x, float* out, int rows, int cols)
{
    int row = blockIdx.x * blockDim.x + threadIdx.x;
    if (row >= rows) return;
    float s = 0.0f;
    for (int j = 0; j < cols; ++j) {
        s += x[(size_t)row * cols + j];
    }
    out[row] = s;
}
