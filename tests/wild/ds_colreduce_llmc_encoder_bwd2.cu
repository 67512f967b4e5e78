// Source: https://github.com/karpathy/llm.c/blob/046d00154826daaf1d1d38e6ce4116fbb7a37e36/dev/cuda/encoder_backward.cu (lines 70-85), license MIT
// License: MIT, Copyright (c) 2024 Andrej Karpathy (https://github.com/karpathy/llm.c/blob/master/LICENSE)
#include <cuda_runtime.h>
// naive implementation that parallelizes over C and loops over B,T
// but it gets rid of atomics
/* kernellsp
sizes = { B = 8, T = 1024, C = 768, V = 50257 }
launch = { grid = "ceil_div(C, 256)", block = 256 }
tolerance = { rtol = 1e-4, atol = 1e-5, norm_rtol = 1e-5 }
shapes = [{ B = 1, T = 33, C = 67, V = 100 }, { B = 3, T = 5, C = 1, V = 2 }, { B = 2, T = 17, C = 1000, V = 3 }]
[args]
dwte = { dtype = "f32", dir = "inout", count = "V * C", dist = "uniform(-1, 1)" }
dwpe = { dtype = "f32", dir = "inout", count = "T * C", dist = "uniform(-1, 1)" }
dout = { dtype = "f32", dir = "in", count = "B * T * C", dist = "uniform(-1, 1)" }
inp = { dtype = "i32", dir = "in", count = "B * T", dist = "randint(0, V)" }
B = { value = "B" }
T = { value = "T" }
C = { value = "C" }
*/
__global__ void encoder_backward_kernel2(float* dwte, float* dwpe,
                                        const float* dout, const int* inp,
                                        int B, int T, int C) {
    int c = blockIdx.x * blockDim.x + threadIdx.x;
    if (c >= C) { return; } // guard
    int BT = B * T;
    for (int i = 0; i < BT; i++) {
        int t = i % T;
        int ix = inp[i];
        float dout_btc = dout[i * C + c];
        dwte[ix * C + c] += dout_btc;
        dwpe[t * C + c] += dout_btc;
    }
}
