// Log-softmax over the last dimension, one thread per row: out = x - max - log(sum(exp(x - max))).
#include <cuda_runtime.h>
#include <math.h>

/* kernellsp
sizes = { B = 16384, D = 1024 }
launch = { grid = "ceil_div(B, 256)", block = 256 }
tolerance = { rtol = 1e-4, atol = 1e-5, norm_rtol = 1e-5 }
shapes = [{ B = 1000, D = 100 }, { B = 31, D = 1025 }, { B = 2, D = 3 }]
[args]
out = { dtype = "f32", dir = "out", count = "B * D" }
in = { dtype = "f32", dir = "in", count = "B * D", dist = "normal(0, 2)" }
batch = { value = "B" }
dim = { value = "D" }
*/
__global__ void log_softmax(float* out, const float* in, int batch, int dim)
{
    int b = blockIdx.x * blockDim.x + threadIdx.x;
    if (b >= batch) return;
    const float* row = in + (long)b * dim;
    float* orow = out + (long)b * dim;

    float mx = row[0];
    for (int i = 1; i < dim; ++i)
        if (row[i] > mx) mx = row[i];
    float sum = 0.f;
    for (int i = 0; i < dim; ++i)
        sum += expf(row[i] - mx);
    float lse = mx + logf(sum);
    for (int i = 0; i < dim; ++i)
        orow[i] = row[i] - lse;
}
