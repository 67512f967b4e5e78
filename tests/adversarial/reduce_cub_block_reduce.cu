// reduce_atomic.cu: *out += sum(x); naive: every thread issues atomicAdd on the same global address, so all N atomics serialize in L2.
#include <cuda_runtime.h>
#include <cub/cub.cuh>

/* kernellsp
sizes = { N = 4194304 }
launch = { grid = "ceil_div(N, 256)", block = 256 }
tolerance = { rtol = 1e-3, atol = 1e-3 }
shapes = [{ N = 1000 }, { N = 1023 }, { N = 1 }]
[args]
x = { dtype = "f32", dir = "in", count = "N", dist = "uniform(0, 1)" }
out = { dtype = "f32", dir = "inout", count = 1, dist = "uniform(0, 1)" }
n = { value = "N" }
*/
__global__ void reduce_atomic(const float* x, float* out, int n)
{
    // CUB's block-wide reduction (the spec's block is 256 threads), then one atomic per block.
    using BlockReduce = cub::BlockReduce<float, 256>;
    __shared__ typename BlockReduce::TempStorage temp;
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    float v = i < n ? x[i] : 0.0f;
    float block_sum = BlockReduce(temp).Sum(v);
    if (threadIdx.x == 0) {
        atomicAdd(out, block_sum);
    }
}
