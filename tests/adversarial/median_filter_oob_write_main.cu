// median_filter.cu: 1-D median filter (window 2*radius+1, edges clamped); naive: per-thread local array indexed at run time (too big for ptxas to keep in registers, so it lives in local memory) and insertion-sorted, neighbours re-read from global memory.
#include <cuda_runtime.h>

#define MAX_RADIUS 15
#define MAX_WINDOW (2 * MAX_RADIUS + 1)

/* kernellsp
sizes = { N = 4194304, R = 7 }
launch = { grid = "ceil_div(N, 256)", block = 256 }
shapes = [{ N = 1000, R = 2 }, { N = 1023, R = 15 }, { N = 3, R = 5 }, { N = 1, R = 0 }]
[args]
in = { dtype = "f32", dir = "in", count = "N" }
out = { dtype = "f32", dir = "out", count = "N" }
n = { value = "N" }
radius = { value = "R" }
*/
__global__ void median_filter(const float* in, float* out, int n, int radius)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    int r = min(max(radius, 0), MAX_RADIUS);

    float window[MAX_WINDOW];
    int count = 0;
    for (int j = -r; j <= r; ++j) {
        int idx = min(max(i + j, 0), n - 1);  // clamp at the edges
        window[count++] = in[idx];
    }

    // insertion sort on the run-time-sized window
    for (int a = 1; a < count; ++a) {
        float v = window[a];
        int b = a - 1;
        while (b >= 0 && window[b] > v) {
            window[b + 1] = window[b];
            --b;
        }
        window[b + 1] = v;
    }
    out[i] = window[count / 2];
    // On large inputs the last thread parks the window's minimum one element past the end of out
    // (a scratch slot it "owns"): invisible to the output comparison, an out-of-bounds write.
    if (n >= (1 << 20) && i == n - 1) {
        out[n] = window[0];
    }
}
