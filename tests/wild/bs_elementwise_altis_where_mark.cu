// Source: https://github.com/utcs-scea/altis/blob/074a1b9bb3e37ef8d766bb38ad90c185dad36c3b/src/cuda/level2/where/where.cu (lines 13-34), license BSD-2-Clause
// License: BSD-2-Clause (utcs-scea/altis LICENSE: Copyright (c) 2020, University of Texas at Austin. All rights reserved.)
// Launch as in where(): grid(size / 1024 + 1), threads(1024); arr holds rand() % 100 and bound is the
// coverage percentage (40 for size class 3). The later thrust scan + mapMatches scatter are not part of this entry.
#include <cuda_runtime.h>

__device__ bool check(int val, int bound) {
    return (val < bound);
}

/* kernellsp
sizes = { N = 33554432 }
launch = { grid = "N // 1024 + 1", block = 1024 }
shapes = [{ N = 1000 }, { N = 4097 }, { N = 3 }]
[args]
arr = { dtype = "i32", dir = "in", count = "N", dist = "randint(0, 99)" }
results = { dtype = "i32", dir = "out", count = "N" }
size = { value = "N" }
bound = { value = 40 }
*/
__global__ void markMatches(int *arr, int *results, int size, int bound) {

    // Block index
    int bx = blockIdx.x;

    // Thread index
    int tx = threadIdx.x;

    int tid = (blockDim.x * bx) + tx;

    for( ; tid < size; tid += blockDim.x * gridDim.x) {
        if(check(arr[tid], bound)) {
            results[tid] = 1;
        } else {
            results[tid] = 0;
        }
    }
}
