// SwiGLU gate for an LLM MLP in bf16: out = silu(gate) * up, float math in a
// __device__ helper.
#include <cuda_bf16.h>

__device__ __forceinline__ float silu(float x)
{
    return x / (1.0f + expf(-x));
}

/* kernellsp
sizes = { N = 33554432 }
launch = { grid = "ceil_div(N, 256)", block = 256 }
shapes = [{ N = 1000 }, { N = 4097 }, { N = 5 }]
[args]
gate = { dtype = "bf16", dir = "in", count = "N", dist = "normal(0, 2)" }
up = { dtype = "bf16", dir = "in", count = "N" }
out = { dtype = "bf16", dir = "out", count = "N" }
n = { value = "N" }
*/
__global__ void swiglu_bf16(const __nv_bfloat16* gate, const __nv_bfloat16* up, __nv_bfloat16* out, int n)
{
    int idx = blockIdx.x * blockDim.x + threadIdx.x;
    if (idx < n) {
        float g = __bfloat162float(gate[idx]);
        float u = __bfloat162float(up[idx]);
        out[idx] = __float2bfloat16(silu(g) * u);
    }
}
