// Source: https://github.com/JuliaParallel/rodinia/blob/0f47cfc2f35034405973703fbb6d2c77a25439c0/cuda/srad_v1/reduce_kernel.cu (lines 1-107), license Rodinia (BSD-style)
// Source: https://github.com/JuliaParallel/rodinia/blob/9419a2136901ba0d0337f01ffa27f700d5b8057b/cuda/srad/srad_v1/define.c (lines 7-9), license Rodinia (BSD-style)
// License: Rodinia BSD-style license (Copyright (c)2008-2011 University of Virginia, All rights reserved; see JuliaParallel/rodinia LICENSE). The source file has no header of its own.
// Launch as the first reduce call in srad.cu main(): threads.x = NUMBER_THREADS, blocks = Ne / 512 rounded
// up, no = Ne, mul = 1 (the later passes over the per-block sums are not part of this entry).
#include <cuda_runtime.h>

#define fp float

#define NUMBER_THREADS 512

// statistical kernel
/* kernellsp
sizes = { NE = 16777216 }
launch = { grid = "ceil_div(NE, 512)", block = 512 }
tolerance = { rtol = 1e-4, atol = 1e-3, norm_rtol = 1e-5 }
shapes = [{ NE = 1000 }, { NE = 4097 }, { NE = 33 }]
[args]
d_Ne = { value = "NE" }
d_no = { value = "NE" }
d_mul = { value = 1 }
d_sums = { dtype = "f32", dir = "inout", count = "NE", dist = "uniform(0, 1)" }
d_sums2 = { dtype = "f32", dir = "inout", count = "NE", dist = "uniform(0, 1)" }
*/
__global__ void
reduce(long d_Ne,  // number of elements in array
       int d_no,   // number of sums to reduce
       int d_mul,  // increment
       fp *d_sums, // pointer to partial sums variable (DEVICE GLOBAL MEMORY)
       fp *d_sums2) {

    // indexes
    int bx = blockIdx.x;  // get current horizontal block index
    int tx = threadIdx.x; // get current horizontal thread index
    int ei = (bx * NUMBER_THREADS) +
             tx; // unique thread id, more threads than actual elements !!!
    int nf =
        NUMBER_THREADS - (gridDim.x * NUMBER_THREADS -
                          d_no); // number of elements assigned to last block
    int df = 0;                  // divisibility factor for the last block

    // statistical
    __shared__ fp d_psum[NUMBER_THREADS]; // data for block calculations
                                          // allocated by every block in its
                                          // shared memory
    __shared__ fp d_psum2[NUMBER_THREADS];

    // counters
    int i;

    // copy data to shared memory
    if (ei < d_no) { // do only for the number of elements, omit extra threads

        d_psum[tx] = d_sums[ei * d_mul];
        d_psum2[tx] = d_sums2[ei * d_mul];
    }

    // reduction of sums if all blocks are full (rare case)
    if (nf == NUMBER_THREADS) {
        // sum of every 2, 4, ..., NUMBER_THREADS elements
        for (i = 2; i <= NUMBER_THREADS; i = 2 * i) {
            // sum of elements
            if ((tx + 1) % i == 0) { // every ith
                d_psum[tx] = d_psum[tx] + d_psum[tx - i / 2];
                d_psum2[tx] = d_psum2[tx] + d_psum2[tx - i / 2];
            }
            // synchronization
            __syncthreads();
        }
        // final sumation by last thread in every block
        if (tx ==
            (NUMBER_THREADS - 1)) { // block result stored in global memory
            d_sums[bx * d_mul * NUMBER_THREADS] = d_psum[tx];
            d_sums2[bx * d_mul * NUMBER_THREADS] = d_psum2[tx];
        }
    }
    // reduction of sums if last block is not full (common case)
    else {
        // for full blocks (all except for last block)
        if (bx != (gridDim.x - 1)) { //
            // sum of every 2, 4, ..., NUMBER_THREADS elements
            for (i = 2; i <= NUMBER_THREADS; i = 2 * i) { //
                // sum of elements
                if ((tx + 1) % i == 0) { // every ith
                    d_psum[tx] = d_psum[tx] + d_psum[tx - i / 2];
                    d_psum2[tx] = d_psum2[tx] + d_psum2[tx - i / 2];
                }
                // synchronization
                __syncthreads(); //
            }
            // final sumation by last thread in every block
            if (tx ==
                (NUMBER_THREADS - 1)) { // block result stored in global memory
                d_sums[bx * d_mul * NUMBER_THREADS] = d_psum[tx];
                d_sums2[bx * d_mul * NUMBER_THREADS] = d_psum2[tx];
            }
        }
        // for not full block (last block)
        else { //
            // figure out divisibility
            for (i = 2; i <= NUMBER_THREADS; i = 2 * i) { //
                if (nf >= i) {
                    df = i;
                }
            }
            // sum of every 2, 4, ..., NUMBER_THREADS elements
            for (i = 2; i <= df; i = 2 * i) { //
                // sum of elements (only busy threads)
                if ((tx + 1) % i == 0 && tx < df) { // every ith
                    d_psum[tx] = d_psum[tx] + d_psum[tx - i / 2];
                    d_psum2[tx] = d_psum2[tx] + d_psum2[tx - i / 2];
                }
                // synchronization (all threads)
                __syncthreads(); //
            }
            // remainder / final summation by last thread
            if (tx == (df - 1)) { //
                // compute the remainder and final summation by last busy thread
                for (i = (bx * NUMBER_THREADS) + df;
                     i < (bx * NUMBER_THREADS) + nf; i++) { //
                    d_psum[tx] = d_psum[tx] + d_sums[i];
                    d_psum2[tx] = d_psum2[tx] + d_sums2[i];
                }
                // final sumation by last thread in every block
                d_sums[bx * d_mul * NUMBER_THREADS] = d_psum[tx];
                d_sums2[bx * d_mul * NUMBER_THREADS] = d_psum2[tx];
            }
        }
    }
}
