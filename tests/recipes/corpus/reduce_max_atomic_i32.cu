// Global max of int32 values with atomicMax; n first, early return.
#include <cuda_runtime.h>

/* kernellsp
sizes = { N = 67108864 }
launch = { grid = "ceil_div(N, 256)", block = 256 }
shapes = [{ N = 1000 }, { N = 4097 }, { N = 1 }]
[args]
n = { value = "N" }
vals = { dtype = "i32", dir = "in", count = "N", dist = "randint(-2000000000, 2000000000)" }
result = { dtype = "i32", dir = "inout", count = 1, dist = "randint(-2147483648, -2100000000)" }
*/
__global__ void max_kernel(int n, const int* __restrict__ vals, int* __restrict__ result)
{
    int gid = threadIdx.x + blockIdx.x * blockDim.x;
    if (gid >= n) return;
    atomicMax(result, vals[gid]);
}
