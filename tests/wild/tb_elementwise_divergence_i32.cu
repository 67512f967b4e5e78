// Source: https://github.com/gpu-mode/lectures/blob/ce7fd929574277657723d9f035a91e17ee69c011/lecture8/divergence.cu (lines 4-13), license Apache-2.0
// Repository license: Apache License 2.0 (Copyright 2024 CUDA MODE); the source file has no header of its own.
#include <cuda_runtime.h>

/* kernellsp
sizes = { N = 67108864 }
launch = { grid = "ceil_div(N, 256)", block = 256 }
shapes = [{ N = 1000 }, { N = 4097 }, { N = 1 }, { N = 257 }]
[args]
data = { dtype = "i32", dir = "inout", count = "N", dist = "randint(-1000000, 1000000)" }
N = { value = "N" }
*/
__global__ void processArrayWithDivergence(int *data, int N) {
    int idx = blockIdx.x * blockDim.x + threadIdx.x;
    if (idx < N) {
        if (data[idx] % 2 == 0) {
            data[idx] = data[idx] * 2;
        } else {
            data[idx] = data[idx] + 1;
        }
    }
}
