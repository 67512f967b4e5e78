// Source: https://github.com/zjin-lcf/HeCBench/blob/173d05050c5c7604940eaae00aa8dbd145b88dc9/src/channelSum-cuda/main.cu (lines 9, 11-12, 41-48, 80-104, 151), license BSD-3-Clause
// License: BSD-3-Clause (zjin-lcf/HeCBench LICENSE: Copyright (c) 2020-2023, Zheming Jin. All rights reserved.). The source file has no header of its own.
// solve() is the launch in ComputeChannelSumNHWC() without the timing loop: one block of NUM_THREADS
// per channel c, each block strides over the N * HxW positions of its channel (stride C in memory).
#include <cuda_runtime.h>
#include <cub/cub.cuh>

#define NUM_THREADS 256

// choose integer type to avoid floating-point rounding errors
typedef int scalar_t;

template <typename T>
__device__ void BlockReduce(T &input1, T &input2) {
  using BlockReduce = cub::BlockReduce<T, NUM_THREADS>;
  __shared__ typename BlockReduce::TempStorage temp_storage1;
  __shared__ typename BlockReduce::TempStorage temp_storage2;
  input1 = BlockReduce(temp_storage1).Sum(input1);
  input2 = BlockReduce(temp_storage2).Sum(input2);
}

template <typename T>
__global__
void ChannelSumNHWC(
    const int N,
    const int C,
    const int HxW,
    const T* X,
    T*__restrict__ sum,
    T*__restrict__ sumsq)
{
  const int inner_size = N * HxW;
  const int c = blockIdx.x;
  T m_val = 0;
  T v_val = 0;
  for (int i = threadIdx.x; i < inner_size; i += blockDim.x) {
    const int index = i * C + c;
    m_val += __ldg(X + index);
    v_val += __ldg(X + index) * __ldg(X + index);
  }
  BlockReduce<T>(m_val, v_val);
  if (threadIdx.x == 0) {
    sum[c] = m_val;
    sumsq[c] = v_val;
  }
}

/* kernellsp
sizes = { NB = 16, C = 512, HW = 4096 }
shapes = [{ NB = 1, C = 3, HW = 1000 }, { NB = 3, C = 33, HW = 45 }, { NB = 2, C = 1, HW = 4097 }]
[args]
N = { value = "NB" }
C = { value = "C" }
HxW = { value = "HW" }
X = { dtype = "i32", dir = "in", count = "NB * HW * C", dist = "randint(0, 15)" }
sum = { dtype = "i32", dir = "out", count = "C" }
sumsq = { dtype = "i32", dir = "out", count = "C" }
*/
extern "C" void solve(const int N, const int C, const int HxW, const scalar_t* X, scalar_t* sum, scalar_t* sumsq)
{
    ChannelSumNHWC<scalar_t> <<<C, NUM_THREADS>>>(N, C, HxW, X, sum, sumsq);
}
