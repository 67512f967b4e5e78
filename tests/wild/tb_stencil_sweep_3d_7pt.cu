// Source: https://github.com/kathsucurry/programming_massively_parallel_processors/blob/a49a8ed8811e9cf5b6d3a252e9cd58109e0b7acc/chapter_08/stencil_sweep_basic.cu (lines 5-40), license MIT
// Repository license: MIT (Copyright (c) 2025 Kathleen Sucipto); the source file has no header of its own.
#include <stdio.h>
#include <cuda_runtime.h>


#define ORDER 1
// The number of points in the three-dimensional stencil.
#define NUM_POINT 1 + ORDER*2*3
#define BLOCK_SIZE 4


/**
 *  Perform basic stencil sweep kernel, corresponds to Fig. 8.6.
 */
/* kernellsp
sizes = { S = 256 }
launch = { grid = ["ceil_div(S, 4)", "ceil_div(S, 4)", "ceil_div(S, 4)"], block = [4, 4, 4] }
tolerance = { rtol = 1e-5, atol = 1e-5 }
shapes = [{ S = 33 }, { S = 3 }, { S = 1 }, { S = 67 }]
[args]
input_array = { dtype = "f32", dir = "in", count = "S * S * S" }
output_array = { dtype = "f32", dir = "inout", count = "S * S * S" }
coefficients = { dtype = "f32", dir = "in", count = 7 }
size = { value = "S" }
*/
__global__
void StencilKernel(
    float* input_array,
    float* output_array,
    float* coefficients,
    unsigned int size
) {
    unsigned int out_z_index = blockIdx.z * blockDim.z + threadIdx.z;
    unsigned int out_y_index = blockIdx.y * blockDim.y + threadIdx.y;
    unsigned int out_x_index = blockIdx.x * blockDim.x + threadIdx.x;
    unsigned int out_index = out_z_index * size * size + out_y_index * size + out_x_index;

    // Here, we simplify the boundary condition which will not be updated from iteration
    // to the next. Hence, only calculate the inner output grid points.
    if (out_z_index >= 1 && out_z_index < size - 1 && 
        out_y_index >= 1 && out_y_index < size - 1 &&
        out_x_index >= 1 && out_x_index < size - 1) {
            output_array[out_index] = coefficients[0] * input_array[out_z_index * size * size + out_y_index * size + out_x_index]
                                    + coefficients[1] * input_array[out_z_index * size * size + out_y_index * size + (out_x_index - 1)]
                                    + coefficients[2] * input_array[out_z_index * size * size + out_y_index * size + (out_x_index + 1)]
                                    + coefficients[3] * input_array[out_z_index * size * size + (out_y_index - 1) * size + out_x_index]
                                    + coefficients[4] * input_array[out_z_index * size * size + (out_y_index + 1) * size + out_x_index]
                                    + coefficients[5] * input_array[(out_z_index - 1) * size * size + out_y_index * size + out_x_index]
                                    + coefficients[6] * input_array[(out_z_index + 1) * size * size + out_y_index * size + out_x_index];
                                    
        }
}
