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
    // A shared-memory tree reduction; on large inputs its last six steps are the old warp-synchronous
    // idiom without __syncwarp: a data race under independent thread scheduling (Volta and later) that
    // usually still gives the right sum. Small inputs take a synchronised path, so racecheck on the
    // smallest shape alone finds nothing.
    __shared__ float s[256];
    int tid = threadIdx.x;
    int i = blockIdx.x * blockDim.x + tid;
    s[tid] = i < n ? x[i] : 0.0f;
    __syncthreads();
    for (int stride = blockDim.x / 2; stride > 32; stride >>= 1) {
        if (tid < stride) {
            s[tid] += s[tid + stride];
        }
        __syncthreads();
    }
    if (n >= (1 << 20)) {
        if (tid < 32) {
            volatile float* v = s;
            v[tid] += v[tid + 32];
            v[tid] += v[tid + 16];
            v[tid] += v[tid + 8];
            v[tid] += v[tid + 4];
            v[tid] += v[tid + 2];
            v[tid] += v[tid + 1];
        }
    } else {
        for (int stride = 32; stride > 0; stride >>= 1) {
            if (tid < stride) {
                s[tid] += s[tid + stride];
            }
            __syncthreads();
        }
    }
    if (tid == 0) {
        atomicAdd(out, s[0]);
    }
}
