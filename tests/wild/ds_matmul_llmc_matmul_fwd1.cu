// Source: https://github.com/karpathy/llm.c/blob/071c977c79e8e23269b98ade7582dc48fb2fbd35/dev/cuda/matmul_forward.cu (lines 55-73), license MIT
// License: MIT, Copyright (c) 2024 Andrej Karpathy (https://github.com/karpathy/llm.c/blob/master/LICENSE)
#include <cuda_runtime.h>
// kernel 1: naive kernel, every thread handles one output element, direct global memory access
/* kernellsp
sizes = { BT = 2048, C = 768, OC = 2048 }
launch = { grid = ["ceil_div(BT, 16)", "ceil_div(OC, 16)"], block = [16, 16] }
tolerance = { rtol = 1e-3, atol = 1e-4, norm_rtol = 1e-5 }
shapes = [{ BT = 67, C = 45, OC = 33 }, { BT = 1000, C = 1, OC = 9 }, { BT = 3, C = 129, OC = 200 }]
[args]
out = { dtype = "f32", dir = "out", count = "BT * OC" }
inp = { dtype = "f32", dir = "in", count = "BT * C", dist = "uniform(-1, 1)" }
weight = { dtype = "f32", dir = "in", count = "OC * C", dist = "uniform(-1, 1)" }
bias = { dtype = "f32", dir = "in", count = "OC", dist = "uniform(-1, 1)" }
BT = { value = "BT" }
C = { value = "C" }
OC = { value = "OC" }
*/
__global__ void matmul_forward_kernel1(float* out,
                                       const float* inp, const float* weight, const float* bias,
                                       int BT, int C, int OC) {
    // out is (B,T,OC). OC is short for "output channels", e.g. OC = 4 * C
    // inp is (B,T,C), weight is (OC, C), bias is (OC)
    // in the naive kernel, every thread handles one element of out
    int bt = blockIdx.x * blockDim.x + threadIdx.x;
    int oc = blockIdx.y * blockDim.y + threadIdx.y;
    if (bt < BT && oc < OC) {
        float val = (bias != NULL) ? bias[oc] : 0.0f;
        const float* wrow = weight + oc * C;
        const float* inp_bt = inp + bt * C;
        for (int i = 0; i < C; i++) {
            val += inp_bt[i] * wrow[i];
        }
        out[bt * OC + oc] = val;
    }
}
