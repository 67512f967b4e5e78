// gelu_rows.cu: y = GELU(x) (tanh form) over a rows x cols matrix; naive: one thread per row, so the threads of
// a warp touch addresses cols floats apart (uncoalesced loads and stores).
#include <cuda_runtime.h>
#include <math.h>

/* kernellsp
sizes = { ROWS = 16384, COLS = 1024 }
launch = { grid = "ceil_div(ROWS * COLS, 256)", block = 256 }
tolerance = { rtol = 1e-3, atol = 1e-5 }
shapes = [{ ROWS = 1000, COLS = 100 }, { ROWS = 33, COLS = 1023 }, { ROWS = 1, COLS = 1 }]
[args]
x = { dtype = "f32", dir = "in", count = "ROWS * COLS", dist = "normal(0, 2)" }
y = { dtype = "f32", dir = "out", count = "ROWS * COLS" }
rows = { value = "ROWS" }
cols = { value = "COLS" }
*/
__global__ void gelu_rows(const float* x, float* y, int rows, int cols)
{
    // One thread per element: consecutive threads, consecutive addresses (coalesced).
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= (size_t)rows * cols) return;
    float v = x[i];
    float inner = 0.7978845608f * (v + 0.044715f * v * v * v);
    y[i] = 0.5f * v * (1.0f + tanhf(inner));
}
