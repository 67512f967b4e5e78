// Source: https://github.com/myurtoglu/cudaforengineers/blob/b9d90c795dfa63988985e8caee9a1d2a00fb98b0/dd_1d_global/kernel.cu (lines 2, 4-9), license MIT
// Copyright (c) 2015-2016 Duane Storti and Mete Yurtoglu, MIT License (repository LICENSE; the source file has no header of its own).
#include <cuda_runtime.h>
#define TPB 64

/* kernellsp
sizes = { N = 67108864 }
launch = { grid = "ceil_div(N, 64)", block = 64 }
tolerance = { rtol = 1e-5, atol = 1e-3 }
shapes = [{ N = 1000 }, { N = 4097 }, { N = 1 }, { N = 3 }]
[args]
d_out = { dtype = "f32", dir = "inout", count = "N" }
d_in = { dtype = "f32", dir = "in", count = "N" }
size = { value = "N" }
h = { value = 0.01 }
*/
__global__
void ddKernel(float *d_out, const float *d_in, int size, float h) {
  const int i = threadIdx.x + blockDim.x*blockIdx.x;
  if (i >= size - 1 || i == 0) return;
  d_out[i] = (d_in[i - 1] - 2.f*d_in[i] + d_in[i + 1]) / (h*h);
}
