// One colour of a red-black Gauss-Seidel sweep, updated in place: u is both
// read (the four neighbours) and written (the point itself) in the same
// launch. Correct only because neighbours of a colour-c point have the other
// colour; a rewrite that treats u as separate input and output is wrong.
#include <cuda_runtime.h>

/* kernellsp
sizes = { NX = 4096, NY = 4096 }
launch = { grid = ["ceil_div(NX, 16)", "ceil_div(NY, 16)"], block = [16, 16] }
tolerance = { rtol = 1e-5, atol = 1e-6 }
shapes = [{ NX = 100, NY = 77 }, { NX = 3, NY = 1000 }, { NX = 33, NY = 3 }]
[args]
u = { dtype = "f32", dir = "inout", count = "NX * NY" }
f = { dtype = "f32", dir = "in", count = "NX * NY" }
nx = { value = "NX" }
ny = { value = "NY" }
h2 = { value = 0.001 }
color = { value = 1 }
*/
__global__ void redblack_sweep(float* u, const float* f, int nx, int ny, float h2, int color)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    int j = blockIdx.y * blockDim.y + threadIdx.y;
    if (i <= 0 || j <= 0 || i >= nx - 1 || j >= ny - 1) return;
    if (((i + j) & 1) != color) return;
    int c = j * nx + i;
    u[c] = 0.25f * (u[c - 1] + u[c + 1] + u[c - nx] + u[c + nx] + h2 * f[c]);
}
