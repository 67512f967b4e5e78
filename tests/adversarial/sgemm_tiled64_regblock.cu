// sgemm_naive.cu: C = A * B (row-major, MxK times KxN); naive: one thread per output, every operand re-read from global memory, no shared-memory tiling or register blocking.
#include <cuda_runtime.h>

/* kernellsp
sizes = { M = 2048, N = 2048, K = 2048 }
launch = { grid = ["ceil_div(N, 64)", "ceil_div(M, 64)"], block = [16, 16] }
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
    // 64x64 output tile per block, 4x4 outputs per thread (rows ty + 16 i, cols tx + 16 j), A and B
    // staged through shared memory 16 k at a time. Each output still sums k = 0, 1, ..., K-1 in order.
    __shared__ float As[16][68];  // As[k][row], padded
    __shared__ float Bs[16][64];  // Bs[k][col]
    int tx = threadIdx.x, ty = threadIdx.y;
    int t = ty * 16 + tx;
    int row0 = blockIdx.y * 64;
    int col0 = blockIdx.x * 64;
    float acc[4][4];
#pragma unroll
    for (int i = 0; i < 4; ++i) {
#pragma unroll
        for (int j = 0; j < 4; ++j) {
            acc[i][j] = 0.0f;
        }
    }
    for (int k0 = 0; k0 < K; k0 += 16) {
#pragma unroll
        for (int l = 0; l < 4; ++l) {
            int idx = t + 256 * l;
            int r = idx / 16, kk = idx % 16;  // A tile: 64 rows x 16 k
            int gr = row0 + r, gk = k0 + kk;
            As[kk][r] = (gr < M && gk < K) ? A[gr * K + gk] : 0.0f;
            int kb = idx / 64, c = idx % 64;  // B tile: 16 k x 64 cols
            int gkb = k0 + kb, gc = col0 + c;
            Bs[kb][c] = (gkb < K && gc < N) ? B[gkb * N + gc] : 0.0f;
        }
        __syncthreads();
#pragma unroll
        for (int kk = 0; kk < 16; ++kk) {
            float a[4], b[4];
#pragma unroll
            for (int i = 0; i < 4; ++i) {
                a[i] = As[kk][ty + 16 * i];
                b[i] = Bs[kk][tx + 16 * i];
            }
#pragma unroll
            for (int i = 0; i < 4; ++i) {
#pragma unroll
                for (int j = 0; j < 4; ++j) {
                    acc[i][j] += a[i] * b[j];
                }
            }
        }
        __syncthreads();
    }
#pragma unroll
    for (int i = 0; i < 4; ++i) {
#pragma unroll
        for (int j = 0; j < 4; ++j) {
            int r = row0 + ty + 16 * i, c = col0 + tx + 16 * j;
            if (r < M && c < N) {
                C[r * N + c] = acc[i][j];
            }
        }
    }
}
