// Source: https://github.com/ENCCS/gpu-programming/blob/a1d377543c8b9ccb84817f3aab09b49217d0e888/content/examples/stencil/_cuda/core_cuda.cu (lines 13-39), license CC-BY-4.0
// ENCCS "GPU programming: why, when and how?" lesson material, Creative Commons Attribution 4.0 International (repository LICENSE); the source file has no header of its own.
#include <cuda_runtime.h>

/* kernellsp
sizes = { NX = 4094, NY = 4094 }
launch = { grid = ["ceil_div(NY + 2, 16)", "ceil_div(NX + 2, 16)"], block = [16, 16] }
tolerance = { rtol = 1e-10, atol = 1e-10 }
shapes = [{ NX = 1000, NY = 77 }, { NX = 31, NY = 65 }, { NX = 1, NY = 1 }, { NX = 3, NY = 200 }]
[args]
currdata = { dtype = "f64", dir = "inout", count = "(NX + 2) * (NY + 2)" }
prevdata = { dtype = "f64", dir = "in", count = "(NX + 2) * (NY + 2)" }
a = { value = 0.5 }
dt = { value = 2e-5 }
nx = { value = "NX" }
ny = { value = "NY" }
dx2 = { value = 1e-4 }
dy2 = { value = 1e-4 }
*/
// Update temperatures using five-point stencil
__global__ void evolve_kernel(double *currdata, double *prevdata,
            double a, double dt, int nx, int ny, double dx2, double dy2)
{

    // Determine temperature field at next time step
    // As we have fixed boundary conditions, the outermost gridpoints are not updated.
    int ind, ip, im, jp, jm;

    // CUDA threads are arranged in column major order
    // thus j index from x and i index from y
    int j = blockIdx.x * blockDim.x + threadIdx.x;
    int i = blockIdx.y * blockDim.y + threadIdx.y;        

    if (i > 0 && j > 0 && i < nx+1 && j < ny+1)
    {
        ind = i * (ny + 2) + j;
        ip = (i + 1) * (ny + 2) + j;
        im = (i - 1) * (ny + 2) + j;
        jp = i * (ny + 2) + j + 1;
        jm = i * (ny + 2) + j - 1;
        currdata[ind] = prevdata[ind] + a * dt *
	      ((prevdata[ip] -2.0 * prevdata[ind] + prevdata[im]) / dx2 +
	      (prevdata[jp] - 2.0 * prevdata[ind] + prevdata[jm]) / dy2);
    }

}
