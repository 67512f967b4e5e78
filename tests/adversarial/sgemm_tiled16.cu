// sgemm_naive.cu: C = A * B (row-major, MxK times KxN); naive: one thread per output, every operand re-read from global memory, no shared-memory tiling or register blocking.
#include <cuda_runtime.h>

/* kernellsp
sizes = { M = 2048, N = 2048, K = 2048 }
launch = { grid = ["ceil_div(N, 16)", "ceil_div(M, 16)"], block = [16, 16] }
tolerance = { rtol = 1e-3, atol = 1e-3 }
shapes = [{ M = 100, N = 77, K = 33 }, { M = 1, N = 1023, K = 5 }, { M = 129, N = 1, K = 300 }]
[args]
A = { dtype = "f32", dir = "in", count = "M * K" }
B = { dtype = "f32", dir = "in", count = "K * N" }
C = { dtype = "f32", dir = "out", count = "M * N" }
M = { value = "M" }
N = { value = "N" }
K = { value = "K" }
*/
__global__ void sgemm_naive(const float* A, const float* B, float* C, int M, int N, int K)
{
    // 16x16 shared-memory tiles of A and B; each thread keeps one output in a register. The k
    // order per output is the baseline's (k = 0, 1, ..., K-1), so the sums are the same.
    __shared__ float As[16][16];
    __shared__ float Bs[16][16];
    int tx = threadIdx.x, ty = threadIdx.y;
    int row = blockIdx.y * 16 + ty;
    int col = blockIdx.x * 16 + tx;
    float acc = 0.0f;
    for (int k0 = 0; k0 < K; k0 += 16) {
        As[ty][tx] = (row < M && k0 + tx < K) ? A[row * K + k0 + tx] : 0.0f;
        Bs[ty][tx] = (k0 + ty < K && col < N) ? B[(k0 + ty) * N + col] : 0.0f;
        __syncthreads();
#pragma unroll
        for (int k = 0; k < 16; ++k) {
            acc += As[ty][k] * Bs[k][tx];
        }
        __syncthreads();
    }
    if (row < M && col < N) {
        C[row * N + col] = acc;
    }
}
