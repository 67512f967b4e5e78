// 256-bin byte histogram, "CUDA by Example" style: a fixed grid walks the
// buffer with a grid-stride while loop, one global atomicAdd per byte.
#include <cuda_runtime.h>

/* kernellsp
sizes = { N = 67108864 }
launch = { grid = 1056, block = 256 }
shapes = [{ N = 1000 }, { N = 270337 }, { N = 1 }]
[args]
buffer = { dtype = "u8", dir = "in", count = "N", dist = "randint(0, 256)" }
size = { value = "N" }
histo = { dtype = "u32", dir = "inout", count = 256, dist = "randint(0, 1000)" }
*/
__global__ void histo_kernel(unsigned char *buffer, long size, unsigned int *histo)
{
    int i = threadIdx.x + blockIdx.x * blockDim.x;
    int stride = blockDim.x * gridDim.x;
    while (i < size) {
        atomicAdd(&(histo[buffer[i]]), 1);
        i += stride;
    }
}
