// Source: https://github.com/myurtoglu/cudaforengineers/blob/f19eb6d1a0d9a3beef8c3df3fb7d28d89530781c/dist_3d/kernel.cu (lines 4-24), license MIT
// Copyright (c) 2015-2016 Duane Storti and Mete Yurtoglu, MIT License (repository LICENSE; the source file has no header of its own).
#include <cuda_runtime.h>

#define TX 8 // number of threads per block along x-axis
#define TY 8 // number of threads per block along y-axis
#define TZ 8 // number of threads per block along z-axis

int divUp(int a, int b) { return (a + b - 1) / b; }

__device__
float distance(int c, int r, int s, float3 pos) {
  return sqrtf((c - pos.x)*(c - pos.x) + (r - pos.y)*(r - pos.y) +
               (s - pos.z)*(s - pos.z));
}

__global__
void distanceKernel(float *d_out, int w, int h, int d, float3 pos) {
  const int c = blockIdx.x * blockDim.x + threadIdx.x; // column
  const int r = blockIdx.y * blockDim.y + threadIdx.y; // row
  const int s = blockIdx.z * blockDim.z + threadIdx.z; // stack
  const int i = c + r*w + s*w*h;
  if ((c >= w) || (r >= h) || (s >= d)) return;
  d_out[i] = distance(c, r, s, pos); // compute and store result
}

// Launcher written for the corpus: the kernel takes a float3 by value, so solve() builds it and
// launches exactly as main() does (source lines 30-33: blockSize(TX, TY, TZ), gridSize(divUp(...))).
/* kernellsp
sizes = { W = 256, H = 256, D = 256 }
tolerance = { rtol = 1e-6, atol = 1e-5 }
shapes = [{ W = 33, H = 17, D = 9 }, { W = 1, H = 1, D = 1 }, { W = 100, H = 7, D = 3 }]
[args]
d_out = { dtype = "f32", dir = "out", count = "W * H * D" }
w = { value = "W" }
h = { value = "H" }
d = { value = "D" }
px = { value = 0.0 }
py = { value = 0.0 }
pz = { value = 0.0 }
*/
extern "C" void solve(float *d_out, int w, int h, int d, float px, float py, float pz)
{
  const float3 pos = { px, py, pz }; // set reference position
  const dim3 blockSize(TX, TY, TZ);
  const dim3 gridSize(divUp(w, TX), divUp(h, TY), divUp(d, TZ));
  distanceKernel<<<gridSize, blockSize>>>(d_out, w, h, d, pos);
}
