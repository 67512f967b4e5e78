// Magnitude of interleaved complex samples (I/Q pairs): reads x[2*i] and
// x[2*i+1], i.e. a stride-2 access per thread (array of structs).
#include <cuda_runtime.h>
#include <math.h>

/* kernellsp
sizes = { N = 33554432 }
launch = { grid = "ceil_div(N, 256)", block = 256 }
tolerance = { rtol = 1e-5, atol = 1e-6 }
shapes = [{ N = 1000 }, { N = 4097 }, { N = 3 }]
[args]
iq = { dtype = "f32", dir = "in", count = "2 * N" }
mag = { dtype = "f32", dir = "out", count = "N" }
n = { value = "N" }
*/
__global__ void complex_abs(const float* iq, float* mag, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        float re = iq[2 * i];
        float im = iq[2 * i + 1];
        mag[i] = sqrtf(re * re + im * im);
    }
}
