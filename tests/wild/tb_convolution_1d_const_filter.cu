// Source: https://github.com/kathsucurry/programming_massively_parallel_processors/blob/a49a8ed8811e9cf5b6d3a252e9cd58109e0b7acc/chapter_07/convolution_1d.cu (lines 4-38), license MIT
// Repository license: MIT (Copyright (c) 2025 Kathleen Sucipto); the source file has no header of its own.
#include <stdio.h>
#include <cuda_runtime.h>

#define BLOCK_SIZE 4
#define FILTER_RADIUS 1

// Declare the filter array that utilizes constant memory.
__constant__ float CONST_FILTER[2*FILTER_RADIUS+1];


/**
 *  Perform 1D convolution.
 */
__global__
void Convolution1DBasicKernel(
    float* input_array,
    float* output_array,
    int radius,
    int length
) {
    int out_index = blockIdx.x * blockDim.x + threadIdx.x;
    float out_value = 0.0f;

    for (int conv_index = -radius; conv_index < radius+1; conv_index++) {
        // Obtain the index of the input array.
        int input_index = out_index + conv_index;

        // Obtain the index of the filter.
        int filter_index = conv_index + radius;

        // Check the boundary.
        if (input_index >= 0 && input_index < length) {
            out_value += CONST_FILTER[filter_index]*input_array[input_index];
        }
    }

    output_array[out_index] = out_value;
}

// Launcher written for the corpus from runConvolution1D (source lines 41-78): the filter goes to
// constant memory, then the original <<<ceil(length / 4.0), 4>>> launch with radius FILTER_RADIUS.
/* kernellsp
sizes = { N = 16777216 }
tolerance = { rtol = 1e-5, atol = 1e-5 }
shapes = [{ N = 1000 }, { N = 4100 }, { N = 4 }, { N = 36 }]
[args]
input_array = { dtype = "f32", dir = "in", count = "N" }
filter = { dtype = "f32", dir = "in", count = 3 }
output_array = { dtype = "f32", dir = "out", count = "N" }
length = { value = "N" }
*/
extern "C" void solve(float* input_array, float* filter, float* output_array, int length)
{
    cudaMemcpyToSymbol(CONST_FILTER, filter, (2*FILTER_RADIUS+1) * sizeof(float), 0, cudaMemcpyDeviceToDevice);

    dim3 dimBlock(BLOCK_SIZE);
    dim3 dimGrid(ceil(length / (BLOCK_SIZE * 1.0)));
    Convolution1DBasicKernel<<<dimGrid, dimBlock>>>(
        input_array,
        output_array,
        FILTER_RADIUS,
        length
    );
}
