// Elementwise square root with a leftover debugging printf for negative
// inputs (never taken with these inputs, but device-side I/O must stay).
#include <cstdio>
#include <cuda_runtime.h>

/* kernellsp
sizes = { N = 33554432 }
launch = { grid = "ceil_div(N, 256)", block = 256 }
tolerance = { rtol = 1e-6, atol = 1e-7 }
shapes = [{ N = 1000 }, { N = 4097 }, { N = 3 }]
[args]
in = { dtype = "f32", dir = "in", count = "N", dist = "uniform(0, 4)" }
out = { dtype = "f32", dir = "out", count = "N" }
n = { value = "N" }
*/
__global__ void safe_sqrt(const float* in, float* out, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        float v = in[i];
        if (v < 0.0f) {
            printf("safe_sqrt: negative input %f at %d\n", v, i);
            v = 0.0f;
        }
        out[i] = sqrtf(v);
    }
}
