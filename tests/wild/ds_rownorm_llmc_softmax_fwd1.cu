// Source: https://github.com/karpathy/llm.c/blob/00010c7188bc688871d0abb1d3277f2199c2b4ce/dev/cuda/softmax_forward.cu (lines 101-124), license MIT
// License: MIT, Copyright (c) 2024 Andrej Karpathy (https://github.com/karpathy/llm.c/blob/master/LICENSE)
#include <cuda_runtime.h>
#include <math.h>
/* kernellsp
sizes = { N = 16384, C = 1024 }
launch = { grid = "ceil_div(N, 256)", block = 256 }
tolerance = { rtol = 1e-3, atol = 1e-6, norm_rtol = 1e-4 }
shapes = [{ N = 1000, C = 100 }, { N = 33, C = 1023 }, { N = 3, C = 2 }]
[args]
out = { dtype = "f32", dir = "out", count = "N * C" }
inp = { dtype = "f32", dir = "in", count = "N * C", dist = "normal(0, 2)" }
N = { value = "N" }
C = { value = "C" }
*/
__global__ void softmax_forward_kernel1(float* out, float* inp, int N, int C) {
    // inp is (N, C)
    // out is (N, C), each row of inp will get softmaxed
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < N) {
        float* inp_row = inp + i * C;
        float* out_row = out + i * C;

        float maxval = -INFINITY;
        for (int j = 0; j < C; j++) {
            if (inp_row[j] > maxval) {
                maxval = inp_row[j];
            }
        }
        float sum = 0.0f;
        for (int j = 0; j < C; j++) {
            out_row[j] = expf(inp_row[j] - maxval);
            sum += out_row[j];
        }
        for (int j = 0; j < C; j++) {
            out_row[j] /= sum;
        }
    }
}
