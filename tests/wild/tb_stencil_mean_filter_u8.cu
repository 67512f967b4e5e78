// Source: https://github.com/gpu-mode/lectures/blob/e277f6c8976394ebd093b6a2ef7f68e931ab4846/lecture_002/mean_filter/mean_filter_kernel.cu (lines 5-40), license Apache-2.0
// Repository license: Apache License 2.0 (Copyright 2024 CUDA MODE); the source file has no header of its own.
#include <cuda_runtime.h>


/* kernellsp
sizes = { W = 4096, H = 4096, C = 3, R = 4 }
launch = { grid = ["ceil_div(W, 16)", "ceil_div(H, 16)"], block = [16, 16, "C"] }
shapes = [{ W = 1000, H = 777, C = 3, R = 2 }, { W = 33, H = 65, C = 1, R = 1 }, { W = 5, H = 3, C = 3, R = 3 }]
[args]
output = { dtype = "u8", dir = "out", count = "C * H * W" }
input = { dtype = "u8", dir = "in", count = "C * H * W", dist = "randint(0, 256)" }
width = { value = "W" }
height = { value = "H" }
radius = { value = "R" }
*/
__global__
void mean_filter_kernel(unsigned char* output, unsigned char* input, int width, int height, int radius) {
    /*
    均值滤波是一种简单的图像模糊技术，通过计算每个像素周围邻域内所有像素值的平均值来更新像素值，从而减少图像噪声。
    */
    // 计算当前线程处理的列位置，blockIdx.x 和 blockDim.x 确定线程块和线程在x轴上的位置。
    int col = blockIdx.x * blockDim.x + threadIdx.x;
    // 计算当前线程处理的行位置，blockIdx.y 和 blockDim.y 确定线程块和线程在y轴上的位置。
    int row = blockIdx.y * blockDim.y + threadIdx.y;
    // 计算当前线程处理的颜色通道，threadIdx.z 确定线程在z轴上的位置。
    int channel = threadIdx.z;

    // 计算当前通道的基地址偏移量，用于访问多通道图像数据。
    int baseOffset = channel * height * width;
    if (col < width && row < height) {

        // 初始化当前像素的累积像素值和像素计数。
        int pixVal = 0;
        int pixels = 0;

        for (int blurRow=-radius; blurRow <= radius; blurRow += 1) {
            for (int blurCol=-radius; blurCol <= radius; blurCol += 1) {
                int curRow = row + blurRow;
                int curCol = col + blurCol;
                if (curRow >= 0 && curRow < height && curCol >=0 && curCol < width) {
                    pixVal += input[baseOffset + curRow * width + curCol];
                    pixels += 1;
                }
            }
        }

        // 计算邻域内所有像素的平均值，并将其赋值给输出图像的对应像素。
        // 这里使用了类型转换，因为除法结果可能不是整数。
        output[baseOffset + row * width + col] = (unsigned char)(pixVal / pixels);
    }
}
