// Source: https://github.com/NVIDIA/trt-samples-for-hackathon-cn/blob/481e0e40189f098b4d517a382a68ebd43b81af4c/cookbook/05-Plugin/PluginReposity/LayerNormPlugin-V1.0-naive-TRT8/LayerNormPlugin.cu (lines 19-56; EPSILON from LayerNormPlugin.h line 22 at commit de038e1f3d1cbe06475edd9757b65e2b6f7a46fd), license Apache-2.0
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

// ---- from LayerNormPlugin.h ----
#define EPSILON 1.0e-6f
// ---- end of LayerNormPlugin.h ----

// Launch as in LayerNormPlugin::enqueue(): one block of 128 threads per row
// (nBlock = d[0] * d[1]); the kernel handles only rows of 256 elements.
/* kernellsp
sizes = { ROWS = 65536 }
launch = { grid = "ROWS", block = 128 }
tolerance = { rtol = 1e-4, atol = 1e-5 }
shapes = [{ ROWS = 1 }, { ROWS = 33 }, { ROWS = 1000 }]
[args]
pInput = { dtype = "f32", dir = "in", count = "ROWS * 256", dist = "normal(0, 2)" }
pOutput = { dtype = "f32", dir = "out", count = "ROWS * 256" }
*/
__global__ void layerNormKernel(float *pInput, float *pOutput)
{
    const int tx = threadIdx.x, index = blockIdx.x * 256 + threadIdx.x;

    __shared__ float temp[128];

    float value0 = pInput[index];
    float value1 = pInput[index + 128];
    temp[tx]     = value0 + value1;
    __syncthreads();

    for (int stride = 64; stride >= 1; stride /= 2)
    {
        if (tx < stride)
        {
            temp[tx] += temp[tx + stride];
        }
        __syncthreads();
    }
    float mean = temp[0] / 256;
    __syncthreads();

    temp[tx] = (value0 - mean) * (value0 - mean) + (value1 - mean) * (value1 - mean);
    __syncthreads();

    for (int stride = 64; stride >= 1; stride /= 2)
    {
        if (tx < stride)
        {
            temp[tx] += temp[tx + stride];
        }
        __syncthreads();
    }
    float var = temp[0] / 256;

    pOutput[index]       = (value0 - mean) * rsqrtf(var + EPSILON);
    pOutput[index + 128] = (value1 - mean) * rsqrtf(var + EPSILON);
}
