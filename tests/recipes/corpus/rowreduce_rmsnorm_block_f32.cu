// RMSNorm with one block per row: strided partial sums of squares, a
// shared-memory tree (s = blockDim.x / 2 ... 1), then a second sweep to scale.
#include <cuda_runtime.h>
#include <math.h>

#define THREADS 256

/* kernellsp
sizes = { ROWS = 8192, COLS = 4096 }
launch = { grid = "ROWS", block = 256 }
tolerance = { rtol = 1e-4, atol = 1e-5, norm_rtol = 1e-5 }
shapes = [{ ROWS = 7, COLS = 1000 }, { ROWS = 100, COLS = 33 }, { ROWS = 3, COLS = 1 }]
[args]
input = { dtype = "f32", dir = "in", count = "ROWS * COLS" }
weight = { dtype = "f32", dir = "in", count = "COLS", dist = "uniform(0.5, 1.5)" }
output = { dtype = "f32", dir = "out", count = "ROWS * COLS" }
hidden = { value = "COLS" }
*/
__global__ void rmsnorm_kernel(const float* __restrict__ input, const float* __restrict__ weight,
                               float* __restrict__ output, int hidden)
{
    __shared__ float ssum[THREADS];
    const float* x = input + (size_t)blockIdx.x * hidden;
    float* y = output + (size_t)blockIdx.x * hidden;

    float acc = 0.0f;
    for (int i = threadIdx.x; i < hidden; i += blockDim.x) {
        acc += x[i] * x[i];
    }
    ssum[threadIdx.x] = acc;
    __syncthreads();
    for (int s = blockDim.x / 2; s > 0; s >>= 1) {
        if (threadIdx.x < s) ssum[threadIdx.x] += ssum[threadIdx.x + s];
        __syncthreads();
    }
    float inv_rms = rsqrtf(ssum[0] / hidden + 1e-6f);
    for (int i = threadIdx.x; i < hidden; i += blockDim.x) {
        y[i] = x[i] * inv_rms * weight[i];
    }
}
