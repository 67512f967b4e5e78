// Mean of each row (feature averaging), one thread per row, size_t sizes.
#include <cuda_runtime.h>

/* kernellsp
sizes = { M = 8192, N = 4096 }
launch = { grid = "ceil_div(M, 256)", block = 256 }
tolerance = { rtol = 1e-3, atol = 1e-5, norm_rtol = 1e-5 }
shapes = [{ M = 1000, N = 100 }, { M = 5, N = 4097 }, { M = 257, N = 2 }]
[args]
M_ptr = { dtype = "f32", dir = "in", count = "M * N", dist = "uniform(0, 10)" }
avg = { dtype = "f32", dir = "out", count = "M" }
m = { value = "M" }
n = { value = "N" }
*/
__global__ void row_mean(const float* M_ptr, float* avg, size_t m, size_t n)
{
    size_t i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < m) {
        float total = 0.0f;
        for (size_t j = 0; j < n; j++) {
            total += M_ptr[i * n + j];
        }
        avg[i] = total / n;
    }
}
