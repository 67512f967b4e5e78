// Source: https://github.com/NVIDIA-developer-blog/code-samples/blob/059d09947cf8c3996df179fcf313977481d6974b/series/cuda-cpp/overlap-data-transfers/async.cu (lines 31-38), license Apache-2.0
// Copyright 2012 NVIDIA Corporation

// Licensed under the Apache License, Version 2.0 (the "License");
// you may not use this file except in compliance with the License.
// You may obtain a copy of the License at

//     http://www.apache.org/licenses/LICENSE-2.0

// Unless required by applicable law or agreed to in writing, software
// distributed under the License is distributed on an "AS IS" BASIS,
// WITHOUT WARRANTIES OR CONDITIONS OF ANY KIND, either express or implied.
// See the License for the specific language governing permissions and
// limitations under the License.

#include <cuda_runtime.h>

/* kernellsp
sizes = { N = 16777216 }
launch = { grid = "N // 256", block = 256 }
tolerance = { rtol = 1e-5, atol = 1e-5 }
shapes = [{ N = 256 }, { N = 4096 }, { N = 1280 }]
[args]
a = { dtype = "f32", dir = "inout", count = "N" }
offset = { value = 0 }
*/
__global__ void kernel(float *a, int offset)
{
  int i = offset + threadIdx.x + blockIdx.x*blockDim.x;
  float x = (float)i;
  float s = sinf(x); 
  float c = cosf(x);
  a[i] = a[i] + sqrtf(s*s+c*c);
}
