// y = A * x with A column-major (m x n, leading dimension lda), BLAS-style
// argument list; thread i computes y[i] = sum_j A[i + j*lda] * x[j].
#include <cuda_runtime.h>

/* kernellsp
sizes = { M = 8192, N = 8192 }
launch = { grid = "ceil_div(M, 128)", block = 128 }
tolerance = { rtol = 1e-3, atol = 1e-4, norm_rtol = 1e-5 }
shapes = [{ M = 1000, N = 100 }, { M = 3, N = 4097 }, { M = 257, N = 1 }]
[args]
m = { value = "M" }
n = { value = "N" }
A = { dtype = "f32", dir = "in", count = "M * N" }
lda = { value = "M" }
x = { dtype = "f32", dir = "in", count = "N" }
y = { dtype = "f32", dir = "out", count = "M" }
*/
__global__ void sgemv_n_colmajor(int m, int n, const float* A, int lda, const float* x, float* y)
{
    int i = threadIdx.x + blockIdx.x * blockDim.x;
    if (i >= m) return;
    float sum = 0.0f;
    for (int j = 0; j < n; ++j)
        sum += A[i + (size_t)j * lda] * x[j];
    y[i] = sum;
}
