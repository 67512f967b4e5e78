// Vector add behind a host launcher with a fixed grid: every thread handles
// items_per_thread = ceil(N / total_threads) consecutive elements.
#include <cuda_runtime.h>

__global__ void vec_add_items(const float* A, const float* B, float* C, int N, int items_per_thread)
{
    int tid = blockIdx.x * blockDim.x + threadIdx.x;
    int begin = tid * items_per_thread;
    int end = min(begin + items_per_thread, N);
    for (int i = begin; i < end; i++) {
        C[i] = A[i] + B[i];
    }
}

/* kernellsp
sizes = { N = 16777216 }
shapes = [{ N = 1000 }, { N = 65537 }, { N = 300001 }, { N = 2 }]
[args]
A = { dtype = "f32", dir = "in", count = "N" }
B = { dtype = "f32", dir = "in", count = "N" }
C = { dtype = "f32", dir = "out", count = "N" }
N = { value = "N" }
*/
extern "C" void solve(const float* A, const float* B, float* C, int N)
{
    const int blocks = 256;
    const int threads = 256;
    int total = blocks * threads;
    int items_per_thread = (N + total - 1) / total;
    vec_add_items<<<blocks, threads>>>(A, B, C, N, items_per_thread);
}
