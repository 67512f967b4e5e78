// "Kernel 1" of the well-known SGEMM worklog: C = alpha * A * B + beta * C with
// threadIdx.x mapped to the *row* of C (x = blockIdx.x * blockDim.x + threadIdx.x),
// so a warp reads 32 different rows of A and writes a column of C. uint indices.
#include <cuda_runtime.h>

typedef unsigned int uint;

/* kernellsp
sizes = { M = 4096, N = 4096, K = 4096 }
launch = { grid = ["ceil_div(M, 32)", "ceil_div(N, 32)"], block = [32, 32] }
tolerance = { rtol = 1e-3, atol = 1e-3, norm_rtol = 1e-5 }
shapes = [{ M = 67, N = 45, K = 33 }, { M = 1000, N = 1, K = 9 }, { M = 3, N = 129, K = 200 }]
[args]
M = { value = "M" }
N = { value = "N" }
K = { value = "K" }
alpha = { value = 1.5 }
A = { dtype = "f32", dir = "in", count = "M * K" }
B = { dtype = "f32", dir = "in", count = "K * N" }
beta = { value = 0.5 }
C = { dtype = "f32", dir = "inout", count = "M * N" }
*/
__global__ void sgemm_naive(int M, int N, int K, float alpha, const float *A,
                            const float *B, float beta, float *C)
{
    const uint x = blockIdx.x * blockDim.x + threadIdx.x;
    const uint y = blockIdx.y * blockDim.y + threadIdx.y;

    // `if` condition is necessary for when M or N aren't multiples of 32.
    if (x < M && y < N) {
        float tmp = 0.0;
        for (int i = 0; i < K; ++i) {
            tmp += A[x * K + i] * B[i * N + y];
        }
        // C = α*(A@B)+β*C
        C[x * N + y] = alpha * tmp + beta * C[x * N + y];
    }
}
