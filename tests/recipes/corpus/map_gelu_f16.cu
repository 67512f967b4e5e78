// GELU (tanh approximation) on fp16 activations, math done in float.
// size_t index, early-return guard, __restrict__ pointers.
#include <cuda_fp16.h>
#include <math.h>

/* kernellsp
sizes = { N = 33554432 }
launch = { grid = "ceil_div(N, 512)", block = 512 }
tolerance = { rtol = 2e-3, atol = 1e-3 }
shapes = [{ N = 1000 }, { N = 4097 }, { N = 7 }]
[args]
x = { dtype = "f16", dir = "in", count = "N", dist = "normal(0, 2)" }
y = { dtype = "f16", dir = "out", count = "N" }
n = { value = "N" }
*/
__global__ void gelu_kernel(const __half* __restrict__ x, __half* __restrict__ y, size_t n)
{
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    const float kAlpha = 0.7978845608f;  // sqrt(2 / pi)
    float v = __half2float(x[i]);
    float t = tanhf(kAlpha * (v + 0.044715f * v * v * v));
    y[i] = __float2half(0.5f * v * (1.0f + t));
}
