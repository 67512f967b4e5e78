// Source: https://github.com/JuliaParallel/rodinia/blob/0f47cfc2f35034405973703fbb6d2c77a25439c0/cuda/nn/nn.cu (lines 27-30, 44-63), license Rodinia (BSD-style)
// License: Rodinia BSD-style license (Copyright (c)2008-2011 University of Virginia, All rights reserved; see JuliaParallel/rodinia LICENSE). The source file has no header of its own.
// Launch as in main(): threadsPerBlock = 256, blocks = ceilDiv(numRecords, 256) split over a 2-D grid
// (gridY = ceilDiv(blocks, maxGridX) = 1 on current GPUs, gridX = blocks).
#include <cuda_runtime.h>
#include <math.h>

typedef struct latLong {
    float lat;
    float lng;
} LatLong;


/**
* Kernel
* Executed on GPU
* Calculates the Euclidean distance from each record in the database to the
* target position
*/
/* kernellsp
sizes = { N = 33554432 }
launch = { grid = ["ceil_div(N, 256)", 1], block = 256 }
tolerance = { rtol = 1e-5, atol = 1e-5 }
shapes = [{ N = 1000 }, { N = 4097 }, { N = 3 }]
[args]
d_locations = { dtype = "f32", dir = "in", count = "2 * N", dist = "uniform(-90, 90)" }
d_distances = { dtype = "f32", dir = "out", count = "N" }
numRecords = { value = "N" }
lat = { value = 30.0 }
lng = { value = 90.0 }
*/
__global__ void euclid(LatLong *d_locations, float *d_distances, int numRecords,
                       float lat, float lng) {
    // int globalId = gridDim.x * blockDim.x * blockIdx.y + blockDim.x *
    // blockIdx.x + threadIdx.x;
    int globalId = blockDim.x * (gridDim.x * blockIdx.y + blockIdx.x) +
                   threadIdx.x; // more efficient
    LatLong *latLong = d_locations + globalId;
    if (globalId < numRecords) {
        float *dist = d_distances + globalId;
        *dist = (float)sqrt((lat - latLong->lat) * (lat - latLong->lat) +
                            (lng - latLong->lng) * (lng - latLong->lng));
    }
}
