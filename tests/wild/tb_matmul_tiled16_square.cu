// Source: https://github.com/gpu-mode/lectures/blob/838fd2dce3b9f4ee379782fcb065ef6131fadd0e/lecture_008/tiling.cu (lines 13-39), license Apache-2.0
// Repository license: Apache License 2.0 (Copyright 2024 CUDA MODE); the source file has no header of its own.
#include <cuda_runtime.h>

#define TILE_WIDTH 16

/* kernellsp
sizes = { W = 2048 }
launch = { grid = ["ceil_div(W, 16)", "ceil_div(W, 16)"], block = [16, 16] }
tolerance = { rtol = 1e-3, atol = 1e-3, norm_rtol = 1e-5 }
shapes = [{ W = 48 }, { W = 16 }, { W = 208 }]
[args]
A = { dtype = "f32", dir = "in", count = "W * W" }
B = { dtype = "f32", dir = "in", count = "W * W" }
C = { dtype = "f32", dir = "out", count = "W * W" }
width = { value = "W" }
*/
__global__ void matrixMulTiled(float* A, float* B, float* C, int width) {
    __shared__ float As[TILE_WIDTH][TILE_WIDTH];
    __shared__ float Bs[TILE_WIDTH][TILE_WIDTH];

    int bx = blockIdx.x, by = blockIdx.y;
    int tx = threadIdx.x, ty = threadIdx.y;
    int Row = by * blockDim.y + ty;
    int Col = bx * blockDim.x + tx;

    float value = 0;
    for (int m = 0; m < width/TILE_WIDTH; ++m) {
        As[ty][tx] = A[Row*width + (m*TILE_WIDTH + tx)];
        Bs[ty][tx] = B[(m*TILE_WIDTH + ty)*width + Col];
        __syncthreads();

        for (int k = 0; k < TILE_WIDTH; ++k) {
            value += As[ty][k] * Bs[k][tx];
        }
        __syncthreads();
    }

    if(Row < width && Col < width) {
        C[Row*width + Col] = value;
    }
}
