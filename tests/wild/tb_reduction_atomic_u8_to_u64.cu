// Source: https://github.com/PawseySC/gpu-programming-essentials/blob/81f35ab8f938bfebe08233121c84839aac01cb69/vector_sum/01_cuda_simple.cu (lines 12, 16-19), license MIT
// Copyright 2021-present Pawsey Supercomputing Centre, MIT License (repository LICENSE; the source file has no header of its own).
#include <stdio.h>
#include <stdlib.h>
#include <cuda_runtime.h>

#define NTHREADS 1024 

/* kernellsp
sizes = { N = 33554432 }
launch = { grid = "ceil_div(N, 1024)", block = 1024 }
shapes = [{ N = 1000 }, { N = 4097 }, { N = 1 }, { N = 1025 }]
[args]
values = { dtype = "u8", dir = "in", count = "N", dist = "randint(0, 256)" }
nitems = { value = "N" }
result = { dtype = "u64", dir = "inout", count = 1, dist = "randint(0, 1000)" }
*/
__global__ void vector_sum(unsigned char *values, unsigned int nitems, unsigned long long* result){
    unsigned int idx = blockIdx.x * blockDim.x + threadIdx.x;
    if(idx < nitems) atomicAdd(result, values[idx]);  
}
