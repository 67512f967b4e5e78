// Source: https://github.com/vetter/shoc/blob/0282b32c633ce574e0f1992778998f254c834d8d/src/cuda/level1/triad/Triad.cu (lines 35-59), license BSD-3-Clause
// License: BSD-3-Clause (vetter/shoc LICENSE.md: Copyright (c) 2020, UT-Battelle, LLC. All rights reserved.). The source file has no header of its own.
// Launch as in RunBenchmark(): blockSize = 128, globalWorkSize = elemsInBlock / blockSize (no bound
// check in the kernel: the element count is a multiple of 128).
#include <cuda_runtime.h>

// ****************************************************************************
// Function: triad
//
// Purpose:
//   A simple vector addition kernel
//   C = A + s*B
//
// Arguments:
//   A,B - input vectors
//   C - output vectors
//   s - scalar
//
// Returns:  nothing
//
// Programmer: Kyle Spafford
// Creation: December 15, 2009
//
// Modifications:
//
// ****************************************************************************
/* kernellsp
sizes = { N = 33554432 }
launch = { grid = "ceil_div(N, 128)", block = 128 }
tolerance = { rtol = 1e-6, atol = 1e-6 }
shapes = [{ N = 896 }, { N = 4224 }, { N = 128 }]
[args]
A = { dtype = "f32", dir = "in", count = "N", dist = "uniform(0, 10)" }
B = { dtype = "f32", dir = "in", count = "N", dist = "uniform(0, 10)" }
C = { dtype = "f32", dir = "out", count = "N" }
s = { value = 1.75 }
*/
__global__ void triad(float* A, float* B, float* C, float s)
{
    int gid = threadIdx.x + (blockIdx.x * blockDim.x);
    C[gid] = A[gid] + s*B[gid];
}
