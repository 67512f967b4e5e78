// Source: https://github.com/xlite-dev/LeetCUDA/blob/8ed199e5a46548f13381e494c60ed8a64e0ad752/kernels/embedding/embedding.cu (lines 16-23), license GPL-3.0
// License: GPL-3.0 (README: "License: GNU General Public License v3.0"), https://github.com/xlite-dev/LeetCUDA (formerly DefTruth/CUDA-Learn-Notes)
#include <cuda_runtime.h>
/* kernellsp
sizes = { N = 65536, E = 1024, V = 32000 }
launch = { grid = "N", block = "E" }
shapes = [{ N = 1000, E = 100, V = 50 }, { N = 33, E = 1023, V = 7 }, { N = 3, E = 1, V = 1000 }]
[args]
idx = { dtype = "i32", dir = "in", count = "N", dist = "randint(0, V)" }
weight = { dtype = "f32", dir = "in", count = "V * E" }
output = { dtype = "f32", dir = "out", count = "N * E" }
n = { value = "N" }
emb_size = { value = "E" }
*/
__global__ void embedding_f32_kernel(const int *idx, float *weight,
                                     float *output, int n, int emb_size) {
  int tx = threadIdx.x;
  int bx = blockIdx.x;
  int tid = bx * blockDim.x + tx;
  int offset = idx[bx] * emb_size;
  output[bx * emb_size + tx] = weight[offset + tx];
}
