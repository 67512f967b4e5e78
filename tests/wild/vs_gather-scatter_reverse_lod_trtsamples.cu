// Source: https://github.com/NVIDIA/trt-samples-for-hackathon-cn/blob/4847cfd233ebf86f723460255cadda88bc579b06/cookbook/05-Plugin/06-PluginReposity/ReversePlugin/ReversePlugin.cu (lines 19-35), license Apache-2.0
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

template<typename T>
__global__ void reverse4Kernel(T* input, int* lod, T* output)
{
    const int nWidth = gridDim.x, nEmbed = blockDim.x, row = blockIdx.y, col = blockIdx.x, tx = threadIdx.x;
    int src, dst, nValidWidth;
    T value;

    nValidWidth = lod[row];
    if(col < nValidWidth)
    {
        src         = (row * nWidth + col) * nEmbed;
        value       = input[src + tx];
        dst         = (row * nWidth + nValidWidth - 1 - col) * nEmbed + tx;
        output[dst] = value;  
    }
    return;
}

// Launcher (not in the original): ReversePlugin::enqueue(), case 0 (float):
// reverse4Kernel<float><<<dim3(m.nWidth, m.nGroup), m.nEmbed, 0, stream>>>
// for an input of shape [nGroup, nWidth, nEmbed] and lod[nGroup] valid widths.
/* kernellsp
sizes = { G = 4096, W = 128, E = 256 }
shapes = [{ G = 3, W = 5, E = 33 }, { G = 100, W = 17, E = 1 }, { G = 7, W = 1, E = 1000 }]
[args]
input = { dtype = "f32", dir = "in", count = "G * W * E" }
lod = { dtype = "i32", dir = "in", count = "G", dist = "randint(1, W + 1)" }
output = { dtype = "f32", dir = "inout", count = "G * W * E" }
nGroup = { value = "G" }
nWidth = { value = "W" }
nEmbed = { value = "E" }
*/
extern "C" void solve(float* input, int* lod, float* output, int nGroup, int nWidth, int nEmbed)
{
    reverse4Kernel<float>   <<< dim3(nWidth,nGroup), nEmbed, 0 >>> (input, lod, output);
}
