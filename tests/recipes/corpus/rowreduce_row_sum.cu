// Sum of each row of a row-major matrix, one thread per row.
#include <cuda_runtime.h>

/* kernellsp
sizes = { NR = 16384, NC = 1024 }
launch = { grid = "ceil_div(NR, 256)", block = 256 }
tolerance = { rtol = 1e-3, atol = 1e-4, norm_rtol = 1e-5 }
shapes = [{ NR = 1000, NC = 100 }, { NR = 3, NC = 4097 }, { NR = 300, NC = 1 }]
[args]
mat = { dtype = "f32", dir = "in", count = "NR * NC" }
sums = { dtype = "f32", dir = "out", count = "NR" }
nrows = { value = "NR" }
ncols = { value = "NC" }
*/
__global__ void row_sum(const float *mat, float *sums, int nrows, int ncols)
{
    int row = blockIdx.x * blockDim.x + threadIdx.x;
    if (row < nrows) {
        float s = 0;
        for (int col = 0; col < ncols; ++col)
            s += mat[row * ncols + col];
        sums[row] = s;
    }
}
