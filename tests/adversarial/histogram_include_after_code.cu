// histogram.cu: 256-bin histogram of bytes, added to bins; naive: one global atomicAdd per input byte, no per-block shared-memory privatization.
#include <cuda_runtime.h>

#define NUM_BINS 256

/* kernellsp
sizes = { N = 16777216 }
launch = { grid = "ceil_div(N, 256)", block = 256 }
shapes = [{ N = 1000 }, { N = 1023 }, { N = 1 }]
[args]
data = { dtype = "u8", dir = "in", count = "N", dist = "randint(0, 256)" }
bins = { dtype = "u32", dir = "inout", count = 256, dist = "randint(0, 1000)" }
n = { value = "N" }
*/
__global__ void histogram(const unsigned char* data, unsigned int* bins, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        unsigned int bin = data[i];  // 0..255 by construction
        if (bin < NUM_BINS) {
            atomicAdd(&bins[bin], 1u);
        }
    }
}

#include <cooperative_groups.h>
