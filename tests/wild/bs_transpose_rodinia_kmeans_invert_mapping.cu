// Source: https://github.com/JuliaParallel/rodinia/blob/0f47cfc2f35034405973703fbb6d2c77a25439c0/cuda/kmeans/kmeans_cuda_kernel.cu (lines 24-49), license Rodinia (BSD-style)
// License: Rodinia BSD-style license (Copyright (c)2008-2011 University of Virginia, All rights reserved; see JuliaParallel/rodinia LICENSE). The source file has no header of its own.
// Launch reproduced from allocateMemory() in cuda/kmeans/kmeans_cuda.cu: num_threads = 256 and the
// block count rounded up to a perfect square (num_blocks_perdim^2), 1-D grid.
#include <cuda_runtime.h>

/* ----------------- invert_mapping() --------------------- */
/* inverts data array from row-major to column-major.

   [p0,dim0][p0,dim1][p0,dim2] ...
   [p1,dim0][p1,dim1][p1,dim2] ...
   [p2,dim0][p2,dim1][p2,dim2] ...
                                                                                to
   [dim0,p0][dim0,p1][dim0,p2] ...
   [dim1,p0][dim1,p1][dim1,p2] ...
   [dim2,p0][dim2,p1][dim2,p2] ...
*/
/* kernellsp
sizes = { NP = 1048576, NF = 34 }
launch = { grid = "int(ceil(sqrt(ceil_div(NP, 256)))) ** 2", block = 256 }
shapes = [{ NP = 1000, NF = 3 }, { NP = 4097, NF = 34 }, { NP = 33, NF = 1 }]
[args]
input = { dtype = "f32", dir = "in", count = "NP * NF" }
output = { dtype = "f32", dir = "out", count = "NP * NF" }
npoints = { value = "NP" }
nfeatures = { value = "NF" }
*/
__global__ void invert_mapping(float *input,  /* original */
                               float *output, /* inverted */
                               int npoints,   /* npoints */
                               int nfeatures) /* nfeatures */
{
    int point_id = threadIdx.x + blockDim.x * blockIdx.x; /* id of thread */
    int i;

    if (point_id < npoints) {
        for (i = 0; i < nfeatures; i++)
            output[point_id + npoints * i] = input[point_id * nfeatures + i];
    }
    return;
}
/* ----------------- invert_mapping() end --------------------- */
