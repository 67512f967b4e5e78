// Transpose with the size arguments in (cols, rows) order and threadIdx.x
// mapped to the input *row*: the loads are strided, the stores contiguous.
#include <cuda_runtime.h>

/* kernellsp
sizes = { ROWS = 4096, COLS = 8192 }
launch = { grid = ["ceil_div(ROWS, 16)", "ceil_div(COLS, 16)"], block = [16, 16] }
shapes = [{ ROWS = 1000, COLS = 777 }, { ROWS = 17, COLS = 1 }, { ROWS = 1, COLS = 33 }]
[args]
out = { dtype = "f32", dir = "out", count = "ROWS * COLS" }
in = { dtype = "f32", dir = "in", count = "ROWS * COLS" }
cols = { value = "COLS" }
rows = { value = "ROWS" }
*/
__global__ void transpose_kernel(float* out, const float* in, int cols, int rows)
{
    int r = blockIdx.x * blockDim.x + threadIdx.x;  // row of `in`
    int c = blockIdx.y * blockDim.y + threadIdx.y;  // column of `in`
    if (r < rows && c < cols) {
        out[c * rows + r] = in[r * cols + c];
    }
}
