// Classic "reduction #1": interleaved addressing in shared memory with the
// divergent test tid % (2*s) == 0; each block writes its partial sum.
#include <cuda_runtime.h>

#define BLOCK_SIZE 256

/* kernellsp
sizes = { N = 67108864 }
launch = { grid = "ceil_div(N, 256)", block = 256 }
tolerance = { rtol = 1e-4, atol = 1e-5, norm_rtol = 1e-5 }
shapes = [{ N = 1000 }, { N = 4097 }, { N = 257 }]
[args]
g_idata = { dtype = "f32", dir = "in", count = "N" }
g_odata = { dtype = "f32", dir = "out", count = "ceil_div(N, 256)" }
n = { value = "N" }
*/
__global__ void reduce0(const float *g_idata, float *g_odata, unsigned int n)
{
    __shared__ float sdata[BLOCK_SIZE];
    unsigned int tid = threadIdx.x;
    unsigned int i = blockIdx.x * blockDim.x + threadIdx.x;
    sdata[tid] = (i < n) ? g_idata[i] : 0.0f;
    __syncthreads();

    for (unsigned int s = 1; s < blockDim.x; s *= 2) {
        if (tid % (2 * s) == 0) {
            sdata[tid] += sdata[tid + s];
        }
        __syncthreads();
    }
    if (tid == 0) g_odata[blockIdx.x] = sdata[0];
}
