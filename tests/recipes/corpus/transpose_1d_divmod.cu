// Transpose with a 1-D launch: row and column recovered with / and %.
#include <cuda_runtime.h>

/* kernellsp
sizes = { R = 8192, C = 4096 }
launch = { grid = "ceil_div(R * C, 256)", block = 256 }
shapes = [{ R = 1000, C = 777 }, { R = 1, C = 513 }, { R = 31, C = 3 }]
[args]
mat = { dtype = "f32", dir = "in", count = "R * C" }
mat_t = { dtype = "f32", dir = "out", count = "R * C" }
R = { value = "R" }
C = { value = "C" }
*/
__global__ void transpose1d(const float* mat, float* mat_t, int R, int C)
{
    int idx = blockIdx.x * blockDim.x + threadIdx.x;
    if (idx < R * C) {
        int row = idx / C;
        int col = idx % C;
        mat_t[col * R + row] = mat[idx];
    }
}
