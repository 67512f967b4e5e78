// Histogram of int32 keys into num_bins buckets by key % num_bins.
#include <cuda_runtime.h>

/* kernellsp
sizes = { N = 33554432, NB = 64 }
launch = { grid = "ceil_div(N, 256)", block = 256 }
shapes = [{ N = 1000 }, { N = 4097, NB = 7 }, { N = 3, NB = 1000 }]
[args]
data = { dtype = "i32", dir = "in", count = "N", dist = "randint(0, 1000000)" }
bins = { dtype = "i32", dir = "inout", count = "NB", dist = "randint(0, 50)" }
n = { value = "N" }
num_bins = { value = "NB" }
*/
__global__ void histogram_mod(const int* data, int* bins, int n, int num_bins)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        int b = data[i] % num_bins;
        atomicAdd(&bins[b], 1);
    }
}
