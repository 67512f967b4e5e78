// Each thread squares a contiguous chunk of `chunk` elements through pointer
// arithmetic (p = src + tid * chunk), so lanes of a warp are chunk floats apart.
#include <cuda_runtime.h>

/* kernellsp
sizes = { N = 16777216, CHUNK = 32 }
launch = { grid = "ceil_div(ceil_div(N, CHUNK), 256)", block = 256 }
shapes = [{ N = 1000 }, { N = 4099, CHUNK = 7 }, { N = 5, CHUNK = 3 }]
[args]
src = { dtype = "f32", dir = "in", count = "N" }
dst = { dtype = "f32", dir = "out", count = "N" }
n = { value = "N" }
chunk = { value = "CHUNK" }
*/
__global__ void square_chunks(const float* src, float* dst, int n, int chunk)
{
    int t = blockIdx.x * blockDim.x + threadIdx.x;
    long start = (long)t * chunk;
    if (start >= n) return;
    int len = min((long)chunk, n - start);
    const float* p = src + start;
    float* q = dst + start;
    for (int j = 0; j < len; ++j) {
        q[j] = p[j] * p[j];
    }
}
