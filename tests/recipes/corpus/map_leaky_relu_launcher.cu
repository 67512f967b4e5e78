// Leaky ReLU behind a host launcher (LeetGPU-style solve()). The kernel is a
// template; solve() instantiates it for float. Inputs/outputs are device pointers.
#include <cuda_runtime.h>

template <typename T>
__global__ void leaky_relu_kernel(const T* input, T* output, int N, T slope)
{
    int idx = blockIdx.x * blockDim.x + threadIdx.x;
    if (idx < N) {
        T v = input[idx];
        output[idx] = v > T(0) ? v : v * slope;
    }
}

/* kernellsp
sizes = { N = 33554432 }
shapes = [{ N = 1000 }, { N = 4097 }, { N = 5 }]
[args]
input = { dtype = "f32", dir = "in", count = "N" }
output = { dtype = "f32", dir = "out", count = "N" }
N = { value = "N" }
*/
extern "C" void solve(const float* input, float* output, int N)
{
    const int threadsPerBlock = 256;
    const int blocksPerGrid = (N + threadsPerBlock - 1) / threadsPerBlock;
    leaky_relu_kernel<float><<<blocksPerGrid, threadsPerBlock>>>(input, output, N, 0.01f);
    cudaDeviceSynchronize();
}
