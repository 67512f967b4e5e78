// Image preprocessing: uint8 pixels -> normalised float ((p / 255 - mean) * inv_std).
// int tid = ...; int gid = ... spelling.
#include <cuda_runtime.h>

/* kernellsp
sizes = { N = 50331648 }
launch = { grid = "ceil_div(N, 256)", block = 256 }
shapes = [{ N = 1000 }, { N = 4097 }, { N = 3 }]
[args]
img = { dtype = "u8", dir = "in", count = "N", dist = "randint(0, 256)" }
out = { dtype = "f32", dir = "out", count = "N" }
num_pixels = { value = "N" }
mean = { value = 0.485 }
inv_std = { value = 4.366812 }
*/
__global__ void normalize_u8(const unsigned char* img, float* out, int num_pixels, float mean, float inv_std)
{
    int tid = threadIdx.x;
    int gid = blockIdx.x * blockDim.x + tid;
    if (gid < num_pixels) {
        out[gid] = ((float)img[gid] / 255.0f - mean) * inv_std;
    }
}
