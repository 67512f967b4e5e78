// Source: https://github.com/utcs-scea/altis/blob/5514aa6dae95a6ea84e50cc60d8c5f9cbc304902/src/cuda/level2/darknet/src/maxpool_layer_kernels.cu (lines 10-49), license BSD-2-Clause
// License: BSD-2-Clause (utcs-scea/altis LICENSE: Copyright (c) 2020, University of Texas at Austin. All rights reserved.)
// (darknet code; the darknet project itself is public domain.) The file has no license header.
// Launch as in forward_maxpool_layer_gpu(): <<<cuda_gridsize(n), BLOCK>>> with BLOCK = 512
// (include/darknet.h); cuda_gridsize(n) is a 1-D grid of ceil(n / BLOCK) blocks while that stays
// <= 65535, which holds for every shape below. n = out_h * out_w * c * batch.
#include <cuda_runtime.h>
#include <math.h>

/* kernellsp
sizes = { B = 16, C = 64, H = 256, W = 256, S = 2, K = 2, P = 1, OH = "(H + P - K) // S + 1", OW = "(W + P - K) // S + 1" }
launch = { grid = "ceil_div(B * C * OH * OW, 512)", block = 512 }
shapes = [{ B = 1, C = 3, H = 67, W = 45, S = 2, K = 2, P = 1 }, { B = 2, C = 5, H = 33, W = 33, S = 1, K = 3, P = 2 }, { B = 3, C = 1, H = 9, W = 1000, S = 3, K = 3, P = 0 }]
[args]
n = { value = "B * C * OH * OW" }
in_h = { value = "H" }
in_w = { value = "W" }
in_c = { value = "C" }
stride = { value = "S" }
size = { value = "K" }
pad = { value = "P" }
input = { dtype = "f32", dir = "in", count = "B * C * H * W", dist = "normal(0, 1)" }
output = { dtype = "f32", dir = "out", count = "B * C * OH * OW" }
indexes = { dtype = "i32", dir = "out", count = "B * C * OH * OW" }
*/
__global__ void forward_maxpool_layer_kernel(int n, int in_h, int in_w, int in_c,
        int stride, int size, int pad, float *input, float *output, int *indexes)
{
    int h = (in_h + pad - size)/stride + 1;
    int w = (in_w + pad - size)/stride + 1;
    int c = in_c;

    int id = (blockIdx.x + blockIdx.y*gridDim.x) * blockDim.x + threadIdx.x;
    if(id >= n) return;

    int j = id % w;
    id /= w;
    int i = id % h;
    id /= h;
    int k = id % c;
    id /= c;
    int b = id;

    int w_offset = -pad/2;
    int h_offset = -pad/2;

    int out_index = j + w*(i + h*(k + c*b));
    float max = -INFINITY;
    int max_i = -1;
    int l, m;
    for(l = 0; l < size; ++l){
        for(m = 0; m < size; ++m){
            int cur_h = h_offset + i*stride + l;
            int cur_w = w_offset + j*stride + m;
            int index = cur_w + in_w*(cur_h + in_h*(k + b*in_c));
            int valid = (cur_h >= 0 && cur_h < in_h &&
                    cur_w >= 0 && cur_w < in_w);
            float val = (valid != 0) ? input[index] : -INFINITY;
            max_i = (val > max) ? index : max_i;
            max   = (val > max) ? val   : max;
        }
    }
    output[out_index] = max;
    indexes[out_index] = max_i;
}
