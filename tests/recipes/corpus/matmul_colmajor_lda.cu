// Column-major (cuBLAS/Fortran convention) SGEMM with leading dimensions:
// C(i,j) = alpha * sum_l A(i,l) * B(l,j) + beta * C(i,j), X(i,j) = X[i + j * ldx].
#include <cuda_runtime.h>

/* kernellsp
sizes = { M = 2048, N = 2048, K = 2048 }
launch = { grid = ["ceil_div(M, 32)", "ceil_div(N, 8)"], block = [32, 8] }
tolerance = { rtol = 1e-3, atol = 1e-3, norm_rtol = 1e-5 }
shapes = [{ M = 67, N = 45, K = 33 }, { M = 1000, N = 1, K = 3 }, { M = 1, N = 130, K = 257 }]
[args]
m = { value = "M" }
n = { value = "N" }
k = { value = "K" }
alpha = { value = 2.0 }
A = { dtype = "f32", dir = "in", count = "M * K" }
lda = { value = "M" }
B = { dtype = "f32", dir = "in", count = "K * N" }
ldb = { value = "K" }
beta = { value = 0.25 }
C = { dtype = "f32", dir = "inout", count = "M * N" }
ldc = { value = "M" }
*/
__global__ void sgemm_nn_colmajor(int m, int n, int k, float alpha, const float* A, int lda,
                                  const float* B, int ldb, float beta, float* C, int ldc)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;  // row of C
    int j = blockIdx.y * blockDim.y + threadIdx.y;  // column of C
    if (i < m && j < n) {
        float acc = 0.0f;
        for (int l = 0; l < k; ++l) {
            acc += A[i + l * lda] * B[l + j * ldb];
        }
        C[i + j * ldc] = alpha * acc + beta * C[i + j * ldc];
    }
}
