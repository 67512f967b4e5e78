// 7-point Laplacian-style stencil on a 3-D grid with a 3-D launch
// (x fastest); boundary points copied. Index macro for the flattened layout.
#include <cuda_runtime.h>

#define IDX3(i, j, k) (((size_t)(k) * ny + (j)) * nx + (i))

/* kernellsp
sizes = { NX = 512, NY = 512, NZ = 256 }
launch = { grid = ["ceil_div(NX, 32)", "ceil_div(NY, 4)", "ceil_div(NZ, 2)"], block = [32, 4, 2] }
tolerance = { rtol = 1e-5, atol = 1e-6 }
shapes = [{ NX = 33, NY = 17, NZ = 9 }, { NX = 1, NY = 5, NZ = 100 }, { NX = 70, NY = 3, NZ = 3 }]
[args]
in = { dtype = "f32", dir = "in", count = "NX * NY * NZ" }
out = { dtype = "f32", dir = "out", count = "NX * NY * NZ" }
nx = { value = "NX" }
ny = { value = "NY" }
nz = { value = "NZ" }
c0 = { value = 0.4 }
c1 = { value = 0.1 }
*/
__global__ void stencil7(const float* in, float* out, int nx, int ny, int nz, float c0, float c1)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    int j = blockIdx.y * blockDim.y + threadIdx.y;
    int k = blockIdx.z * blockDim.z + threadIdx.z;
    if (i >= nx || j >= ny || k >= nz) return;
    if (i == 0 || j == 0 || k == 0 || i == nx - 1 || j == ny - 1 || k == nz - 1) {
        out[IDX3(i, j, k)] = in[IDX3(i, j, k)];
        return;
    }
    out[IDX3(i, j, k)] = c0 * in[IDX3(i, j, k)]
                       + c1 * (in[IDX3(i - 1, j, k)] + in[IDX3(i + 1, j, k)]
                             + in[IDX3(i, j - 1, k)] + in[IDX3(i, j + 1, k)]
                             + in[IDX3(i, j, k - 1)] + in[IDX3(i, j, k + 1)]);
}
