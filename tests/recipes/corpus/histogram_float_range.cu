// Histogram of float samples over [lo, hi) with nbins equal-width bins;
// values outside the range are dropped. size_t index, early return.
#include <cuda_runtime.h>

/* kernellsp
sizes = { N = 33554432, NB = 128 }
launch = { grid = "ceil_div(N, 256)", block = 256 }
shapes = [{ N = 1000 }, { N = 4097, NB = 10 }, { N = 2, NB = 5 }]
[args]
samples = { dtype = "f32", dir = "in", count = "N", dist = "normal(0, 1.5)" }
n = { value = "N" }
lo = { value = -4.0 }
hi = { value = 4.0 }
nbins = { value = "NB" }
counts = { dtype = "u32", dir = "inout", count = "NB", dist = "randint(0, 10)" }
*/
__global__ void hist_range(const float* samples, size_t n, float lo, float hi, int nbins, unsigned int* counts)
{
    size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
    if (i >= n) return;
    float v = samples[i];
    if (v < lo || v >= hi) return;
    int bin = (int)((v - lo) / (hi - lo) * nbins);
    if (bin >= nbins) bin = nbins - 1;
    atomicAdd(&counts[bin], 1u);
}
