// Source: https://github.com/JuliaParallel/rodinia/blob/0f47cfc2f35034405973703fbb6d2c77a25439c0/cuda/gaussian/gaussian.cu (lines 313-338), license Rodinia (BSD-style)
// gaussian.cu header: Written by Andreas Kura, 02/15/95; Modified by Chong-wei Xu, 04/20/95; Modified by Chris Gregg for CUDA, 07/20/2009.
// License: Rodinia BSD-style license (Copyright (c)2008-2011 University of Virginia, All rights reserved; see JuliaParallel/rodinia LICENSE). The source file has no header of its own.
// Launch as in ForwardSub(): dimBlockXY(BLOCK_SIZE_XY, BLOCK_SIZE_XY) with BLOCK_SIZE_XY = 4 and
// gridSize2d = Size/4 rounded up, for one elimination step t (here t = T); Fan1 (the multiplier column)
// runs before it in the original loop and is not part of this entry.
#include <cuda_runtime.h>

/*-------------------------------------------------------
 ** Fan2() -- Modify the matrix A into LUD
 **-------------------------------------------------------
 */

/* kernellsp
sizes = { S = 4096, T = 1 }
launch = { grid = ["ceil_div(S, 4)", "ceil_div(S, 4)"], block = [4, 4] }
tolerance = { rtol = 1e-5, atol = 1e-5 }
shapes = [{ S = 1000, T = 0 }, { S = 67, T = 5 }, { S = 33, T = 31 }]
[args]
m_cuda = { dtype = "f32", dir = "in", count = "S * S", dist = "uniform(-1, 1)" }
a_cuda = { dtype = "f32", dir = "inout", count = "S * S", dist = "uniform(-1, 1)" }
b_cuda = { dtype = "f32", dir = "inout", count = "S", dist = "uniform(-1, 1)" }
Size = { value = "S" }
j1 = { value = "S - T" }
t = { value = "T" }
*/
__global__ void Fan2(float *m_cuda, float *a_cuda, float *b_cuda, int Size,
                     int j1, int t) {
    if (threadIdx.x + blockIdx.x * blockDim.x >= Size - 1 - t)
        return;
    if (threadIdx.y + blockIdx.y * blockDim.y >= Size - t)
        return;

    int xidx = blockIdx.x * blockDim.x + threadIdx.x;
    int yidx = blockIdx.y * blockDim.y + threadIdx.y;
    // printf("blockIdx.x:%d,threadIdx.x:%d,blockIdx.y:%d,threadIdx.y:%d,blockDim.x:%d,blockDim.y:%d\n",blockIdx.x,threadIdx.x,blockIdx.y,threadIdx.y,blockDim.x,blockDim.y);

    a_cuda[Size * (xidx + 1 + t) + (yidx + t)] -=
        m_cuda[Size * (xidx + 1 + t) + t] * a_cuda[Size * t + (yidx + t)];
    // a_cuda[xidx+1+t][yidx+t] -= m_cuda[xidx+1+t][t] * a_cuda[t][yidx+t];
    if (yidx == 0) {
        // printf("blockIdx.x:%d,threadIdx.x:%d,blockIdx.y:%d,threadIdx.y:%d,blockDim.x:%d,blockDim.y:%d\n",blockIdx.x,threadIdx.x,blockIdx.y,threadIdx.y,blockDim.x,blockDim.y);
        // printf("xidx:%d,yidx:%d\n",xidx,yidx);
        b_cuda[xidx + 1 + t] -=
            m_cuda[Size * (xidx + 1 + t) + (yidx + t)] * b_cuda[t];
    }
}
