// vector_add.cu: c[i] = a[i] + b[i]; naive: one scalar element per thread, no vectorized (float4) loads, no grid-stride loop.
#include <cuda_runtime.h>

/* kernellsp
sizes = { N = 16777216 }
launch = { grid = "ceil_div(N, 2 * BLOCK)", block = "BLOCK" }
shapes = [{ N = 1000 }, { N = 4097 }, { N = 1 }]
tunables = { BLOCK = [256, 128, 512, 1024] }
[args]
a = { dtype = "f32", dir = "in", count = "N" }
b = { dtype = "f32", dir = "in", count = "N" }
c = { dtype = "f32", dir = "out", count = "N" }
n = { value = "N" }
*/
__global__ void vector_add(const float* a, const float* b, float* c, int n)
{
    // Two elements per thread through one 8-byte load; the load of the pair (i, i + 1) is not
    // guarded, so for odd n the last thread reads one float past the end of a and b.
    int i = 2 * (blockIdx.x * blockDim.x + threadIdx.x);
    if (i < n) {
        float2 x = *reinterpret_cast<const float2*>(a + i);
        float2 y = *reinterpret_cast<const float2*>(b + i);
        c[i] = x.x + y.x;
        if (i + 1 < n) {
            c[i + 1] = x.y + y.y;
        }
    }
}
