// Source: https://github.com/karpathy/llm.c/blob/06980b6b2f3f541e5bd2c1f3a60744e0a3a77616/dev/cuda/layernorm_backward.cu (lines 154-197), license MIT
// License: MIT, Copyright (c) 2024 Andrej Karpathy (https://github.com/karpathy/llm.c/blob/master/LICENSE)
#include <cuda_runtime.h>
// super naive kernel that just parallelizes over B,T and loops over C
/* kernellsp
sizes = { B = 8, T = 1024, C = 768 }
launch = { grid = "ceil_div(B * T, 256)", block = 256 }
tolerance = { rtol = 1e-3, atol = 1e-3, norm_rtol = 1e-5 }
shapes = [{ B = 1, T = 33, C = 67 }, { B = 3, T = 5, C = 1 }, { B = 2, T = 17, C = 1000 }]
[args]
dinp = { dtype = "f32", dir = "inout", count = "B * T * C", dist = "uniform(-1, 1)" }
dweight = { dtype = "f32", dir = "inout", count = "C", dist = "uniform(-1, 1)" }
dbias = { dtype = "f32", dir = "inout", count = "C", dist = "uniform(-1, 1)" }
dout = { dtype = "f32", dir = "in", count = "B * T * C", dist = "uniform(-1, 1)" }
inp = { dtype = "f32", dir = "in", count = "B * T * C", dist = "uniform(-1, 1)" }
weight = { dtype = "f32", dir = "in", count = "C", dist = "uniform(-1, 1)" }
mean = { dtype = "f32", dir = "in", count = "B * T", dist = "uniform(-0.1, 0.1)" }
rstd = { dtype = "f32", dir = "in", count = "B * T", dist = "uniform(0.5, 2)" }
B = { value = "B" }
T = { value = "T" }
C = { value = "C" }
*/
__global__ void layernorm_backward_kernel1(float* dinp, float* dweight, float* dbias,
                        const float* dout, const float* inp, const float* weight, const float* mean, const float* rstd,
                        int B, int T, int C) {
    int idx = blockIdx.x * blockDim.x + threadIdx.x;
    if (idx >= B*T) return;
    int b = idx / T;
    int t = idx % T;

    const float* dout_bt = dout + b * T * C + t * C;
    const float* inp_bt = inp + b * T * C + t * C;
    float* dinp_bt = dinp + b * T * C + t * C;
    const float mean_bt = mean[b * T + t];
    const float rstd_bt = rstd[b * T + t];

    // first: two reduce operations
    float dnorm_mean = 0.0f;
    float dnorm_norm_mean = 0.0f;
    for (int i = 0; i < C; i++) {
        float norm_bti = (inp_bt[i] - mean_bt) * rstd_bt;
        float dnorm_i = weight[i] * dout_bt[i];
        dnorm_mean += dnorm_i;
        dnorm_norm_mean += dnorm_i * norm_bti;
    }
    dnorm_mean = dnorm_mean / C;
    dnorm_norm_mean = dnorm_norm_mean / C;

    // now iterate again and accumulate all the gradients
    for (int i = 0; i < C; i++) {
        float norm_bti = (inp_bt[i] - mean_bt) * rstd_bt;
        float dnorm_i = weight[i] * dout_bt[i];
        // gradient contribution to bias
        atomicAdd(&dbias[i], dout_bt[i]);
        // gradient contribution to weight
        atomicAdd(&dweight[i], norm_bti * dout_bt[i]);
        // gradient contribution to input
        float dval = 0.0f;
        dval += dnorm_i; // term 1
        dval -= dnorm_mean; // term 2
        dval -= norm_bti * dnorm_norm_mean; // term 3
        dval *= rstd_bt; // final scale
        dinp_bt[i] += dval;
    }
}
