// 1-D convolution as in Kirk & Hwu, "Programming Massively Parallel
// Processors": N input, M mask (Mask_Width odd), P output, zero ghost cells.
#include <cuda_runtime.h>

/* kernellsp
sizes = { WIDTH = 16777216, MW = 9 }
launch = { grid = "ceil_div(WIDTH, 256)", block = 256 }
tolerance = { rtol = 1e-5, atol = 1e-5 }
shapes = [{ WIDTH = 1000, MW = 5 }, { WIDTH = 4097 }, { WIDTH = 3, MW = 7 }, { WIDTH = 10, MW = 1 }]
[args]
N = { dtype = "f32", dir = "in", count = "WIDTH" }
M = { dtype = "f32", dir = "in", count = "MW" }
P = { dtype = "f32", dir = "out", count = "WIDTH" }
Mask_Width = { value = "MW" }
Width = { value = "WIDTH" }
*/
__global__ void convolution_1D_basic_kernel(float *N, float *M, float *P, int Mask_Width, int Width)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < Width) {
        float Pvalue = 0;
        int N_start_point = i - (Mask_Width / 2);
        for (int j = 0; j < Mask_Width; j++) {
            if (N_start_point + j >= 0 && N_start_point + j < Width) {
                Pvalue += N[N_start_point + j] * M[j];
            }
        }
        P[i] = Pvalue;
    }
}
