// Source: https://github.com/zjin-lcf/HeCBench/blob/280045f0659705899a18d289c3ed6c4fb0b3459b/src/heat2d-cuda/main.cu (lines 10-11, 42-58), license BSD-3-Clause
// License: BSD-3-Clause (zjin-lcf/HeCBench LICENSE: Copyright (c) 2020-2023, Zheming Jin. All rights reserved.). The source file has no header of its own.
// One Jacobi iteration of the 2-D Laplace/heat equation on a periodic Lx x Ly grid (from gpucw/cuda-lapl).
// Launch as in main(): blk(Lx/NTX * Ly/NTY), thr(NTX*NTY) - a 1-D grid covering exactly Lx*Ly sites
// (Lx, Ly multiples of 16, no bound check); sigma = 0.01, delta = sigma/(1+4 sigma), norm = 1/(1+4 sigma).
#include <cuda_runtime.h>

#define NTX 16
#define NTY 16

/*
 * Naive implementation of a single iteration of the lapl
 * equation. Each thread takes one site of the output array
 */
/* kernellsp
sizes = { LX = 4096, LY = 4096 }
launch = { grid = "LX // 16 * LY // 16", block = 256 }
tolerance = { rtol = 1e-5, atol = 1e-6 }
shapes = [{ LX = 48, LY = 16 }, { LX = 16, LY = 80 }, { LX = 1008, LY = 112 }]
[args]
out = { dtype = "f32", dir = "out", count = "LX * LY" }
in = { dtype = "f32", dir = "in", count = "LX * LY", dist = "uniform(0, 1)" }
delta = { value = 0.009615385 }
norm = { value = 0.961538462 }
Lx = { value = "LX" }
Ly = { value = "LY" }
*/
__global__ void
dev_lapl_iter(float *out, const float *in, const float delta, const float norm, const int Lx, const int Ly)
{
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  int x = i % Lx;
  int y = i / Lx;
  int v00 = y*Lx + x;
  int v0p = y*Lx + (x + 1)%Lx;
  int v0m = y*Lx + (Lx + x - 1)%Lx;
  int vp0 = ((y+1)%Ly)*Lx + x;
  int vm0 = ((Ly+y-1)%Ly)*Lx + x;
  out[v00] = norm*in[v00] + delta*(in[v0p] + in[v0m] + in[vp0] + in[vm0]);
}
