// Mixed precision GEMM: fp16 A and B, fp32 accumulation and fp32 output,
// row-major, one output per thread, conversions in the inner loop.
#include <cuda_fp16.h>

/* kernellsp
sizes = { M = 2048, N = 2048, K = 2048 }
launch = { grid = ["ceil_div(N, 16)", "ceil_div(M, 16)"], block = [16, 16] }
tolerance = { rtol = 1e-3, atol = 1e-3, norm_rtol = 1e-5 }
shapes = [{ M = 67, N = 45, K = 33 }, { M = 1, N = 1000, K = 3 }, { M = 129, N = 1, K = 301 }]
[args]
A = { dtype = "f16", dir = "in", count = "M * K" }
B = { dtype = "f16", dir = "in", count = "K * N" }
C = { dtype = "f32", dir = "out", count = "M * N" }
M = { value = "M" }
N = { value = "N" }
K = { value = "K" }
*/
__global__ void hgemm_f32acc(const __half* A, const __half* B, float* C, int M, int N, int K)
{
    int row = blockIdx.y * blockDim.y + threadIdx.y;
    int col = blockIdx.x * blockDim.x + threadIdx.x;
    if (row < M && col < N) {
        float acc = 0.0f;
        for (int k = 0; k < K; ++k) {
            acc += __half2float(A[row * K + k]) * __half2float(B[k * N + col]);
        }
        C[row * N + col] = acc;
    }
}
