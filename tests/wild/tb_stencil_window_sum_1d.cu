// Source: https://github.com/gpu-mode/lectures/blob/838fd2dce3b9f4ee379782fcb065ef6131fadd0e/lecture_008/privatization2.cu (lines 4-18), license Apache-2.0
// Repository license: Apache License 2.0 (Copyright 2024 CUDA MODE); the source file has no header of its own.
#include <cuda_runtime.h>

/* kernellsp
sizes = { N = 67108864, WS = 5 }
launch = { grid = "ceil_div(N, 256)", block = 256 }
tolerance = { rtol = 1e-5, atol = 1e-5 }
shapes = [{ N = 1000, WS = 5 }, { N = 4097, WS = 7 }, { N = 3, WS = 9 }, { N = 33, WS = 1 }]
[args]
input = { dtype = "f32", dir = "in", count = "N" }
output = { dtype = "f32", dir = "out", count = "N" }
n = { value = "N" }
windowSize = { value = "WS" }
*/
// Kernel without privatization: Direct global memory access
__global__ void windowSumDirect(const float *input, float *output, int n, int windowSize) {
    int idx = blockIdx.x * blockDim.x + threadIdx.x;
    int halfWindow = windowSize / 2;
    if (idx < n) {
        float sum = 0.0f;
        for (int i = -halfWindow; i <= halfWindow; ++i) {
            int accessIdx = idx + i;
            if (accessIdx >= 0 && accessIdx < n) {
                sum += input[accessIdx];
            }
        }
        output[idx] = sum;
    }
}
