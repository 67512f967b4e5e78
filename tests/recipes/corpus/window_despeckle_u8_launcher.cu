// 1-D despeckle of u8 samples behind a host launcher: the size first, a size_t index, a 5-tap window
// gathered with a plain index and clamped edges, a selection sort (swap through a temporary), the middle
// read through a #define.
#include <cuda_runtime.h>
#define TAPS 5
#define MID (TAPS / 2)
__global__ void despeckle(size_t len, unsigned char* dst, const unsigned char* src)
{
    size_t p = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (p >= len) return;
    unsigned char taps[TAPS];
    for (int t = 0; t < TAPS; t++) {
        long q = (long)p + t - MID;
        taps[t] = src[q < 0 ? 0 : (q >= (long)len ? (long)len - 1 : q)];
    }
    for (int a = 0; a < TAPS - 1; a++) {
        int lo = a;
        for (int b = a + 1; b < TAPS; b++) {
            if (taps[b] < taps[lo]) lo = b;
        }
        unsigned char t = taps[a];
        taps[a] = taps[lo];
        taps[lo] = t;
    }
    dst[p] = taps[MID];
}
/* kernellsp
sizes = { N = 1048576 }
shapes = [{ N = 7 }, { N = 1 }]
[args]
n = { value = "N" }
out = { dtype = "u8", dir = "out", count = "N" }
in = { dtype = "u8", dir = "in", count = "N" }
*/
extern "C" void run_despeckle(size_t n, unsigned char* out, const unsigned char* in)
{
    despeckle<<<(unsigned)((n + 127) / 128), 128>>>(n, out, in);
}
