// Source: https://github.com/zjin-lcf/HeCBench/blob/1a140e8988841757490f1bc2afd3d02207c05e67/src/convolution1D-cuda/main.cu (lines 1-5, 22-44), license BSD-3-Clause
/*
  Reference
  Chapter 7 in Programming massively parallel processors,
  A hands-on approach (D. Kirk and W. Hwu)
 */
// License: BSD-3-Clause (zjin-lcf/HeCBench LICENSE: Copyright (c) 2020-2023, Zheming Jin. All rights reserved.). The source file has no header of its own.
// solve() follows conv1D<T>() for T = float and block size 256: the mask goes to the templated
// __constant__ array with cudaMemcpyToSymbol (here device-to-device), grids(input_width / bs),
// blocks(bs); input_width is a multiple of the block size, so the kernel has no bound check on out[i].
#include <cuda_runtime.h>

#define MAX_MASK_WIDTH 10
#define MAX_BLOCK_SIZE 1024

template<typename T>
__constant__ T mask [MAX_MASK_WIDTH];

template<typename T>
__global__
void conv1d(const T * __restrict__ in,
                  T * __restrict__ out,
            const int input_width,
            const int mask_width)
{
  int i = threadIdx.x + blockIdx.x * blockDim.x;
  T s = 0;
  int start = i - mask_width / 2;
  for (int j = 0; j < mask_width; j++) {
    if (start + j >= 0 && start + j < input_width) {
      s += in[start + j] * mask<T>[j];
    }
  }
  out[i] = s;
}

/* kernellsp
sizes = { N = 33554432, MW = 7 }
tolerance = { rtol = 1e-5, atol = 1e-4 }
shapes = [{ N = 768, MW = 3 }, { N = 4352, MW = 9 }, { N = 256, MW = 1 }]
[args]
in = { dtype = "f32", dir = "in", count = "N", dist = "uniform(0, 255)" }
out = { dtype = "f32", dir = "out", count = "N" }
mask_d = { dtype = "f32", dir = "in", count = "MW", dist = "uniform(0, 1)" }
input_width = { value = "N" }
mask_width = { value = "MW" }
*/
extern "C" void solve(const float* in, float* out, const float* mask_d, int input_width, int mask_width)
{
  cudaMemcpyToSymbol(mask<float>, mask_d, mask_width * sizeof(float), 0, cudaMemcpyDeviceToDevice);
  int bs = 256;
  dim3 grids (input_width / bs);
  dim3 blocks (bs);
  conv1d <<< grids, blocks >>> (in, out, input_width, mask_width);
}
