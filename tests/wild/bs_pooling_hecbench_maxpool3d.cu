// Source: https://github.com/zjin-lcf/HeCBench/blob/376c6be666dcecee0732bf8d58af632c48db050d/src/maxpool3d-cuda/main.cu (lines 8-44), license BSD-3-Clause
// License: BSD-3-Clause (zjin-lcf/HeCBench LICENSE: Copyright (c) 2020-2023, Zheming Jin. All rights reserved.). The source file has no header of its own.
// Launch as in main(): block_dim(8, 8, 4), grid_dim((o_img_width+7)/8, (o_img_height+7)/8,
// (i_img_count+3)/4), Hstride = Vstride = pool size = 2, o_img_* = i_img_* / 2.
#include <cuda_runtime.h>
#include <math.h>

typedef float DTYPE;

/* kernellsp
sizes = { W = 4096, H = 4096, CNT = 4, S = 2, OW = "W // S", OH = "H // S" }
launch = { grid = ["ceil_div(OW, 8)", "ceil_div(OH, 8)", "ceil_div(CNT, 4)"], block = [8, 8, 4] }
shapes = [{ W = 67, H = 45, CNT = 3 }, { W = 1000, H = 2, CNT = 1 }, { W = 33, H = 65, CNT = 5 }]
[args]
i_img = { dtype = "f32", dir = "in", count = "W * H * CNT", dist = "uniform(0, 1)" }
o_img = { dtype = "f32", dir = "out", count = "OW * OH * CNT" }
Hstride = { value = "S" }
Vstride = { value = "S" }
pool_width = { value = "S" }
pool_height = { value = "S" }
i_img_count = { value = "CNT" }
i_img_width = { value = "W" }
i_img_height = { value = "H" }
o_img_width = { value = "OW" }
o_img_height = { value = "OH" }
*/
__global__ void
maxpool3d(
  const DTYPE* i_img,
        DTYPE* o_img,
  const int Hstride,
  const int Vstride,
  const int pool_width,
  const int pool_height,
  const int i_img_count,
  const int i_img_width,
  const int i_img_height,
  const int o_img_width,
  const int o_img_height )
{
  const int x = blockIdx.x * blockDim.x + threadIdx.x;
  const int y = blockIdx.y * blockDim.y + threadIdx.y;
  const int z = blockIdx.z * blockDim.z + threadIdx.z;
  if (x >= o_img_width || y >= o_img_height || z >= i_img_count)
    return;

  const int xidx = Hstride * x;
  const int yidx = Vstride * y;
  DTYPE maxval = (DTYPE)0;

  for (int r = 0; r < pool_height; r++) 
  { 
    const int idxIntmp = ((z * i_img_height + yidx + r) * i_img_width) + xidx;
    for(int c = 0; c < pool_width; c++)
    {
      const int idxIn = idxIntmp + c;
      maxval = fmaxf(maxval, i_img[idxIn]);
    }
  }
  o_img[(((z * o_img_height) + y) * o_img_width) + x] = maxval;
}
