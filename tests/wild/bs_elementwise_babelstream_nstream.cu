// Source: https://github.com/UoB-HPC/BabelStream/blob/02e06d6fbe041861be0e522ef3dfa3b3f9c42c3a/src/cuda/CUDAStream.cu (lines 17-19, 205-213; launch from lines 218-219), license BSD-3-Clause
// Source: https://github.com/UoB-HPC/BabelStream/blob/062a72ee0b8c5c4e38f48e1f22ee80b604397eea/src/cuda/CUDAStream.h (line 24), license BSD-3-Clause
// Source: https://github.com/UoB-HPC/BabelStream/blob/107cb785fd48b798d4dfc11494a4e6ea6d71cce7/src/Stream.h (line 27), license BSD-3-Clause
// Copyright (c) 2015-16 Tom Deakin, Simon McIntosh-Smith,
// University of Bristol HPC
//
// For full license terms please see the LICENSE file distributed with this
// source code
// License: BSD-3-Clause-style (UoB-HPC/BabelStream LICENSE: Copyright (c) 2015, Tom Deakin and Simon McIntosh-Smith, University of Bristol. All rights reserved.)
// solve() reproduces CUDAStream<T>::nstream() with T = float (BabelStream --float): grid-stride kernel,
// ceil_div(array_size, TBSIZE) blocks of TBSIZE threads.
#include <cuda_runtime.h>

#define startScalar (0.4)
#define TBSIZE 1024

// It is best practice to include __device__ and constexpr even though in BabelStream it only needs to be __host__ const
__host__ __device__ constexpr size_t ceil_div(size_t a, size_t b) { return (a + b - 1) / b; }



template <typename T>
__global__ void nstream_kernel(T * a, const T * b, const T * c, int array_size)
{
  const T scalar = startScalar;
  for (int i = threadIdx.x + blockDim.x * blockIdx.x; i < array_size; i += gridDim.x * blockDim.x) {
    a[i] += b[i] + scalar * c[i];
  }
}

/* kernellsp
sizes = { N = 33554432 }
tolerance = { rtol = 1e-6, atol = 1e-6 }
shapes = [{ N = 1000 }, { N = 4097 }, { N = 3 }]
[args]
a = { dtype = "f32", dir = "inout", count = "N", dist = "uniform(0, 1)" }
b = { dtype = "f32", dir = "in", count = "N", dist = "uniform(0, 1)" }
c = { dtype = "f32", dir = "in", count = "N", dist = "uniform(0, 1)" }
array_size = { value = "N" }
*/
extern "C" void solve(float* a, const float* b, const float* c, int array_size)
{
  size_t blocks = ceil_div(array_size, TBSIZE);
  nstream_kernel<<<blocks, TBSIZE>>>(a, b, c, array_size);
}
