// relu_launcher.cu: output = max(input, 0) through a host launcher solve(); naive: fixed 256-thread blocks, one scalar element per thread, and a blocking cudaDeviceSynchronize after every launch.
#include <cuda_runtime.h>

__global__ void relu_kernel(const float* input, float* output, int N)
{
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < N; i += gridDim.x * blockDim.x) {
        output[i] = fmaxf(input[i], 0.0f);
    }
}

/* kernellsp
sizes = { N = 16777216 }
shapes = [{ N = 1000 }, { N = 4097 }, { N = 1 }]
[args]
input = { dtype = "f32", dir = "in", count = "N" }
output = { dtype = "f32", dir = "out", count = "N" }
N = { value = "N" }
*/
// input, output are device pointers
extern "C" void solve(const float* input, float* output, int N)
{
    // Launch shape chosen in the host launcher: 2 waves of 1024-thread blocks, grid-stride kernel.
    int threadsPerBlock = 1024;
    int blocksPerGrid = 132 * 2;
    relu_kernel<<<blocksPerGrid, threadsPerBlock>>>(input, output, N);
    cudaDeviceSynchronize();
}
