// Binary threshold of a byte image; ITEMS consecutive bytes per thread
// (compile-time constant), loop exits with break at the end of the data.
#include <cuda_runtime.h>

#define ITEMS 16

/* kernellsp
sizes = { N = 67108864 }
launch = { grid = "ceil_div(N, 16 * 256)", block = 256 }
shapes = [{ N = 1000 }, { N = 4097 }, { N = 17 }]
[args]
in = { dtype = "u8", dir = "in", count = "N", dist = "randint(0, 256)" }
out = { dtype = "u8", dir = "out", count = "N" }
n = { value = "N" }
thresh = { value = 128 }
*/
__global__ void threshold_u8(const unsigned char* in, unsigned char* out, int n, unsigned char thresh)
{
    int tid = blockIdx.x * blockDim.x + threadIdx.x;
    for (int k = 0; k < ITEMS; k++) {
        int i = tid * ITEMS + k;
        if (i >= n) break;
        out[i] = in[i] > thresh ? 255 : 0;
    }
}
