// Source: https://github.com/DefTruth/CUDA-Learn-Notes/blob/0fca376d6fe39ef7ddb28b4b0f3f988f5aee17d1/dot-product/dot_product.cu (lines 13, 18-26, 92-122), license GPL-3.0
// License: GPL-3.0 (README: "License: GNU General Public License v3.0"), https://github.com/xlite-dev/LeetCUDA (formerly DefTruth/CUDA-Learn-Notes)
#include <cuda_runtime.h>
#include <cuda_fp16.h>
#define WARP_SIZE 32

// Warp Reduce Sum
template<const int kWarpSize = WARP_SIZE>
__device__ __forceinline__ float warp_reduce_sum_f32(float val) {
  #pragma unroll
  for (int mask = kWarpSize >> 1; mask >= 1; mask >>= 1) {
    val += __shfl_xor_sync(0xffffffff, val, mask);
  }
  return val;
}

template<const int kWarpSize = WARP_SIZE>
__device__ __forceinline__ float warp_reduce_sum_f16_acc_with_f32(half val) {
  float val_f32 = __half2float(val);
  #pragma unroll
  for (int mask = kWarpSize >> 1; mask >= 1; mask >>= 1) {
    val_f32 += __shfl_xor_sync(0xffffffff, val_f32, mask);
  }
  return val_f32;
}

template<const int NUM_THREADS = 256>
__global__ void dot_prod_f16_acc_with_f32_kernel(half* a, half* b, float* y, int N) {
  int tid = threadIdx.x;
  int idx = blockIdx.x * NUM_THREADS + tid;
  constexpr int NUM_WARPS = (NUM_THREADS + WARP_SIZE - 1) / WARP_SIZE;
  __shared__ float reduce_smem[NUM_WARPS];

  // keep the data in register is enougth for warp operaion.
  half prod_f16 = (idx < N) ? __hmul(a[idx], b[idx]) : __float2half(0.0f);
  int warp = tid / WARP_SIZE;
  int lane = tid % WARP_SIZE;
  // perform warp sync reduce.
  float prod = warp_reduce_sum_f16_acc_with_f32<WARP_SIZE>(prod_f16);
  // warp leaders store the data to shared memory.
  if (lane == 0) reduce_smem[warp] = prod;
  __syncthreads(); // make sure the data is in shared memory.
  // the first warp compute the final sum.
  prod = (lane < NUM_WARPS) ? reduce_smem[lane] : 0.0f;
  if (warp == 0) prod = warp_reduce_sum_f32<NUM_WARPS>(prod);
  if (tid == 0) atomicAdd(y, prod);
}

// Launcher written for this corpus from the file's TORCH_BINDING_DOT_PROD(f16, f32, ...) binding: the result is a
// torch::zeros({1}) tensor (here a cudaMemset), NUM_THREADS_PER_BLOCK = 256, grid((N + 256 - 1) / 256).
/* kernellsp
sizes = { N = 67108864 }
tolerance = { rtol = 1e-3, atol = 1e-2 }
shapes = [{ N = 1000 }, { N = 4097 }, { N = 3 }]
[args]
a = { dtype = "f16", dir = "in", count = "N", dist = "uniform(-1, 1)" }
b = { dtype = "f16", dir = "in", count = "N", dist = "uniform(0, 1)" }
y = { dtype = "f32", dir = "out", count = 1 }
N = { value = "N" }
*/
extern "C" void solve(half* a, half* b, float* y, int N) {
  cudaMemset(y, 0, sizeof(float));
  static const int NUM_THREADS_PER_BLOCK = 256;
  const int NUM_BLOCKS = (N + NUM_THREADS_PER_BLOCK - 1) / NUM_THREADS_PER_BLOCK;
  dim3 block(NUM_THREADS_PER_BLOCK);
  dim3 grid(NUM_BLOCKS);
  dot_prod_f16_acc_with_f32_kernel<NUM_THREADS_PER_BLOCK><<<grid, block>>>(a, b, y, N);
}
