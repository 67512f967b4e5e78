// C = A^T * B with A stored row-major as K x M (e.g. a weight-gradient
// computation), B row-major K x N, C row-major M x N. Index macro.
#include <cuda_runtime.h>

#define IDX2(r, c, ld) ((r) * (ld) + (c))

/* kernellsp
sizes = { M = 2048, N = 2048, K = 2048 }
launch = { grid = ["ceil_div(N, 16)", "ceil_div(M, 16)"], block = [16, 16] }
tolerance = { rtol = 1e-3, atol = 1e-3, norm_rtol = 1e-5 }
shapes = [{ M = 67, N = 45, K = 33 }, { M = 1, N = 999, K = 2 }, { M = 130, N = 1, K = 100 }]
[args]
A = { dtype = "f32", dir = "in", count = "K * M" }
B = { dtype = "f32", dir = "in", count = "K * N" }
C = { dtype = "f32", dir = "out", count = "M * N" }
M = { value = "M" }
N = { value = "N" }
K = { value = "K" }
*/
__global__ void matmul_tn(const float* A, const float* B, float* C, int M, int N, int K)
{
    int row = blockIdx.y * blockDim.y + threadIdx.y;
    int col = blockIdx.x * blockDim.x + threadIdx.x;
    if (row >= M || col >= N) return;
    float sum = 0.0f;
    for (int k = 0; k < K; k++) {
        sum += A[IDX2(k, row, M)] * B[IDX2(k, col, N)];
    }
    C[IDX2(row, col, N)] = sum;
}
