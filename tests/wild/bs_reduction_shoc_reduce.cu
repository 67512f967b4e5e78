// Source: https://github.com/vetter/shoc/blob/77ccaba38aa9d617dc414fc9e43a8538d3bb8f54/src/cuda/level1/reduction/reduction_kernel.h (lines 1-123), license BSD-3-Clause
// Source: https://github.com/vetter/shoc/blob/77ccaba38aa9d617dc414fc9e43a8538d3bb8f54/src/cuda/level1/reduction/Reduction.cu (launch statements of RunTest<T>(), T = float), license BSD-3-Clause
// License: BSD-3-Clause (vetter/shoc LICENSE.md: Copyright (c) 2020, UT-Battelle, LLC. All rights reserved.). The source file has no header of its own.
// solve() is the launch of RunTest<float>() (Reduction.cu) without the timing/transfer code: 64 blocks
// of 256 threads, dynamic shared memory of 256 floats, one partial sum per block.
#include <cuda_runtime.h>

#ifndef REDUCTION_KERNEL_H_
#define REDUCTION_KERNEL_H_

#include <cuda.h>

// The following class is a workaround for using dynamically sized
// shared memory in templated code. Without this workaround, the
// compiler would generate two shared memory arrays (one for SP
// and one for DP) of the same name and would generate an error.
template <class T>
class SharedMem
{
    public:
      __device__ inline T* getPointer() 
      { 
          extern __shared__ T s[]; 
          return s; 
      };
};

// Specialization for double
template <>
class SharedMem <double>
{
    public:
      __device__ inline double* getPointer() 
      { 
          extern __shared__ double s_double[]; 
          return s_double; 
      }
};

// specialization for float
template <>
class SharedMem <float>
{
    public:
      __device__ inline float* getPointer() 
      { 
          extern __shared__ float s_float[]; 
          return s_float; 
      }
};

// Reduction Kernel
template <class T, int blockSize>
__global__ void
reduce(const T* __restrict__ g_idata, T* __restrict__ g_odata,
        const unsigned int n)
{

    const unsigned int tid = threadIdx.x;
    unsigned int i = (blockIdx.x*(blockDim.x*2)) + tid;
    const unsigned int gridSize = blockDim.x*2*gridDim.x;
    
    // Shared memory will be used for intrablock summation
    // NB: CC's < 1.3 seem incompatible with the templated dynamic
    // shared memory workaround.
    // Inspection with cuda-gdb shows sdata as a pointer to *global*
    // memory and incorrect results are obtained.  This explicit macro
    // works around this issue. Further, it is acceptable to specify
    // float, since CC's < 1.3 do not support double precision.
#if __CUDA_ARCH__ <= 130
    extern volatile __shared__ float sdata[]; 
#else
    SharedMem<T> shared;
    volatile T* sdata = shared.getPointer();
#endif

    sdata[tid] = 0.0f;

    // Reduce multiple elements per thread
    while (i < n)
    {
        sdata[tid] += g_idata[i] + g_idata[i+blockSize];
        i += gridSize;
    }
    __syncthreads();

    // Reduce the contents of shared memory
    // NB: This is an unrolled loop, and assumes warp-syncrhonous
    // execution.
    if (blockSize >= 512) 
    { 
        if (tid < 256) 
        { 
            sdata[tid] += sdata[tid + 256]; 
        } 
        __syncthreads();
    }
    if (blockSize >= 256) 
    { 
        if (tid < 128) 
        { 
            sdata[tid] += sdata[tid + 128]; 
        } 
        __syncthreads(); 
    }
    if (blockSize >= 128) 
    { 
        if (tid < 64)  { sdata[tid] += sdata[tid + 64]; }  __syncthreads(); 
    }
    if (tid < warpSize) 
    {
        // NB2: This section would also need __sync calls if warp
        // synchronous execution were not assumed
        if (blockSize >= 64) sdata[tid] += sdata[tid + 32];
        if (blockSize >= 32) sdata[tid] += sdata[tid + 16];
        if (blockSize >= 16) sdata[tid] += sdata[tid + 8];
        if (blockSize >= 8)  sdata[tid] += sdata[tid + 4];
        if (blockSize >= 4)  sdata[tid] += sdata[tid + 2];
        if (blockSize >= 2)  sdata[tid] += sdata[tid + 1];
    }
    
    // Write result for this block to global memory
    if (tid == 0)
    {
        g_odata[blockIdx.x] = sdata[0];
    }
}


#endif // REDUCTION_KERNEL_H_

/* kernellsp
sizes = { N = 33554432 }
tolerance = { rtol = 1e-3, atol = 0.05, norm_rtol = 1e-4 }
shapes = [{ N = 1536 }, { N = 33280 }, { N = 512 }]
[args]
d_idata = { dtype = "f32", dir = "in", count = "N", dist = "uniform(-0.99, 1.0)" }
d_odata = { dtype = "f32", dir = "out", count = "64" }
size = { value = "N" }
*/
extern "C" void solve(const float* d_idata, float* d_odata, int size)
{
    int num_threads = 256; // NB: Update template to kernel launch
                           // if this is changed
    int num_blocks = 64;
    int smem_size = sizeof(float) * num_threads;
            reduce<float,256><<<num_blocks,num_threads, smem_size>>>
                (d_idata, d_odata, size);
}
