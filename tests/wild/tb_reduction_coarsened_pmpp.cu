// Source: https://github.com/kathsucurry/programming_massively_parallel_processors/blob/a04ff7af2721656def2e3f8ea61412d301e1844f/chapter_10/sum_reduction_thread_coarsening.cu (lines 5-6, 9-38), license MIT
// Repository license: MIT (Copyright (c) 2025 Kathleen Sucipto); the source file has no header of its own.
#include <stdio.h>
#include <cuda_runtime.h>

#define BLOCK_SIZE 1024
#define COARSE_FACTOR 2


/**
 *  Perform multiblock sum reduction with thread coarsening, corresponds to Fig. 10.15.
 * 
 *  Note: it only works for input arrays with length of the power of two.
 */
/* kernellsp
sizes = { N = 67108864 }
launch = { grid = "ceil_div(N, 2 * 1024 * 2)", block = 1024 }
tolerance = { rtol = 1e-3, atol = 1e-5, norm_rtol = 1e-4 }
shapes = [{ N = 4096 }, { N = 12288 }, { N = 40960 }]
[args]
input_array = { dtype = "f32", dir = "in", count = "N", dist = "uniform(-0.99, 1.0)" }
output_value = { dtype = "f32", dir = "inout", count = 1, dist = "ones()" }
*/
__global__
void CoarsenedSumReduction(
    float* input_array,
    float* output_value
) {
    __shared__ float input_shared[BLOCK_SIZE];
    // Each block processes COARSE_FACTOR * 2 * blockDim.x * COARSE_FACTOR;
    unsigned int segment = COARSE_FACTOR*2*blockDim.x*blockIdx.x;
    unsigned int index = segment + threadIdx.x;
    unsigned int shared_index = threadIdx.x;

    float sum = input_array[index];
    for (unsigned int tile = 1; tile < COARSE_FACTOR*2; ++tile)
        sum += input_array[index + tile*BLOCK_SIZE];
    input_shared[shared_index] = sum;

    for (unsigned int stride = blockDim.x/2; stride >= 1; stride/=2) {
        __syncthreads();
        if (shared_index < stride) 
            input_shared[shared_index] += input_shared[shared_index + stride];
    }
    if (shared_index == 0) {
        atomicAdd(output_value, input_shared[0]);
    }
}
