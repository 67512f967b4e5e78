// RMSNorm on bf16 activations, one thread per token row, float accumulation;
// every element is converted twice (sum pass and scale pass).
#include <cuda_bf16.h>

/* kernellsp
sizes = { T = 16384, H = 1024 }
launch = { grid = "ceil_div(T, 64)", block = 64 }
shapes = [{ T = 1000, H = 64 }, { T = 5, H = 1000 }, { T = 65, H = 3 }]
[args]
x = { dtype = "bf16", dir = "in", count = "T * H" }
w = { dtype = "bf16", dir = "in", count = "H", dist = "uniform(0.5, 1.5)" }
y = { dtype = "bf16", dir = "out", count = "T * H" }
num_tokens = { value = "T" }
hidden_size = { value = "H" }
eps = { value = 1e-6 }
*/
__global__ void rmsnorm_bf16(const __nv_bfloat16* x, const __nv_bfloat16* w, __nv_bfloat16* y,
                             int num_tokens, int hidden_size, float eps)
{
    int t = blockIdx.x * blockDim.x + threadIdx.x;
    if (t >= num_tokens) return;
    float ss = 0.0f;
    for (int i = 0; i < hidden_size; i++) {
        float v = __bfloat162float(x[t * hidden_size + i]);
        ss += v * v;
    }
    float scale = rsqrtf(ss / hidden_size + eps);
    for (int i = 0; i < hidden_size; i++) {
        float v = __bfloat162float(x[t * hidden_size + i]);
        y[t * hidden_size + i] = __float2bfloat16(v * scale * __bfloat162float(w[i]));
    }
}
