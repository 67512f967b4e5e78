// Source: https://github.com/utcs-scea/altis/blob/179f13e5c6a6d699f5534128a7c0bdaafe6ae0ae/src/cuda/level2/gups/gups.cu (lines 127, 135, 143-148, 156, 194-219, 227-230, 240-268, 296-307; launch from lines 352, 358-359, 376-379, 386), license BSD-2-Clause
// License: BSD-2-Clause (utcs-scea/altis LICENSE: Copyright (c) 2020, University of Texas at Austin. All rights reserved.)
// GUPS (HPCC RandomAccess, contributed by the DARPA HPCS program) as packaged in Altis. solve() follows
// RunBenchmark(): starts() fills the constant table, then d_bench<ATOMICTYPE_CAS> runs on
// multiProcessorCount * (maxThreadsPerMultiProcessor / warpSize) blocks of warpSize threads. The XOR
// updates commute, so the final table does not depend on the update order.
#include <cuda_runtime.h>
#include <stdint.h>
#include <stddef.h>

#define POLY 0x0000000000000007ULL

#define DEFAULT_GPU 0

union benchtype {
  /// <summary>	The 64. </summary>
  uint64_t u64;
  /// <summary>	The 32. </summary>
  uint2 u32;
};

static __constant__ uint64_t c_m2[64];

static __device__ uint64_t
d_starts(size_t n)
{
  if (n == 0) {
    return 1;
  }

  int i = 63 - __clzll(n);

  uint64_t ran = 2;
  while (i > 0) {
    uint64_t temp = 0;
    for (int j = 0; j < 64; j++) {
      if ((ran >> j) & 1) {
        temp ^= c_m2[j];
      }
    }
    ran = temp;
    i -= 1;
    if ((n >> i) & 1) {
      ran = (ran << 1) ^ ((int64_t) ran < 0 ? POLY : 0);
    }
  }

  return ran;
}

enum atomictype_t {
  ATOMICTYPE_CAS,
  ATOMICTYPE_XOR,
};

template<atomictype_t ATOMICTYPE>
__global__ void
d_bench(size_t n, benchtype *t)
{
  size_t num_threads = gridDim.x * blockDim.x;
  size_t thread_num = blockIdx.x * blockDim.x + threadIdx.x;
  size_t start = thread_num * 4 * n / num_threads;
  size_t end = (thread_num + 1) * 4 * n / num_threads;
  benchtype ran;
  ran.u64 = d_starts(start);
  for (ptrdiff_t i = start; i < end; ++i) {
    ran.u64 = (ran.u64 << 1) ^ ((int64_t) ran.u64 < 0 ? POLY : 0);
    switch (ATOMICTYPE) {
    case ATOMICTYPE_CAS:
      unsigned long long int *address, old, assumed;
      address = (unsigned long long int *)&t[ran.u64 & (n - 1)].u64;
      old = *address;
      do {
        assumed = old;
        old = atomicCAS(address, assumed, assumed ^ ran.u64);
      } while  (assumed != old);
      break;
    case ATOMICTYPE_XOR:
      atomicXor(&t[ran.u64 & (n - 1)].u32.x, ran.u32.x);
      atomicXor(&t[ran.u64 & (n - 1)].u32.y, ran.u32.y);
      break;
    }
  }
}

static void
starts()
{
  uint64_t m2[64];
  uint64_t temp = 1;
  for (ptrdiff_t i = 0; i < 64; i++) {
    m2[i] = temp;
    temp = (temp << 1) ^ ((int64_t) temp < 0 ? POLY : 0);
    temp = (temp << 1) ^ ((int64_t) temp < 0 ? POLY : 0);
  }
  cudaMemcpyToSymbol(c_m2, m2, sizeof(m2));
}

/* kernellsp
sizes = { N = 8388608 }
shapes = [{ N = 1024 }, { N = 32768 }, { N = 1 }]
[args]
d_t = { dtype = "u64", dir = "inout", count = "N", dist = "randint(0, 1000000)" }
n = { value = "N" }
*/
extern "C" void solve(benchtype *d_t, size_t n)
{
  starts();

  cudaDeviceProp prop;
  cudaGetDeviceProperties(&prop, DEFAULT_GPU);

  dim3 grid(prop.multiProcessorCount *
            (prop.maxThreadsPerMultiProcessor / prop.warpSize));
  // # as if scheduling warps instead of blocks
  dim3 thread(prop.warpSize);
  d_bench<ATOMICTYPE_CAS><<<grid, thread>>>(n, d_t);
}
