// Max of each row (e.g. for a later stable softmax); row index from the y
// dimension of the grid: blockIdx.y * blockDim.y + threadIdx.y, blockDim.x == 1.
#include <cuda_runtime.h>
#include <float.h>

/* kernellsp
sizes = { ROWS = 8192, COLS = 4096 }
launch = { grid = [1, "ceil_div(ROWS, 128)"], block = [1, 128] }
shapes = [{ ROWS = 1000, COLS = 100 }, { ROWS = 3, COLS = 4097 }, { ROWS = 200, COLS = 1 }]
[args]
a = { dtype = "f32", dir = "in", count = "ROWS * COLS", dist = "normal(0, 10)" }
row_max = { dtype = "f32", dir = "out", count = "ROWS" }
rows = { value = "ROWS" }
cols = { value = "COLS" }
*/
__global__ void rowmax_kernel(const float* a, float* row_max, int rows, int cols)
{
    int r = blockIdx.y * blockDim.y + threadIdx.y;
    if (r >= rows) return;
    float m = -FLT_MAX;
    for (int c = 0; c < cols; ++c) {
        m = fmaxf(m, a[(size_t)r * cols + c]);
    }
    row_max[r] = m;
}
