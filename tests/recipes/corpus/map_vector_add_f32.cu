// Vector addition, tutorial style: C = A + B. Non-const pointers, index spelled
// threadIdx.x + blockDim.x * blockIdx.x, one element per thread.
#include <cuda_runtime.h>
#include <stdio.h>

/* kernellsp
sizes = { N = 33554432 }
launch = { grid = "ceil_div(N, 256)", block = 256 }
shapes = [{ N = 1000 }, { N = 4097 }, { N = 3 }]
[args]
A = { dtype = "f32", dir = "in", count = "N" }
B = { dtype = "f32", dir = "in", count = "N" }
C = { dtype = "f32", dir = "out", count = "N" }
N = { value = "N" }
*/
__global__ void VecAdd(float* A, float* B, float* C, int N)
{
    int i = threadIdx.x + blockDim.x * blockIdx.x;
    if (i < N)
        C[i] = A[i] + B[i];
}
