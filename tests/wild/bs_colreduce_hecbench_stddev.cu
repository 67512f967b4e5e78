// Source: https://github.com/zjin-lcf/HeCBench/blob/280045f0659705899a18d289c3ed6c4fb0b3459b/src/stddev-cuda/main.cu (lines 1-15, 24-91), license Apache-2.0
/*
 * Copyright (c) 2018-2020, NVIDIA CORPORATION.
 *
 * Licensed under the Apache License, Version 2.0 (the "License");
 * you may not use this file except in compliance with the License.
 * You may obtain a copy of the License at
 *
 *     http://www.apache.org/licenses/LICENSE-2.0
 *
 * Unless required by applicable law or agreed to in writing, software
 * distributed under the License is distributed on an "AS IS" BASIS,
 * WITHOUT WARRANTIES OR CONDITIONS OF ANY KIND, either express or implied.
 * See the License for the specific language governing permissions and
 * limitations under the License.
 */
// (RAFT-derived code packaged in HeCBench, repository license BSD-3-Clause.)
// solve() calls the original host function stddev<float, int>(..., sample = true) as main() does:
// cudaMemset, column sum-of-squares with shared+global atomics, then the sqrt(sum / (N-1)) kernel.
#include <cuda_runtime.h>
#include <math.h>

// final step for the deviation of a sample
template <typename Type, typename IdxType>
__global__ void sampleKernel (Type *std, IdxType D, IdxType N) {
  IdxType i = blockDim.x * blockIdx.x + threadIdx.x;
  if (i < D) std[i] = sqrtf(std[i] / N);
}

// sum of products using atomics
template <typename Type, typename IdxType, int TPB, int ColsPerBlk = 32>
__global__ void sopKernel(
        Type *__restrict__ std, 
  const Type *__restrict__ data, 
  IdxType D, 
  IdxType N) 
{
  const int RowsPerBlkPerIter = TPB / ColsPerBlk;
  IdxType thisColId = threadIdx.x % ColsPerBlk;
  IdxType thisRowId = threadIdx.x / ColsPerBlk;
  IdxType colId = thisColId + ((IdxType)blockIdx.y * ColsPerBlk);
  IdxType rowId = thisRowId + ((IdxType)blockIdx.x * RowsPerBlkPerIter);
  Type thread_data = Type(0);
  const IdxType stride = RowsPerBlkPerIter * gridDim.x;
  for (IdxType i = rowId; i < N; i += stride) {
    Type val = (colId < D) ? data[i * D + colId] : Type(0);
    thread_data += val * val;
  }
  __shared__ Type sstd[ColsPerBlk];
  if (threadIdx.x < ColsPerBlk) sstd[threadIdx.x] = Type(0);
  __syncthreads();

  atomicAdd(sstd + thisColId, thread_data);
  __syncthreads();

  if (threadIdx.x < ColsPerBlk) atomicAdd(std + colId, sstd[thisColId]);
}

/**
 * @brief Compute stddev of the input matrix
 *
 * Stddev operation is assumed to be performed on a given column.
 *
 * @tparam Type the data type
 * @tparam IdxType Integer type used to for addressing
 * @param std the output stddev vector
 * @param data the input matrix
 * @param D number of columns of data
 * @param N number of rows of data
 * @param sample whether to evaluate sample stddev or not. In other words,
 * whether
 *  to normalize the output using N-1 or N, for true or false, respectively
 */
template <typename Type, typename IdxType = int>
void stddev(Type *std, const Type *data, IdxType D, IdxType N, bool sample) {
  static const int TPB = 256;
  static const int RowsPerThread = 4;
  static const int ColsPerBlk = 32;
  static const int RowsPerBlk = (TPB / ColsPerBlk) * RowsPerThread;
  dim3 grid((N + (IdxType)RowsPerBlk - 1) / (IdxType)RowsPerBlk, 
            (D + (IdxType)ColsPerBlk - 1) / (IdxType)ColsPerBlk);
  dim3 block(TPB);

  cudaMemset(std, 0, sizeof(Type) * D); // required for atomics

  sopKernel<Type, IdxType, TPB, ColsPerBlk> <<<grid, block>>>(std, data, D, N);

  IdxType sampleSize = sample ? N-1 : N;
  sampleKernel<Type, IdxType> <<<(D+TPB-1)/TPB, TPB>>>(std, D, sampleSize);
}

/* kernellsp
sizes = { D = 1024, NR = 32768 }
tolerance = { rtol = 1e-3, atol = 1e-5, norm_rtol = 1e-4 }
shapes = [{ D = 32, NR = 1000 }, { D = 96, NR = 33 }, { D = 64, NR = 2 }]
[args]
std = { dtype = "f32", dir = "out", count = "D" }
data = { dtype = "f32", dir = "in", count = "NR * D", dist = "uniform(0, 1)" }
D = { value = "D" }
N = { value = "NR" }
*/
extern "C" void solve(float* std, const float* data, int D, int N)
{
  stddev(std, data, D, N, true);
}
