// Source: https://github.com/karpathy/llm.c/blob/4052f29c86360f40d3b59cefcb445f3b9f847c60/dev/cuda/rope.cu (lines 77-101), license MIT
// Source: https://github.com/karpathy/llm.c/blob/0f112f1b6225b28e3cf827dc658b115a8f6a8012/dev/cuda/common.h (lines 184-201; rope.cu does not define ENABLE_BF16, so floatX is float), license MIT
// License: MIT, Copyright (c) 2024 Andrej Karpathy (https://github.com/karpathy/llm.c/blob/master/LICENSE)
#include <cuda_runtime.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>
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

// kernel
/* kernellsp
sizes = { B = 8, T = 1024, NH = 32, HD = 128 }
launch = { grid = "ceil_div(B * T * NH * HD / 2, 128)", block = 128 }
tolerance = { rtol = 1e-5, atol = 1e-6 }
shapes = [{ B = 1, T = 33, NH = 3, HD = 2 }, { B = 3, T = 5, NH = 1, HD = 64 }, { B = 2, T = 17, NH = 7, HD = 10 }]
[args]
out = { dtype = "f32", dir = "out", count = "B * T * NH * HD" }
inp = { dtype = "f32", dir = "in", count = "B * T * NH * HD", dist = "uniform(-1, 1)" }
freqs_cis = { dtype = "f32", dir = "in", count = "T * HD", dist = "uniform(-1, 1)" }
B = { value = "B" }
T = { value = "T" }
n_head = { value = "NH" }
head_dim = { value = "HD" }
*/
__global__ void rope_forward_kernel1(floatX *out, const floatX *inp, const floatX *freqs_cis, int B, int T, int n_head, int head_dim) {
    int idx = blockIdx.x * blockDim.x + threadIdx.x;
    int head_dim_half = head_dim / 2;
    if (idx >= B * T * n_head * head_dim_half) return;
    // decode the individual indices
    int b = idx / (T * n_head * head_dim_half);
    int t = (idx / (n_head * head_dim_half)) % T;
    int h = (idx / head_dim_half) % n_head;
    int d = idx % head_dim_half;
    // calculate the index in the input
    int idx_bt = b * (T * n_head * head_dim) + t * (n_head * head_dim);
    int idx_bth = idx_bt + h * head_dim;
    int idxi = idx_bth + 2 * d; // index in the input
    // fetch the input
    float x_real = inp[idxi];
    float x_imag = inp[idxi + 1];
    // fetch the freqs_cis
    int freqs_idx = t * head_dim + 2 * d;
    float freqs_cos = freqs_cis[freqs_idx];
    float freqs_sin = freqs_cis[freqs_idx + 1];
    // apply the rotation
    out[idxi] = x_real * freqs_cos - x_imag * freqs_sin;
    out[idxi + 1] = x_real * freqs_sin + x_imag * freqs_cos;
}
