// Source: https://github.com/karpathy/llm.c/blob/06980b6b2f3f541e5bd2c1f3a60744e0a3a77616/dev/cuda/gelu_forward.cu (lines 24-36, 43, 56-64), license MIT
// License: MIT, Copyright (c) 2024 Andrej Karpathy (https://github.com/karpathy/llm.c/blob/master/LICENSE)
#include <cuda_runtime.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <math.h>
// turn on bf16 as default, done up here for now
#define ENABLE_BF16

#if defined(ENABLE_BF16)
typedef __nv_bfloat16 floatX;
typedef __nv_bfloat16 floatN;
#elif defined(ENABLE_FP16)
typedef half floatX;
typedef half floatN;
#else
typedef float floatX;
typedef float floatN;
#endif

#define GELU_SCALING_FACTOR sqrtf(2.0f / M_PI)

// elementwise ops are nice and ez
/* kernellsp
sizes = { N = 33554432 }
launch = { grid = "ceil_div(N, 256)", block = 256 }
tolerance = { rtol = 1e-2, atol = 1e-2, norm_rtol = 1e-3 }
shapes = [{ N = 1000 }, { N = 4097 }, { N = 3 }]
[args]
out = { dtype = "bf16", dir = "out", count = "N" }
inp = { dtype = "bf16", dir = "in", count = "N", dist = "uniform(-4, 4)" }
N = { value = "N" }
*/
__global__ void gelu_forward_kernel1(floatX* out, const floatX* inp, int N) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < N) {
        float xi = inp[i];
        float cube = 0.044715f * xi * xi * xi;
        out[i] = 0.5f * xi * (1.0f + tanhf(GELU_SCALING_FACTOR * (xi + cube)));
    }
}
