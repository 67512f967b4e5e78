// Source: https://github.com/karpathy/llm.c/blob/023b2d3d3e8acda287c99e12934c82bea0085c02/dev/cuda/layernorm_forward.cu (lines 77-112), license MIT
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
mean = { dtype = "f32", dir = "out", count = "N" }
rstd = { dtype = "f32", dir = "out", count = "N" }
inp = { dtype = "f32", dir = "in", count = "N * C", dist = "normal(0.5, 2)" }
weight = { dtype = "f32", dir = "in", count = "C" }
bias = { dtype = "f32", dir = "in", count = "C" }
N = { value = "N" }
C = { value = "C" }
*/
__global__ void layernorm_forward_kernel1(float* out, float* mean, float* rstd,
                                 const float* inp, const float* weight, const float* bias,
                                 int N, int C) {
    int idx = blockIdx.x * blockDim.x + threadIdx.x;
    float eps = 1e-5f;

    if (idx < N) {
        // seek to the input position inp[idx,:]
        const float* x = inp + idx * C;
        // calculate the mean
        float m = 0.0f;
        for (int i = 0; i < C; i++) {
            m += x[i];
        }
        m = m / C;
        // calculate the variance (without any bias correction)
        float v = 0.0f;
        for (int i = 0; i < C; i++) {
            float xshift = x[i] - m;
            v += xshift * xshift;
        }
        v = v / C;
        // calculate the rstd
        float s = 1.0f / sqrtf(v + eps);
        // seek to the output position in out[idx,:]
        float* out_idx = out + idx * C;
        for (int i = 0; i < C; i++) {
            float n = (s * (x[i] - m)); // normalized output
            float o = n * weight[i] + bias[i]; // scale and shift it
            out_idx[i] = o; // write
        }
        // cache the mean and rstd for the backward pass later
        mean[idx] = m;
        rstd[idx] = s;
    }
}
