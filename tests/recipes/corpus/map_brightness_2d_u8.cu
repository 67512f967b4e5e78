// Brightness/contrast on an 8-bit grayscale image with a 2-D launch:
// out = saturate(in * gain + bias). Elementwise on idx = row * width + col.
#include <cuda_runtime.h>

/* kernellsp
sizes = { W = 7680, H = 4320 }
launch = { grid = ["ceil_div(W, 32)", "ceil_div(H, 8)"], block = [32, 8] }
shapes = [{ W = 1000, H = 7 }, { W = 33, H = 65 }, { W = 1, H = 17 }]
[args]
out = { dtype = "u8", dir = "out", count = "W * H" }
in = { dtype = "u8", dir = "in", count = "W * H", dist = "randint(0, 256)" }
width = { value = "W" }
height = { value = "H" }
gain = { value = 1.5 }
bias = { value = -20 }
*/
__global__ void adjust_brightness(unsigned char* out, const unsigned char* in, int width, int height,
                                  float gain, int bias)
{
    int col = blockIdx.x * blockDim.x + threadIdx.x;
    int row = blockIdx.y * blockDim.y + threadIdx.y;
    if (col < width && row < height) {
        int idx = row * width + col;
        float v = in[idx] * gain + bias;
        v = fminf(fmaxf(v, 0.0f), 255.0f);
        out[idx] = (unsigned char)(v + 0.5f);
    }
}
