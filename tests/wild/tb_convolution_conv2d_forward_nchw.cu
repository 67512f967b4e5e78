// Source: https://github.com/kathsucurry/programming_massively_parallel_processors/blob/120835c0e39350ab96c46ef6ab362352c272945e/chapter_16/src/kernel_functions.cu (lines 7-51), license MIT
// TILE_WIDTH from chapter_16/src/kernel_functions.cuh (line 7, same commit).
// Repository license: MIT (Copyright (c) 2025 Kathleen Sucipto); the source file has no header of its own.
#include <cuda_runtime.h>
#include <stdint.h>

#define TILE_WIDTH 32


/**
 * (Not optimized) Conv2 kernel implementation, following the method in chapter 16.3 (Fig. 16.13,14).
 */
/* kernellsp
sizes = { NS = 32, IC = 16, OC = 32, IH = 130, IW = 130, K = 3 }
launch = { grid = ["OC", "ceil_div(IW - K + 1, 32) * ceil_div(IH - K + 1, 32)", "NS"], block = [32, 32] }
tolerance = { rtol = 1e-4, atol = 1e-4, norm_rtol = 1e-5 }
shapes = [{ NS = 3, IC = 1, OC = 6, IH = 33, IW = 45, K = 5 }, { NS = 1, IC = 3, OC = 1, IH = 7, IW = 7, K = 7 }, { NS = 2, IC = 5, OC = 3, IH = 67, IW = 3, K = 3 }]
[args]
X = { dtype = "f32", dir = "in", count = "NS * IC * IH * IW" }
Y = { dtype = "f32", dir = "out", count = "NS * OC * (IH - K + 1) * (IW - K + 1)" }
filters = { dtype = "f32", dir = "in", count = "OC * IC * K * K" }
kernel_length = { value = "K" }
in_channels = { value = "IC" }
grid_height = { value = "ceil_div(IH - K + 1, 32)" }
grid_width = { value = "ceil_div(IW - K + 1, 32)" }
in_height = { value = "IH" }
in_width = { value = "IW" }
out_height = { value = "IH - K + 1" }
out_width = { value = "IW - K + 1" }
*/
__global__ void Conv2ForwardKernel(
    float *X, float *Y,
    float *filters,
    uint32_t kernel_length,
    uint32_t in_channels,
    uint32_t grid_height, uint32_t grid_width,
    uint32_t in_height, uint32_t in_width,
    uint32_t out_height, uint32_t out_width
) {
    uint32_t out_channel_idx = blockIdx.x;
    uint32_t out_height_idx  = (blockIdx.y / grid_width)*TILE_WIDTH + threadIdx.y;
    uint32_t out_width_idx   = (blockIdx.y % grid_width)*TILE_WIDTH + threadIdx.x;
    uint32_t sample_idx      = blockIdx.z;
    uint32_t out_channels = gridDim.x;

    if (out_height_idx >= out_height || out_width_idx >= out_width)
        return;
    
    float value = 0.0f;
    for (uint32_t in_channel_idx = 0; in_channel_idx < in_channels; ++in_channel_idx)
        for (uint32_t k_row = 0; k_row < kernel_length; ++k_row)
            for (uint32_t k_col = 0; k_col < kernel_length; ++k_col) {
                uint32_t in_row = out_height_idx + k_row;
                uint32_t in_col = out_width_idx + k_col;
                
                uint32_t X_idx = (sample_idx * in_channels * in_height * in_width) + 
                    (in_channel_idx * in_height * in_width) + 
                    (in_row * in_width) + 
                    in_col;
                uint32_t weight_idx = (out_channel_idx * in_channels * kernel_length * kernel_length) +
                    (in_channel_idx * kernel_length * kernel_length) +
                    (k_row * kernel_length) +
                    k_col;
                value += X[X_idx] * filters[weight_idx];
            }
    
    uint32_t Y_idx = (sample_idx * out_channels * out_height * out_width) + 
            (out_channel_idx * out_height * out_width) +
            (out_height_idx * out_width) +
            out_width_idx;
    Y[Y_idx] = value;
}
