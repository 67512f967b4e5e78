// 3x3 box blur of an 8-bit image with clamp-to-edge borders, integer average.
#include <cuda_runtime.h>

static __device__ int clampi(int v, int lo, int hi)
{
    return v < lo ? lo : (v > hi ? hi : v);
}

/* kernellsp
sizes = { W = 7680, H = 4320 }
launch = { grid = ["ceil_div(W, 32)", "ceil_div(H, 8)"], block = [32, 8] }
shapes = [{ W = 1000, H = 7 }, { W = 1, H = 33 }, { W = 65, H = 1 }, { W = 2, H = 2 }]
[args]
src = { dtype = "u8", dir = "in", count = "W * H", dist = "randint(0, 256)" }
dst = { dtype = "u8", dir = "out", count = "W * H" }
w = { value = "W" }
h = { value = "H" }
*/
__global__ void box_blur3x3(const unsigned char* src, unsigned char* dst, int w, int h)
{
    int x = blockIdx.x * blockDim.x + threadIdx.x;
    int y = blockIdx.y * blockDim.y + threadIdx.y;
    if (x >= w || y >= h) return;
    int sum = 0;
    for (int dy = -1; dy <= 1; dy++) {
        int yy = clampi(y + dy, 0, h - 1);
        for (int dx = -1; dx <= 1; dx++) {
            int xx = clampi(x + dx, 0, w - 1);
            sum += src[yy * w + xx];
        }
    }
    dst[y * w + x] = (unsigned char)(sum / 9);
}
