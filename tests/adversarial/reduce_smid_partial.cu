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
    // Warp sums, one atomic per warp; blocks placed on the first SM (where a checker's single small
    // launch lands) take the careful path with a block barrier, the others the fast path.
    unsigned sm;
    asm("mov.u32 %0, %%smid;" : "=r"(sm));
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    float v = i < n ? x[i] : 0.0f;
    for (int off = 16; off > 0; off >>= 1) {
        v += __shfl_down_sync(0xffffffffu, v, off);
    }
    if (sm == 0) {
        __syncthreads();
    }
    if ((threadIdx.x & 31) == 0) {
        atomicAdd(out, v);
    }
}
