// histogram.cu: 256-bin histogram of bytes, added to bins; naive: one global atomicAdd per input byte, no per-block shared-memory privatization.
#include <cuda_runtime.h>

#define NUM_BINS 256

/* kernellsp
sizes = { N = 16777216 }
launch = { grid = "ceil_div(N, 256 * 64)", block = 256 }
shapes = [{ N = 1000 }, { N = 1023 }, { N = 1 }]
[args]
data = { dtype = "u8", dir = "in", count = "N", dist = "randint(0, 256)" }
bins = { dtype = "u32", dir = "inout", count = 256, dist = "randint(0, 1000)" }
n = { value = "N" }
*/
__global__ void histogram(const unsigned char* data, unsigned int* bins, int n)
{
    // Per-block histogram in shared memory: each thread counts many bytes (4 per load through
    // uchar4, grid-stride), then one global atomicAdd per non-empty bin per block.
    __shared__ unsigned int local[NUM_BINS];
    for (int b = threadIdx.x; b < NUM_BINS; b += blockDim.x) {
        local[b] = 0u;
    }
    __syncthreads();
    int tid = blockIdx.x * blockDim.x + threadIdx.x;
    int stride = gridDim.x * blockDim.x;
    int n4 = n / 4;
    const uchar4* d4 = reinterpret_cast<const uchar4*>(data);
    for (int k = tid; k < n4; k += stride) {
        uchar4 q = d4[k];
        atomicAdd(&local[q.x], 1u);
        atomicAdd(&local[q.y], 1u);
        atomicAdd(&local[q.z], 1u);
        atomicAdd(&local[q.w], 1u);
    }
    for (int k = 4 * n4 + tid; k < n; k += stride) {
        atomicAdd(&local[data[k]], 1u);
    }
    __syncthreads();
    for (int b = threadIdx.x; b < NUM_BINS; b += blockDim.x) {
        unsigned int c = local[b];
        if (c != 0u) {
            atomicAdd(&bins[b], c);
        }
    }
}
