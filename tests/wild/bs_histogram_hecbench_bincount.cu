// Source: https://github.com/zjin-lcf/HeCBench/blob/1587cdff744cc25222084df8e08185ecea14f113/src/bincount-cuda/main.cu (lines 10-93), license BSD-3-Clause
// License: BSD-3-Clause (zjin-lcf/HeCBench LICENSE: Copyright (c) 2020-2023, Zheming Jin. All rights reserved.). The source file has no header of its own.
// solve() follows eval<int, float, int>() for the global-atomics case: cudaMemset of the bins, then
// bincount<..., DeviceMemoryType::GLOBAL> on ceil(input_size / 256) blocks of 256 threads.
#include <cuda_runtime.h>

#define threadsPerBlock  256

static inline __device__
void gpuAtomicAddNoReturn(int *address, int val) {
  atomicAdd(address, val);
}

#define FOR_KERNEL_LOOP(i, lim)                                      \
  for (IndexType i = blockIdx.x * blockDim.x + threadIdx.x; i < lim; \
                 i += gridDim.x * blockDim.x)

// Memory types used for the bincount implementations
enum class DeviceMemoryType { SHARED, GLOBAL };

template <typename input_t, typename IndexType>
__device__ static IndexType
getBin(input_t v, input_t minvalue, input_t maxvalue, IndexType nbins)
{
  IndexType bin = (v - minvalue) * nbins / (maxvalue - minvalue);
  // (only applicable for histc)
  // while each bin is inclusive at the lower end and exclusive at the higher,
  // i.e. [start, end) the last bin is inclusive at both, i.e. [start, end], in
  // order to include maxvalue if exists therefore when bin == nbins, adjust bin
  // to the last bin
  if (bin == nbins) bin--;
  return bin;
}

// Kernel for computing the histogram of the input
template <typename output_t,
          typename input_t,
          typename IndexType,
          DeviceMemoryType MemoryType>
__global__ void bincount (
       output_t *output,
  const input_t *input,
  IndexType nbins,
  input_t minvalue,
  input_t maxvalue,
  IndexType input_size,
  IndexType output_size)
{
  extern __shared__ unsigned char my_smem[];
  output_t* smem = nullptr;

  if (MemoryType == DeviceMemoryType::SHARED) {
    // atomically add to block specific shared memory
    // then atomically add to the global output tensor
    smem = reinterpret_cast<output_t*>(my_smem);
    for (IndexType i = threadIdx.x; i < nbins; i += blockDim.x) {
      smem[i] = 0;
    }
    __syncthreads();

    FOR_KERNEL_LOOP(linearIndex, input_size) {
      const auto v = input[linearIndex];

      if (v >= minvalue && v <= maxvalue) {
        const IndexType bin = getBin<input_t, IndexType>(
                              v, minvalue, maxvalue, nbins);
        gpuAtomicAddNoReturn(&smem[bin], 1);
      }
    }
    __syncthreads();

    // Atomically update output bin count.
    for (IndexType i = threadIdx.x; i < nbins; i += blockDim.x) {
      gpuAtomicAddNoReturn(&output[i], smem[i]);
    }

  } else {
    ////////////////////////// Global memory //////////////////////////
    // atomically add to the output tensor
    // compute histogram for the block
    FOR_KERNEL_LOOP(linearIndex, input_size) {
      const auto v = input[linearIndex];
      if (v >= minvalue && v <= maxvalue) {
        const IndexType bin = getBin<input_t, IndexType>(
                              v, minvalue, maxvalue, nbins);
        gpuAtomicAddNoReturn(&output[bin], 1);
      }
    }
  }
}

/* kernellsp
sizes = { N = 33554432, NB = 768 }
shapes = [{ N = 1000, NB = 7 }, { N = 4097, NB = 768 }, { N = 3, NB = 1 }]
[args]
output = { dtype = "i32", dir = "out", count = "NB" }
input = { dtype = "f32", dir = "in", count = "N", dist = "normal(5, 2)" }
nbins = { value = "NB" }
minvalue = { value = -3.0 }
maxvalue = { value = 13.0 }
input_size = { value = "N" }
*/
extern "C" void solve(int* output, const float* input, int nbins, float minvalue, float maxvalue, int input_size)
{
  cudaMemset(output, 0, nbins * sizeof(int));
  dim3 grid ((input_size + threadsPerBlock - 1) / threadsPerBlock);
  dim3 block (threadsPerBlock);
  bincount<int, float, int, DeviceMemoryType::GLOBAL><<<grid, block, 0>>>(
      output, input, nbins, minvalue, maxvalue, input_size, nbins);
}
