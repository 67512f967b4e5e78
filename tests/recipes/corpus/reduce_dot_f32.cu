// Dot product: each thread multiplies one pair and atomically adds it to a
// single float (map then reduce).
#include <cuda_runtime.h>

/* kernellsp
sizes = { N = 16777216 }
launch = { grid = "ceil_div(N, 256)", block = 256 }
tolerance = { rtol = 1e-3, atol = 1e-3, norm_rtol = 1e-3 }
shapes = [{ N = 1000 }, { N = 4097 }, { N = 3 }]
[args]
a = { dtype = "f32", dir = "in", count = "N", dist = "uniform(-0.95, 1.0)" }
b = { dtype = "f32", dir = "in", count = "N", dist = "uniform(0.5, 1.5)" }
result = { dtype = "f32", dir = "inout", count = 1, dist = "uniform(0.5, 1.5)" }
n = { value = "N" }
*/
__global__ void dot_atomic(const float* a, const float* b, float* result, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        atomicAdd(result, a[i] * b[i]);
    }
}
