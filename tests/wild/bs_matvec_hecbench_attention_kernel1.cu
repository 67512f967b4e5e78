// Source: https://github.com/zjin-lcf/HeCBench/blob/682bcb0b59f82a0876c62724a21c1253b46715b2/src/attention-cuda/kernels.h (lines 5-22), license BSD-3-Clause
// License: BSD-3-Clause (zjin-lcf/HeCBench LICENSE: Copyright (c) 2020-2023, Zheming Jin. All rights reserved.). The source file has no header of its own.
// solve() follows the naive implementation (impl 0) in attention_device() (main.cu): cudaMemset of
// exp_sum, then attention_kernel1<<<(n+255)/256, 256>>>: one thread per key row (row-major key[n][d]),
// dot with the query vector, and an atomicAdd of exp(dot) into a single accumulator.
#include <cuda_runtime.h>

__global__
void attention_kernel1 (
    const float*__restrict__ key,
    const float*__restrict__ query,
    float*__restrict__ dot_product,
    float*__restrict__ exp_sum,
    const int n,
    const int d)
{
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) {
    float sum = 0;
    for (int j = 0; j < d; j++)
      sum += key[i * d + j] * query[j];
    dot_product[i] = sum;
    atomicAdd(exp_sum, __expf(sum));
  }
}

/* kernellsp
sizes = { NR = 65536, D = 512 }
tolerance = { rtol = 1e-4, atol = 1e-5, norm_rtol = 1e-5 }
shapes = [{ NR = 1000, D = 33 }, { NR = 4097, D = 1 }, { NR = 3, D = 1000 }]
[args]
key = { dtype = "f32", dir = "in", count = "NR * D", dist = "uniform(-0.01, 0.01)" }
query = { dtype = "f32", dir = "in", count = "D", dist = "uniform(-0.01, 0.01)" }
dot_product = { dtype = "f32", dir = "out", count = "NR" }
exp_sum = { dtype = "f32", dir = "out", count = "1" }
n = { value = "NR" }
d = { value = "D" }
*/
extern "C" void solve(const float* key, const float* query, float* dot_product, float* exp_sum,
                      const int n, const int d)
{
  cudaMemset(exp_sum, 0, 4);
  attention_kernel1<<<(n+255)/256, 256>>>(key, query, dot_product, exp_sum, n, d);
}
