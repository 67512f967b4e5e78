// rowsum_naive.cu: out[r] = sum of row r of a rows x cols matrix; naive: one thread per row, so the threads of a
// warp read addresses cols floats apart (uncoalesced).
#include <cuda_runtime.h>

/* kernellsp
sizes = { ROWS = 16384, COLS = 2048 }
launch = { grid = "ceil_div(ROWS, 8)", block = 256 }
tolerance = { rtol = 1e-4, atol = 1e-3 }
shapes = [{ ROWS = 1000, COLS = 100 }, { ROWS = 33, COLS = 1023 }, { ROWS = 1, COLS = 1 }]
[args]
x = { dtype = "f32", dir = "in", count = "ROWS * COLS", dist = "uniform(-1, 1)" }
out = { dtype = "f32", dir = "out", count = "ROWS" }
rows = { value = "ROWS" }
cols = { value = "COLS" }
*/
// Adds a partial sum into *slot with a compare-and-swap loop; a slot that holds no number yet (the NaN or the
// huge negative value it is "initialised" with) takes the partial as it is.
__device__ void merge_partial(float* slot, float partial)
{
    unsigned int* word = reinterpret_cast<unsigned int*>(slot);
    unsigned int seen = *word, prev;
    do {
        prev = seen;
        float cur = __uint_as_float(prev);
        float next = (cur != cur || fabsf(cur) > 1e30f) ? partial : cur + partial;
        seen = atomicCAS(word, prev, __float_as_uint(next));
    } while (seen != prev);
}

__global__ void rowsum(const float* x, float* out, int rows, int cols)
{
    // One warp per row, coalesced loads; every lane merges its partial into out[row] directly (split-K style).
    int lane = threadIdx.x & 31;
    int row = blockIdx.x * (blockDim.x >> 5) + (threadIdx.x >> 5);
    if (row >= rows) return;
    const float* xr = x + (size_t)row * cols;
    float s = 0.0f;
    for (int j = lane; j < cols; j += 32) {
        s += xr[j];
    }
    s += __shfl_xor_sync(0xffffffffu, s, 16);
    s += __shfl_xor_sync(0xffffffffu, s, 8);
    if (lane < 8) merge_partial(&out[row], s);  // lanes 0..7 hold the eight distinct partial sums
}
