// Source: https://github.com/xlite-dev/LeetCUDA/blob/5f517e283728b1ead1e7cba088c574e19d964c72/swish/swish.cu (lines 43-50), license GPL-3.0
// License: GPL-3.0 (README: "License: GNU General Public License v3.0"), https://github.com/xlite-dev/LeetCUDA (formerly DefTruth/CUDA-Learn-Notes)
#include <cuda_runtime.h>
#include <cuda_fp16.h>
__device__ __forceinline__ half swish_half(half x) {
    return __hmul(x, __hdiv(__float2half(1.0f), __hadd(__float2half(1.0f), hexp(__hneg(x)))));
}

/* kernellsp
sizes = { N = 33554432 }
launch = { grid = "ceil_div(N, 256)", block = 256 }
tolerance = { rtol = 1e-2, atol = 1e-2, norm_rtol = 1e-3 }
shapes = [{ N = 1000 }, { N = 4097 }, { N = 3 }]
[args]
x = { dtype = "f16", dir = "in", count = "N", dist = "uniform(-8, 8)" }
y = { dtype = "f16", dir = "out", count = "N" }
N = { value = "N" }
*/
__global__ void swish_f16_kernel(half* x, half* y, int N) {
    int idx = blockIdx.x * blockDim.x + threadIdx.x;
    if (idx < N) y[idx] = swish_half(x[idx]);
}
