// Collatz stopping time of each start value: a while loop whose trip count is
// decided by the data (capped at 10000 steps).
#include <cuda_runtime.h>

/* kernellsp
sizes = { N = 4194304 }
launch = { grid = "ceil_div(N, 256)", block = 256 }
shapes = [{ N = 1000 }, { N = 4097 }, { N = 3 }]
[args]
start = { dtype = "u32", dir = "in", count = "N", dist = "randint(1, 1000000)" }
steps = { dtype = "i32", dir = "out", count = "N" }
n = { value = "N" }
*/
__global__ void collatz_steps(const unsigned int* start, int* steps, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    unsigned long long v = start[i];
    int s = 0;
    while (v != 1 && s < 10000) {
        v = (v & 1) ? 3 * v + 1 : v / 2;
        ++s;
    }
    steps[i] = s;
}
