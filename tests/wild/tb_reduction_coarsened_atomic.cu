// Source: https://github.com/gpu-mode/lectures/blob/838fd2dce3b9f4ee379782fcb065ef6131fadd0e/lecture_009/reduce_coarsening.cu (lines 4-37), license Apache-2.0
// Repository license: Apache License 2.0 (Copyright 2024 CUDA MODE); the source file has no header of its own.
#include <cuda_runtime.h>

#define BLOCK_DIM 1024
#define COARSE_FACTOR 2

/* kernellsp
sizes = { N = 67108864 }
launch = { grid = "ceil_div(N, 2048)", block = 1024 }
tolerance = { rtol = 1e-3, atol = 1e-5, norm_rtol = 1e-4 }
shapes = [{ N = 1000 }, { N = 4097 }, { N = 1 }, { N = 10000 }]
[args]
input = { dtype = "f32", dir = "in", count = "N", dist = "uniform(-0.99, 1.0)" }
output = { dtype = "f32", dir = "inout", count = 1, dist = "ones()" }
size = { value = "N" }
*/
__global__ void CoarsenedReduction(float* input, float* output, int size) {
    __shared__ float input_s[BLOCK_DIM];

    unsigned int i = blockIdx.x * blockDim.x * COARSE_FACTOR + threadIdx.x;
    unsigned int t = threadIdx.x;
    float sum = 0.0f;

    // Reduce within a thread
    for (unsigned int tile = 0; tile < COARSE_FACTOR; ++tile) {
        unsigned int index = i + tile * blockDim.x;
        if (index < size) {
            sum += input[index];
        }
    }

    input_s[t] = sum;
    __syncthreads();
    
    //Reduce within a block
    for (unsigned int stride = blockDim.x / 2; stride > 0; stride >>= 1) {
        if (t < stride) {
            input_s[t] += input_s[t + stride];
        }
        __syncthreads();
    }

    //Reduce over blocks
    if (t == 0) {
        atomicAdd(output, input_s[0]);
    }
}
