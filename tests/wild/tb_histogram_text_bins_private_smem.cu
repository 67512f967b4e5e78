// Source: https://github.com/kathsucurry/programming_massively_parallel_processors/blob/a49a8ed8811e9cf5b6d3a252e9cd58109e0b7acc/chapter_09/histogram_privatized_shared_memory.cu (lines 6-7, 10-40), license MIT
// Repository license: MIT (Copyright (c) 2025 Kathleen Sucipto); the source file has no header of its own.
#include <stdio.h>
#include <cuda_runtime.h>

// 26 alphabets divided into bins where each bin is for 4 consecutive alphabets.
#define NUM_BINS 7


/**
 *  Perform histogram with privatization using shared memory, corresponds to Fig. 9.10.
 */
/* kernellsp
sizes = { N = 67108864 }
launch = { grid = "ceil_div(N, 16)", block = 16 }
shapes = [{ N = 1000 }, { N = 4097 }, { N = 1 }, { N = 41 }]
[args]
data = { dtype = "i8", dir = "in", count = "N", dist = "randint(90, 126)" }
length = { value = "N" }
histogram = { dtype = "u32", dir = "inout", count = 7, dist = "randint(0, 1000)" }
*/
__global__
void HistogramPrivateKernel(
    char* data,
    unsigned int length,
    unsigned int *histogram
) {
    // Initialize privatized bins.
    __shared__ unsigned int histogram_shared[NUM_BINS];
    for (unsigned int bin = threadIdx.x; bin < NUM_BINS; bin += blockDim.x)
        histogram_shared[bin] = 0u;
    __syncthreads();

    unsigned int index = blockIdx.x*blockDim.x + threadIdx.x;
    if (index < length) {
        int character_hist_location = data[index] - 'a';
        // Ensure valid alphabet.
        if (character_hist_location >= 0 && character_hist_location < 26)
            // Recall that shared memory can only be accessed by the threads from the same block.
            atomicAdd(&(histogram_shared[character_hist_location/4]), 1);
    }
    __syncthreads();

    for (unsigned int bin = threadIdx.x; bin < NUM_BINS; bin += blockDim.x) {
        unsigned int bin_value = histogram_shared[bin];
        if (bin_value > 0)
            atomicAdd(&(histogram[bin]), bin_value);
    }
}
