// z = alpha * x + beta * y. BLAS-like argument order: n first, scalars
// interleaved with the vectors; const int index.
#include <cuda_runtime.h>

/* kernellsp
sizes = { N = 33554432 }
launch = { grid = "ceil_div(N, BLOCK)", block = "BLOCK" }
tunables = { BLOCK = [256, 128, 512, 1024] }
shapes = [{ N = 1000 }, { N = 4097 }, { N = 2 }]
[args]
n = { value = "N" }
alpha = { value = 1.75 }
x = { dtype = "f32", dir = "in", count = "N" }
beta = { value = -0.5 }
y = { dtype = "f32", dir = "in", count = "N" }
z = { dtype = "f32", dir = "out", count = "N" }
*/
__global__ void axpby(int n, float alpha, const float *x, float beta, const float *y, float *z)
{
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        z[i] = alpha * x[i] + beta * y[i];
    }
}
