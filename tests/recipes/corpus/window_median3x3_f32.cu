// 3x3 median filter of an f32 image with clamped edges, as in image-processing course homework: a 2-D
// launch, the window filled by two nested loops with an index counter, a bubble sort through a temporary,
// the middle element read by a constant.
#include <cuda_runtime.h>
/* kernellsp
sizes = { W = 1024, H = 768 }
launch = { grid = ["ceil_div(W, 16)", "ceil_div(H, 16)"], block = [16, 16] }
shapes = [{ W = 5, H = 3 }]
[args]
img = { dtype = "f32", dir = "in", count = "W * H" }
res = { dtype = "f32", dir = "out", count = "W * H" }
width = { value = "W" }
height = { value = "H" }
*/
__global__ void median3x3(const float* img, float* res, int width, int height)
{
    unsigned x = blockIdx.x * blockDim.x + threadIdx.x;
    unsigned y = blockIdx.y * blockDim.y + threadIdx.y;
    if (x >= width || y >= height) return;
    float v[9];
    int k = 0;
    for (int dy = -1; dy <= 1; dy++) {
        for (int dx = -1; dx <= 1; dx++) {
            int yy = min(max((int)y + dy, 0), height - 1);
            int xx = min(max((int)x + dx, 0), width - 1);
            v[k++] = img[yy * width + xx];
        }
    }
    for (int a = 0; a < 9; a++) {
        for (int b = 0; b < 8 - a; b++) {
            if (v[b] > v[b + 1]) {
                float t = v[b];
                v[b] = v[b + 1];
                v[b + 1] = t;
            }
        }
    }
    res[y * width + x] = v[4];
}
