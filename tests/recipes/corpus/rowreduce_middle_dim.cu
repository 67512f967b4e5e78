// Sum over the middle axis of a [A, B, C] tensor: out[a][c] = sum_b in[a][b][c].
// 2-D launch: x over C (contiguous), y over A; every thread loops over B.
#include <cuda_runtime.h>

/* kernellsp
sizes = { A = 128, B = 1024, C = 512 }
launch = { grid = ["ceil_div(C, 128)", "A"], block = [128, 1] }
tolerance = { rtol = 1e-3, atol = 1e-4, norm_rtol = 1e-5 }
shapes = [{ A = 3, B = 100, C = 77 }, { A = 1, B = 1000, C = 1 }, { A = 17, B = 1, C = 129 }]
[args]
in = { dtype = "f32", dir = "in", count = "A * B * C" }
out = { dtype = "f32", dir = "out", count = "A * C" }
A = { value = "A" }
B = { value = "B" }
C = { value = "C" }
*/
__global__ void sum_middle_axis(const float* in, float* out, int A, int B, int C)
{
    int c = blockIdx.x * blockDim.x + threadIdx.x;
    int a = blockIdx.y;
    if (c < C && a < A) {
        float acc = 0.0f;
        for (int b = 0; b < B; b++) {
            acc += in[(a * B + b) * C + c];
        }
        out[a * C + c] = acc;
    }
}
