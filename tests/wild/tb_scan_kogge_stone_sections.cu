// Source: https://github.com/kathsucurry/programming_massively_parallel_processors/blob/2f6f351d5910bd0bdf870de4f8ae9ba514fc2b7b/chapter_11/kogge_stone_inclusive.cu (lines 4-5, 10-41), license MIT
// Repository license: MIT (Copyright (c) 2025 Kathleen Sucipto); the source file has no header of its own.
#include <stdio.h>
#include <cuda_runtime.h>

#define SECTION_SIZE 32
#define BLOCK_SIZE SECTION_SIZE


/**
 *  Perform Kogge-Stone kernel for inclusive (segmented) scan, corresponds to Fig. 11.3.
 */
/* kernellsp
sizes = { N = 16777216 }
launch = { grid = "N // 32", block = 32 }
tolerance = { rtol = 1e-4, atol = 1e-5 }
shapes = [{ N = 32 }, { N = 4064 }, { N = 96 }]
[args]
input_array = { dtype = "f32", dir = "in", count = "N" }
output_array = { dtype = "f32", dir = "out", count = "N" }
size = { value = "N" }
*/
__global__
void KoggeStoneScanKernel(
    float* input_array,
    float* output_array,
    unsigned int size
) {
    __shared__ float shared_array[SECTION_SIZE];
    unsigned int global_index = blockIdx.x * blockDim.x + threadIdx.x;

    if (global_index < size)
        shared_array[threadIdx.x] = input_array[global_index];
    else
        shared_array[threadIdx.x] = 0.0f;

    for (unsigned int stride = 1; stride < blockDim.x; stride *= 2) {
        __syncthreads();

        float temp_value;
        if (threadIdx.x >= stride)
            temp_value = shared_array[threadIdx.x] + shared_array[threadIdx.x - stride];
        __syncthreads();

        if (threadIdx.x >= stride)
            shared_array[threadIdx.x] = temp_value;
    }

    if (global_index < size)
        output_array[global_index] = shared_array[threadIdx.x];
}
