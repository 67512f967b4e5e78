// Source: https://github.com/UoB-HPC/BabelStream/blob/02e06d6fbe041861be0e522ef3dfa3b3f9c42c3a/src/cuda/CUDAStream.cu (lines 9-15, 224-241; launch from lines 46-49, 246), license BSD-3-Clause
// Source: https://github.com/UoB-HPC/BabelStream/blob/062a72ee0b8c5c4e38f48e1f22ee80b604397eea/src/cuda/CUDAStream.h (line 24), license BSD-3-Clause
// Copyright (c) 2015-16 Tom Deakin, Simon McIntosh-Smith,
// University of Bristol HPC
//
// For full license terms please see the LICENSE file distributed with this
// source code
// License: BSD-3-Clause-style (UoB-HPC/BabelStream LICENSE: Copyright (c) 2015, Tom Deakin and Simon McIntosh-Smith, University of Bristol. All rights reserved.)
// solve() reproduces CUDAStream<T>::dot() (T = double, the BabelStream default): dot_num_blocks =
// 4 * multiProcessorCount blocks of TBSIZE threads, one partial sum per block (the host adds them).
#include <cuda_runtime.h>
#include <cstdio>
#include <cstdlib>

#define TBSIZE 1024

[[noreturn]] inline void error(char const* file, int line, char const* expr, cudaError_t e) {
  std::fprintf(stderr, "Error at %s:%d: %s (%d)\n  %s\n", file, line, cudaGetErrorString(e), e, expr);
  exit(e);
}

// The do while is there to make sure you remember to put a semi-colon after calling CU
#define CU(EXPR) do { auto __e = (EXPR); if (__e != cudaSuccess) error(__FILE__, __LINE__, #EXPR, __e); } while(false)

template <class T>
__global__ void dot_kernel(const T * a, const T * b, T* sums, int array_size)
{
  __shared__ T smem[TBSIZE];
  T tmp = T(0.);
  const size_t tidx = threadIdx.x;
  for (int i = tidx + (size_t)blockDim.x * blockIdx.x; i < array_size; i += gridDim.x * blockDim.x) {
    tmp += a[i] * b[i];
  }
  smem[tidx] = tmp;

  for (int offset = blockDim.x / 2; offset > 0; offset /= 2) {
    __syncthreads();
    if (tidx < offset) smem[tidx] += smem[tidx+offset];
  }

  if (tidx == 0) sums[blockIdx.x] = smem[tidx];
}

/* kernellsp
sizes = { N = 33554432 }
tolerance = { rtol = 1e-9, atol = 1e-9, norm_rtol = 1e-10 }
shapes = [{ N = 1000 }, { N = 4097 }, { N = 3 }]
[args]
a = { dtype = "f64", dir = "in", count = "N", dist = "uniform(-0.99, 1.0)" }
b = { dtype = "f64", dir = "in", count = "N", dist = "uniform(-0.99, 1.0)" }
sums = { dtype = "f64", dir = "inout", count = "4096", dist = "ones()" }
array_size = { value = "N" }
*/
extern "C" void solve(const double* a, const double* b, double* sums, int array_size)
{
  // Query device for sensible dot kernel block count
  cudaDeviceProp props;
  CU(cudaGetDeviceProperties(&props, 0));
  int dot_num_blocks = props.multiProcessorCount * 4;
  dot_kernel<<<dot_num_blocks, TBSIZE>>>(a, b, sums, array_size);
}
