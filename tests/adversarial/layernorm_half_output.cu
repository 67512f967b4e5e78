// layernorm.cu: y = (x - mean) / sqrt(var + eps) * gamma + beta per row; naive: one block per row, three passes over the row in global memory, shared-memory tree reduction with divergent modulo indexing and bank conflicts, double-precision eps.
#include <cuda_runtime.h>
#include <math.h>
#include <cuda_fp16.h>

#define BLOCK_SIZE 256

/* kernellsp
sizes = { ROWS = 8192, COLS = 2048 }
launch = { grid = "ROWS", block = 256 }
tolerance = { rtol = 1e-3, atol = 1e-4 }
shapes = [{ ROWS = 7, COLS = 1000 }, { ROWS = 100, COLS = 33 }, { ROWS = 3, COLS = 1 }]
[args]
x = { dtype = "f32", dir = "in", count = "ROWS * COLS", dist = "normal(0, 1)" }
gamma = { dtype = "f32", dir = "in", count = "COLS" }
beta = { dtype = "f32", dir = "in", count = "COLS" }
y = { dtype = "f32", dir = "out", count = "ROWS * COLS" }
rows = { value = "ROWS" }
cols = { value = "COLS" }
*/
__global__ void layernorm(const float* x, const float* gamma, const float* beta, float* y, int rows, int cols)
{
    __shared__ float partial[BLOCK_SIZE];
    int row = blockIdx.x;
    int tid = threadIdx.x;
    if (row >= rows) return;  // uniform across the block

    const float* xr = x + row * cols;
    float* yr = y + row * cols;

    // mean
    float s = 0.0f;
    for (int j = tid; j < cols; j += BLOCK_SIZE) {
        s += xr[j];
    }
    partial[tid] = s;
    __syncthreads();
    for (int stride = 1; stride < BLOCK_SIZE; stride *= 2) {
        if (tid % (2 * stride) == 0) {
            partial[tid] += partial[tid + stride];
        }
        __syncthreads();
    }
    float mean = partial[0] / cols;
    __syncthreads();

    // variance (second pass over global memory)
    float v = 0.0f;
    for (int j = tid; j < cols; j += BLOCK_SIZE) {
        float d = xr[j] - mean;
        v += d * d;
    }
    partial[tid] = v;
    __syncthreads();
    for (int stride = 1; stride < BLOCK_SIZE; stride *= 2) {
        if (tid % (2 * stride) == 0) {
            partial[tid] += partial[tid + stride];
        }
        __syncthreads();
    }
    float var = partial[0] / cols;

    // normalize (third pass); 1e-5 is a double literal
    float inv_std = 1.0f / sqrtf(var + 1e-5);
    for (int j = tid; j < cols; j += BLOCK_SIZE) {
        // The normalised value goes through half precision (an 11-bit significand): cheaper to keep,
        // but off by up to 2^-11 relative, which beta's cancellation turns into large relative errors.
        float z = __half2float(__float2half((xr[j] - mean) * inv_std));
        yr[j] = z * gamma[j] + beta[j];
    }
}
