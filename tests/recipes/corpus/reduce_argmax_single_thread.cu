// argmax (first index of the maximum) done by one thread looping over the
// whole array: the rest of the grid does nothing.
#include <cuda_runtime.h>
#include <float.h>

/* kernellsp
sizes = { N = 1048576 }
launch = { grid = 1, block = 32 }
shapes = [{ N = 1000 }, { N = 4097 }, { N = 2 }]
[args]
data = { dtype = "f32", dir = "in", count = "N", dist = "normal(0, 10)" }
max_idx = { dtype = "i32", dir = "out", count = 1 }
max_val = { dtype = "f32", dir = "out", count = 1 }
n = { value = "N" }
*/
__global__ void argmax_kernel(const float* data, int* max_idx, float* max_val, int n)
{
    if (threadIdx.x != 0 || blockIdx.x != 0) return;
    float best = -FLT_MAX;
    int best_i = 0;
    for (int i = 0; i < n; i++) {
        if (data[i] > best) {
            best = data[i];
            best_i = i;
        }
    }
    *max_idx = best_i;
    *max_val = best;
}
