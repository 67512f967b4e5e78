// Source: https://github.com/karpathy/llm.c/blob/13f7d3585032c8ded65a1de16837061492866601/dev/cuda/crossentropy_forward.cu (lines 38-50), license MIT
// License: MIT, Copyright (c) 2024 Andrej Karpathy (https://github.com/karpathy/llm.c/blob/master/LICENSE)
#include <cuda_runtime.h>
#include <math.h>
/* kernellsp
sizes = { B = 256, T = 1024, V = 256 }
launch = { grid = "ceil_div(B * T, 256)", block = 256 }
tolerance = { rtol = 1e-5, atol = 1e-6 }
shapes = [{ B = 1, T = 33, V = 100 }, { B = 3, T = 5, V = 1 }, { B = 7, T = 1000, V = 3 }]
[args]
losses = { dtype = "f32", dir = "out", count = "B * T" }
probs = { dtype = "f32", dir = "in", count = "B * T * V", dist = "uniform(0.01, 1)" }
targets = { dtype = "i32", dir = "in", count = "B * T", dist = "randint(0, V)" }
B = { value = "B" }
T = { value = "T" }
V = { value = "V" }
*/
__global__ void crossentropy_forward_kernel1(float* losses,
                            const float* probs, const int* targets,
                            int B, int T, int V) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < B * T) {
        int b = i / T;
        int t = i % T;
        const int bt = b * T + t;
        const float* probs_bt = probs + bt * V;
        int ix = targets[bt];
        losses[bt] = -logf(probs_bt[ix]);
    }
}
