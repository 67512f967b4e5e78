// Source: https://github.com/JuliaParallel/rodinia/blob/0f47cfc2f35034405973703fbb6d2c77a25439c0/cuda/lud/lud_kernel.cu (lines 4-12, 166-188), license Rodinia (BSD-style)
// License: Rodinia BSD-style license (Copyright (c)2008-2011 University of Virginia, All rights reserved; see JuliaParallel/rodinia LICENSE). The source file has no header of its own.
// Launch as in lud_cuda() (same file) for one step i = offset: dimBlock(BLOCK_SIZE, BLOCK_SIZE),
// dimGrid((matrix_dim - i) / BLOCK_SIZE - 1, (matrix_dim - i) / BLOCK_SIZE - 1). The trailing-submatrix
// update m -= L_col * U_row with 16x16 shared-memory tiles (K = 16).
#include <cuda_runtime.h>

#ifdef RD_WG_SIZE_0_0
#define BLOCK_SIZE RD_WG_SIZE_0_0
#elif defined(RD_WG_SIZE_0)
#define BLOCK_SIZE RD_WG_SIZE_0
#elif defined(RD_WG_SIZE)
#define BLOCK_SIZE RD_WG_SIZE
#else
#define BLOCK_SIZE 16
#endif

/* kernellsp
sizes = { D = 8192, OFF = 0 }
launch = { grid = ["(D - OFF) // 16 - 1", "(D - OFF) // 16 - 1"], block = [16, 16] }
tolerance = { rtol = 1e-5, atol = 1e-5 }
shapes = [{ D = 48, OFF = 16 }, { D = 1024, OFF = 32 }, { D = 32, OFF = 0 }, { D = 80, OFF = 48 }]
[args]
m = { dtype = "f32", dir = "inout", count = "D * D", dist = "uniform(-1, 1)" }
matrix_dim = { value = "D" }
offset = { value = "OFF" }
*/
__global__ void lud_internal(float *m, int matrix_dim, int offset) {
    __shared__ float peri_row[BLOCK_SIZE][BLOCK_SIZE];
    __shared__ float peri_col[BLOCK_SIZE][BLOCK_SIZE];

    int i;
    float sum;

    int global_row_id = offset + (blockIdx.y + 1) * BLOCK_SIZE;
    int global_col_id = offset + (blockIdx.x + 1) * BLOCK_SIZE;

    peri_row[threadIdx.y][threadIdx.x] =
        m[(offset + threadIdx.y) * matrix_dim + global_col_id + threadIdx.x];
    peri_col[threadIdx.y][threadIdx.x] =
        m[(global_row_id + threadIdx.y) * matrix_dim + offset + threadIdx.x];

    __syncthreads();

    sum = 0;
    for (i = 0; i < BLOCK_SIZE; i++)
        sum += peri_col[threadIdx.y][i] * peri_row[i][threadIdx.x];
    m[(global_row_id + threadIdx.y) * matrix_dim + global_col_id +
      threadIdx.x] -= sum;
}
