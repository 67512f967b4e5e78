// Source: https://github.com/csc-training/CUDA/blob/63c2d7e179d536e16808e48f696bb27b76e65012/exercises/jacobi/solution/jacobi.cu (lines 31-50), license MIT
// Copyright (c) 2017 CSC Training, MIT License (repository LICENSE; the source file has no header of its own).
#include <cuda_runtime.h>
#include <cstdio>

/* kernellsp
sizes = { N = 4096 }
launch = { grid = ["ceil_div(N, 16)", "ceil_div(N, 16)"], block = [16, 16] }
tolerance = { rtol = 1e-10, atol = 1e-10 }
shapes = [{ N = 1000 }, { N = 33 }, { N = 3 }, { N = 1 }]
[args]
phi = { dtype = "f64", dir = "inout", count = "N * N" }
phiPrev = { dtype = "f64", dir = "in", count = "N * N" }
source = { dtype = "f64", dir = "in", count = "N * N" }
h2 = { value = 5.96e-8 }
N = { value = "N" }
*/
// GPU kernel
__global__ 
void sweepGPU(double *phi, const double *phiPrev, const double *source, 
              double h2, int N)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    int j = blockIdx.y * blockDim.y + threadIdx.y;
    int index = i + j*N;
    int i1, i2, i3, i4;

    i1 = (i-1) +   j   * N;
    i2 = (i+1) +   j   * N;
    i3 =   i   + (j-1) * N;
    i4 =   i   + (j+1) * N;

    if (i > 0 && j > 0 && i < N-1 && j < N-1)
        phi[index] = 0.25 * (phiPrev[i1] + phiPrev[i2] + 
                             phiPrev[i3] + phiPrev[i4] - 
                             h2 * source[index]);
}
