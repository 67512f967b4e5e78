// Source: https://github.com/zjin-lcf/HeCBench/blob/280045f0659705899a18d289c3ed6c4fb0b3459b/src/scan-cuda/main.cu (lines 89-143; launch from lines 178-181, 187), license BSD-3-Clause
// License: BSD-3-Clause (zjin-lcf/HeCBench LICENSE: Copyright (c) 2020-2023, Zheming Jin. All rights reserved.). The source file has no header of its own.
// Work-efficient (Blelloch) exclusive scan of each N-element segment in shared memory, GPU Gems 3 ch. 39.
// solve() follows runTest<int, 512>(): grids(16 * multiProcessorCount), blocks(N / 2), the kernel
// loops over the segments with a grid stride.
#include <cuda_runtime.h>
#include <stdint.h>

template<typename T, int N>
__global__ void scan(
  const int64_t nblocks,
        T *__restrict__ g_odata,
  const T *__restrict__ g_idata)
{
  __shared__ T temp[N];

  for (int64_t bid = blockIdx.x; bid < nblocks; bid += gridDim.x)
  {
    auto gi = g_idata + bid * N;
    auto go = g_odata + bid * N;

    int thid = threadIdx.x;
    int offset = 1;
    temp[2*thid]   = gi[2*thid];
    temp[2*thid+1] = gi[2*thid+1];
    for (int d = N >> 1; d > 0; d >>= 1)
    {
      __syncthreads();
      if (thid < d)
      {
        // e.g.
        // thread 0: ai = 0, bi = 1 (offset = 1) d = 4
        // thread 1: ai = 2, bi = 3 (offset = 1) d = 4
        // thread 2: ai = 4, bi = 5 (offset = 1) d = 4
        // thread 3: ai = 6, bi = 7 (offset = 1) d = 4
        // thread 0: ai = 1, bi = 3 (offset = 2) d = 2
        // thread 1: ai = 5, bi = 7 (offset = 2) d = 2
        // thread 0: ai = 3, bi = 7 (offset = 4) d = 1
        int ai = offset*(2*thid+1)-1;
        int bi = offset*(2*thid+2)-1;
        temp[bi] += temp[ai];
      }
      offset *= 2;
    }

    if (thid == 0) temp[N-1] = 0; // clear the last elem
    for (int d = 1; d < N; d *= 2) // traverse down
    {
      offset >>= 1;
      __syncthreads();
      if (thid < d)
      {
        int ai = offset*(2*thid+1)-1;
        int bi = offset*(2*thid+2)-1;
        T t = temp[ai];
        temp[ai] = temp[bi];
        temp[bi] += t;
      }
    }
    go[2*thid] = temp[2*thid];
    go[2*thid+1] = temp[2*thid+1];
  }
}

/* kernellsp
sizes = { NBLK = 65536 }
shapes = [{ NBLK = 1 }, { NBLK = 3 }, { NBLK = 1000 }]
[args]
nblocks = { value = "NBLK" }
g_odata = { dtype = "i32", dir = "out", count = "NBLK * 512" }
g_idata = { dtype = "i32", dir = "in", count = "NBLK * 512", dist = "randint(1, 5)" }
*/
extern "C" void solve(const int64_t nblocks, int *g_odata, const int *g_idata)
{
  cudaDeviceProp prop;
  cudaGetDeviceProperties(&prop, 0);
  dim3 grids (16 * prop.multiProcessorCount);
  dim3 blocks (512/2);
    scan<int, 512><<<grids, blocks>>>(nblocks, g_odata, g_idata);
}
