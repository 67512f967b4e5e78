// Source: https://github.com/ENCCS/gpu-programming/blob/16c4ab511d6a6529419a5742a08857406365ef46/content/examples/non-portable-kernel-models/cuda-matrix-transpose-v1.cu (lines 11, 13-22), license CC-BY-4.0
// ENCCS "GPU programming: why, when and how?" lesson material, Creative Commons Attribution 4.0 International (repository LICENSE); the source file has no header of its own.
#include <cuda_runtime.h>

const static int tile_dim = 16;

/* kernellsp
sizes = { W = 8192, H = 8192 }
launch = { grid = ["W // 16", "H // 16"], block = [16, 16] }
shapes = [{ W = 48, H = 16 }, { W = 16, H = 208 }, { W = 1008, H = 80 }]
[args]
in = { dtype = "f32", dir = "in", count = "W * H" }
out = { dtype = "f32", dir = "out", count = "W * H" }
width = { value = "W" }
height = { value = "H" }
*/
__global__ void transpose_naive_kernel(float *in, float *out, int width,
                                       int height) {
  int x_index = blockIdx.x * tile_dim + threadIdx.x;
  int y_index = blockIdx.y * tile_dim + threadIdx.y;

  int in_index = y_index * width + x_index;
  int out_index = x_index * height + y_index;

  out[out_index] = in[in_index];
}
