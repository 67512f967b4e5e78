// Source: https://github.com/NVIDIA/trt-samples-for-hackathon-cn/blob/4847cfd233ebf86f723460255cadda88bc579b06/cookbook/05-Plugin/06-PluginReposity/CumSumPlugin/V1.0/CumSumPlugin.cu (lines 94-108), license Apache-2.0
/*
 * Copyright (c) 2021, NVIDIA CORPORATION. All rights reserved.
 *
 * Licensed under the Apache License, Version 2.0 (the "License");
 * you may not use this file except in compliance with the License.
 * You may obtain a copy of the License at
 *
 *     http://www.apache.org/licenses/LICENSE-2.0
 *
 * Unless required by applicable law or agreed to in writing, software
 * distributed under the License is distributed on an "AS IS" BASIS,
 * WITHOUT WARRANTIES OR CONDITIONS OF ANY KIND, either express or implied.
 * See the License for the specific language governing permissions and
 * limitations under the License.
 */

#include <cuda_runtime.h>
#include <cuda_fp16.h>

template <typename T>
__global__ void scanAxis1Small(const T * input, T * output, const int nHeight, const int nWidth)
{
    const int bx = blockIdx.x, tx = threadIdx.x, index = bx * nWidth * nHeight + tx;

    if(tx >= nWidth)
        return;

    T sum = T(0);
    for(int i = 0; i < nWidth * nHeight; i += nWidth)
    {
        sum += input[index + i];
        output[index + i] = sum;
    }
}

// Launcher (not in the original): CumSumPlugin::enqueue(), case 8 (scan over
// the h axis, float32): (scanAxis1Small<float>)<<<m.n * m.c, ALIGN32(m.w), 0, stream>>>
// for an input of shape [n * c, h, w] with w <= 1024; ALIGN32(m.w) is written
// out as the next multiple of 32.
/* kernellsp
sizes = { NC = 256, H = 512, W = 512 }
tolerance = { rtol = 1e-4, atol = 1e-4 }
shapes = [{ NC = 3, H = 5, W = 33 }, { NC = 1, H = 100, W = 1 }, { NC = 7, H = 1, W = 1000 }]
[args]
input = { dtype = "f32", dir = "in", count = "NC * H * W", dist = "uniform(0, 1)" }
output = { dtype = "f32", dir = "out", count = "NC * H * W" }
nc = { value = "NC" }
h = { value = "H" }
w = { value = "W" }
*/
extern "C" void solve(const float *input, float *output, int nc, int h, int w)
{
    (scanAxis1Small<float>)     <<< nc, (w + 31) / 32 * 32, 0>>> (input, output, h, w);
}
