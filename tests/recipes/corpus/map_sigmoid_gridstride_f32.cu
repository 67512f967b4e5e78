// Logistic sigmoid with a grid-stride loop over a fixed-size grid
// (2048 blocks of 256 threads, whatever n is).
#include <cuda_runtime.h>
#include <math.h>

/* kernellsp
sizes = { N = 33554432 }
launch = { grid = 2048, block = 256 }
tolerance = { rtol = 1e-5, atol = 1e-6 }
shapes = [{ N = 1000 }, { N = 524289 }, { N = 5 }]
[args]
x = { dtype = "f32", dir = "in", count = "N", dist = "normal(0, 4)" }
y = { dtype = "f32", dir = "out", count = "N" }
n = { value = "N" }
*/
__global__ void sigmoid_kernel(const float* x, float* y, int n)
{
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += blockDim.x * gridDim.x) {
        y[i] = 1.0f / (1.0f + expf(-x[i]));
    }
}
