// "Kernel 2" of the SGEMM worklog: global-memory coalescing with a 1-D block of
// 32*32 threads split by / and % BLOCKSIZE, so consecutive threads share a
// row of C and walk its columns. alpha/beta, C in-out.
#include <cuda_runtime.h>

#define BLOCKSIZE 32

/* kernellsp
sizes = { M = 4096, N = 4096, K = 4096 }
launch = { grid = ["ceil_div(M, 32)", "ceil_div(N, 32)"], block = 1024 }
tolerance = { rtol = 1e-3, atol = 1e-3, norm_rtol = 1e-5 }
shapes = [{ M = 67, N = 45, K = 33 }, { M = 1, N = 1000, K = 5 }, { M = 100, N = 2, K = 77 }]
[args]
M = { value = "M" }
N = { value = "N" }
K = { value = "K" }
alpha = { value = 1.0 }
A = { dtype = "f32", dir = "in", count = "M * K" }
B = { dtype = "f32", dir = "in", count = "K * N" }
beta = { value = -2.0 }
C = { dtype = "f32", dir = "inout", count = "M * N" }
*/
__global__ void sgemm_global_mem_coalesce(int M, int N, int K, float alpha, const float *A,
                                          const float *B, float beta, float *C)
{
    const int cRow = blockIdx.x * BLOCKSIZE + (threadIdx.x / BLOCKSIZE);
    const int cCol = blockIdx.y * BLOCKSIZE + (threadIdx.x % BLOCKSIZE);

    if (cRow < M && cCol < N) {
        float tmp = 0.0f;
        for (int i = 0; i < K; ++i) {
            tmp += A[cRow * K + i] * B[i * N + cCol];
        }
        C[cRow * N + cCol] = alpha * tmp + beta * C[cRow * N + cCol];
    }
}
