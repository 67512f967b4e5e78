// vector_add.cu: c[i] = a[i] + b[i]; naive: one scalar element per thread, no vectorized (float4) loads, no grid-stride loop.
#include <cuda_runtime.h>

/* kernellsp
sizes = { N = 16777216 }
launch = { grid = "ceil_div(N, BLOCK)", block = "BLOCK" }
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
    // float4 loads and stores; thread 0 also adds the 0 to 3 elements after the last full float4.
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n / 4) {
        float4 x = reinterpret_cast<const float4*>(a)[i];
        float4 y = reinterpret_cast<const float4*>(b)[i];
        reinterpret_cast<float4*>(c)[i] = make_float4(x.x + y.x, x.y + y.y, x.z + y.z, x.w + y.w);
    }
    if (i == 0) {
        for (int j = n / 4 * 4; j < n; ++j) c[j] = a[j] + b[j];
    }
}
