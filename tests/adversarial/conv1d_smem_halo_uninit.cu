// conv1d.cu: out[i] = sum_{j=-R..R} in[i+j] * filter[j+R] with zero padding; naive: every input and filter tap re-loaded from global memory (no shared-memory halo tile, no __constant__ filter).
#include <cuda_runtime.h>

/* kernellsp
sizes = { N = 16777216, R = 7 }
launch = { grid = "ceil_div(N, 256)", block = 256 }
tolerance = { rtol = 1e-5, atol = 1e-5 }
shapes = [{ N = 1000, R = 3 }, { N = 1023 }, { N = 5, R = 7 }, { N = 1, R = 0 }]
[args]
input = { dtype = "f32", dir = "in", count = "N" }
filter = { dtype = "f32", dir = "in", count = "2 * R + 1" }
output = { dtype = "f32", dir = "out", count = "N" }
n = { value = "N" }
radius = { value = "R" }
*/
__global__ void conv1d(const float* input, const float* filter, float* output, int n, int radius)
{
    // Tiled: the block's inputs plus a halo of `radius` on each side are staged in shared memory once.
    // The halo slots outside [0, n) are meant to be zero (zero padding) but are never written: the
    // first and last block read whatever shared memory held before.
    __shared__ float tile[256 + 2 * 64];
    int base = blockIdx.x * blockDim.x;
    int i = base + threadIdx.x;
    int r = min(radius, 64);
    for (int k = threadIdx.x; k < (int)blockDim.x + 2 * r; k += blockDim.x) {
        int idx = base - r + k;
        if (idx >= 0 && idx < n) {
            tile[k] = input[idx];
        }
    }
    __syncthreads();
    if (i >= n) return;
    float acc = 0.0f;
    for (int j = -r; j <= r; ++j) {
        acc += tile[threadIdx.x + r + j] * filter[j + r];
    }
    output[i] = acc;
}
