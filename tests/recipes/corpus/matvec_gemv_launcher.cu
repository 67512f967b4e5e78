// y = alpha * A * x + beta * y behind a host launcher (row-major A, one thread
// per row); y is read and written.
#include <cuda_runtime.h>

__global__ void gemv_kernel(const float* A, const float* x, float* y, int M, int N, float alpha, float beta)
{
    int row = blockIdx.x * blockDim.x + threadIdx.x;
    if (row < M) {
        float s = 0.0f;
        for (int c = 0; c < N; ++c)
            s += A[row * N + c] * x[c];
        y[row] = alpha * s + beta * y[row];
    }
}

/* kernellsp
sizes = { M = 8192, N = 8192 }
tolerance = { rtol = 1e-3, atol = 1e-4, norm_rtol = 1e-5 }
shapes = [{ M = 1000, N = 100 }, { M = 3, N = 4097 }, { M = 257, N = 1 }]
[args]
A = { dtype = "f32", dir = "in", count = "M * N" }
x = { dtype = "f32", dir = "in", count = "N" }
y = { dtype = "f32", dir = "inout", count = "M" }
M = { value = "M" }
N = { value = "N" }
alpha = { value = 0.5 }
beta = { value = 2.0 }
*/
extern "C" void solve(const float* A, const float* x, float* y, int M, int N, float alpha, float beta)
{
    int block = 256;
    int grid = (M + block - 1) / block;
    gemv_kernel<<<grid, block>>>(A, x, y, M, N, alpha, beta);
    cudaDeviceSynchronize();
}
