// Source: https://github.com/xlite-dev/LeetCUDA/blob/3c20dcdfb6ec66f47f9c852449994ebd96e8b966/kernels/mat-transpose/mat_transpose.cu (lines 88-96), license GPL-3.0
// License: GPL-3.0 (README: "License: GNU General Public License v3.0"), https://github.com/xlite-dev/LeetCUDA (formerly DefTruth/CUDA-Learn-Notes)
#include <cuda_runtime.h>
/* kernellsp
sizes = { ROWS = 8192, COLS = 8192 }
launch = { grid = ["ceil_div(COLS, 16)", "ceil_div(ROWS, 16)"], block = [16, 16] }
shapes = [{ ROWS = 1000, COLS = 777 }, { ROWS = 33, COLS = 65 }, { ROWS = 1, COLS = 100 }, { ROWS = 45, COLS = 1 }]
[args]
x = { dtype = "f32", dir = "in", count = "ROWS * COLS" }
y = { dtype = "f32", dir = "out", count = "ROWS * COLS" }
row = { value = "ROWS" }
col = { value = "COLS" }
*/
__global__ void mat_transpose_f32_col2row2d_kernel(float *x, float *y,
                                                   const int row,
                                                   const int col) {
  const int global_x = blockIdx.x * blockDim.x + threadIdx.x;
  const int global_y = blockIdx.y * blockDim.y + threadIdx.y;
  if (global_x < col && global_y < row) {
    y[global_x * row + global_y] = x[global_y * col + global_x];
  }
}
