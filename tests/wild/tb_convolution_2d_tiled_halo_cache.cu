// Source: https://github.com/kathsucurry/programming_massively_parallel_processors/blob/a49a8ed8811e9cf5b6d3a252e9cd58109e0b7acc/chapter_07/convolution_2d_tiled_cached_halo.cu (lines 4-66), license MIT
// Repository license: MIT (Copyright (c) 2025 Kathleen Sucipto); the source file has no header of its own.
#include <stdio.h>
#include <cuda_runtime.h>

#define BLOCK_SIZE 4
#define FILTER_RADIUS 1

#define TILE_DIM BLOCK_SIZE

// Declare the filter array that utilizes constant memory.
__constant__ float CONST_FILTER[2*FILTER_RADIUS+1][2*FILTER_RADIUS+1];


/**
 *  Perform tiled 2D convolution with caching for halos; corresponds to figure 7.15.
 */
__global__
void Convolution2DTiledKernelWithHaloCaching(
    float* input_array,
    float* output_array,
    int width,
    int height
) {
    int col = blockIdx.x * TILE_DIM + threadIdx.x;
    int row = blockIdx.y * TILE_DIM + threadIdx.y;
    
    // Load input tile.
    __shared__ float shared_array[TILE_DIM][TILE_DIM];
    // No need to check if row/col >=0 since they will always be positive.
    if (row < height && col < width)
        shared_array[threadIdx.y][threadIdx.x] = input_array[row * width + col];
    else
        shared_array[threadIdx.y][threadIdx.x] = 0.0f;
    
    __syncthreads();

    // Calculate output elements.
    // Turn off the threads at the edges of the block.
    if (!(col < width && row < height))
        return;

    float out_value = 0.0f;
    for (int conv_row = -FILTER_RADIUS; conv_row <= FILTER_RADIUS; ++conv_row) {
        for (int conv_col = -FILTER_RADIUS; conv_col <= FILTER_RADIUS; ++conv_col) {
            // Obtain the cell index of the filter.
            int filter_row = conv_row + FILTER_RADIUS;
            int filter_col = conv_col + FILTER_RADIUS;

            // Check for halo cells.
            if (threadIdx.x + conv_col >= 0 &&
                threadIdx.x + conv_col < TILE_DIM &&
                threadIdx.y + conv_row >= 0 &&
                threadIdx.y + conv_row < TILE_DIM) {
                    out_value += CONST_FILTER[filter_row][filter_col] * shared_array[threadIdx.y + conv_row][threadIdx.x + conv_col];
            } else {
                // Check for boundary edges.
                if (row + conv_row >= 0 &&
                    row + conv_row < height &&
                    col + conv_col >=0 &&
                    col + conv_col < width) {
                        out_value += CONST_FILTER[filter_row][filter_col] * input_array[(row + conv_row)* width + col + conv_col];
                }
            }
        }
    }
    output_array[row * width + col] = out_value;
}

// Launcher written for the corpus from runConvolution2D (source lines 69-106): the 3x3 filter goes to
// constant memory, then the original <<<(ceil(width / 4.0), ceil(height / 4.0)), (4, 4)>>> launch.
/* kernellsp
sizes = { W = 4096, H = 4096 }
tolerance = { rtol = 1e-5, atol = 1e-5 }
shapes = [{ W = 1000, H = 77 }, { W = 33, H = 65 }, { W = 1, H = 3 }, { W = 5, H = 6 }]
[args]
input_array = { dtype = "f32", dir = "in", count = "W * H" }
filter = { dtype = "f32", dir = "in", count = 9 }
output_array = { dtype = "f32", dir = "out", count = "W * H" }
width = { value = "W" }
height = { value = "H" }
*/
extern "C" void solve(float* input_array, float* filter, float* output_array, int width, int height)
{
    size_t size_filter = (2*FILTER_RADIUS+1) * (2*FILTER_RADIUS+1) * sizeof(float);
    cudaMemcpyToSymbol(CONST_FILTER, filter, size_filter, 0, cudaMemcpyDeviceToDevice);

    dim3 dimBlock(BLOCK_SIZE, BLOCK_SIZE);
    dim3 dimGrid(ceil(width / (TILE_DIM * 1.0)), ceil(height / (TILE_DIM * 1.0)));
    Convolution2DTiledKernelWithHaloCaching<<<dimGrid, dimBlock>>>(
        input_array,
        output_array,
        width,
        height
    );
}
