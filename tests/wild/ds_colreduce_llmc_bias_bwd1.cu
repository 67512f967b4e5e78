// Source: https://github.com/karpathy/llm.c/blob/009be4dcab5fad5eebd05c431eaa2f6e99550f10/dev/cuda/matmul_backward_bias.cu (lines 27, 73-97), license MIT
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

/* kernellsp
launch = { grid = "OC", block = 512, smem = "512 * 4" }
sizes = { B = 8, T = 2048, OC = 4096 }
tolerance = { rtol = 1e-2, atol = 1.0, norm_rtol = 1e-2 }
shapes = [{ B = 3, T = 33, OC = 67 }, { B = 1, T = 1, OC = 5 }, { B = 2, T = 1000, OC = 33 }]
[args]
dbias = { dtype = "bf16", dir = "inout", count = "OC", dist = "uniform(-1, 1)" }
dout = { dtype = "bf16", dir = "in", count = "B * T * OC", dist = "uniform(-1, 1)" }
B = { value = "B" }
T = { value = "T" }
OC = { value = "OC" }
*/
__global__ void matmul_backward_bias_kernel1(floatX* dbias, const floatX* dout, int B, int T, int OC) {
    extern __shared__ float shared[];
    int o = blockIdx.x; // range [0, OC)
    int tid = threadIdx.x; // range [0, block_size)
    int block_size = blockDim.x;
    const floatX* x = dout + o;
    // thread coarsening
    float sum = 0.0;
    for (int i = tid; i < B * T; i += block_size) {
        sum += (float)x[i * OC];
    }
    shared[tid] = sum;
    __syncthreads();
    // reductions
    for (int stride = block_size / 2; stride >= 1; stride /= 2) {
        __syncthreads();
        if (tid < stride) {
            shared[tid] += shared[tid + stride];
        }
    }
    // write the final result (at thread 0) to global memory
    if (tid == 0) {
        dbias[o] = (floatX)((float)dbias[o] + shared[0]);
    }
}
