// Source: https://github.com/karpathy/llm.c/blob/046d00154826daaf1d1d38e6ce4116fbb7a37e36/dev/cuda/encoder_backward.cu (lines 46-68), license MIT
// License: MIT, Copyright (c) 2024 Andrej Karpathy (https://github.com/karpathy/llm.c/blob/master/LICENSE)
#include <cuda_runtime.h>
// naive implementation with atomics
/* kernellsp
sizes = { B = 16, T = 1024, C = 1024, V = 50257 }
launch = { grid = "ceil_div(B * T * C, 256)", block = 256 }
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
__global__ void encoder_backward_kernel1(float* dwte, float* dwpe,
                                        const float* dout, const int* inp,
                                        int B, int T, int C) {
    int idx = blockIdx.x * blockDim.x + threadIdx.x;
    int N = B * T * C;

    if (idx < N) {
        int bt = idx / C;
        int b = bt / T;
        int t = bt % T;
        int c = idx % C;

        int ix = inp[b * T + t];

        const float* dout_btc = dout + b * T * C + t * C + c;
        float* dwte_ix = dwte + ix * C + c;
        float* dwpe_tc = dwpe + t * C + c;

        atomicAdd(dwte_ix, *dout_btc);
        atomicAdd(dwpe_tc, *dout_btc);
    }
}
