// Source: https://github.com/PawseySC/gpu-programming-essentials/blob/cbc572b0d032ca4c209cb523b7014180a56b95d9/vector_redux/07_cuda_accum_and_reduce.cu (lines 12, 16-48), license MIT
// Copyright 2021-present Pawsey Supercomputing Centre, MIT License (repository LICENSE; the source file has no header of its own).
#include <stdio.h>
#include <stdlib.h>
#include <cuda_runtime.h>

#define NTHREADS 1024 

/* kernellsp
sizes = { N = 134217728 }
launch = { grid = 264, block = 1024 }
shapes = [{ N = 1000 }, { N = 270337 }, { N = 1 }, { N = 33 }]
[args]
values = { dtype = "u8", dir = "in", count = "N", dist = "randint(0, 256)" }
nitems = { value = "N" }
result = { dtype = "u64", dir = "inout", count = 1, dist = "randint(0, 1000)" }
*/
__global__ void vector_sum(unsigned char *values, unsigned int nitems, unsigned long long* result){
    unsigned int idx = blockIdx.x * blockDim.x + threadIdx.x;
    __shared__ unsigned int partial_sums[32];
    unsigned int warpId = threadIdx.x / 32;
    unsigned int laneId = threadIdx.x % 32; 
    unsigned int gridSize = gridDim.x * blockDim.x;
    unsigned int nloops = (nitems + gridSize  - 1) / gridSize;
    unsigned int myvalue = 0;
    for(unsigned int l = 0; l < nloops; l++, idx+=gridSize){
        if(idx < nitems) myvalue += values[idx]; 
    }
 
    for(unsigned int i = 16; i >= 1; i /= 2){
        unsigned int up = __shfl_down_sync(0xffffffff, myvalue, i, 32); 
        if(laneId < i){
            myvalue += up; 
        }
    }
    if(laneId == 0 && warpId > 0) partial_sums[warpId] = myvalue;

    __syncthreads();
    // step 2
    if(warpId == 0){
        if(laneId > 0) myvalue = partial_sums[laneId];
        for(unsigned int i = 16; i >= 1; i >>= 1){
            unsigned int up = __shfl_down_sync(0xffffffff, myvalue, i, 32); 
            if(laneId < i){
               myvalue += up; 
            }
        }
        if(laneId == 0) atomicAdd(result, myvalue);
    }  
}
