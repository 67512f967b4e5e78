// softmax_row.cu: row-wise softmax of a rows x cols matrix; naive: one thread per row (strided, uncoalesced loads), three passes over the row, exp recomputed, and a double literal (1.0 / sum) pulls fp64 math into the inner loop.
#include <cuda_runtime.h>
#include <math.h>

/* kernellsp
sizes = { ROWS = 16384, COLS = 1024 }
launch = { grid = "ceil_div(ROWS, BLOCK // 32)", block = "BLOCK" }
tolerance = { rtol = 1e-3, atol = 1e-6 }
shapes = [{ ROWS = 1000, COLS = 100 }, { ROWS = 33, COLS = 1023 }, { ROWS = 1, COLS = 1 }]
tunables = { BLOCK = [256, 128, 64, 32] }
[args]
x = { dtype = "f32", dir = "in", count = "ROWS * COLS", dist = "normal(0, 3)" }
y = { dtype = "f32", dir = "out", count = "ROWS * COLS" }
rows = { value = "ROWS" }
cols = { value = "COLS" }
*/
__global__ void softmax_row(const float* x, float* y, int rows, int cols)
{
    // One warp per row: lanes read consecutive elements (coalesced), max and sum are reduced with
    // warp shuffles, and every literal is fp32 (1.0f / sum), so no fp64 math is left.
    int lane = threadIdx.x & 31;
    int row = blockIdx.x * (blockDim.x >> 5) + (threadIdx.x >> 5);
    if (row >= rows) return;  // uniform per warp
    const float* xr = x + (size_t)row * cols;
    float* yr = y + (size_t)row * cols;

    float row_max = -INFINITY;
    for (int j = lane; j < cols; j += 32) {
        row_max = fmaxf(row_max, xr[j]);
    }
#pragma unroll
    for (int off = 16; off > 0; off >>= 1) {
        row_max = fmaxf(row_max, __shfl_xor_sync(0xffffffffu, row_max, off));
    }

    // The exponentials go to y once and are scaled there: each lane reads back only what it wrote itself.
    float sum = 0.0f;
    for (int j = lane; j < cols; j += 32) {
        float e = expf(xr[j] - row_max);
        yr[j] = e;
        sum += e;
    }
#pragma unroll
    for (int off = 16; off > 0; off >>= 1) {
        sum += __shfl_xor_sync(0xffffffffu, sum, off);
    }
    float inv = 1.0f / sum;
    for (int j = lane; j < cols; j += 32) {
        yr[j] *= inv;
    }
}
