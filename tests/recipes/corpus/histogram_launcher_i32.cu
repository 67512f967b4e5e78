// LeetGPU-style histogram: solve() zeroes the output with cudaMemset and then
// launches one thread per input value, each doing a global atomicAdd.
#include <cuda_runtime.h>

__global__ void histogram_kernel(const int* input, int* histogram, int N, int num_bins)
{
    int idx = blockIdx.x * blockDim.x + threadIdx.x;
    if (idx < N) {
        int v = input[idx];
        if (v >= 0 && v < num_bins) {
            atomicAdd(&histogram[v], 1);
        }
    }
}

/* kernellsp
sizes = { N = 33554432, B = 1024 }
shapes = [{ N = 1000, B = 10 }, { N = 4097 }, { N = 50000, B = 1 }]
[args]
input = { dtype = "i32", dir = "in", count = "N", dist = "randint(0, B)" }
histogram = { dtype = "i32", dir = "out", count = "B" }
N = { value = "N" }
num_bins = { value = "B" }
*/
extern "C" void solve(const int* input, int* histogram, int N, int num_bins)
{
    cudaMemset(histogram, 0, num_bins * sizeof(int));
    int threads = 256;
    int blocks = (N + threads - 1) / threads;
    histogram_kernel<<<blocks, threads>>>(input, histogram, N, num_bins);
    cudaDeviceSynchronize();
}
