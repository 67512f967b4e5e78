// 2-D convolution of a single-channel image with a K x K mask (K odd), zero
// padding, output the same size as the input. Mask passed as a global array.
#include <cuda_runtime.h>

/* kernellsp
sizes = { H = 4096, W = 4096, K = 5 }
launch = { grid = ["ceil_div(W, 16)", "ceil_div(H, 16)"], block = [16, 16] }
tolerance = { rtol = 1e-5, atol = 1e-5 }
shapes = [{ H = 100, W = 77, K = 3 }, { H = 1, W = 1000 }, { H = 33, W = 2, K = 7 }, { H = 9, W = 9, K = 1 }]
[args]
image = { dtype = "f32", dir = "in", count = "H * W" }
mask = { dtype = "f32", dir = "in", count = "K * K" }
result = { dtype = "f32", dir = "out", count = "H * W" }
height = { value = "H" }
width = { value = "W" }
ksize = { value = "K" }
*/
__global__ void conv2d_same(const float* image, const float* mask, float* result, int height, int width, int ksize)
{
    int col = blockIdx.x * blockDim.x + threadIdx.x;
    int row = blockIdx.y * blockDim.y + threadIdx.y;
    if (row < height && col < width) {
        int r = ksize / 2;
        float sum = 0.0f;
        for (int dy = -r; dy <= r; ++dy) {
            for (int dx = -r; dx <= r; ++dx) {
                int y = row + dy;
                int x = col + dx;
                if (y >= 0 && y < height && x >= 0 && x < width) {
                    sum += image[y * width + x] * mask[(dy + r) * ksize + (dx + r)];
                }
            }
        }
        result[row * width + col] = sum;
    }
}
