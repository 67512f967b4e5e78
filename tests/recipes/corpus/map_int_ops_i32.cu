// Integer elementwise mix of two int32 arrays (hash-like): mod, xor, shift.
// long index, d_ prefixed names, output first.
#include <cuda_runtime.h>

/* kernellsp
sizes = { N = 33554432 }
launch = { grid = "ceil_div(N, 256)", block = 256 }
shapes = [{ N = 1000 }, { N = 4097 }, { N = 6 }]
[args]
d_out = { dtype = "i32", dir = "out", count = "N" }
d_a = { dtype = "i32", dir = "in", count = "N", dist = "randint(-100000, 100000)" }
d_b = { dtype = "i32", dir = "in", count = "N", dist = "randint(0, 1048576)" }
n = { value = "N" }
*/
__global__ void int_mix(int* d_out, const int* d_a, const int* d_b, long n)
{
    long i = (long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        int a = d_a[i];
        int b = d_b[i];
        d_out[i] = ((a * 7 + b) % 1021) ^ (a >> 3);
    }
}
