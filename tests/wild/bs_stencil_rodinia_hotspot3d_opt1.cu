// Source: https://github.com/JuliaParallel/rodinia/blob/84d4cf577f64215c37a28bae7b9294981f87d24f/cuda/hotspot3D/opt1.cu (lines 7-55), license Rodinia (BSD-style)
// License: Rodinia BSD-style license (Copyright (c)2008-2011 University of Virginia, All rights reserved; see JuliaParallel/rodinia LICENSE). The source file has no header of its own.
// Launch as in hotspot_opt1() (same file): block_dim(64, 4, 1), grid_dim(nx / 64, ny / 4, 1).
#include <cuda_runtime.h>

/* kernellsp
sizes = { NX = 512, NY = 512, NZ = 64 }
launch = { grid = ["ceil_div(NX, 64)", "ceil_div(NY, 4)"], block = [64, 4] }
tolerance = { rtol = 1e-5, atol = 1e-5 }
shapes = [{ NX = 64, NY = 4, NZ = 3 }, { NX = 128, NY = 12, NZ = 2 }, { NX = 192, NY = 20, NZ = 5 }]
[args]
p = { dtype = "f32", dir = "in", count = "NX * NY * NZ", dist = "uniform(0, 1)" }
tIn = { dtype = "f32", dir = "in", count = "NX * NY * NZ", dist = "uniform(320, 340)" }
tOut = { dtype = "f32", dir = "out", count = "NX * NY * NZ" }
sdc = { value = 0.01 }
nx = { value = "NX" }
ny = { value = "NY" }
nz = { value = "NZ" }
ce = { value = 0.1 }
cw = { value = 0.1 }
cn = { value = 0.1 }
cs = { value = 0.1 }
ct = { value = 0.05 }
cb = { value = 0.05 }
cc = { value = 0.45 }
*/
__global__ void hotspotOpt1(float *p, float *tIn, float *tOut, float sdc,
                            int nx, int ny, int nz, float ce, float cw,
                            float cn, float cs, float ct, float cb, float cc) {
    float amb_temp = 80.0;

    int i = blockDim.x * blockIdx.x + threadIdx.x;
    int j = blockDim.y * blockIdx.y + threadIdx.y;

    int c = i + j * nx;
    int xy = nx * ny;

    int W = (i == 0) ? c : c - 1;
    int E = (i == nx - 1) ? c : c + 1;
    int N = (j == 0) ? c : c - nx;
    int S = (j == ny - 1) ? c : c + nx;

    float temp1, temp2, temp3;
    temp1 = temp2 = tIn[c];
    temp3 = tIn[c + xy];
    tOut[c] = cc * temp2 + cw * tIn[W] + ce * tIn[E] + cs * tIn[S] +
              cn * tIn[N] + cb * temp1 + ct * temp3 + sdc * p[c] +
              ct * amb_temp;
    c += xy;
    W += xy;
    E += xy;
    N += xy;
    S += xy;

    for (int k = 1; k < nz - 1; ++k) {
        temp1 = temp2;
        temp2 = temp3;
        temp3 = tIn[c + xy];
        tOut[c] = cc * temp2 + cw * tIn[W] + ce * tIn[E] + cs * tIn[S] +
                  cn * tIn[N] + cb * temp1 + ct * temp3 + sdc * p[c] +
                  ct * amb_temp;
        c += xy;
        W += xy;
        E += xy;
        N += xy;
        S += xy;
    }
    temp1 = temp2;
    temp2 = temp3;
    tOut[c] = cc * temp2 + cw * tIn[W] + ce * tIn[E] + cs * tIn[S] +
              cn * tIn[N] + cb * temp1 + ct * temp3 + sdc * p[c] +
              ct * amb_temp;
    return;
}

