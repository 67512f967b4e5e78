// Source: https://github.com/PawseySC/gpu-programming-essentials/blob/f162b1a1b6e09604139b050603032f428b914489/matrix_transpose/matrix_transpose_solution.cu (lines 5, 39-55), license MIT
// Copyright 2021-present Pawsey Supercomputing Centre, MIT License (repository LICENSE; the source file has no header of its own).
#include <stdio.h>
#include <stdlib.h>
#include <cuda_runtime.h>

#define NTHREADS 1024


/**
    Kernel to transpose a Matrix.

    Parameters:
    - a_in: input vector holding the matrix to be transposed.
    - a_trans: output vector where to write the transposed matrix.
    - m, n: number of rows and columns respectively in matrix a_in.
*/
/* kernellsp
sizes = { M = 8192, N = 8192 }
launch = { grid = "ceil_div(N * M, 1024)", block = 1024 }
shapes = [{ M = 1000, N = 777 }, { M = 33, N = 65 }, { M = 1, N = 100 }, { M = 45, N = 1 }]
[args]
a_in = { dtype = "f32", dir = "in", count = "M * N" }
a_trans = { dtype = "f32", dir = "out", count = "M * N" }
m = { value = "M" }
n = { value = "N" }
*/
__global__ void matrix_transpose(float *a_in, float *a_trans, int m, int n){
    unsigned int idx_in = blockDim.x * blockIdx.x + threadIdx.x;
    if (idx_in < n * m){
        unsigned int row = idx_in / n;
        unsigned int col = idx_in % n;
        unsigned int idx_trans = col * m + row;
        a_trans[idx_trans] = a_in[idx_in];
    }
}
