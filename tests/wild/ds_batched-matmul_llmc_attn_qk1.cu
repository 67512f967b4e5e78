// Source: https://github.com/karpathy/llm.c/blob/03f37cfb6bb91ed93a34b05fa63adddf91e95b32/dev/cuda/attention_forward.cu (lines 106-132), license MIT
// License: MIT, Copyright (c) 2024 Andrej Karpathy (https://github.com/karpathy/llm.c/blob/master/LICENSE)
#include <cuda_runtime.h>
#include <math.h>
/* kernellsp
sizes = { B = 4, T = 1024, C = 768, NH = 12 }
launch = { grid = "ceil_div(B * NH * T * T, 256)", block = 256 }
tolerance = { rtol = 1e-4, atol = 1e-5, norm_rtol = 1e-5 }
shapes = [{ B = 1, T = 33, C = 12, NH = 3 }, { B = 2, T = 5, C = 64, NH = 1 }, { B = 3, T = 17, C = 30, NH = 5 }]
[args]
preatt = { dtype = "f32", dir = "inout", count = "B * NH * T * T", dist = "uniform(-1, 1)" }
inp = { dtype = "f32", dir = "in", count = "B * T * 3 * C", dist = "uniform(-1, 1)" }
B = { value = "B" }
T = { value = "T" }
C = { value = "C" }
NH = { value = "NH" }
*/
__global__ void attention_query_key_kernel1(float* preatt, float* inp,
                                           int B, int T, int C, int NH) {
    int idx = blockIdx.x * blockDim.x + threadIdx.x;
    int total_threads = B * NH * T * T;

    if (idx < total_threads) {
        int t2 = idx % T;
        int t = (idx / T) % T;
        if (t2 > t) { return; } // autoregressive mask
        int h = (idx / (T * T)) % NH;
        int b = idx / (NH * T * T);

        int C3 = C*3;
        int hs = C / NH; // head size
        float* query_t = inp + b * T * C3 + t * C3 + h * hs;
        float* key_t2 = inp + b * T * C3 + t2 * C3 + h * hs + C; // +C because it's key

        // (query_t) dot (key_t2)
        float val = 0.0f;
        for (int i = 0; i < hs; i++) {
            val += query_t[i] * key_t2[i];
        }
        val *= 1.0 / sqrtf(hs);

        preatt[idx] = val;
    }
}
