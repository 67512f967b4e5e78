// Source: https://github.com/NVIDIA-developer-blog/code-samples/blob/278a59a4379da1e1af19818b6400431a3d55dd12/posts/gups/gups.cu (lines 1, 94, 96-97, 101, 104, 107, 127-148, 158-191, 201-244, 309-319), license BSD-3-Clause (NVIDIA / NISHIMURA Ryohei / Univ. of Tennessee)
// Copyright (c) 2020-2023 NVIDIA CORPORATION & AFFILIATES. All rights reserved.
/* License text of posts/gups/LICENSE.gups.cu (same repository, commit 2d8ba9f1cac52bfb7ec323b49e7a0b0e4d1a2182):
Copyright (c) 2020-2023 NVIDIA CORPORATION & AFFILIATES. All rights reserved.

Copyright (c) 2012 NISHIMURA Ryohei.
Copyright (c) 2012 The University of Tennessee.
All rights reserved.

Redistribution and use in source and binary forms, with or without modification, are permitted provided that the following conditions are met:
· Redistributions of source code must retain the above copyright notice, this list of conditions and the following disclaimer.
· Redistributions in binary form must reproduce the above copyright notice, this list of conditions and the following disclaimer listed in this license in the documentation and/or other materials provided with the distribution.
· Neither the name of the copyright holders nor the names of its contributors may be used to endorse or promote products derived from this software without specific prior written permission.

This software is provided by the copyright holders and contributors "as is" and any express or implied warranties, including, but not limited to, the implied warranties of merchantability and fitness for a particular purpose are disclaimed. in no event shall the copyright owner or contributors be liable for any direct, indirect, incidental, special, exemplary, or consequential damages (including, but not limited to, procurement of substitute goods or services; loss of use, data, or profits; or business interruption) however caused and on any theory of liability, whether in contract, strict liability, or tort (including negligence or otherwise) arising in any way out of the use of this software, even if advised of the possibility of such damage.
*/

#include <assert.h>
#include <stdint.h>
#include <stdio.h>
#include <math.h>

#define ACCESS_PER_ELEM_GMEM_U_UNL_RW 8
#define NUM_THREADS_PER_BLOCK_GMEM 1024
#define POLY 0x0000000000000007ULL

union benchtype
{
  uint64_t data;
};
static __constant__ uint64_t c_m2[64];

#ifndef CUDA_RT_CALL
#define CUDA_RT_CALL(call)                                                         \
  {                                                                                \
    cudaError_t cudaStatus = call;                                                 \
    if (cudaSuccess != cudaStatus)                                                 \
      fprintf(                                                                     \
          stderr,                                                                  \
          "ERROR: CUDA RT call \"%s\" in line %d of file %s failed with %s "       \
          "(%d).\n",                                                               \
          #call,                                                                   \
          __LINE__,                                                                \
          __FILE__,                                                                \
          cudaGetErrorString(cudaStatus),                                          \
          cudaStatus);                                                             \
  }
#endif

static __device__ uint64_t d_starts(size_t n)
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
      ran = (ran << 1) ^ ((int64_t)ran < 0 ? POLY : 0);
    }
  }

  return ran;
}

enum test_t
{
  UPDATE = 0,
  READ,
  WRITE,
  READ_WRITE,
  UPDATE_NO_LOOP,
};

template <test_t T_TYPE>
__global__ void
d_bench(size_t n, size_t working_set, benchtype* t, int accesses_per_elem)
{
  size_t num_threads = gridDim.x * blockDim.x;
  size_t thread_num = blockIdx.x * blockDim.x + threadIdx.x;
  size_t start = thread_num * accesses_per_elem * n / num_threads;
  size_t end = (thread_num + 1) * accesses_per_elem * n / num_threads;
  benchtype ran;
  ran.data = d_starts(start);

#pragma unroll
  for (ptrdiff_t i = start; i < end; ++i) {
    ran.data = (ran.data << 1) ^ ((int64_t)ran.data < 0 ? POLY : 0);
    unsigned long long int *address, old, assumed;
    address = (unsigned long long int*)&t[ran.data & (working_set - 1)].data;
    switch (T_TYPE) {
    case READ:
      old = *address;
      if (old == n) { // basically never executes
        *address = n + 1;
      }
      break;
    case WRITE:
      *address = 1;
      break;
    case READ_WRITE:
      *address += 1;
      break;
    case UPDATE_NO_LOOP:
      old = *address;
      assumed = old;
      old = atomicCAS(address, assumed, assumed ^ ran.data);
      break;
    case UPDATE:
      old = *address;
      do {
        assumed = old;
        old = atomicCAS(address, assumed, assumed ^ ran.data);
      } while (assumed != old);
      break;
    }
  }
}

static void starts()
{
  uint64_t m2[64];
  uint64_t temp = 1;
  for (ptrdiff_t i = 0; i < 64; i++) {
    m2[i] = temp;
    temp = (temp << 1) ^ ((int64_t)temp < 0 ? POLY : 0);
    temp = (temp << 1) ^ ((int64_t)temp < 0 ? POLY : 0);
  }
  CUDA_RT_CALL(cudaMemcpyToSymbol(c_m2, m2, sizeof(m2)));
}

// Launcher (not in the original): main()'s global-memory path for the default
// test (UPDATE, occupancy 100 so working_set = n, accesses_per_elem = 8):
// starts() fills c_m2, then d_bench<UPDATE><<<grid, thread>>>. The table is
// passed as uint64_t (benchtype is a one-member union of uint64_t data).
/* kernellsp
sizes = { N = 16777216 }
shapes = [{ N = 1024 }, { N = 64 }, { N = 4096 }]
[args]
d_t = { dtype = "u64", dir = "inout", count = "N", dist = "arange()" }
n = { value = "N" }
*/
extern "C" void solve(uint64_t *d_t, size_t n)
{
  size_t working_set = (size_t)n * 100 / 100;
  size_t thread = NUM_THREADS_PER_BLOCK_GMEM;
  size_t grid = ceil(1.0 * n / thread);
  starts();
  d_bench<UPDATE><<<grid, thread>>>(n, working_set, (benchtype *)d_t, ACCESS_PER_ELEM_GMEM_U_UNL_RW);
}
