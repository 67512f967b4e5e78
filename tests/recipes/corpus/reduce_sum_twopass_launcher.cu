// Sum of a float array behind solve(): pass 1 reduces each block in dynamic
// shared memory (interleaved addressing, index = 2*s*tid: bank conflicts) into
// a temporary array of partials; pass 2 is a single thread adding the partials.
#include <cuda_runtime.h>

__global__ void block_sum(const float* in, float* partial, int n)
{
    extern __shared__ float sdata[];
    int tid = threadIdx.x;
    int i = blockIdx.x * blockDim.x + tid;
    sdata[tid] = 0.0f;
    if (i < n) sdata[tid] = in[i];
    __syncthreads();
    for (int s = 1; s < blockDim.x; s <<= 1) {
        int index = 2 * s * tid;
        if (index < blockDim.x) {
            sdata[index] += sdata[index + s];
        }
        __syncthreads();
    }
    if (tid == 0) partial[blockIdx.x] = sdata[0];
}

__global__ void final_sum(const float* partial, float* out, int m)
{
    if (blockIdx.x == 0 && threadIdx.x == 0) {
        float s = 0.0f;
        for (int j = 0; j < m; ++j) s += partial[j];
        *out = s;
    }
}

/* kernellsp
sizes = { N = 67108864 }
tolerance = { rtol = 1e-3, atol = 1e-3, norm_rtol = 1e-3 }
shapes = [{ N = 1000 }, { N = 4097 }, { N = 1 }]
[args]
input = { dtype = "f32", dir = "in", count = "N", dist = "uniform(-0.99, 1.0)" }
output = { dtype = "f32", dir = "out", count = 1 }
N = { value = "N" }
*/
extern "C" void solve(const float* input, float* output, int N)
{
    int threads = 512;
    int blocks = (N + threads - 1) / threads;
    float* d_partial = nullptr;
    cudaMalloc(&d_partial, blocks * sizeof(float));
    block_sum<<<blocks, threads, threads * sizeof(float)>>>(input, d_partial, N);
    final_sum<<<1, 1>>>(d_partial, output, blocks);
    cudaDeviceSynchronize();
    cudaFree(d_partial);
}
