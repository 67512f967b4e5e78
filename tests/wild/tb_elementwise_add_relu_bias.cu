// Source: https://github.com/gpu-mode/lectures/blob/077c728c5d618f43d0dc79bf7d13563c47f0cfed/lecture_018/kernels/src/pointwise_add_relu_fused.cu (lines 7-23), license Apache-2.0
// Repository license: Apache License 2.0 (Copyright 2024 CUDA MODE); the source file has no header of its own.
#include <cuda_runtime.h>


/* kernellsp
sizes = { ROWS = 16384, COLS = 1024 }
launch = { grid = "ceil_div(ROWS * COLS, COLS)", block = "COLS" }
shapes = [{ ROWS = 1000, COLS = 100 }, { ROWS = 33, COLS = 1023 }, { ROWS = 3, COLS = 1 }, { ROWS = 7, COLS = 65 }]
[args]
in_out_ptr0 = { dtype = "f32", dir = "inout", count = "ROWS * COLS", dist = "normal(0, 1)" }
in_ptr0 = { dtype = "f32", dir = "in", count = "COLS", dist = "normal(0, 1)" }
xnumel = { value = "ROWS * COLS" }
XBLOCK = { value = "COLS" }
*/
__global__ void add_relu_fusion_kernel(float* in_out_ptr0, const float* in_ptr0, const int xnumel ,const int XBLOCK) {
    const int tid = threadIdx.x;
    const int xoffset = blockIdx.x * XBLOCK;
    const int xindex = xoffset + tid;
    const bool xmask = xindex < xnumel;

    if (xmask) {
        int x2 = xindex;
        int x0 = xindex % XBLOCK;
        float tmp0 = in_out_ptr0[x2];
        float tmp1 = in_ptr0[x0];
        float tmp2 = tmp0 + tmp1;
        float tmp3 = max(0.0f, tmp2); // ReLU operation

        in_out_ptr0[x2] = tmp3;
    }
}
