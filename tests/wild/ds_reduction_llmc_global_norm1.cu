// Source: https://github.com/karpathy/llm.c/blob/0f6853d39970b11bd2e6d2d29eb088c4c18f677d/dev/cuda/global_norm.cu (lines 15-16, 30-60), license MIT
// Source: https://github.com/karpathy/llm.c/blob/0f112f1b6225b28e3cf827dc658b115a8f6a8012/dev/cuda/common.h (lines 184-201), license MIT
// License: MIT, Copyright (c) 2024 Andrej Karpathy (https://github.com/karpathy/llm.c/blob/master/LICENSE)
#include <cuda_runtime.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cooperative_groups.h>
#include <cooperative_groups/reduce.h>
// turn on bf16 as default, done up here for now
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

template<class T>
__global__ void norm_kernel1(float* out, const T* data, size_t count) {
    // we want as few atomics as possible, so each block tries to do
    // the maximum amount of work (so no fixed chunk, but instead iterating
    // until we run out of data), and then we reduce inside the block
    // and finally have just one atomic per block.
    namespace cg = cooperative_groups;
    cg::thread_block block = cg::this_thread_block();
    cg::thread_block_tile<32> warp = cg::tiled_partition<32>(block);

    __shared__ float block_result[32];

    // out will be updated atomically from all thread blocks
    size_t index = threadIdx.x + blockDim.x * blockIdx.x;
    size_t grid_width = blockDim.x * gridDim.x;
    float accumulator = 0.f;
    for(size_t i = index; i < count; i += grid_width) {
        accumulator += (float)data[i] * (float)data[i];
    }
    // warp-level reduce
    float warp_result = cg::reduce(warp, accumulator, cg::plus<float>{});
    block_result[warp.meta_group_rank()] = warp_result;
    block.sync();
    if(warp.meta_group_rank() == 0) {
        float gather = warp.thread_rank() < warp.meta_group_size() ? block_result[warp.thread_rank()] : 0.f;
        float block_sum = cg::reduce(warp, gather, cg::plus<float>{});
        if(warp.thread_rank() ==  0) {
            atomicAdd(out, block_sum);
        }
    }
}

// Launcher written for this corpus (norm_kernel1 is a template): it follows global_norm1()/global_norm3()
// of the same file -- just enough blocks to fill the GPU, maxThreadsPerMultiProcessor * multiProcessorCount
// / block_size -- and main(), which does cudaMemset(d_out, 0, sizeof(float)) before each call.
/* kernellsp
sizes = { N = 67108864 }
tolerance = { rtol = 1e-3, atol = 1e-3 }
shapes = [{ N = 1000 }, { N = 4097 }, { N = 3 }]
[args]
out = { dtype = "f32", dir = "out", count = 1 }
values = { dtype = "bf16", dir = "in", count = "N", dist = "uniform(-1, 1)" }
count = { value = "N" }
*/
extern "C" void solve(float* out, const floatX* values, size_t count) {
    int block_size = 512;
    int threads_per_SM = 0, num_SMs = 0;
    cudaDeviceGetAttribute(&threads_per_SM, cudaDevAttrMaxThreadsPerMultiProcessor, 0);
    cudaDeviceGetAttribute(&num_SMs, cudaDevAttrMultiProcessorCount, 0);
    cudaMemset(out, 0, sizeof(float));
    const int grid_size = threads_per_SM * num_SMs / block_size;
    norm_kernel1<<<grid_size, block_size>>>(out, values, count);
}
