// y = A * x with A row-major (rows x cols), one thread per row: each thread
// walks its own row, so a warp's loads are cols floats apart.
#include <cuda_runtime.h>

/* kernellsp
sizes = { ROWS = 8192, COLS = 8192 }
launch = { grid = "ceil_div(ROWS, 256)", block = 256 }
tolerance = { rtol = 1e-3, atol = 1e-4, norm_rtol = 1e-5 }
shapes = [{ ROWS = 1000, COLS = 100 }, { ROWS = 3, COLS = 4097 }, { ROWS = 257, COLS = 1 }]
[args]
A = { dtype = "f32", dir = "in", count = "ROWS * COLS" }
x = { dtype = "f32", dir = "in", count = "COLS" }
y = { dtype = "f32", dir = "out", count = "ROWS" }
rows = { value = "ROWS" }
cols = { value = "COLS" }
*/
__global__ void gemv_rowwise(const float* A, const float* x, float* y, int rows, int cols)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < rows) {
        float dot = 0.0f;
        for (int j = 0; j < cols; j++) {
            dot += A[i * cols + j] * x[j];
        }
        y[i] = dot;
    }
}
