// y = A^T * x with A row-major (M x N): thread j owns output j and walks down
// column j of A (y[j] = sum_i A[i][j] * x[i]).
#include <cuda_runtime.h>

/* kernellsp
sizes = { M = 8192, N = 8192 }
launch = { grid = "ceil_div(N, 256)", block = 256 }
tolerance = { rtol = 1e-3, atol = 1e-4, norm_rtol = 1e-5 }
shapes = [{ M = 1000, N = 100 }, { M = 3, N = 4097 }, { M = 257, N = 1 }]
[args]
mat = { dtype = "f32", dir = "in", count = "M * N" }
vec = { dtype = "f32", dir = "in", count = "M" }
res = { dtype = "f32", dir = "out", count = "N" }
M = { value = "M" }
N = { value = "N" }
*/
__global__ void matvec_t(const float* mat, const float* vec, float* res, int M, int N)
{
    int j = blockIdx.x * blockDim.x + threadIdx.x;
    if (j < N) {
        float acc = 0.0f;
        for (int i = 0; i < M; ++i) {
            acc += mat[i * N + j] * vec[i];
        }
        res[j] = acc;
    }
}
