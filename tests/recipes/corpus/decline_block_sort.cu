// Sort every 256-element segment of the keys with an odd-even transposition
// sort in shared memory (tail padded with FLT_MAX). A sort, not a map or reduce.
#include <cuda_runtime.h>
#include <float.h>

#define SEG 256

/* kernellsp
sizes = { N = 16777216 }
launch = { grid = "ceil_div(N, 256)", block = 256 }
shapes = [{ N = 1000 }, { N = 4097 }, { N = 2 }]
[args]
keys_in = { dtype = "f32", dir = "in", count = "N" }
keys_out = { dtype = "f32", dir = "out", count = "N" }
n = { value = "N" }
*/
__global__ void sort_segments(const float* keys_in, float* keys_out, int n)
{
    __shared__ float s[SEG];
    int t = threadIdx.x;
    int g = blockIdx.x * SEG + t;
    s[t] = (g < n) ? keys_in[g] : FLT_MAX;
    __syncthreads();
    for (int phase = 0; phase < SEG; ++phase) {
        int i = 2 * t + (phase & 1);
        if (t < SEG / 2 && i + 1 < SEG) {
            float a = s[i], b = s[i + 1];
            if (a > b) {
                s[i] = b;
                s[i + 1] = a;
            }
        }
        __syncthreads();
    }
    if (g < n) keys_out[g] = s[t];
}
