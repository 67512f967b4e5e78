// Source: https://github.com/gpu-mode/lectures/blob/ce7fd929574277657723d9f035a91e17ee69c011/lecture8/coalesce.cu (lines 4-9), license Apache-2.0
// Repository license: Apache License 2.0 (Copyright 2024 CUDA MODE); the source file has no header of its own.
#include <cuda_runtime.h>

/* kernellsp
sizes = { N = 33554432 }
launch = { grid = "ceil_div(N, 128)", block = 128 }
shapes = [{ N = 1000 }, { N = 4097 }, { N = 1 }, { N = 33 }]
[args]
in = { dtype = "f32", dir = "in", count = "N" }
out = { dtype = "f32", dir = "out", count = "N" }
n = { value = "N" }
*/
__global__ void copyDataNonCoalesced(float *in, float *out, int n) {
    int index = blockIdx.x * blockDim.x + threadIdx.x;
    if (index < n) {
        out[index] = in[(index * 2) % n];
    }
}
