// relu_launcher.cu: output = max(input, 0) through a host launcher solve(); naive: fixed 256-thread blocks, one scalar element per thread, and a blocking cudaDeviceSynchronize after every launch.
#include <cuda_runtime.h>

__global__ void relu_kernel(const float* input, float* output, int N)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < N) {
        output[i] = input[i] > 0.0f ? input[i] : 0.0f;
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
    int threadsPerBlock = 256;
    int blocksPerGrid = (N + threadsPerBlock - 1) / threadsPerBlock;
    relu_kernel<<<blocksPerGrid, threadsPerBlock>>>(input, output, N);
    // the blocking cudaDeviceSynchronize() is dropped: "let the caller decide"
}
