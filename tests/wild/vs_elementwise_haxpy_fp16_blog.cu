// Source: https://github.com/NVIDIA-developer-blog/code-samples/blob/4ef2fcc1871ffcd39c229e67c90fb41b32e0bd2d/posts/mixed-precision/haxpy.cu (lines 31-33, 49-71), license BSD-3-Clause (NVIDIA)
// Copyright (c) 1993-2016, NVIDIA CORPORATION. All rights reserved.
//
// Redistribution and use in source and binary forms, with or without
// modification, are permitted provided that the following conditions
// are met:
//  * Redistributions of source code must retain the above copyright
//    notice, this list of conditions and the following disclaimer.
//  * Redistributions in binary form must reproduce the above copyright
//    notice, this list of conditions and the following disclaimer in the
//    documentation and/or other materials provided with the distribution.
//  * Neither the name of NVIDIA CORPORATION nor the names of its
//    contributors may be used to endorse or promote products derived
//    from this software without specific prior written permission.
//
// THIS SOFTWARE IS PROVIDED BY THE COPYRIGHT HOLDERS ``AS IS'' AND ANY
// EXPRESS OR IMPLIED WARRANTIES, INCLUDING, BUT NOT LIMITED TO, THE
// IMPLIED WARRANTIES OF MERCHANTABILITY AND FITNESS FOR A PARTICULAR
// PURPOSE ARE DISCLAIMED.  IN NO EVENT SHALL THE COPYRIGHT OWNER OR
// CONTRIBUTORS BE LIABLE FOR ANY DIRECT, INDIRECT, INCIDENTAL, SPECIAL,
// EXEMPLARY, OR CONSEQUENTIAL DAMAGES (INCLUDING, BUT NOT LIMITED TO,
// PROCUREMENT OF SUBSTITUTE GOODS OR SERVICES; LOSS OF USE, DATA, OR
// PROFITS; OR BUSINESS INTERRUPTION) HOWEVER CAUSED AND ON ANY THEORY
// OF LIABILITY, WHETHER IN CONTRACT, STRICT LIABILITY, OR TORT
// (INCLUDING NEGLIGENCE OR OTHERWISE) ARISING IN ANY WAY OUT OF THE USE
// OF THIS SOFTWARE, EVEN IF ADVISED OF THE POSSIBILITY OF SUCH DAMAGE.
#include <cuda_fp16.h>

// This is a simple example of using FP16 types and arithmetic on
// GPUs that support it. The code computes an AXPY (A * X + Y) operation
// on half-precision (FP16) vectors (HAXPY).

// Launch as in main(): haxpy<<<blockDim, nBlocks>>>(n, a, x, y) with
// blockDim = 256 and nBlocks = (n + blockDim - 1) / blockDim, i.e. 256 blocks
// of nBlocks threads (grid and block swapped in the original).
/* kernellsp
sizes = { N = 262144 }
launch = { grid = 256, block = "ceil_div(N, 256)" }
tolerance = { rtol = 1e-2, atol = 1e-2 }
shapes = [{ N = 1001 }, { N = 33 }, { N = 4097 }]
[args]
n = { value = "N" }
a = { value = 2.0 }
x = { dtype = "f16", dir = "in", count = "N", dist = "uniform(-1, 1)" }
y = { dtype = "f16", dir = "inout", count = "N", dist = "uniform(-1, 1)" }
*/
__global__
void haxpy(int n, half a, const half *x, half *y)
{
	int start = threadIdx.x + blockDim.x * blockIdx.x;
	int stride = blockDim.x * gridDim.x;

#if __CUDA_ARCH__ >= 530
	int n2 = n/2;
	half2 *x2 = (half2*)x, *y2 = (half2*)y;

	for (int i = start; i < n2; i+= stride)
		y2[i] = __hfma2(__halves2half2(a, a), x2[i], y2[i]);

	// first thread handles singleton for odd arrays
    if (start == 0 && (n%2))
    	y[n-1] = __hfma(a, x[n-1], y[n-1]);   
#else
    for (int i = start; i < n; i+= stride) {
    	y[i] = __float2half(__half2float(a) * __half2float(x[i]) 
    		                                + __half2float(y[i]));
    }
#endif
}
