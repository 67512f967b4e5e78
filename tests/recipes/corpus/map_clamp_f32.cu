// Clamp to [lo, hi]. n in the middle of the argument list, output last,
// early return, fminf/fmaxf.
#include <cuda_runtime.h>

/* kernellsp
sizes = { N = 33554432 }
launch = { grid = "ceil_div(N, 128)", block = 128 }
shapes = [{ N = 1000 }, { N = 4097 }, { N = 4 }]
[args]
src = { dtype = "f32", dir = "in", count = "N", dist = "normal(0, 1)" }
n = { value = "N" }
lo = { value = -0.5 }
hi = { value = 0.75 }
dst = { dtype = "f32", dir = "out", count = "N" }
*/
__global__ void clamp_kernel(const float* src, int n, float lo, float hi, float* dst)
{
    int i = blockDim.x * blockIdx.x + threadIdx.x;
    if (i >= n)
        return;
    dst[i] = fminf(fmaxf(src[i], lo), hi);
}
