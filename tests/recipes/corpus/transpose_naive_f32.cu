// Naive transpose from the NVIDIA "efficient matrix transpose" blog: 32x32
// tiles, 32x8 threads, each thread copies TILE_DIM/BLOCK_ROWS elements.
// Reads are coalesced, writes are strided by height. odata first.
#include <cuda_runtime.h>

#define TILE_DIM 32
#define BLOCK_ROWS 8

/* kernellsp
sizes = { W = 8192, H = 8192 }
launch = { grid = ["ceil_div(W, 32)", "ceil_div(H, 32)"], block = [32, 8] }
shapes = [{ W = 1000, H = 777 }, { W = 33, H = 65 }, { W = 1, H = 100 }, { W = 45, H = 1 }]
[args]
odata = { dtype = "f32", dir = "out", count = "W * H" }
idata = { dtype = "f32", dir = "in", count = "W * H" }
width = { value = "W" }
height = { value = "H" }
*/
__global__ void transposeNaive(float *odata, const float *idata, int width, int height)
{
    int x = blockIdx.x * TILE_DIM + threadIdx.x;
    int y = blockIdx.y * TILE_DIM + threadIdx.y;

    for (int j = 0; j < TILE_DIM; j += BLOCK_ROWS) {
        if (x < width && (y + j) < height) {
            odata[x * height + (y + j)] = idata[(y + j) * width + x];
        }
    }
}
