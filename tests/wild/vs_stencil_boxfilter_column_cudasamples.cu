// Source: https://github.com/NVIDIA/cuda-samples/blob/2e41896e1b2c7e2699b7b7f6689c107900c233bb/Samples/2_Concepts_and_Techniques/boxFilter/boxFilter_kernel.cu (lines 55-90, 127-160, 168-172), license BSD-3-Clause (NVIDIA)
/* Copyright (c) 2022, NVIDIA CORPORATION. All rights reserved.
 *
 * Redistribution and use in source and binary forms, with or without
 * modification, are permitted provided that the following conditions
 * are met:
 *  * Redistributions of source code must retain the above copyright
 *    notice, this list of conditions and the following disclaimer.
 *  * Redistributions in binary form must reproduce the above copyright
 *    notice, this list of conditions and the following disclaimer in the
 *    documentation and/or other materials provided with the distribution.
 *  * Neither the name of NVIDIA CORPORATION nor the names of its
 *    contributors may be used to endorse or promote products derived
 *    from this software without specific prior written permission.
 *
 * THIS SOFTWARE IS PROVIDED BY THE COPYRIGHT HOLDERS ``AS IS'' AND ANY
 * EXPRESS OR IMPLIED WARRANTIES, INCLUDING, BUT NOT LIMITED TO, THE
 * IMPLIED WARRANTIES OF MERCHANTABILITY AND FITNESS FOR A PARTICULAR
 * PURPOSE ARE DISCLAIMED.  IN NO EVENT SHALL THE COPYRIGHT OWNER OR
 * CONTRIBUTORS BE LIABLE FOR ANY DIRECT, INDIRECT, INCIDENTAL, SPECIAL,
 * EXEMPLARY, OR CONSEQUENTIAL DAMAGES (INCLUDING, BUT NOT LIMITED TO,
 * PROCUREMENT OF SUBSTITUTE GOODS OR SERVICES; LOSS OF USE, DATA, OR
 * PROFITS; OR BUSINESS INTERRUPTION) HOWEVER CAUSED AND ON ANY THEORY
 * OF LIABILITY, WHETHER IN CONTRACT, STRICT LIABILITY, OR TORT
 * (INCLUDING NEGLIGENCE OR OTHERWISE) ARISING IN ANY WAY OUT OF THE USE
 * OF THIS SOFTWARE, EVEN IF ADVISED OF THE POSSIBILITY OF SUCH DAMAGE.
 */

#include <cuda_runtime.h>

/*
  Perform a fast box filter using the sliding window method.

  As the kernel moves from left to right, we add in the contribution of the
  new sample on the right, and subtract the value of the exiting sample on the
  left. This only requires 2 adds and a mul per output value, independent of the
  filter radius. The box filter is separable, so to perform a 2D box filter we
  perform the filter in the x direction, followed by the same filter in the y
  direction. Applying multiple iterations of the box filter converges towards a
  Gaussian blur. Using CUDA, rows or columns of the image are processed in
  parallel. This version duplicates edge pixels.

  Note that the x (row) pass suffers from uncoalesced global memory reads,
  since each thread is reading from a different row. For this reason it is
  better to use texture lookups for the x pass.
  The y (column) pass is perfectly coalesced.

  Parameters
  id - pointer to input data in global memory
  od - pointer to output data in global memory
  w  - image width
  h  - image height
  r  - filter radius

  e.g. for r = 2, w = 8:

  0 1 2 3 4 5 6 7
  x - -
  - x - -
  - - x - -
    - - x - -
      - - x - -
        - - x - -
          - - x -
            - - x
*/

// process column
__device__ void d_boxfilter_y(float *id, float *od, int w, int h, int r) {
  float scale = 1.0f / (float)((r << 1) + 1);

  float t;
  // do left edge
  t = id[0] * r;

  for (int y = 0; y < (r + 1); y++) {
    t += id[y * w];
  }

  od[0] = t * scale;

  for (int y = 1; y < (r + 1); y++) {
    t += id[(y + r) * w];
    t -= id[0];
    od[y * w] = t * scale;
  }

  // main loop
  for (int y = (r + 1); y < (h - r); y++) {
    t += id[(y + r) * w];
    t -= id[((y - r) * w) - w];
    od[y * w] = t * scale;
  }

  // do right edge
  for (int y = h - r; y < h; y++) {
    t += id[(h - 1) * w];
    t -= id[((y - r) * w) - w];
    od[y * w] = t * scale;
  }
}

// Launch as in boxFilter(): d_boxfilter_y_global<<<width / nthreads, nthreads, 0>>>
// with the sample's nthreads = 64 and radius = 14.
/* kernellsp
sizes = { W = 8192, H = 8192, R = 14 }
launch = { grid = "W // 64", block = 64 }
tolerance = { rtol = 1e-4, atol = 1e-5 }
shapes = [{ W = 64, H = 100, R = 14 }, { W = 128, H = 33, R = 3 }, { W = 192, H = 1000, R = 1 }]
[args]
id = { dtype = "f32", dir = "in", count = "W * H", dist = "uniform(0, 1)" }
od = { dtype = "f32", dir = "out", count = "W * H" }
w = { value = "W" }
h = { value = "H" }
r = { value = "R" }
*/
__global__ void d_boxfilter_y_global(float *id, float *od, int w, int h,
                                     int r) {
  unsigned int x = blockIdx.x * blockDim.x + threadIdx.x;
  d_boxfilter_y(&id[x], &od[x], w, h, r);
}
