// Source: https://github.com/csc-training/CUDA/blob/0be3e9c6026956f5a846577f1f5ec5701e75cd2c/exercises/kernel-optimization/main.cu (lines 186-213), license MIT
// Copyright (c) 2017 CSC Training, MIT License (repository LICENSE; the source file has no header of its own).
#include <cuda_runtime.h>

/* kernellsp
sizes = { W = 4096, H = 4096, S = 2 }
launch = { grid = ["1 + W // 16", "1 + H // 16"], block = [16, 16] }
tolerance = { rtol = 1e-5, atol = 1e-6 }
shapes = [{ W = 1000, H = 77, S = 2 }, { W = 33, H = 65, S = 3 }, { W = 1, H = 1, S = 1 }, { W = 17, H = 5, S = 4 }]
[args]
height = { value = "H" }
width = { value = "W" }
scale = { value = "S" }
rawR = { dtype = "f32", dir = "in", count = "W * S * H * S" }
rawG = { dtype = "f32", dir = "in", count = "W * S * H * S" }
rawB = { dtype = "f32", dir = "in", count = "W * S * H * S" }
imageR = { dtype = "f32", dir = "out", count = "W * H" }
imageG = { dtype = "f32", dir = "out", count = "W * H" }
imageB = { dtype = "f32", dir = "out", count = "W * H" }
*/
__global__ void downsample(int height, int width, int scale, float *rawR, float *rawG, float *rawB, float *imageR, float *imageG, float *imageB)
{
    const int x = blockIdx.x * blockDim.x + threadIdx.x;
    const int y = blockIdx.y * blockDim.y + threadIdx.y;
    if(x >= width)
        return;
    if(y >= height)
        return;

    int inX = x*scale;
    int inY = y*scale;

    float outR = 0;
    float outG = 0;
    float outB = 0;
    for(int i = 0; i < scale; i++)
    {
        for(int j = 0; j < scale; j++)
        {
            outR += (rawR[((inY+i)*width*scale)+(inX+j)]);
            outG += (rawG[((inY+i)*width*scale)+(inX+j)]);
            outB += (rawB[((inY+i)*width*scale)+(inX+j)]);
        }
    }
    imageR[(y*width)+x] = outR/(float)(scale*scale);
    imageG[(y*width)+x] = outG/(float)(scale*scale);
    imageB[(y*width)+x] = outB/(float)(scale*scale);
}
