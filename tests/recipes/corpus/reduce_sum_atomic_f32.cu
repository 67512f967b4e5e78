// Global sum with one atomicAdd per element into a single address.
// unsigned int index. The input has a small positive mean so that any
// summation order lands within the tolerance of the reference.
#include <cuda_runtime.h>

/* kernellsp
sizes = { N = 67108864 }
launch = { grid = "ceil_div(N, 256)", block = 256 }
tolerance = { rtol = 1e-3, atol = 1e-3, norm_rtol = 1e-3 }
shapes = [{ N = 1000 }, { N = 4097 }, { N = 1 }]
[args]
input = { dtype = "f32", dir = "in", count = "N", dist = "uniform(-0.99, 1.0)" }
total = { dtype = "f32", dir = "inout", count = 1, dist = "uniform(1, 2)" }
n = { value = "N" }
*/
__global__ void sum_atomic(const float *input, float *total, unsigned int n)
{
    unsigned int idx = blockIdx.x * blockDim.x + threadIdx.x;
    if (idx < n) {
        atomicAdd(total, input[idx]);
    }
}
