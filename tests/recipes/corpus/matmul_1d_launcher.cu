// Matrix multiply behind solve() (LeetGPU signature): a template kernel with a
// 1-D launch over the M*N outputs, row = idx / N, col = idx % N.
#include <cuda_runtime.h>

template <typename T>
__global__ void matmul_1d(const T* A, const T* B, T* C, int M, int N, int K)
{
    int idx = blockIdx.x * blockDim.x + threadIdx.x;
    if (idx < M * N) {
        int row = idx / N;
        int col = idx % N;
        T sum = 0;
        for (int k = 0; k < K; k++) {
            sum += A[row * K + k] * B[k * N + col];
        }
        C[row * N + col] = sum;
    }
}

/* kernellsp
sizes = { M = 2048, N = 2048, K = 2048 }
tolerance = { rtol = 1e-3, atol = 1e-3, norm_rtol = 1e-5 }
shapes = [{ M = 67, N = 45, K = 33 }, { M = 1, N = 1000, K = 7 }, { M = 99, N = 1, K = 64 }]
[args]
A = { dtype = "f32", dir = "in", count = "M * K" }
B = { dtype = "f32", dir = "in", count = "K * N" }
C = { dtype = "f32", dir = "out", count = "M * N" }
M = { value = "M" }
N = { value = "N" }
K = { value = "K" }
*/
extern "C" void solve(const float* A, const float* B, float* C, int M, int N, int K)
{
    int total = M * N;
    int threads = 256;
    int blocks = (total + threads - 1) / threads;
    matmul_1d<float><<<blocks, threads>>>(A, B, C, M, N, K);
    cudaDeviceSynchronize();
}
