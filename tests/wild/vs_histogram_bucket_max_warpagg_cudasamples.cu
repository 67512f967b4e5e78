// Source: https://github.com/NVIDIA/cuda-samples/blob/f5cb14f3aa1aefa07059c287f0e875ada3ecde14/Samples/3_CUDA_Features/warpAggregatedAtomicsCG/warpAggregatedAtomicsCG.cu (lines 28, 35-36, 38, 41, 156-188; launcher after lines 209-215), license BSD-3-Clause (NVIDIA)
/* Copyright (c) 2022, NVIDIA CORPORATION. All rights reserved.
 *
 * Redistribution and use in source and binary forms, with or without
 * modification, are permitted provided that the following conditions
 * are met:
 *  * Redistributions of source code must retain the above copyright
 *    notice, this list of conditions and the following disclaimer.
 *  * Redistributions in binary form must reproduce the above copyright
 *    notice, this list of conditions and the following disclaimer in the
 *    documentation and/or other materials provided with the distribution.
 *  * Neither the name of NVIDIA CORPORATION nor the names of its
 *    contributors may be used to endorse or promote products derived
 *    from this software without specific prior written permission.
 *
 * THIS SOFTWARE IS PROVIDED BY THE COPYRIGHT HOLDERS ``AS IS'' AND ANY
 * EXPRESS OR IMPLIED WARRANTIES, INCLUDING, BUT NOT LIMITED TO, THE
 * IMPLIED WARRANTIES OF MERCHANTABILITY AND FITNESS FOR A PARTICULAR
 * PURPOSE ARE DISCLAIMED.  IN NO EVENT SHALL THE COPYRIGHT OWNER OR
 * CONTRIBUTORS BE LIABLE FOR ANY DIRECT, INDIRECT, INCIDENTAL, SPECIAL,
 * EXEMPLARY, OR CONSEQUENTIAL DAMAGES (INCLUDING, BUT NOT LIMITED TO,
 * PROCUREMENT OF SUBSTITUTE GOODS OR SERVICES; LOSS OF USE, DATA, OR
 * PROFITS; OR BUSINESS INTERRUPTION) HOWEVER CAUSED AND ON ANY THEORY
 * OF LIABILITY, WHETHER IN CONTRACT, STRICT LIABILITY, OR TORT
 * (INCLUDING NEGLIGENCE OR OTHERWISE) ARISING IN ANY WAY OUT OF THE USE
 * OF THIS SOFTWARE, EVEN IF ADVISED OF THE POSSIBILITY OF SUCH DAMAGE.
 */

#include <stdio.h>

#include <cooperative_groups.h>
#include <cooperative_groups/reduce.h>

namespace cg = cooperative_groups;

#define NUM_THREADS_PER_BLOCK 512

// Warp-aggregated atomic Max in multi bucket
#if __CUDA_ARCH__ >= 700
__device__ void atomicAggMaxMulti(const int bucket, int *counter, const int valueForMax)
{
  cg::coalesced_group active = cg::coalesced_threads();
  // group all threads with same bucket value.
  auto labeledGroup = cg::labeled_partition(active, bucket);

  const int maxValueInGroup = cg::reduce(labeledGroup, valueForMax, cg::greater<int>());

  if (labeledGroup.thread_rank() == 0)
  {
    atomicMax(&counter[bucket], maxValueInGroup);
  }
}
#endif

// Performs max calculation in each buckets.
__global__ void calculateMaxInEachBuckets(const int *srcArr, const int *valueInBuckets, int *bucketsMax, const int srcSize, const int numOfBuckets)
{
#if __CUDA_ARCH__ >= 700
  cg::grid_group grid = cg::this_grid();

  for (int i=grid.thread_rank(); i < srcSize; i += grid.size())
  {
    const int bucket = srcArr[i];
    if (bucket < numOfBuckets)
    {
      atomicAggMaxMulti(bucket, bucketsMax, valueInBuckets[i]);
    }
  }
#endif
}

// Launcher (not in the original): the launch of calculateMaxInBuckets(),
// which zeroes d_bucketsMax with cudaMemset and launches NUM_ELEMS / 512
// blocks of 512 threads (here with srcSize in place of NUM_ELEMS).
/* kernellsp
sizes = { N = 33554432, NB = 5 }
shapes = [{ N = 1000, NB = 5 }, { N = 4097, NB = 3 }, { N = 513, NB = 7 }]
[args]
d_srcArr = { dtype = "i32", dir = "in", count = "N", dist = "randint(0, NB)" }
d_valueInBuckets = { dtype = "i32", dir = "in", count = "N", dist = "randint(0, 2147483647)" }
d_bucketsMax = { dtype = "i32", dir = "out", count = "NB" }
srcSize = { value = "N" }
numOfBuckets = { value = "NB" }
*/
extern "C" void solve(const int *d_srcArr, const int *d_valueInBuckets, int *d_bucketsMax,
                      int srcSize, int numOfBuckets)
{
  cudaMemset(d_bucketsMax, 0, sizeof(int) * numOfBuckets);

  dim3 dimBlock(NUM_THREADS_PER_BLOCK, 1, 1);
  dim3 dimGrid((srcSize / NUM_THREADS_PER_BLOCK), 1, 1);

  calculateMaxInEachBuckets<<<dimGrid, dimBlock>>>(d_srcArr, d_valueInBuckets, d_bucketsMax, srcSize, numOfBuckets);
}
