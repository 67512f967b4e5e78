// Indirect gather out[i] = table[idx[i]] (embedding-style lookup): the load
// address depends on data, so no affine access pattern describes it.
#include <cuda_runtime.h>

/* kernellsp
sizes = { N = 16777216, T = 1048576 }
launch = { grid = "ceil_div(N, 256)", block = 256 }
shapes = [{ N = 1000, T = 50 }, { N = 4097, T = 4097 }, { N = 7, T = 3 }]
[args]
table = { dtype = "f32", dir = "in", count = "T" }
idx = { dtype = "i32", dir = "in", count = "N", dist = "randint(0, T)" }
out = { dtype = "f32", dir = "out", count = "N" }
n = { value = "N" }
table_size = { value = "T" }
*/
__global__ void gather(const float* table, const int* idx, float* out, int n, int table_size)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        int j = idx[i];
        out[i] = (j >= 0 && j < table_size) ? table[j] : 0.0f;
    }
}
