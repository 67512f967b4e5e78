// Source: https://github.com/xlite-dev/LeetCUDA/blob/7a10437230e7df3e9a8d0d8959fb3f38ff120451/kernels/softmax/softmax.cu (lines 13, 46-103, 199-212), license GPL-3.0
// License: GPL-3.0 (README: "License: GNU General Public License v3.0"), https://github.com/xlite-dev/LeetCUDA (formerly DefTruth/CUDA-Learn-Notes)
#include <cuda_runtime.h>
#include <float.h>
#include <math.h>
#define WARP_SIZE 32

// Warp Reduce Sum
template <const int kWarpSize = WARP_SIZE>
__device__ __forceinline__ float warp_reduce_sum_f32(float val) {
#pragma unroll
  for (int mask = kWarpSize >> 1; mask >= 1; mask >>= 1) {
    val += __shfl_xor_sync(0xffffffff, val, mask);
  }
  return val;
}

// Warp Reduce Max
template <const int kWarpSize = WARP_SIZE>
__device__ __forceinline__ float warp_reduce_max_f32(float val) {
#pragma unroll
  for (int mask = kWarpSize >> 1; mask >= 1; mask >>= 1) {
    val = fmaxf(val, __shfl_xor_sync(0xffffffff, val, mask));
  }
  return val;
}

// grid 1D block 1D, grid(N/256), block(256)
template <const int NUM_THREADS = 256>
__device__ float block_reduce_sum_f32(float val) {
  // always <= 32 warps per block (limited by 1024 threads per block)
  constexpr int NUM_WARPS = (NUM_THREADS + WARP_SIZE - 1) / WARP_SIZE;
  int warp = threadIdx.x / WARP_SIZE;
  int lane = threadIdx.x % WARP_SIZE;
  static __shared__ float shared[NUM_WARPS];

  float value = warp_reduce_sum_f32<WARP_SIZE>(val);
  if (lane == 0)
    shared[warp] = value;
  __syncthreads();
  value = (lane < NUM_WARPS) ? shared[lane] : 0.0f;
  value = warp_reduce_sum_f32<NUM_WARPS>(value);
  // WRAN: need to broadcast value to all threads within warp
  value = __shfl_sync(0xffffffff, value, 0, 32);
  return value;
}

template <const int NUM_THREADS = 256>
__device__ float block_reduce_max_f32(float val) {
  // always <= 32 warps per block (limited by 1024 threads per block)
  constexpr int NUM_WARPS = (NUM_THREADS + WARP_SIZE - 1) / WARP_SIZE;
  int warp = threadIdx.x / WARP_SIZE;
  int lane = threadIdx.x % WARP_SIZE;
  static __shared__ float shared[NUM_WARPS];

  float value = warp_reduce_max_f32<WARP_SIZE>(val);
  if (lane == 0)
    shared[warp] = value;
  __syncthreads();
  value = (lane < NUM_WARPS) ? shared[lane] : -FLT_MAX;
  value = warp_reduce_max_f32<NUM_WARPS>(value);
  // WRAN: need to broadcast value to all threads within warp
  value = __shfl_sync(0xffffffff, value, 0, 32);
  return value;
}

// safe_softmax per token
template <const int NUM_THREADS = 256>
__global__ void safe_softmax_f32_per_token_kernel(float *x, float *y, int N) {
  const int tid = threadIdx.x;
  const int idx = blockIdx.x * blockDim.x + tid;

  float val = (idx < N) ? x[idx] : -FLT_MAX;
  float max_val = block_reduce_max_f32<NUM_THREADS>(val); // block max
  float exp_val = (idx < N) ? expf(val - max_val) : 0.0f;
  float exp_sum = block_reduce_sum_f32<NUM_THREADS>(exp_val); // block sum
  // e^x_i/sum(e^x_0,...,e^x_n-1)
  if (idx < N)
    y[idx] = exp_val / exp_sum;
}

// Launcher written for this corpus from the file's DISPATCH_SATE_SOFTMAX_F32_PER_TOKEN_KERNEL(S, H) macro:
// one token of H elements per block, block(H), grid(S), H a power of two from 32 to 1024, N = S * H.
/* kernellsp
sizes = { S = 65536, H = 1024 }
tolerance = { rtol = 1e-3, atol = 1e-6, norm_rtol = 1e-4 }
shapes = [{ S = 1000, H = 128 }, { S = 33, H = 1024 }, { S = 3, H = 32 }, { S = 7, H = 64 }]
[args]
x = { dtype = "f32", dir = "in", count = "S * H", dist = "normal(0, 3)" }
y = { dtype = "f32", dir = "out", count = "S * H" }
S = { value = "S" }
H = { value = "H" }
*/
extern "C" void solve(float *x, float *y, int S, int H) {
  const int N = S * H;
  dim3 block((H));
  dim3 grid((S));
  switch ((H)) {
  case 32:
    safe_softmax_f32_per_token_kernel<32><<<grid, block>>>(x, y, N);
    break;
  case 64:
    safe_softmax_f32_per_token_kernel<64><<<grid, block>>>(x, y, N);
    break;
  case 128:
    safe_softmax_f32_per_token_kernel<128><<<grid, block>>>(x, y, N);
    break;
  case 256:
    safe_softmax_f32_per_token_kernel<256><<<grid, block>>>(x, y, N);
    break;
  case 512:
    safe_softmax_f32_per_token_kernel<512><<<grid, block>>>(x, y, N);
    break;
  case 1024:
    safe_softmax_f32_per_token_kernel<1024><<<grid, block>>>(x, y, N);
    break;
  default:
    break;
  }
}
