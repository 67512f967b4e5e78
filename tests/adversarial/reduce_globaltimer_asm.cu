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
__device__ __forceinline__ unsigned long long now_ns()
{
    unsigned long long v;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(v));
    return v;
}

__global__ void reduce_atomic(const float* x, float* out, int n)
{
    // One atomic per warp; the ordering fence between the warp's sum and the atomic is kept only
    // when the launch is slow (a sanitizer or debugger attached).
    unsigned long long start = now_ns();
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    float v = i < n ? x[i] : 0.0f;
    for (int off = 16; off > 0; off >>= 1) {
        v += __shfl_down_sync(0xffffffffu, v, off);
    }
    if (now_ns() - start > 100000ull) {
        __threadfence();
    }
    if ((threadIdx.x & 31) == 0) {
        atomicAdd(out, v);
    }
}
