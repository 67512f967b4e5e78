// Source: https://github.com/gpu-mode/lectures/blob/838fd2dce3b9f4ee379782fcb065ef6131fadd0e/lecture_008/tiling.cu (lines 1-11), license Apache-2.0
// Repository license: Apache License 2.0 (Copyright 2024 CUDA MODE); the source file has no header of its own.
#include <cuda_runtime.h>

/* kernellsp
sizes = { W = 2048 }
launch = { grid = ["ceil_div(W, 16)", "ceil_div(W, 16)"], block = [16, 16] }
tolerance = { rtol = 1e-3, atol = 1e-3, norm_rtol = 1e-5 }
shapes = [{ W = 67 }, { W = 1 }, { W = 33 }]
[args]
A = { dtype = "f32", dir = "in", count = "W * W" }
B = { dtype = "f32", dir = "in", count = "W * W" }
C = { dtype = "f32", dir = "out", count = "W * W" }
width = { value = "W" }
*/
__global__ void matrixMulSimple(float* A, float* B, float* C, int width) {
    int col = blockIdx.x * blockDim.x + threadIdx.x;
    int row = blockIdx.y * blockDim.y + threadIdx.y;
    if(col < width && row < width) {
        float value = 0;
        for (int k = 0; k < width; ++k) {
            value += A[row * width + k] * B[k * width + col];
        }
        C[row * width + col] = value;
    }
}
