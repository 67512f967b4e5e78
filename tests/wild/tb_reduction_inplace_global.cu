// Source: https://github.com/ENCCS/gpu-programming/blob/73c3adb62dda7f1dec1fdce00b5b6cba0be163a6/content/examples/cuda-hip/cuda/04_array_reduce/02_array_reduce_gpu.cu (lines 8-12, 51-64), license CC-BY-4.0
// ENCCS "GPU programming: why, when and how?" lesson material, Creative Commons Attribution 4.0 International (repository LICENSE); the source file has no header of its own.
#include <cuda_runtime.h>
#include <stdio.h>

#ifdef USE_DP
    typedef double real;
#else
    typedef float real;
#endif

/* kernellsp
sizes = { N = 67108864 }
launch = { grid = "ceil_div(N, 128)", block = 128 }
tolerance = { rtol = 1e-4, atol = 1e-5, norm_rtol = 1e-5 }
shapes = [{ N = 128 }, { N = 1152 }, { N = 40960 }]
[args]
d_x = { dtype = "f32", dir = "inout", count = "N", dist = "uniform(-0.99, 1.0)" }
d_y = { dtype = "f32", dir = "out", count = "ceil_div(N, 128)" }
*/
void __global__ reduction_global(real *d_x, real *d_y)
{
    const int tid = threadIdx.x;
    real *x = d_x + blockDim.x * blockIdx.x;

    for (int offset = blockDim.x >> 1; offset > 0; offset >>= 1)
    {
        if (tid < offset)
            x[tid] += x[tid + offset];
        __syncthreads();
    }
    if (tid == 0)
        d_y[blockIdx.x] = x[0];
}
