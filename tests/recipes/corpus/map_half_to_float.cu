// Type conversion: fp16 -> fp32 (e.g. upcasting half weights). unsigned int
// index and count, destination first.
#include <cuda_fp16.h>

/* kernellsp
sizes = { N = 67108864 }
launch = { grid = "ceil_div(N, 256)", block = 256 }
shapes = [{ N = 1000 }, { N = 4097 }, { N = 9 }]
[args]
dst = { dtype = "f32", dir = "out", count = "N" }
src = { dtype = "f16", dir = "in", count = "N", dist = "uniform(-100, 100)" }
count = { value = "N" }
*/
__global__ void half2float_kernel(float *dst, const __half *src, unsigned int count)
{
    unsigned int idx = blockIdx.x * blockDim.x + threadIdx.x;
    if (idx < count) {
        dst[idx] = __half2float(src[idx]);
    }
}
