// Source: https://github.com/csc-training/CUDA/blob/b31c4acf8f1f902a6d14a3485ad6b05966299014/demo/stencil%20code/stencil.cu (lines 25-39), license MIT
// Copyright (c) 2017 CSC Training, MIT License (repository LICENSE; the source file has no header of its own).
#include <iostream>
#include <cuda_runtime_api.h>

/* kernellsp
sizes = { N = 67108864 }
launch = { grid = "ceil_div(N, 1024)", block = 1024 }
tolerance = { rtol = 1e-4, atol = 1e-4 }
shapes = [{ N = 1000 }, { N = 4097 }, { N = 12 }, { N = 1 }]
[args]
src = { dtype = "f32", dir = "in", count = "N + 10" }
dst = { dtype = "f32", dir = "inout", count = "N" }
size = { value = "N" }
stencilWeight = { dtype = "f32", dir = "in", count = 21 }
*/
// base case
__global__ void stencil(float *src, float *dst, int size, float *stencilWeight)
{
    int idx = blockIdx.x * blockDim.x + threadIdx.x;
    idx += 11;
    if (idx >= size)
        return;
    float out = 0;
    #pragma unroll
    for(int i = -10;i < 10; i++)
    {
        out += src[idx+i] * stencilWeight[i+10];
    }
    dst[idx] = out;
}
