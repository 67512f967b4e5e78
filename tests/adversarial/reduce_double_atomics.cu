// reduce_atomic.cu: *out += sum(x); naive: every thread issues atomicAdd on the same global address, so all N atomics serialize in L2.
#include <cuda_runtime.h>

/* kernellsp
sizes = { N = 4194304 }
launch = { grid = "ceil_div(N, 256)", block = 256 }
tolerance = { rtol = 1e-3, atol = 1e-3 }
shapes = [{ N = 1000 }, { N = 1023 }, { N = 1 }]
[args]
x = { dtype = "f32", dir = "in", count = "N", dist = "uniform(0, 1)" }
out = { dtype = "f32", dir = "inout", count = 1, dist = "uniform(0, 1)" }
n = { value = "N" }
*/
__global__ void reduce_atomic(const float* x, float* out, int n)
{
    // Correct but slower: each element is added as two halves (0.5f * v is exact), so twice as many
    // atomics serialize on the same address.
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        float h = 0.5f * x[i];
        atomicAdd(out, h);
        atomicAdd(out, h);
    }
}
