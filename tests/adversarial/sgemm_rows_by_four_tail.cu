// sgemm_naive.cu: C = A * B (row-major, MxK times KxN); naive: one thread per output, every operand re-read from global memory, no shared-memory tiling or register blocking.
#include <cuda_runtime.h>

/* kernellsp
sizes = { M = 2048, N = 2048, K = 2048 }
launch = { grid = ["ceil_div(N, 16)", "ceil_div(M, 64)"], block = [16, 16] }
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
    // Rows in groups of four: each B element loaded once feeds four accumulators; a group that runs past M
    // computes its 1 to 3 rows one at a time.
    int row = 4 * (blockIdx.y * blockDim.y + threadIdx.y);
    int col = blockIdx.x * blockDim.x + threadIdx.x;
    if (col >= N || row >= M) return;
    if (row + 3 < M) {
        float acc0 = 0.0f, acc1 = 0.0f, acc2 = 0.0f, acc3 = 0.0f;
        for (int k = 0; k < K; ++k) {
            float b = B[k * N + col];
            acc0 += A[row * K + k] * b;
            acc1 += A[(row + 1) * K + k] * b;
            acc2 += A[(row + 2) * K + k] * b;
            acc3 += A[(row + 3) * K + k] * b;
        }
        C[row * N + col] = acc0;
        C[(row + 1) * N + col] = acc1;
        C[(row + 2) * N + col] = acc2;
        C[(row + 3) * N + col] = acc3;
    } else {
        for (int r = row; r < M; ++r) {
            float acc = 0.0f;
            for (int k = 0; k < K; ++k) {
                acc += A[r * K + k] * B[k * N + col];
            }
            C[r * N + col] = acc;
        }
    }
}
