// Source: https://github.com/karpathy/llm.c/blob/0d9ce74b746be2f3923d5e82b7fe15c69b4400a4/dev/cuda/encoder_forward.cu (lines 22, 48-66), license MIT
// Source: https://github.com/karpathy/llm.c/blob/0f112f1b6225b28e3cf827dc658b115a8f6a8012/dev/cuda/common.h (lines 184-201), license MIT
// License: MIT, Copyright (c) 2024 Andrej Karpathy (https://github.com/karpathy/llm.c/blob/master/LICENSE)
#include <cuda_runtime.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#define ENABLE_BF16

#if defined(ENABLE_BF16)

typedef __nv_bfloat16 floatX;
typedef __nv_bfloat16 floatN;
#define CUBLAS_LOWP CUDA_R_16BF // CUDA_R_16F or CUDA_R_16BF (or CUDA_R_32F)
// CUBLAS_COMPUTE_32F or CUBLAS_COMPUTE_16F (for CUDA_R_16F only, potentially slower?!)
#define CUBLAS_LOWP_COMPUTE CUBLAS_COMPUTE_32F

#elif defined(ENABLE_FP16)

typedef half floatX;
typedef half floatN;

#else

typedef float floatX;
typedef float floatN;
#endif

// naive implementation into kernel, parallelize over B,T, loop over C
/* kernellsp
sizes = { B = 16, T = 1024, C = 768, V = 50257 }
launch = { grid = "ceil_div(B * T, 256)", block = 256 }
tolerance = { rtol = 1e-2, atol = 1e-2, norm_rtol = 1e-3 }
shapes = [{ B = 1, T = 33, C = 67, V = 100 }, { B = 3, T = 5, C = 1, V = 7 }, { B = 2, T = 17, C = 1000, V = 3 }]
[args]
out = { dtype = "bf16", dir = "out", count = "B * T * C" }
inp = { dtype = "i32", dir = "in", count = "B * T", dist = "randint(0, V)" }
wte = { dtype = "bf16", dir = "in", count = "V * C", dist = "uniform(-1, 1)" }
wpe = { dtype = "bf16", dir = "in", count = "T * C", dist = "uniform(-1, 1)" }
B = { value = "B" }
T = { value = "T" }
C = { value = "C" }
*/
__global__ void encoder_forward_kernel1(floatX* out,
                               const int* inp, const floatX* wte, const floatX* wpe,
                               int B, int T, int C) {
    int idx = blockIdx.x * blockDim.x + threadIdx.x;
    int N = B * T;

    if (idx < N) {
        int b = idx / T;
        int t = idx % T;
        floatX* out_bt = out + b * T * C + t * C;
        int ix = inp[b * T + t];
        const floatX* wte_ix = wte + ix * C;
        const floatX* wpe_t = wpe + t * C;
        for (int i = 0; i < C; i++) {
            out_bt[i] = (floatX)((float)wte_ix[i] + (float)wpe_t[i]);
        }
    }
}
