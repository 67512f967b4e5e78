// fp16 matrix transpose behind a host launcher with dim3 16x16 blocks.
#include <cuda_runtime.h>
#include <cuda_fp16.h>

#define BLOCK 16

__global__ void transpose_half(const __half* input, __half* output, int rows, int cols)
{
    int col = blockIdx.x * blockDim.x + threadIdx.x;
    int row = blockIdx.y * blockDim.y + threadIdx.y;
    if (row < rows && col < cols) {
        output[col * rows + row] = input[row * cols + col];
    }
}

/* kernellsp
sizes = { ROWS = 8192, COLS = 8192 }
shapes = [{ ROWS = 1000, COLS = 777 }, { ROWS = 3, COLS = 1025 }, { ROWS = 63, COLS = 1 }]
[args]
input = { dtype = "f16", dir = "in", count = "ROWS * COLS" }
output = { dtype = "f16", dir = "out", count = "ROWS * COLS" }
rows = { value = "ROWS" }
cols = { value = "COLS" }
*/
extern "C" void solve(const __half* input, __half* output, int rows, int cols)
{
    dim3 threadsPerBlock(BLOCK, BLOCK);
    dim3 blocksPerGrid((cols + BLOCK - 1) / BLOCK, (rows + BLOCK - 1) / BLOCK);
    transpose_half<<<blocksPerGrid, threadsPerBlock>>>(input, output, rows, cols);
    cudaDeviceSynchronize();
}
