// LeetGPU-style 2-D "valid" convolution (cross-correlation) behind solve():
// output is (input_rows - kernel_rows + 1) x (input_cols - kernel_cols + 1).
#include <cuda_runtime.h>

__global__ void conv2d_valid(const float* input, const float* kernel, float* output,
                             int input_rows, int input_cols, int kernel_rows, int kernel_cols)
{
    int out_rows = input_rows - kernel_rows + 1;
    int out_cols = input_cols - kernel_cols + 1;
    int c = blockIdx.x * blockDim.x + threadIdx.x;
    int r = blockIdx.y * blockDim.y + threadIdx.y;
    if (r < out_rows && c < out_cols) {
        float acc = 0.0f;
        for (int i = 0; i < kernel_rows; i++)
            for (int j = 0; j < kernel_cols; j++)
                acc += input[(r + i) * input_cols + (c + j)] * kernel[i * kernel_cols + j];
        output[r * out_cols + c] = acc;
    }
}

/* kernellsp
sizes = { IR = 4096, IC = 4096, KR = 7, KC = 7 }
tolerance = { rtol = 1e-5, atol = 1e-5 }
shapes = [{ IR = 100, IC = 77, KR = 3, KC = 5 }, { IR = 5, IC = 1000, KR = 5, KC = 1 }, { IR = 31, IC = 31, KR = 31, KC = 2 }]
[args]
input = { dtype = "f32", dir = "in", count = "IR * IC" }
kernel = { dtype = "f32", dir = "in", count = "KR * KC" }
output = { dtype = "f32", dir = "out", count = "(IR - KR + 1) * (IC - KC + 1)" }
input_rows = { value = "IR" }
input_cols = { value = "IC" }
kernel_rows = { value = "KR" }
kernel_cols = { value = "KC" }
*/
extern "C" void solve(const float* input, const float* kernel, float* output,
                      int input_rows, int input_cols, int kernel_rows, int kernel_cols)
{
    int out_rows = input_rows - kernel_rows + 1;
    int out_cols = input_cols - kernel_cols + 1;
    dim3 block(16, 16);
    dim3 grid((out_cols + block.x - 1) / block.x, (out_rows + block.y - 1) / block.y);
    conv2d_valid<<<grid, block>>>(input, kernel, output, input_rows, input_cols, kernel_rows, kernel_cols);
    cudaDeviceSynchronize();
}
