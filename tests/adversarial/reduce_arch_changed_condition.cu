// reduce_atomic_arch.cu: *out += sum(x), with an architecture-specific path (#if __CUDA_ARCH__) in the kernel; naive: every thread issues atomicAdd on the same global address, so all N atomics serialize in L2.
#include <cuda_runtime.h>

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
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
#if __CUDA_ARCH__ >= 600 || !defined(__CUDA_ARCH__)
        atomicAdd(out, x[i]);
#else
        // Before sm_60 the same float add through a compare-and-swap loop.
        unsigned int* word = reinterpret_cast<unsigned int*>(out);
        unsigned int seen = *word, prev;
        do {
            prev = seen;
            seen = atomicCAS(word, prev, __float_as_uint(__uint_as_float(prev) + x[i]));
        } while (seen != prev);
#endif
    }
}
