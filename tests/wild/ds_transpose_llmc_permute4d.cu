// Source: https://github.com/karpathy/llm.c/blob/3f7d0ccef8054136ea6b5bb19f5a85048b1c12d3/dev/cuda/permute.cu (lines 99-116), license MIT
// License: MIT, Copyright (c) 2024 Andrej Karpathy (https://github.com/karpathy/llm.c/blob/master/LICENSE)
#include <cuda_runtime.h>
// CUDA kernel to permute a 4D matrix
/* kernellsp
sizes = { D1 = 64, D2 = 64, D3 = 64, D4 = 64 }
launch = { grid = "ceil_div(D1 * D2 * D3 * D4, 256)", block = 256 }
shapes = [{ D1 = 3, D2 = 5, D3 = 7, D4 = 11 }, { D1 = 1, D2 = 33, D3 = 1, D4 = 67 }, { D1 = 13, D2 = 1, D3 = 17, D4 = 2 }]
[args]
matrix = { dtype = "f32", dir = "in", count = "D1 * D2 * D3 * D4" }
out_matrix = { dtype = "f32", dir = "out", count = "D1 * D2 * D3 * D4" }
dim1 = { value = "D1" }
dim2 = { value = "D2" }
dim3 = { value = "D3" }
dim4 = { value = "D4" }
*/
__global__ void permute_kernel(const float* matrix, float* out_matrix, int dim1, int dim2, int dim3, int dim4) {
    int idx = blockIdx.x * blockDim.x + threadIdx.x;

    // Ensure index is within bounds
    if (idx < dim1 * dim2 * dim3 * dim4) {
        // Calculate the 4D indices from the linear index
        int i1 = (idx / (dim2 * dim3 * dim4)) % dim1;
        int i2 = (idx / (dim3 * dim4)) % dim2;
        int i3 = (idx / dim4) % dim3;
        int i4 = idx % dim4;

        // Compute the new index for the permuted matrix
        // Transpose from (dim1, dim2, dim3, dim4) to (dim4, dim3, dim1, dim2)
        int permuted_idx = i4 * (dim3 * dim1 * dim2) + i3 * (dim1 * dim2) + i1 * dim2 + i2;
        out_matrix[permuted_idx] = matrix[idx];
    }
}
