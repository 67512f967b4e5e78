// Source: https://github.com/kathsucurry/programming_massively_parallel_processors/blob/120835c0e39350ab96c46ef6ab362352c272945e/chapter_16/src/kernel_functions.cu (lines 79-125), license MIT
// TILE_WIDTH and pooling_type from chapter_16/src/kernel_functions.cuh (lines 7, 10, same commit).
// Repository license: MIT (Copyright (c) 2025 Kathleen Sucipto); the source file has no header of its own.
#include <cuda_runtime.h>
#include <stdint.h>

#define TILE_WIDTH 32

enum pooling_type { MAX, MEAN };


/**
 * Perform either max or mean pooling forward layer.
 * 
 * For now, assume that the stride is always kernel_length and the input width & height
 * are always divisible by kernel_length.
 */
/* kernellsp
sizes = { NS = 32, C = 64, IH = 128, IW = 128, K = 2 }
launch = { grid = ["C", "ceil_div(IW // K, 32) * ceil_div(IH // K, 32)", "NS"], block = [32, 32] }
tolerance = { rtol = 1e-5, atol = 1e-6 }
shapes = [{ NS = 3, C = 5, IH = 66, IW = 34, K = 2 }, { NS = 1, C = 1, IH = 9, IW = 27, K = 3 }, { NS = 2, C = 3, IH = 4, IW = 4, K = 4 }]
[args]
X = { dtype = "f32", dir = "in", count = "NS * C * IH * IW", dist = "uniform(0, 1)" }
Y = { dtype = "f32", dir = "out", count = "NS * C * (IH // K) * (IW // K)" }
pool_type = { value = 0 }
kernel_length = { value = "K" }
grid_height = { value = "ceil_div(IH // K, 32)" }
grid_width = { value = "ceil_div(IW // K, 32)" }
in_height = { value = "IH" }
in_width = { value = "IW" }
out_height = { value = "IH // K" }
out_width = { value = "IW // K" }
*/
__global__ void PoolForwardKernel(
    float *X, float *Y,
    pooling_type pool_type,
    uint32_t kernel_length,
    uint32_t grid_height, uint32_t grid_width,
    uint32_t in_height, uint32_t in_width,
    uint32_t out_height, uint32_t out_width
) {
    uint32_t num_channel_idx = blockIdx.x;
    uint32_t out_height_idx  = (blockIdx.y / grid_width)*TILE_WIDTH + threadIdx.y;
    uint32_t out_width_idx   = (blockIdx.y % grid_width)*TILE_WIDTH + threadIdx.x;
    uint32_t sample_idx      = blockIdx.z;
    uint32_t num_channels = gridDim.x;

    if (out_height_idx >= out_height || out_width_idx >= out_width)
        return;
    
    float value = 0.0f;
    for (uint32_t k_row = 0; k_row < kernel_length; ++k_row)
        for (uint32_t k_col = 0; k_col < kernel_length; ++k_col) {
            uint32_t in_row = kernel_length * out_height_idx + k_row;
            uint32_t in_col = kernel_length * out_width_idx + k_col;
            
            uint32_t X_idx = (sample_idx * num_channels * in_height * in_width) + 
                (num_channel_idx * in_height * in_width) + 
                (in_row * in_width) + 
                in_col;
            
            if (pool_type == MAX) {
                value = max(value, X[X_idx]);
            } else {
                value += (X[X_idx] / (kernel_length * kernel_length));
            }
        }

    uint32_t Y_idx = (sample_idx * num_channels * out_height * out_width) + 
            (num_channel_idx * out_height * out_width) +
            (out_height_idx * out_width) +
            out_width_idx;
    Y[Y_idx] = value;
}
