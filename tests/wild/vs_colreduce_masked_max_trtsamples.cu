// Source: https://github.com/NVIDIA/trt-samples-for-hackathon-cn/blob/3ee54193356ff631556cd1cf7a2910cceb654dfe/cookbook/05-Plugin/PluginReposity/MaxPlugin/MaxPlugin.cu (lines 19-32; SMALL_NUMBER from MaxPlugin.h line 21 at commit 3c25bc5474988764377bfab1506cd1d0ced2a8b5), license Apache-2.0
/*
 * Copyright (c) 2021-2022, NVIDIA CORPORATION. All rights reserved.
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

// ---- from MaxPlugin.h ----
#define SMALL_NUMBER -60000
// ---- end of MaxPlugin.h ----

template<typename T>
__global__ void maxKernel(T *input, int *lod, T *output, int nGroup, int totalWidth)
{
    const int validWidth = lod[blockIdx.x % nGroup], dst = blockIdx.x * blockDim.x + threadIdx.x;

    T temp, maxTemp = T(SMALL_NUMBER);
    for (int i = 0, src = blockIdx.x * totalWidth + threadIdx.x; i < validWidth; i++, src += blockDim.x)
    {
        temp    = input[src];
        maxTemp = (maxTemp > temp) ? maxTemp : temp;
    }
    output[dst] = maxTemp;
    return;
}

// Launcher (not in the original): MaxPlugin::enqueue(), case 0 (float):
// maxKernel<float><<<m.nGroup, m.nEmbed, 0, stream>>>(..., m.nGroup, m.nWidth * m.nEmbed)
// for an input of shape [nGroup, nWidth, nEmbed] and lod[nGroup] valid widths.
/* kernellsp
sizes = { G = 4096, W = 128, E = 256 }
shapes = [{ G = 3, W = 5, E = 33 }, { G = 100, W = 17, E = 1 }, { G = 7, W = 1, E = 1000 }]
[args]
input = { dtype = "f32", dir = "in", count = "G * W * E", dist = "uniform(-100, 100)" }
lod = { dtype = "i32", dir = "in", count = "G", dist = "randint(1, W + 1)" }
output = { dtype = "f32", dir = "out", count = "G * E" }
nGroup = { value = "G" }
nWidth = { value = "W" }
nEmbed = { value = "E" }
*/
extern "C" void solve(float *input, int *lod, float *output, int nGroup, int nWidth, int nEmbed)
{
    maxKernel<float><<<nGroup, nEmbed, 0>>>(input, lod, output, nGroup, nWidth * nEmbed);
}
