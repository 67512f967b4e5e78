// Linear layer forward, y = x * W^T + b: x is [M, K], W is [N, K] (PyTorch
// nn.Linear layout, so B is used transposed), b is [N], y is [M, N].
#include <cuda_runtime.h>

/* kernellsp
sizes = { M = 2048, N = 4096, K = 1024 }
launch = { grid = ["ceil_div(N, 32)", "ceil_div(M, 8)"], block = [32, 8] }
tolerance = { rtol = 1e-3, atol = 1e-3, norm_rtol = 1e-5 }
shapes = [{ M = 67, N = 45, K = 33 }, { M = 3, N = 1000, K = 1 }, { M = 100, N = 1, K = 129 }]
[args]
x = { dtype = "f32", dir = "in", count = "M * K" }
weight = { dtype = "f32", dir = "in", count = "N * K" }
bias = { dtype = "f32", dir = "in", count = "N" }
y = { dtype = "f32", dir = "out", count = "M * N" }
M = { value = "M" }
N = { value = "N" }
K = { value = "K" }
*/
__global__ void linear_forward(const float* __restrict__ x, const float* __restrict__ weight,
                               const float* __restrict__ bias, float* __restrict__ y, int M, int N, int K)
{
    int n = blockIdx.x * blockDim.x + threadIdx.x;
    int m = blockIdx.y * blockDim.y + threadIdx.y;
    if (m < M && n < N) {
        float acc = bias[n];
        for (int k = 0; k < K; ++k) {
            acc += x[m * K + k] * weight[n * K + k];
        }
        y[m * N + n] = acc;
    }
}
