// Source: https://github.com/utcs-scea/altis/blob/19ad3f9adb9e55d2a5aaff5468744d3090233737/src/cuda/level2/fdtd2d/fdtd2d.cu (lines 1-12, 38-39, 163-172), license BSD-2-Clause
/**
 * fdtd2d.cu: This file is part of the PolyBench/GPU 1.0 test suite.
 *
 *
 * Contact: Scott Grauer-Gray <sgrauerg@gmail.com>
 * Louis-Noel Pouchet <pouchet@cse.ohio-state.edu>
 * Web address: http://www.cse.ohio-state.edu/~pouchet/software/polybench/GPU
 *
 * Modfified by Bodun Hu <bodunhu@utexas.edu>
 * Added: UVM and coop support
 *
 */
// License: BSD-2-Clause (utcs-scea/altis LICENSE: Copyright (c) 2020, University of Texas at Austin. All rights reserved.)
// Launch as in fdtdCuda(): block(DIM_THREAD_BLOCK_X = 32, DIM_THREAD_BLOCK_Y = 8),
// grid(ceil(NY / 32), ceil(NX / 8)); this is the third (hz update) kernel of one time step.
#include <cuda_runtime.h>

/* Can switch DATA_TYPE between float, int, and double */
typedef float DATA_TYPE;

/* kernellsp
sizes = { NX = 4096, NY = 4096 }
launch = { grid = ["ceil_div(NY, 32)", "ceil_div(NX, 8)"], block = [32, 8] }
tolerance = { rtol = 1e-5, atol = 1e-5 }
shapes = [{ NX = 67, NY = 45 }, { NX = 1000, NY = 1 }, { NX = 3, NY = 129 }]
[args]
NX = { value = "NX" }
NY = { value = "NY" }
ex = { dtype = "f32", dir = "in", count = "NX * (NY + 1)", dist = "uniform(-1, 1)" }
ey = { dtype = "f32", dir = "in", count = "(NX + 1) * NY", dist = "uniform(-1, 1)" }
hz = { dtype = "f32", dir = "inout", count = "NX * NY", dist = "uniform(-1, 1)" }
t = { value = 0 }
*/
__global__ void fdtd_step3_kernel(size_t NX, size_t NY, DATA_TYPE *ex, DATA_TYPE *ey, DATA_TYPE *hz, int t)
{
    int j = blockIdx.x * blockDim.x + threadIdx.x;
    int i = blockIdx.y * blockDim.y + threadIdx.y;
    
    if ((i < NX) && (j < NY))
    {	
        hz[i * NY + j] = hz[i * NY + j] - 0.7f*(ex[i * (NY+1) + (j+1)] - ex[i * (NY+1) + j] + ey[(i + 1) * NY + j] - ey[i * NY + j]);
    }
}
