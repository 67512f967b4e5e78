// Textbook SGEMM, C = A * B, row-major: A is M x K, B is K x N. 2-D launch,
// Row from blockIdx.y, Col from blockIdx.x (threadIdx.x walks columns).
// Non-const pointers; the size arguments come in (M, K, N) order.
#include <cuda_runtime.h>

/* kernellsp
sizes = { M = 4096, N = 4096, K = 4096 }
launch = { grid = ["ceil_div(N, 16)", "ceil_div(M, 16)"], block = [16, 16] }
tolerance = { rtol = 1e-3, atol = 1e-3, norm_rtol = 1e-5 }
shapes = [{ M = 67, N = 45, K = 33 }, { M = 1, N = 1000, K = 17 }, { M = 129, N = 3, K = 300 }]
[args]
A = { dtype = "f32", dir = "in", count = "M * K" }
B = { dtype = "f32", dir = "in", count = "K * N" }
C = { dtype = "f32", dir = "out", count = "M * N" }
M = { value = "M" }
K = { value = "K" }
N = { value = "N" }
*/
__global__ void MatrixMulKernel(float* A, float* B, float* C, int M, int K, int N)
{
    int Row = blockIdx.y * blockDim.y + threadIdx.y;
    int Col = blockIdx.x * blockDim.x + threadIdx.x;
    if ((Row < M) && (Col < N)) {
        float Pvalue = 0;
        for (int k = 0; k < K; ++k) {
            Pvalue += A[Row * K + k] * B[k * N + Col];
        }
        C[Row * N + Col] = Pvalue;
    }
}
