// transpose_naive.cu: out (cols x rows) = transpose of in (rows x cols); naive: reads are coalesced but every store is strided by `rows` (uncoalesced), no shared-memory tile.
#include <cuda_runtime.h>

/* kernellsp
sizes = { ROWS = 4096, COLS = 4096 }
launch = { grid = ["ceil_div(COLS, 32)", "ceil_div(ROWS, 32)"], block = [32, 8] }
shapes = [{ ROWS = 1000, COLS = 777 }, { ROWS = 1, COLS = 1023 }, { ROWS = 33, COLS = 1 }]
[args]
in = { dtype = "f32", dir = "in", count = "ROWS * COLS" }
out = { dtype = "f32", dir = "out", count = "ROWS * COLS" }
rows = { value = "ROWS" }
cols = { value = "COLS" }
*/
__global__ void transpose_naive(const float* in, float* out, int rows, int cols)
{
    // 32x32 tile through shared memory (33 columns: no bank conflicts on the transposed read), each
    // thread moves 4 elements; both the global load and the global store are coalesced.
    __shared__ float tile[32][33];
    int x0 = blockIdx.x * 32;  // first column of `in` in this tile
    int y0 = blockIdx.y * 32;  // first row of `in` in this tile
    int x = x0 + threadIdx.x;
    for (int j = threadIdx.y; j < 32; j += 8) {
        int y = y0 + j;
        if (x < cols && y < rows) {
            tile[j][threadIdx.x] = in[y * cols + x];
        }
    }
    __syncthreads();
    int oy = y0 + threadIdx.x;  // row of `in` = column of `out`
    for (int j = threadIdx.y; j < 32; j += 8) {
        int ox = x0 + j;  // column of `in` = row of `out`
        if (ox < cols && oy < rows) {
            out[ox * rows + oy] = tile[threadIdx.x][j];
        }
    }
}
