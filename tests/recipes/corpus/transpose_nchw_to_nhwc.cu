// Layout permutation NCHW -> NHWC with a 3-D launch: x over W, y over H,
// z over the N*C planes. Reads are contiguous along W, writes strided by C.
#include <cuda_runtime.h>

/* kernellsp
sizes = { N = 32, C = 128, H = 56, W = 56 }
launch = { grid = ["ceil_div(W, 32)", "ceil_div(H, 8)", "N * C"], block = [32, 8, 1] }
shapes = [{ N = 2, C = 3, H = 17, W = 33 }, { N = 1, C = 64, H = 7, W = 7 }, { N = 3, C = 1, H = 1, W = 5 }]
[args]
src = { dtype = "f32", dir = "in", count = "N * C * H * W" }
dst = { dtype = "f32", dir = "out", count = "N * C * H * W" }
N = { value = "N" }
C = { value = "C" }
H = { value = "H" }
W = { value = "W" }
*/
__global__ void nchw_to_nhwc(const float* src, float* dst, int N, int C, int H, int W)
{
    int w = blockIdx.x * blockDim.x + threadIdx.x;
    int h = blockIdx.y * blockDim.y + threadIdx.y;
    int nc = blockIdx.z;  // n * C + c
    if (w >= W || h >= H || nc >= N * C) return;
    int n = nc / C;
    int c = nc % C;
    dst[((n * H + h) * W + w) * C + c] = src[((n * C + c) * H + h) * W + w];
}
