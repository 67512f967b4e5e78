// Global min of unsigned keys: grid-stride loop over a fixed grid, one
// atomicMin per element.
#include <cuda_runtime.h>

/* kernellsp
sizes = { N = 67108864 }
launch = { grid = 1024, block = 256 }
shapes = [{ N = 1000 }, { N = 262145 }, { N = 2 }]
[args]
keys = { dtype = "u32", dir = "in", count = "N", dist = "randint(1000, 4000000000)" }
out_min = { dtype = "u32", dir = "inout", count = 1, dist = "randint(4000000000, 4294967296)" }
n = { value = "N" }
*/
__global__ void min_u32(const unsigned int* keys, unsigned int* out_min, int n)
{
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += blockDim.x * gridDim.x) {
        atomicMin(out_min, keys[i]);
    }
}
