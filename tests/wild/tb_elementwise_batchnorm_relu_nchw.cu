// Source: https://github.com/AIComputing101/gpu-programming-101/blob/797435cf4bc7e9e3013c3e57d848b5f5436c56f9/modules/module8/examples/01_deep_learning_cuda.cu (lines 217-242), license MIT
// Copyright (c) 2025 GPU Programming 101, MIT License (repository LICENSE; the source file's header comment describes the module only).
#include <cuda_runtime.h>

/* kernellsp
sizes = { NB = 32, C = 64, H = 112, W = 112 }
launch = { grid = "ceil_div(NB * C * H * W, 256)", block = 256 }
tolerance = { rtol = 1e-5, atol = 1e-5 }
shapes = [{ NB = 1, C = 3, H = 33, W = 17 }, { NB = 3, C = 5, H = 1, W = 1 }, { NB = 2, C = 7, H = 9, W = 13 }]
[args]
input = { dtype = "f32", dir = "in", count = "NB * C * H * W", dist = "normal(0, 1)" }
gamma = { dtype = "f32", dir = "in", count = "C", dist = "uniform(0.5, 1.5)" }
beta = { dtype = "f32", dir = "in", count = "C", dist = "uniform(-0.5, 0.5)" }
mean = { dtype = "f32", dir = "in", count = "C", dist = "uniform(-0.5, 0.5)" }
variance = { dtype = "f32", dir = "in", count = "C", dist = "uniform(0.5, 2.0)" }
output = { dtype = "f32", dir = "out", count = "NB * C * H * W" }
batch_size = { value = "NB" }
channels = { value = "C" }
height = { value = "H" }
width = { value = "W" }
epsilon = { value = 1e-5 }
*/
// Fused batch normalization + ReLU
__global__ void batch_norm_relu_fused(const float* __restrict__ input,
                                     const float* __restrict__ gamma,
                                     const float* __restrict__ beta,
                                     const float* __restrict__ mean,
                                     const float* __restrict__ variance,
                                     float* __restrict__ output,
                                     int batch_size, int channels,
                                     int height, int width,
                                     float epsilon) {
    int idx = blockIdx.x * blockDim.x + threadIdx.x;
    int stride = blockDim.x * gridDim.x;
    int total_elements = batch_size * channels * height * width;
    
    for (int i = idx; i < total_elements; i += stride) {
        // Extract channel index
        int channel = (i / (height * width)) % channels;
        
        // Batch normalization
        float normalized = (input[i] - mean[channel]) / sqrtf(variance[channel] + epsilon);
        float bn_output = gamma[channel] * normalized + beta[channel];
        
        // Fused ReLU
        output[i] = fmaxf(0.0f, bn_output);
    }
}
