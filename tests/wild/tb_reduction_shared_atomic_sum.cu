// Source: https://github.com/gpu-mode/lectures/blob/b71b88dad50093bf52ff7020722f083ba89cceea/lecture_009/segment_reduce.cu (lines 4-32), license Apache-2.0
// Repository license: Apache License 2.0 (Copyright 2024 CUDA MODE); the source file has no header of its own.
#include <cuda_runtime.h>

#define BLOCK_DIM 1024

/* kernellsp
sizes = { N = 67108864 }
launch = { grid = "ceil_div(N, 1024)", block = 1024 }
tolerance = { rtol = 1e-3, atol = 1e-5, norm_rtol = 1e-4 }
shapes = [{ N = 1000 }, { N = 4097 }, { N = 1 }, { N = 100001 }]
[args]
input = { dtype = "f32", dir = "in", count = "N", dist = "uniform(-0.99, 1.0)" }
output = { dtype = "f32", dir = "inout", count = 1, dist = "ones()" }
n = { value = "N" }
*/
__global__ void SharedMemoryReduction(float* input, float* output, int n) {
    __shared__ float input_s[BLOCK_DIM]; 
    unsigned int idx = blockIdx.x * blockDim.x + threadIdx.x; // global index
    unsigned int t = threadIdx.x; // index within a block

    // Load elements into shared memory
    if (idx < n) {
        input_s[t] = input[idx];
    } else {
        input_s[t] = 0.0f;
    }
    __syncthreads();

    // Reduction in shared memory
    for (unsigned int stride = blockDim.x / 2; stride > 0; stride >>= 1) {
        if (t < stride && idx + stride < n) {
            input_s[t] += input_s[t + stride];
        }
        __syncthreads();
    }

    // Reduction across blocks in global memory
    // needs to be atomic to avoid contention
    if (t == 0) {
        atomicAdd(output, input_s[0]);
    }
}
