// Source: https://github.com/DefTruth/CUDA-Learn-Notes/blob/691c539b0e6aaa5c349bff803068e351cbf28692/sgemv/sgemv.cu (lines 13, 18-50), license GPL-3.0
// License: GPL-3.0 (README: "License: GNU General Public License v3.0"), https://github.com/xlite-dev/LeetCUDA (formerly DefTruth/CUDA-Learn-Notes)
#include <cuda_runtime.h>
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

// SGEMV: Warp SGEMV K32
// 假设K为32的倍数，每个warp负责一行
// grid(M/4), block(32,4) blockDim.x=32=K, blockDim.y=4
// a: MxK, x: Kx1, y: Mx1, compute: y = a * x
/* kernellsp
sizes = { M = 16384, K = 4096 }
launch = { grid = "ceil_div(M, 4)", block = [32, 4] }
tolerance = { rtol = 1e-3, atol = 1e-4, norm_rtol = 1e-5 }
shapes = [{ M = 1000, K = 32 }, { M = 33, K = 320 }, { M = 3, K = 4096 }, { M = 4097, K = 64 }]
[args]
a = { dtype = "f32", dir = "in", count = "M * K", dist = "uniform(-1, 1)" }
x = { dtype = "f32", dir = "in", count = "K", dist = "uniform(-1, 1)" }
y = { dtype = "f32", dir = "out", count = "M" }
M = { value = "M" }
K = { value = "K" }
*/
__global__ void sgemv_k32(float* a, float* x, float* y, int M, int K) {
  int tx = threadIdx.x;         // 0~31
  int ty = threadIdx.y;         // 0~4
  int bx = blockIdx.x;          // 0~M/4
  int lane = tx % WARP_SIZE;    // 0~31
  int m = bx * blockDim.y + ty; // (0~M/4) * 4 + (0~3)
  if (m < M) {
    float sum = 0.0f;
    int NUM_WARPS = (K + WARP_SIZE - 1) / WARP_SIZE;
    #pragma unroll
    for (int w = 0; w < NUM_WARPS; ++w) {
      // 若NUM_WARPS>=2，先将当前行的数据累加到第一个warp中
      int k = w * WARP_SIZE + lane;
      sum += a[m * K + k] * x[k];
    }
    sum = warp_reduce_sum_f32<WARP_SIZE>(sum);
    if (lane == 0) y[m] = sum;
  }
}
