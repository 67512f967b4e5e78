// One explicit step of the 1-D heat equation (3-point stencil):
// u_new[i] = u[i] + r * (u[i-1] - 2 u[i] + u[i+1]); the two end points are held fixed.
#include <cuda_runtime.h>

/* kernellsp
sizes = { N = 33554432 }
launch = { grid = "ceil_div(N, 256)", block = 256 }
tolerance = { rtol = 1e-5, atol = 1e-6 }
shapes = [{ N = 1000 }, { N = 4097 }, { N = 2 }, { N = 3 }]
[args]
u = { dtype = "f32", dir = "in", count = "N" }
u_new = { dtype = "f32", dir = "out", count = "N" }
n = { value = "N" }
r = { value = 0.25 }
*/
__global__ void heat_step(const float* u, float* u_new, int n, float r)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    if (i == 0 || i == n - 1) {
        u_new[i] = u[i];
    } else {
        u_new[i] = u[i] + r * (u[i - 1] - 2.0f * u[i] + u[i + 1]);
    }
}
