// Source: https://github.com/gpu-mode/lectures/blob/e277f6c8976394ebd093b6a2ef7f68e931ab4846/lecture_002/rgb_to_grayscale/grayscale_kernel.cu (lines 5-35), license Apache-2.0
// Repository license: Apache License 2.0 (Copyright 2024 CUDA MODE); the source file has no header of its own.
#include <cuda_runtime.h>


/* kernellsp
sizes = { W = 8192, H = 8192 }
launch = { grid = ["ceil_div(W, 16)", "ceil_div(H, 16)"], block = [16, 16] }
shapes = [{ W = 1000, H = 777 }, { W = 33, H = 65 }, { W = 1, H = 3 }]
[args]
output = { dtype = "u8", dir = "out", count = "W * H" }
input = { dtype = "u8", dir = "in", count = "W * H * 3", dist = "randint(0, 256)" }
width = { value = "W" }
height = { value = "H" }
*/
__global__
void rgb_to_grayscale_kernel(unsigned char* output, unsigned char* input, int width, int height) {
    const int channels = 3;

    int col = blockIdx.x * blockDim.x + threadIdx.x;
    int row = blockIdx.y * blockDim.y + threadIdx.y;
    if (col < width && row < height) {
        // 这里考虑二维矩阵的存储方式，记住，在计算机中，所有的都是从0开始计数的。
        // 当这个row是0的时候是第0行，所以这个offset就是0+列，0+col，这个是只存一个灰度的图像值，所以输出，不用乘channel数。
        int outputOffset = row * width + col;
        // 由于输入是RGB的三通道，这里的通道你可以简单的理解为三个矩阵，一个R矩阵，一个G矩阵，一个B矩阵
        //image[height][width][3]; // height 为图像高度，width 为图像宽度在这个数组中，
        // image[y][x][0] 将访问像素点 (x, y) 的红色分量，image[y][x][1] 访问绿色通道，image[y][x][2] 访问蓝色分量。

        // 还有一种简单的理解方法，当第一个线程的时候(row * width + col) 这个是0，那么inputOffset就是0，接下来取RGB的值就是
        // 取连续的值，
        /* 假设我现在已经找到了(row * width + col) 
        [0,1,2,  // 这是一个RGB
        3,4,5,   // 这是一个RGB
        6,7,8,   // 这是一个RGB
        9,0，0]  // 这是一个RGB
        */
        int inputOffset = (row * width + col) * channels;

        unsigned char r = input[inputOffset + 0];   // red
        unsigned char g = input[inputOffset + 1];   // green
        unsigned char b = input[inputOffset + 2];   // blue

        output[outputOffset] = (unsigned char)(0.21f * r + 0.71f * g + 0.07f * b);
    }
}
