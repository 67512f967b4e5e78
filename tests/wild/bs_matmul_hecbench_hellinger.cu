// Source: https://github.com/zjin-lcf/HeCBench/blob/38a6f7a79309c5c428925eeb370c38b5e9a60a9b/src/hellinger-cuda/main.cu (lines 7-17, 20-23, 35-55), license BSD-3-Clause
// License: BSD-3-Clause (zjin-lcf/HeCBench LICENSE: Copyright (c) 2020-2023, Zheming Jin. All rights reserved.). The source file has no header of its own.
// Hellinger distance between the rows of a and the columns of b: a GEMM-shaped loop with sqrt(a*b)
// in place of a*b. Launch as in main(): dimBlock(16, 16), dimGrid(ceil(P / 16), ceil(M / 16)).
#include <cuda_runtime.h>
#include <math.h>

#define BLOCK_SIZE 16

#ifdef DOUBLE_PRECISION
  #define SQRT sqrt
  #define FABS fabs
  #define FP double
#else
  #define SQRT sqrtf
  #define FABS fabsf
  #define FP float
#endif

/**
 * Each element of the product matrix c[i][j] is computed from a unique row and
 * column of the factor matrices, a[i][k] and b[k][j]
 */
/* kernellsp
sizes = { M = 2048, N = 1024, K = 2048 }
launch = { grid = ["ceil_div(K, 16)", "ceil_div(M, 16)"], block = [16, 16] }
tolerance = { rtol = 1e-4, atol = 1e-5, norm_rtol = 1e-5 }
shapes = [{ M = 67, N = 45, K = 33 }, { M = 1000, N = 1, K = 9 }, { M = 3, N = 129, K = 200 }]
[args]
a = { dtype = "f32", dir = "in", count = "M * N", dist = "uniform(0, 0.0001)" }
b = { dtype = "f32", dir = "in", count = "N * K", dist = "uniform(0, 0.0001)" }
c = { dtype = "f32", dir = "out", count = "M * K" }
m = { value = "M" }
n = { value = "N" }
k = { value = "K" }
*/
__global__ 
void hellinger(
  const FP *__restrict__ a, 
  const FP *__restrict__ b, 
        FP *__restrict__ c, 
  const int m, const int n, const int k)
{
    int col = blockIdx.x * blockDim.x + threadIdx.x;
    int row = blockIdx.y * blockDim.y + threadIdx.y;
    if( col < k && row < m)
    {
        FP sum = 0;
        for(int i = 0; i < n; i++)
        {
            sum += SQRT(a[row * n + i] * b[i * k + col]);
        }
        const FP value = (FP)1.0 - sum;
        const FP gate = (!signbit(value));
        c[row * k + col] = SQRT(gate * value);
    }
}
