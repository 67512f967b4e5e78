// rowsum_naive.cu: out[r] = sum of row r of a rows x cols matrix; naive: one thread per row, so the threads of a
// warp read addresses cols floats apart (uncoalesced).
#include <cuda_runtime.h>

/* kernellsp
sizes = { ROWS = 16384, COLS = 2048 }
launch = { grid = "ceil_div(ROWS, 8)", block = 256 }
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
    // One warp per row: lanes read consecutive elements (coalesced) and a shuffle tree adds the 32 partial sums.
    int lane = threadIdx.x & 31;
    int row = blockIdx.x * (blockDim.x >> 5) + (threadIdx.x >> 5);
    if (row >= rows) return;  // uniform per warp
    const float* xr = x + (size_t)row * cols;
    float s = 0.0f;
    for (int j = lane; j < cols; j += 32) {
        s += xr[j];
    }
#pragma unroll
    for (int off = 16; off > 0; off >>= 1) {
        s += __shfl_xor_sync(0xffffffffu, s, off);
    }
    if (lane == 0) out[row] = s;
}
