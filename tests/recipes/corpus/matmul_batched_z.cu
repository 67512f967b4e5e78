// Batched matmul C[b] = A[b] * B[b] (row-major), batch index from blockIdx.z,
// per-batch pointer offsets with strides computed in the kernel.
#include <cuda_runtime.h>

/* kernellsp
sizes = { BATCH = 32, M = 512, N = 512, K = 512 }
launch = { grid = ["ceil_div(N, 16)", "ceil_div(M, 16)", "BATCH"], block = [16, 16, 1] }
tolerance = { rtol = 1e-3, atol = 1e-3, norm_rtol = 1e-5 }
shapes = [{ BATCH = 3, M = 67, N = 45, K = 33 }, { BATCH = 1, M = 1, N = 100, K = 9 }, { BATCH = 5, M = 17, N = 1, K = 1 }]
[args]
A = { dtype = "f32", dir = "in", count = "BATCH * M * K" }
B = { dtype = "f32", dir = "in", count = "BATCH * K * N" }
C = { dtype = "f32", dir = "out", count = "BATCH * M * N" }
batch = { value = "BATCH" }
M = { value = "M" }
N = { value = "N" }
K = { value = "K" }
*/
__global__ void bmm_naive(const float* A, const float* B, float* C, int batch, int M, int N, int K)
{
    int b = blockIdx.z;
    int row = blockIdx.y * blockDim.y + threadIdx.y;
    int col = blockIdx.x * blockDim.x + threadIdx.x;
    if (b < batch && row < M && col < N) {
        const float* a = A + (size_t)b * M * K;
        const float* bm = B + (size_t)b * K * N;
        float acc = 0.0f;
        for (int k = 0; k < K; ++k)
            acc += a[row * K + k] * bm[k * N + col];
        C[(size_t)b * M * N + row * N + col] = acc;
    }
}
