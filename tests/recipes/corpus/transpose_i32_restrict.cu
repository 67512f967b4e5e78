// int32 transpose, __restrict__ pointers, early-return guard, 32x8 blocks.
#include <cuda_runtime.h>

/* kernellsp
sizes = { M = 8192, N = 8192 }
launch = { grid = ["ceil_div(N, 32)", "ceil_div(M, 8)"], block = [32, 8] }
shapes = [{ M = 1000, N = 777 }, { M = 33, N = 2 }, { M = 1, N = 129 }]
[args]
src = { dtype = "i32", dir = "in", count = "M * N", dist = "randint(-1000000, 1000000)" }
dst = { dtype = "i32", dir = "out", count = "M * N" }
M = { value = "M" }
N = { value = "N" }
*/
__global__ void transpose_i32(const int* __restrict__ src, int* __restrict__ dst, int M, int N)
{
    const int j = blockIdx.x * blockDim.x + threadIdx.x;
    const int i = blockIdx.y * blockDim.y + threadIdx.y;
    if (i >= M || j >= N) return;
    dst[(size_t)j * M + i] = src[(size_t)i * N + j];
}
