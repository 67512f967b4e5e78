// Source: https://github.com/NVIDIA-developer-blog/code-samples/blob/34391cf8c5e1036548673ae73cfebf22b59f805c/posts/rnn/LSTM.cu (lines 93-96, 212-254), license BSD-3-Clause (NVIDIA)
/* Copyright (c) 1993-2016, NVIDIA CORPORATION. All rights reserved.
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
#include <math.h>

// Device functions
__forceinline__ __device__ float sigmoidf(float in) {
   return 1.f / (1.f + expf(-in));  
}

// Fused forward kernel
/* kernellsp
sizes = { HID = 4096, BATCH = 4096 }
launch = { grid = "ceil_div(HID * BATCH, 256)", block = 256 }
tolerance = { rtol = 1e-5, atol = 1e-6 }
shapes = [{ HID = 1000, BATCH = 3 }, { HID = 33, BATCH = 65 }, { HID = 4097, BATCH = 1 }]
[args]
hiddenSize = { value = "HID" }
miniBatch = { value = "BATCH" }
tmp_h = { dtype = "f32", dir = "in", count = "4 * HID * BATCH", dist = "uniform(-1, 1)" }
tmp_i = { dtype = "f32", dir = "in", count = "4 * HID * BATCH", dist = "uniform(-1, 1)" }
bias = { dtype = "f32", dir = "in", count = "8 * HID", dist = "uniform(-1, 1)" }
linearGates = { dtype = "f32", dir = "in", count = 1 }
h_out = { dtype = "f32", dir = "out", count = "HID * BATCH" }
i_out = { dtype = "f32", dir = "out", count = "HID * BATCH" }
c_in = { dtype = "f32", dir = "in", count = "HID * BATCH", dist = "uniform(0, 1)" }
c_out = { dtype = "f32", dir = "out", count = "HID * BATCH" }
training = { value = 0 }
*/
__global__ void elementWise_fp(int hiddenSize, int miniBatch,
                               float *tmp_h, 
                               float *tmp_i, 
                               float *bias,
                               float *linearGates,
                               float *h_out,
                               float *i_out,
                               float *c_in,
                               float *c_out,
                               bool training) {
   int index = blockIdx.x * blockDim.x + threadIdx.x;
   int numElements = miniBatch * hiddenSize;
   
   if (index >= numElements) return;
   
   int batch = index / hiddenSize;
   int gateIndex = (index % hiddenSize) + 4 * batch * hiddenSize;   
   
   float g[4];

   for (int i = 0; i < 4; i++) {
      g[i] = tmp_i[i * hiddenSize + gateIndex] + tmp_h[i * hiddenSize + gateIndex];
      g[i] += bias[i * hiddenSize + index % hiddenSize] + bias[(i + 4) * hiddenSize + index % hiddenSize];
      
      if (training) linearGates[gateIndex + i * hiddenSize] = g[i];
   }   
   
   
   float in_gate     = sigmoidf(g[0]);
   float forget_gate = sigmoidf(g[1]);
   float in_gate2    = tanhf(g[2]);
   float out_gate    = sigmoidf(g[3]);
   
   float val = (forget_gate * c_in[index]) + (in_gate * in_gate2);
   
   c_out[index] = val;
   
   val = out_gate * tanhf(val);                                   

   h_out[index] = val;
   i_out[index] = val;
}
