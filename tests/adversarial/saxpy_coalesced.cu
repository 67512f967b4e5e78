// saxpy_strided.cu: y = a*x + y; naive: each thread owns a contiguous chunk of `chunk` elements, so a warp's accesses are `chunk` floats apart (uncoalesced).
#include <cuda_runtime.h>

/* kernellsp
sizes = { N = 16777216, CHUNK = 16 }
launch = { grid = "ceil_div(N, CHUNK * BLOCK)", block = "BLOCK" }
shapes = [{ N = 1000 }, { N = 4099, CHUNK = 7 }, { N = 3, CHUNK = 16 }]
tunables = { BLOCK = [256, 128, 512] }
[args]
n = { value = "N" }
a = { value = 2.5 }
x = { dtype = "f32", dir = "in", count = "N" }
y = { dtype = "f32", dir = "inout", count = "N" }
chunk = { value = "CHUNK" }
*/
__global__ void saxpy_strided(int n, float a, const float* x, float* y, int chunk)
{
    // The block still owns the same chunk * blockDim.x elements, but in step k the threads touch
    // consecutive elements (base + k * blockDim.x + threadIdx.x): every warp access is coalesced.
    int base = blockIdx.x * blockDim.x * chunk;
    for (int k = 0; k < chunk; ++k) {
        int i = base + k * blockDim.x + threadIdx.x;
        if (i < n) {
            y[i] = a * x[i] + y[i];
        }
    }
}
