// Source: https://github.com/karpathy/llm.c/blob/009be4dcab5fad5eebd05c431eaa2f6e99550f10/dev/cuda/matmul_backward_bias.cu (lines 27, 99-121), license MIT
// Source: https://github.com/karpathy/llm.c/blob/0f112f1b6225b28e3cf827dc658b115a8f6a8012/dev/cuda/common.h (lines 184-201), license MIT
// License: MIT, Copyright (c) 2024 Andrej Karpathy (https://github.com/karpathy/llm.c/blob/master/LICENSE)
#include <cuda_runtime.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cooperative_groups.h>
#include <cooperative_groups/reduce.h>
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

// cooperative groups solution, one warp per output channel
/* kernellsp
launch = { grid = "ceil_div(OC * 32, 512)", block = 512 }
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
__global__ void matmul_backward_bias_kernel2(floatX* dbias, const floatX* dout, int B, int T, int OC) {
    // dout is (B, T, OC), dbias is (OC)
    // e.g. if block_size = 128, then we have 4 warps per block, each in charge of one output channel
    namespace cg = cooperative_groups;
    cg::thread_block block = cg::this_thread_block();
    cg::thread_block_tile<32> warp = cg::tiled_partition<32>(block);
    // meta_group_size is the number of warps in a block (e.g. 4), meta_group_rank is the warp index (0,1,2,3)
    int idx = blockIdx.x * warp.meta_group_size() + warp.meta_group_rank();
    if(idx >= OC) { return; }
    int BT = B * T; // number of elements to reduce in total, per channel
    // first, thread coarsening to sum reduce the problem size from B*T to 32
    float sum = 0.0f;
    for(int i = warp.thread_rank(); i < BT; i += warp.size()) {
        sum += (float)dout[i * OC + idx];
    }
    // now do a warp-level reduce to get the sum across the 32 threads in this warp
    sum = cg::reduce(warp, sum, cg::plus<float>{});
    // write the result to output (global memory)
    if(warp.thread_rank() == 0) {
        dbias[idx] += (floatX)sum;
    }
}
