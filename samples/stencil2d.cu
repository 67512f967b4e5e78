// stencil2d.cu: one Jacobi step of a 5-point stencil on an ny x nx grid (boundary copied); naive: five global loads per point with no shared-memory tile, 16x16 blocks.
#include <cuda_runtime.h>

/* kernellsp
sizes = { NX = 4096, NY = 4096 }
launch = { grid = ["ceil_div(NX, 16)", "ceil_div(NY, 16)"], block = [16, 16] }
tolerance = { rtol = 1e-5, atol = 1e-6 }
shapes = [{ NX = 1000, NY = 77 }, { NX = 1, NY = 1023 }, { NX = 2, NY = 2 }, { NX = 31, NY = 1 }]
[args]
in = { dtype = "f32", dir = "in", count = "NX * NY" }
out = { dtype = "f32", dir = "out", count = "NX * NY" }
nx = { value = "NX" }
ny = { value = "NY" }
*/
__global__ void stencil2d(const float* in, float* out, int nx, int ny)
{
    int x = blockIdx.x * blockDim.x + threadIdx.x;
    int y = blockIdx.y * blockDim.y + threadIdx.y;
    if (x >= nx || y >= ny) return;

    int idx = y * nx + x;
    if (x == 0 || y == 0 || x == nx - 1 || y == ny - 1) {
        out[idx] = in[idx];  // fixed boundary
        return;
    }
    out[idx] = 0.2f * (in[idx] + in[idx - 1] + in[idx + 1] + in[idx - nx] + in[idx + nx]);
}
