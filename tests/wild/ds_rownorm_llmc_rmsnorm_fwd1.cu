// Source: https://github.com/karpathy/llm.c/blob/1341ef6ac2dcd5c23e935be3be2117398532c497/dev/cuda/rmsnorm_forward.cu (lines 46-86), license MIT
// License: MIT, Copyright (c) 2024 Andrej Karpathy (https://github.com/karpathy/llm.c/blob/master/LICENSE)
#include <cuda_runtime.h>
#include <math.h>
/* kernellsp
sizes = { N = 16384, C = 1024 }
launch = { grid = "ceil_div(N, 256)", block = 256 }
tolerance = { rtol = 1e-3, atol = 1e-5, norm_rtol = 1e-4 }
shapes = [{ N = 1000, C = 100 }, { N = 33, C = 1023 }, { N = 3, C = 2 }]
[args]
out = { dtype = "f32", dir = "out", count = "N * C" }
rms = { dtype = "f32", dir = "out", count = "N" }
inp = { dtype = "f32", dir = "in", count = "N * C", dist = "normal(0.5, 2)" }
weight = { dtype = "f32", dir = "in", count = "C" }
bias = { dtype = "f32", dir = "in", count = "C" }
N = { value = "N" }
C = { value = "C" }
*/
__global__ void rmsnorm_forward_kernel1(
    float* out, 
    float* rms,
    const float* inp, 
    const float* weight, 
    const float* bias,
    int N, 
    int C
) {
    int idx = blockIdx.x * blockDim.x + threadIdx.x;

    if (idx < N) {
        // Seek to the input position inp[idx,:]
        const float* x = inp + idx * C;

        // Calculate the sum of squares
        float sum_of_squares = 0.0f;

        #pragma unroll
        for (int i = 0; i < C; i++) {
            sum_of_squares += x[i] * x[i];
        }

        // Compute RMS value
        sum_of_squares = sum_of_squares / C;
        float rms_val = rsqrtf(sum_of_squares);

        // Seek to the output position in out[idx,:]
        float* out_idx = out + idx * C;

        #pragma unroll
        for (int i = 0; i < C; i++) {
            float n = x[i] * rms_val; // Normalized output
            float o = n * weight[i] + bias[i]; // Scale and shift it
            out_idx[i] = o; // Write
        }

        // Cache the RMS for the backward pass later
        rms[idx] = rms_val;
    }
}
