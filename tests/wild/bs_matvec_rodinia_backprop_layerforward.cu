// Source: https://github.com/JuliaParallel/rodinia/blob/0f47cfc2f35034405973703fbb6d2c77a25439c0/cuda/backprop/backprop_cuda_kernel.cu (lines 12-75), license Rodinia (BSD-style)
// Source: https://github.com/JuliaParallel/rodinia/blob/0f47cfc2f35034405973703fbb6d2c77a25439c0/cuda/backprop/backprop.h (lines 8-9), license Rodinia (BSD-style)
// License: Rodinia BSD-style license (Copyright (c)2008-2011 University of Virginia, All rights reserved; see JuliaParallel/rodinia LICENSE). The source file has no header of its own.
// Launch as in bpnn_train_cuda() (backprop_cuda.cu): num_blocks = in / 16, grid(1, num_blocks),
// threads(16, 16); hid is 16 (= WIDTH) in Rodinia. Each block writes 16 partial sums of the
// input-to-hidden matrix-vector product and the scaled weights back in place.
#include <cuda_runtime.h>
#include <math.h>

#define WIDTH 16  // shared memory width
#define HEIGHT 16 // shared memory height

/* kernellsp
sizes = { IN = 1048560, HID = 16 }
launch = { grid = [1, "IN // 16"], block = [16, 16] }
tolerance = { rtol = 1e-4, atol = 1e-5, norm_rtol = 1e-5 }
shapes = [{ IN = 112 }, { IN = 528 }, { IN = 16 }]
[args]
input_cuda = { dtype = "f32", dir = "in", count = "IN + 1", dist = "uniform(0, 1)" }
output_hidden_cuda = { dtype = "f32", dir = "in", count = "HID + 1" }
input_hidden_cuda = { dtype = "f32", dir = "inout", count = "(IN + 1) * (HID + 1)", dist = "uniform(-1, 1)" }
hidden_partial_sum = { dtype = "f32", dir = "out", count = "(IN // 16) * HID" }
in = { value = "IN" }
hid = { value = "HID" }
*/
__global__ void bpnn_layerforward_CUDA(float *input_cuda,
                                       float *output_hidden_cuda,
                                       float *input_hidden_cuda,
                                       float *hidden_partial_sum, int in,
                                       int hid) {
    int by = blockIdx.y;
    int tx = threadIdx.x;
    int ty = threadIdx.y;

    int index = (hid + 1) * HEIGHT * by + (hid + 1) * ty + tx + 1 + (hid + 1);

    int index_in = HEIGHT * by + ty + 1;

    __shared__ float input_node[HEIGHT];
    __shared__ float weight_matrix[HEIGHT][WIDTH];


    if (tx == 0)
        input_node[ty] = input_cuda[index_in];

    __syncthreads();

    weight_matrix[ty][tx] = input_hidden_cuda[index];

    __syncthreads();

    weight_matrix[ty][tx] = weight_matrix[ty][tx] * input_node[ty];

    __syncthreads();

    for (int i = 1; i <= __log2f(HEIGHT); i++) {

        int power_two = __powf(2, i);

        if (ty % power_two == 0)
            weight_matrix[ty][tx] =
                weight_matrix[ty][tx] + weight_matrix[ty + power_two / 2][tx];

        __syncthreads();
    }

    //__syncthreads();

    input_hidden_cuda[index] = weight_matrix[ty][tx];

    /*
       for ( unsigned int i = 2 ; i <= HEIGHT ; i *= 2){

               unsigned int power_two = i - 1;

               if( (ty & power_two) == 0 ) {
                    weight_matrix[ty][tx] = weight_matrix[ty][tx] +
       weight_matrix[ty + power_two/2][tx];
               }

       }
       */

    __syncthreads();

    if (tx == 0) {
        hidden_partial_sum[by * hid + ty] = weight_matrix[tx][ty];
    }
}
