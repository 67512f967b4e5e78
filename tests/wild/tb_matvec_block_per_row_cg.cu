// Source: https://github.com/AIComputing101/gpu-programming-101/blob/fbfad1243d3a4ebc559512631a92cad5c5a21eff/modules/module3/examples/05_matrix_operations_cuda.cu (lines 9, 74-113), license MIT
// Copyright (c) 2025 GPU Programming 101, MIT License (repository LICENSE; the source file has no header of its own).
#include <cuda_runtime.h>
#include <stdio.h>

#define BLOCK_SIZE 256

// Matrix-vector multiplication using cooperative groups
#include <cooperative_groups.h>
namespace cg = cooperative_groups;

/* kernellsp
sizes = { N = 8192 }
launch = { grid = "N", block = 256 }
tolerance = { rtol = 1e-4, atol = 1e-4, norm_rtol = 1e-5 }
shapes = [{ N = 1000 }, { N = 257 }, { N = 1 }, { N = 33 }]
[args]
matrix = { dtype = "f32", dir = "in", count = "N * N" }
vector = { dtype = "f32", dir = "in", count = "N" }
result = { dtype = "f32", dir = "out", count = "N" }
N = { value = "N" }
*/
__global__ void matrixVectorMul(float *matrix, float *vector, float *result, int N) {
    auto block = cg::this_thread_block();
    __shared__ float shared_vector[BLOCK_SIZE];
    
    int row = blockIdx.x;
    int tid = threadIdx.x;
    
    float sum = 0.0f;
    
    // Process matrix row in chunks
    for (int chunk = 0; chunk < (N + BLOCK_SIZE - 1) / BLOCK_SIZE; ++chunk) {
        int idx = chunk * BLOCK_SIZE + tid;
        
        // Load vector chunk into shared memory
        if (idx < N) {
            shared_vector[tid] = vector[idx];
        } else {
            shared_vector[tid] = 0.0f;
        }
        
        block.sync();
        
        // Compute partial dot product
        for (int i = 0; i < BLOCK_SIZE && chunk * BLOCK_SIZE + i < N; ++i) {
            if (row < N) {
                sum += matrix[row * N + chunk * BLOCK_SIZE + i] * shared_vector[i];
            }
        }
        
        block.sync();
    }
    
    if (tid == 0 && row < N) {
        result[row] = sum;
    }
}
