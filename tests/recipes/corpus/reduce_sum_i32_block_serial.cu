// Integer sum: thread 0 of every block loops over the block's slice of the
// input by itself, then adds the block total to the result with atomicAdd.
#include <cuda_runtime.h>

/* kernellsp
sizes = { N = 67108864 }
launch = { grid = "ceil_div(N, 256)", block = 256 }
shapes = [{ N = 1000 }, { N = 4097 }, { N = 1 }]
[args]
x = { dtype = "i32", dir = "in", count = "N", dist = "randint(-1000, 1000)" }
sum = { dtype = "i32", dir = "inout", count = 1, dist = "randint(-100, 100)" }
n = { value = "N" }
*/
__global__ void block_serial_sum(const int* x, int* sum, int n)
{
    if (threadIdx.x == 0) {
        int base = blockIdx.x * blockDim.x;
        int acc = 0;
        for (int j = 0; j < blockDim.x; j++) {
            if (base + j < n) acc += x[base + j];
        }
        atomicAdd(sum, acc);
    }
}
