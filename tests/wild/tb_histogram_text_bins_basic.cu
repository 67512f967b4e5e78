// Source: https://github.com/kathsucurry/programming_massively_parallel_processors/blob/a49a8ed8811e9cf5b6d3a252e9cd58109e0b7acc/chapter_09/histogram.cu (lines 8-24), license MIT
// Repository license: MIT (Copyright (c) 2025 Kathleen Sucipto); the source file has no header of its own.
#include <stdio.h>
#include <cuda_runtime.h>


/**
 *  Perform basic histogram, corresponds to Fig. 9.6.
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
void HistogramKernel(
    char* data,
    unsigned int length,
    unsigned int *histogram
) {
    unsigned int index = blockIdx.x*blockDim.x + threadIdx.x;
    if (index < length) {
        int character_hist_location = data[index] - 'a';
        // Ensure valid alphabet.
        if (character_hist_location >= 0 && character_hist_location < 26)
            atomicAdd(&(histogram[character_hist_location/4]), 1);
    }
}
