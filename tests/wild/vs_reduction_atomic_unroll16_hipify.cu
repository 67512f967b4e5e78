// Source: https://github.com/ROCm/HIPIFY/blob/73fa5bfb660ab183f418d48ab613984bbb5e8209/tests/unit_tests/samples/reduction.cu (lines 59-68; launcher after main()), license MIT (AMD)
/*
Copyright (c) 2015-present Advanced Micro Devices, Inc. All rights reserved.

Permission is hereby granted, free of charge, to any person obtaining a copy
of this software and associated documentation files (the "Software"), to deal
in the Software without restriction, including without limitation the rights
to use, copy, modify, merge, publish, distribute, sublicense, and/or sell
copies of the Software, and to permit persons to whom the Software is
furnished to do so, subject to the following conditions:

The above copyright notice and this permission notice shall be included in
all copies or substantial portions of the Software.

THE SOFTWARE IS PROVIDED "AS IS", WITHOUT WARRANTY OF ANY KIND, EXPRESS OR
IMPLIED, INCLUDING BUT NOT LIMITED TO THE WARRANTIES OF MERCHANTABILITY,
FITNESS FOR A PARTICULAR PURPOSE AND NONINFRINGEMENT.  IN NO EVENT SHALL THE
AUTHORS OR COPYRIGHT HOLDERS BE LIABLE FOR ANY CLAIM, DAMAGES OR OTHER
LIABILITY, WHETHER IN AN ACTION OF CONTRACT, TORT OR OTHERWISE, ARISING FROM,
OUT OF OR IN CONNECTION WITH THE SOFTWARE OR THE USE OR OTHER DEALINGS IN
THE SOFTWARE.
*/

#include <algorithm>
#include <cuda_runtime.h>

__global__ void atomic_reduction_kernel2(int *in, int *out, int ARRAYSIZE) {
  int sum = int(0);
  int idx = blockIdx.x * blockDim.x + threadIdx.x;
  for(int i = idx * 16; i < ARRAYSIZE; i += blockDim.x * gridDim.x * 16) {
    sum += in[i] + in[i+1] + in[i+2] + in[i+3] + in[i+4] + in[i+5] + in[i+6] + in[i+7] + in[i+8] + in[i+9] + in[i+10]
         + in[i+11] + in[i+12] + in[i+13] + in[i+14] + in[i+15];
  }
  // CHECK: atomicAdd(out, sum);
  atomicAdd(out, sum);
}

// Launcher (not in the original): main()'s launch configuration and the
// cudaMemsetAsync of the accumulator before each launch.
/* kernellsp
sizes = { N = 52428800 }
shapes = [{ N = 1008 }, { N = 4096 }, { N = 48 }]
[args]
in = { dtype = "i32", dir = "in", count = "N", dist = "randint(0, 2)" }
out = { dtype = "i32", dir = "out", count = 1 }
ARRAYSIZE = { value = "N" }
*/
extern "C" void solve(int *in, int *out, unsigned int ARRAYSIZE) {
  int threads = 256;
  int blocks = std::min((ARRAYSIZE + threads - 1) / threads, 2048u);
  cudaMemsetAsync(out, 0, sizeof(int));
  atomic_reduction_kernel2<<<blocks, threads>>>(in, out, ARRAYSIZE);
}
