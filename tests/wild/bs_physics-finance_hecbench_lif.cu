// Source: https://github.com/zjin-lcf/HeCBench/blob/280045f0659705899a18d289c3ed6c4fb0b3459b/src/lif-cuda/main.cu (lines 10-57), license BSD-3-Clause
// License: BSD-3-Clause (zjin-lcf/HeCBench LICENSE: Copyright (c) 2020-2023, Zheming Jin. All rights reserved.). The source file has no header of its own.
// Leaky integrate-and-fire neuron update (from nengo/hrr-scaling), one time step. Launch as in main():
// blocks(256), grids((num_neurons + 255) / 256); dt = 0.1, tau_rc = 10, tau_ref = 2; voltages start in
// [1, 2) and refractory times in {0, 0.1, ..., 0.4} as in main().
#include <cuda_runtime.h>
#include <math.h>

/* kernellsp
sizes = { NPI = 1024, NI = 32768 }
launch = { grid = "ceil_div(NPI * NI, 256)", block = 256 }
tolerance = { rtol = 1e-4, atol = 1e-5 }
shapes = [{ NPI = 33, NI = 1000 }, { NPI = 1000, NI = 3 }, { NPI = 1, NI = 4097 }]
[args]
numNeurons = { value = "NPI * NI" }
neurons_per_item = { value = "NPI" }
dt = { value = 0.1 }
encode_result = { dtype = "f32", dir = "in", count = "NI", dist = "uniform(0, 1)" }
voltage_array = { dtype = "f32", dir = "inout", count = "NPI * NI", dist = "uniform(1, 2)" }
reftime_array = { dtype = "f32", dir = "inout", count = "NPI * NI", dist = "choice(0.0, 0.1, 0.2, 0.3, 0.4)" }
tau_rc = { value = 10.0 }
tau_ref = { value = 2.0 }
bias = { dtype = "f32", dir = "in", count = "NPI", dist = "uniform(0, 1)" }
gain = { dtype = "f32", dir = "in", count = "NPI", dist = "uniform(0.5, 1.5)" }
spikes = { dtype = "f32", dir = "out", count = "NPI * NI" }
*/
__global__ void lif (
    size_t numNeurons, int neurons_per_item, float dt,
    const float*__restrict__ encode_result,
          float*__restrict__ voltage_array,
          float*__restrict__ reftime_array,
    float tau_rc, float tau_ref,
    const float*__restrict__ bias,
    const float*__restrict__ gain,
          float*__restrict__ spikes)
{
  size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
  if (i < numNeurons)
  {
    int neuron_index = i % neurons_per_item;
    int item_index = i / neurons_per_item;

    float voltage = voltage_array[i];
    float ref_time = reftime_array[i];
    float current = bias[neuron_index] + gain[neuron_index] * encode_result[item_index];
    float dV, spike, mult;

    dV = -expm1f(-dt / tau_rc) * (current - voltage);
    voltage = fmaxf(voltage + dV, 0.f);

    ref_time -= dt;

    mult = ref_time;
    mult *= -1.f / dt;
    mult += 1.f;

    mult = fminf(mult, 1.f);
    mult = fmaxf(mult, 0.f);

    voltage *= mult;

    if(voltage > 1.f){
      spike = 1.f / dt;
      ref_time = tau_ref + dt * (1.f - (voltage - 1.f) / dV);
      voltage = 0.f;
    }else{
      spike = 0.f;
    }

    reftime_array[i] = ref_time;
    voltage_array[i] = voltage;
    spikes[i] = spike;
  }
}
