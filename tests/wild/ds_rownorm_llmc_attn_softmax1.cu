// Source: https://github.com/karpathy/llm.c/blob/03f37cfb6bb91ed93a34b05fa63adddf91e95b32/dev/cuda/attention_forward.cu (lines 134-175), license MIT
// License: MIT, Copyright (c) 2024 Andrej Karpathy (https://github.com/karpathy/llm.c/blob/master/LICENSE)
#include <cuda_runtime.h>
#include <math.h>
/* kernellsp
sizes = { B = 4, T = 1024, NH = 12 }
launch = { grid = "ceil_div(B * T * NH, 256)", block = 256 }
tolerance = { rtol = 1e-3, atol = 1e-6, norm_rtol = 1e-4 }
shapes = [{ B = 1, T = 33, NH = 3 }, { B = 2, T = 5, NH = 1 }, { B = 3, T = 17, NH = 5 }]
[args]
att = { dtype = "f32", dir = "out", count = "B * NH * T * T" }
preatt = { dtype = "f32", dir = "in", count = "B * NH * T * T", dist = "normal(0, 2)" }
B = { value = "B" }
T = { value = "T" }
NH = { value = "NH" }
*/
__global__ void attention_softmax_kernel1(float* att, float* preatt,
                                         int B, int T, int NH) {
    int idx = blockIdx.x * blockDim.x + threadIdx.x;
    int total_threads = B * T * NH;

    if (idx < total_threads) {
        int h = idx % NH;
        int t = (idx / NH) % T;
        int b = idx / (NH * T);

        float* preatt_bth = preatt + b*NH*T*T + h*T*T + t*T;
        float* att_bth = att + b*NH*T*T + h*T*T + t*T;

        // find maxval
        float maxval = -10000.0f; // TODO something better
        for (int t2 = 0; t2 <= t; t2++) {
            if (preatt_bth[t2] > maxval) {
                maxval = preatt_bth[t2];
            }
        }

        // calculate the exp and keep track of sum
        float expsum = 0.0f;
        for (int t2 = 0; t2 <= t; t2++) {
            float expv = expf(preatt_bth[t2] - maxval);
            expsum += expv;
            att_bth[t2] = expv;
        }
        float expsum_inv = expsum == 0.0f ? 0.0f : 1.0f / expsum;

        // normalize to get the softmax
        for (int t2 = 0; t2 < T; t2++) {
            if (t2 <= t) {
                att_bth[t2] *= expsum_inv;
            } else {
                // causal attention mask. not strictly necessary to set to zero here
                // only doing this explicitly for debugging and checking to PyTorch
                att_bth[t2] = 0.0f;
            }
        }
    }
}
