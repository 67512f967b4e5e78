// Source: https://github.com/xlite-dev/LeetCUDA/blob/3c20dcdfb6ec66f47f9c852449994ebd96e8b966/kernels/histogram/histogram.cu (lines 15-22), license GPL-3.0
// License: GPL-3.0 (README: "License: GNU General Public License v3.0"), https://github.com/xlite-dev/LeetCUDA (formerly DefTruth/CUDA-Learn-Notes)
#include <cuda_runtime.h>
// Histogram
// grid(N/256), block(256)
// a: Nx1, y: count histogram, a >= 1
__global__ void histogram_i32_kernel(int *a, int *y, int N) {
  int idx = blockIdx.x * blockDim.x + threadIdx.x;
  if (idx < N)
    atomicAdd(&(y[a[idx]]), 1);
}

// Launcher written for this corpus from the file's TORCH_BINDING_HIST(i32, ...) binding: y is a
// torch::zeros({M + 1}) tensor (here a cudaMemset of the num_bins counters), block(256),
// grid((N + 256 - 1) / 256).
/* kernellsp
sizes = { N = 33554432, BINS = 1024 }
shapes = [{ N = 1000, BINS = 10 }, { N = 4097, BINS = 1 }, { N = 3, BINS = 5000 }]
[args]
a = { dtype = "i32", dir = "in", count = "N", dist = "randint(0, BINS)" }
y = { dtype = "i32", dir = "out", count = "BINS" }
N = { value = "N" }
num_bins = { value = "BINS" }
*/
extern "C" void solve(int *a, int *y, int N, int num_bins) {
  cudaMemset(y, 0, num_bins * sizeof(int));
  const int NUM_BLOCKS = (N + 256 - 1) / 256;
  dim3 block(256);
  dim3 grid(NUM_BLOCKS);
  histogram_i32_kernel<<<grid, block>>>(a, y, N);
}
