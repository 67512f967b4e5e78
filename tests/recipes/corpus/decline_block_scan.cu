// Inclusive prefix sum within each block (Hillis-Steele, double-buffered
// shared memory): each output depends on all earlier elements of its block.
// A scan, not a reduction: the per-element outputs must not be collapsed.
#include <cuda_runtime.h>

#define BLOCK 256

/* kernellsp
sizes = { N = 33554432 }
launch = { grid = "ceil_div(N, 256)", block = 256 }
shapes = [{ N = 1000 }, { N = 4097 }, { N = 2 }]
[args]
in = { dtype = "i32", dir = "in", count = "N", dist = "randint(-50, 50)" }
out = { dtype = "i32", dir = "out", count = "N" }
n = { value = "N" }
*/
__global__ void scan_block(const int* in, int* out, int n)
{
    __shared__ int temp[2][BLOCK];
    int t = threadIdx.x;
    int g = blockIdx.x * blockDim.x + t;
    int pout = 0, pin = 1;
    temp[pout][t] = (g < n) ? in[g] : 0;
    __syncthreads();
    for (int offset = 1; offset < BLOCK; offset *= 2) {
        pout = 1 - pout;
        pin = 1 - pout;
        if (t >= offset)
            temp[pout][t] = temp[pin][t] + temp[pin][t - offset];
        else
            temp[pout][t] = temp[pin][t];
        __syncthreads();
    }
    if (g < n) out[g] = temp[pout][t];
}
