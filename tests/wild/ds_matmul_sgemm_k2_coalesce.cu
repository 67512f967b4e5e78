// Source: https://github.com/siboehm/SGEMM_CUDA/blob/d668922980d06f4263a6b34201ab50ab28149af4/src/kernels/2_kernel_global_mem_coalesce.cuh (lines 9-24), license MIT
// Source: https://github.com/siboehm/SGEMM_CUDA/blob/1d2038c7b4c32cf4ff60668bce332721c24ec66d/src/runner.cu (lines 159-165), license MIT
// Source: https://github.com/siboehm/SGEMM_CUDA/blob/1dfc00d29e7cf52ba340b846439b787d81ae62bc/src/kernels/3_kernel_shared_mem_blocking.cuh (line 9: CEIL_DIV), license MIT
// License: MIT, Copyright (c) 2023 Simon Boehm (https://github.com/siboehm/SGEMM_CUDA/blob/master/LICENSE)
#include <cuda_runtime.h>
#include <cstdlib>
#define CEIL_DIV(M, N) (((M) + (N)-1) / (N))

template <const uint BLOCKSIZE>
__global__ void sgemm_global_mem_coalesce(int M, int N, int K, float alpha,
                                          const float *A, const float *B,
                                          float beta, float *C) {
  const int cRow = blockIdx.x * BLOCKSIZE + (threadIdx.x / BLOCKSIZE);
  const int cCol = blockIdx.y * BLOCKSIZE + (threadIdx.x % BLOCKSIZE);

  // if statement is necessary to make things work under tile quantization
  if (cRow < M && cCol < N) {
    float tmp = 0.0;
    for (int i = 0; i < K; ++i) {
      tmp += A[cRow * K + i] * B[i * N + cCol];
    }
    C[cRow * N + cCol] = alpha * tmp + beta * C[cRow * N + cCol];
  }
}

/* kernellsp
sizes = { M = 2048, N = 2048, K = 2048 }
tolerance = { rtol = 1e-3, atol = 1e-3, norm_rtol = 1e-5 }
shapes = [{ M = 67, N = 45, K = 33 }, { M = 1000, N = 1, K = 9 }, { M = 3, N = 129, K = 200 }]
[args]
M = { value = "M" }
N = { value = "N" }
K = { value = "K" }
alpha = { value = 1.5 }
A = { dtype = "f32", dir = "in", count = "M * K", dist = "uniform(-1, 1)" }
B = { dtype = "f32", dir = "in", count = "K * N", dist = "uniform(-1, 1)" }
beta = { value = 0.5 }
C = { dtype = "f32", dir = "inout", count = "M * N", dist = "uniform(-1, 1)" }
*/
void run_sgemm_coalesce(int M, int N, int K, float alpha, float *A, float *B,
                        float beta, float *C) {
  dim3 gridDim(CEIL_DIV(M, 32), CEIL_DIV(N, 32));
  dim3 blockDim(32 * 32);
  sgemm_global_mem_coalesce<32>
      <<<gridDim, blockDim>>>(M, N, K, alpha, A, B, beta, C);
}
