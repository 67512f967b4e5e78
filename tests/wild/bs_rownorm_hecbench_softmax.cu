// Source: https://github.com/zjin-lcf/HeCBench/blob/18c78aceb3258a957ce5e5b789e3643ef7345791/src/softmax-cuda/main.cu (lines 8, 29-46), license BSD-3-Clause
// License: BSD-3-Clause (zjin-lcf/HeCBench LICENSE: Copyright (c) 2020-2023, Zheming Jin. All rights reserved.). The source file has no header of its own.
// Launch as in main() for implementation 0 (naive): grids((numSlice + BLOCK_SIZE - 1) / BLOCK_SIZE),
// blocks(BLOCK_SIZE); one thread per row, three passes over the row.
#include <cuda_runtime.h>
#include <math.h>

#define BLOCK_SIZE 256

/* kernellsp
sizes = { NS = 16384, SS = 1024 }
launch = { grid = "ceil_div(NS, 256)", block = 256 }
tolerance = { rtol = 1e-3, atol = 1e-6, norm_rtol = 1e-4 }
shapes = [{ NS = 1000, SS = 100 }, { NS = 33, SS = 1023 }, { NS = 3, SS = 2 }]
[args]
numSlice = { value = "NS" }
sliceSize = { value = "SS" }
src = { dtype = "f32", dir = "in", count = "NS * SS", dist = "uniform(0, 13)" }
dest = { dtype = "f32", dir = "out", count = "NS * SS" }
*/
__global__
void softMax (const int numSlice, const int sliceSize,
              const float* src, float* dest)
{
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= numSlice) return;
  float max_ = src[i * sliceSize];
  for (int j = 0; j < sliceSize; j++) {
    max_ = max(max_, src[i * sliceSize + j]);
  }
  float sum = 0;
  for (int j = 0; j < sliceSize; j++) {
    sum += expf(src[i * sliceSize + j] - max_);
  }
  for (int j = 0; j < sliceSize; j++) {
    dest[i * sliceSize + j] = expf(src[i * sliceSize + j] - max_) / sum;
  }
}
