// bf16 GEMM in the "NT" form of a linear layer's backward pass: C = alpha * X * W^T + beta * C, where W
// is stored N x K (so B = W^T is column-major), fp32 accumulation and fp32 C, one output per thread,
// the thread's column from x and its row from y, conversions with __bfloat162float in the loop.
#include <cuda_bf16.h>

/* kernellsp
sizes = { M = 2048, N = 2048, K = 2048 }
launch = { grid = ["(N + 31) / 32", "(M + 7) / 8"], block = [32, 8] }
tolerance = { rtol = 2e-3, atol = 2e-3, norm_rtol = 1e-4 }
shapes = [{ M = 37, N = 70, K = 45 }, { M = 130, N = 3, K = 260 }, { M = 1, N = 257, K = 17 }]
[args]
X = { dtype = "bf16", dir = "in", count = "M * K" }
W = { dtype = "bf16", dir = "in", count = "N * K" }
C = { dtype = "f32", dir = "inout", count = "M * N" }
M = { value = "M" }
N = { value = "N" }
K = { value = "K" }
alpha = { value = 0.75 }
beta = { value = -0.5 }
*/
__global__ void gemm_nt_bf16(int M, int N, int K, float alpha, const __nv_bfloat16* X,
                             const __nv_bfloat16* W, float beta, float* C)
{
    const unsigned n = blockIdx.x * blockDim.x + threadIdx.x;
    const unsigned m = blockIdx.y * blockDim.y + threadIdx.y;
    if (m >= (unsigned)M || n >= (unsigned)N) return;
    float sum = 0.f;
    for (int k = 0; k < K; k++)
        sum += __bfloat162float(X[m * K + k]) * __bfloat162float(W[n * K + k]);
    C[m * N + n] = alpha * sum + beta * C[m * N + n];
}
