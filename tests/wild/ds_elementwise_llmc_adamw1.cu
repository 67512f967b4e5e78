// Source: https://github.com/karpathy/llm.c/blob/10c706a1ea7906eed4db5a28e126976a84cd1c78/dev/cuda/adamw.cu (lines 66-78), license MIT
// License: MIT, Copyright (c) 2024 Andrej Karpathy (https://github.com/karpathy/llm.c/blob/master/LICENSE)
#include <cuda_runtime.h>
#include <math.h>
// naive fused kernel
/* kernellsp
sizes = { N = 33554432 }
launch = { grid = "ceil_div(N, 512)", block = 512, smem = "4 * 512 * 4" }
tolerance = { rtol = 1e-5, atol = 1e-6, norm_rtol = 1e-6 }
shapes = [{ N = 1000 }, { N = 4097 }, { N = 3 }]
[args]
params_memory = { dtype = "f32", dir = "inout", count = "N", dist = "uniform(-1, 1)" }
grads_memory = { dtype = "f32", dir = "in", count = "N", dist = "uniform(-1, 1)" }
m_memory = { dtype = "f32", dir = "inout", count = "N", dist = "uniform(-1, 1)" }
v_memory = { dtype = "f32", dir = "inout", count = "N", dist = "uniform(0, 1)" }
num_parameters = { value = "N" }
learning_rate = { value = 1e-3 }
beta1 = { value = 0.9 }
beta2 = { value = 0.999 }
beta1_correction = { value = 0.6513215599 }
beta2_correction = { value = 0.00995511979025 }
eps = { value = 1e-8 }
weight_decay = { value = 0.0 }
*/
__global__ void adamw_kernel1(float* params_memory, const float* grads_memory, float* m_memory, float* v_memory, long num_parameters,
                              float learning_rate, float beta1, float beta2, float beta1_correction, float beta2_correction, float eps, float weight_decay) {
   int i = blockIdx.x * blockDim.x + threadIdx.x;
   if (i >= num_parameters) return;  // guard
   // update the first moment (momentum)
   m_memory[i] = beta1 * m_memory[i] + (1.0f - beta1) * grads_memory[i];
   // update the second moment (RMSprop)
   v_memory[i] = beta2 * v_memory[i] + (1.0f - beta2) * grads_memory[i] * grads_memory[i];
   float m_hat = m_memory[i] / beta1_correction;
   float v_hat = v_memory[i] / beta2_correction;
   params_memory[i] -= learning_rate * (m_hat / (sqrtf(v_hat) + eps) + weight_decay * params_memory[i]);
}
