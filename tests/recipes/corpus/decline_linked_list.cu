// Sum the values along linked lists stored as index arrays: each thread follows
// next[] from head[l] until a negative link (or max_hops). The trip count and
// every address after the first depend on the data.
#include <cuda_runtime.h>

/* kernellsp
sizes = { L = 1048576, NODES = 65536 }
launch = { grid = "ceil_div(L, 128)", block = 128 }
tolerance = { rtol = 1e-5, atol = 1e-5 }
shapes = [{ L = 1000, NODES = 100 }, { L = 4097, NODES = 5000 }, { L = 33, NODES = 7 }]
[args]
head = { dtype = "i32", dir = "in", count = "L", dist = "randint(0, NODES)" }
next = { dtype = "i32", dir = "in", count = "NODES", dist = "randint(-1024, NODES)" }
value = { dtype = "f32", dir = "in", count = "NODES" }
out = { dtype = "f32", dir = "out", count = "L" }
num_lists = { value = "L" }
max_hops = { value = 256 }
*/
__global__ void walk_lists(const int* head, const int* next, const float* value, float* out,
                           int num_lists, int max_hops)
{
    int l = blockIdx.x * blockDim.x + threadIdx.x;
    if (l >= num_lists) return;
    float acc = 0.0f;
    int node = head[l];
    int hops = 0;
    while (node >= 0 && hops < max_hops) {
        acc += value[node];
        node = next[node];
        hops++;
    }
    out[l] = acc;
}
