// int8 x int8 -> int32 matrix multiply (quantised inference), row-major,
// exact integer accumulation; int8_t inputs, early return.
#include <cuda_runtime.h>
#include <stdint.h>

/* kernellsp
sizes = { M = 2048, N = 2048, K = 2048 }
launch = { grid = ["ceil_div(N, 32)", "ceil_div(M, 8)"], block = [32, 8] }
shapes = [{ M = 67, N = 45, K = 33 }, { M = 1, N = 1000, K = 3 }, { M = 129, N = 2, K = 301 }]
[args]
A = { dtype = "i8", dir = "in", count = "M * K", dist = "randint(-128, 128)" }
B = { dtype = "i8", dir = "in", count = "K * N", dist = "randint(-128, 128)" }
C = { dtype = "i32", dir = "out", count = "M * N" }
M = { value = "M" }
N = { value = "N" }
K = { value = "K" }
*/
__global__ void gemm_i8(const int8_t* A, const int8_t* B, int32_t* C, int M, int N, int K)
{
    int col = blockIdx.x * blockDim.x + threadIdx.x;
    int row = blockIdx.y * blockDim.y + threadIdx.y;
    if (row >= M || col >= N) return;
    int32_t acc = 0;
    for (int k = 0; k < K; ++k) {
        acc += (int32_t)A[row * K + k] * (int32_t)B[k * N + col];
    }
    C[row * N + col] = acc;
}
