// Source: https://github.com/karpathy/llm.c/blob/03f37cfb6bb91ed93a34b05fa63adddf91e95b32/dev/cuda/attention_forward.cu (lines 177-202), license MIT
// License: MIT, Copyright (c) 2024 Andrej Karpathy (https://github.com/karpathy/llm.c/blob/master/LICENSE)
#include <cuda_runtime.h>
#include <math.h>
/* kernellsp
sizes = { B = 2, T = 1024, C = 768, NH = 12 }
launch = { grid = "ceil_div(B * T * NH, 256)", block = 256 }
tolerance = { rtol = 1e-3, atol = 1e-5, norm_rtol = 1e-5 }
shapes = [{ B = 1, T = 33, C = 12, NH = 3 }, { B = 2, T = 5, C = 64, NH = 1 }, { B = 3, T = 17, C = 30, NH = 5 }]
[args]
out = { dtype = "f32", dir = "out", count = "B * T * C" }
att = { dtype = "f32", dir = "in", count = "B * NH * T * T", dist = "uniform(0, 1)" }
inp = { dtype = "f32", dir = "in", count = "B * T * 3 * C", dist = "uniform(-1, 1)" }
B = { value = "B" }
T = { value = "T" }
C = { value = "C" }
NH = { value = "NH" }
*/
__global__ void attention_value_kernel1(float* out, float* att, float* inp,
                                       int B, int T, int C, int NH) {
    int idx = blockIdx.x * blockDim.x + threadIdx.x;
    int total_threads = B * T * NH;

    if (idx < total_threads) {
        int h = idx % NH;
        int t = (idx / NH) % T;
        int b = idx / (NH * T);

        int C3 = C*3;
        int hs = C / NH; // head size

        float* out_bth = out + b * T * C + t * C + h * hs;
        float* att_bth = att + b*NH*T*T + h*T*T + t*T;

        for (int i = 0; i < hs; i++) { out_bth[i] = 0.0f; }
        for (int t2 = 0; t2 <= t; t2++) {
            float* value_t2 = inp + b * T * C3 + t2 * C3 + h * hs + C*2; // +C*2 because it's value
            float att_btht2 = att_bth[t2];
            for (int i = 0; i < hs; i++) {
                out_bth[i] += att_btht2 * value_t2[i];
            }
        }
    }
}
