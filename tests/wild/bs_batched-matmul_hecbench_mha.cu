// Source: https://github.com/zjin-lcf/HeCBench/blob/d7fbb0018e4e625b399a8fcf825e0037ccd7309d/src/attentionMultiHead-cuda/main.cu (lines 9-18, 20-123), license BSD-3-Clause
// License: BSD-3-Clause (zjin-lcf/HeCBench LICENSE: Copyright (c) 2020-2023, Zheming Jin. All rights reserved.). The source file has no header of its own.
// Beam-search decoding attention: one block per (candidate, head) computes q.K^T over n_steps keys, a
// block softmax (cub::BlockReduce<float, 256>) and the weighted sum of V. Launch as in main():
// grid(nhead * beamsize), block(qk_col / nhead), dynamic smem sizeof(float) * (qk_col / nhead + n_steps),
// scaler = sqrt(nhead / dim_feature), THRESHOLD = 64.
#include <cuda_runtime.h>
#include <cub/cub.cuh>
#include <math.h>
#include <type_traits>

struct Max
{
  template <typename T, typename U>
  __device__ __forceinline__
  typename std::common_type<T, U>::type
    operator()(T &&t, U &&u) const
  {
    return ((t) > (u)) ? (t) : (u);
  }
};

/* kernellsp
sizes = { B = 64, NH = 16, QK = 4096, NS = 256 }
launch = { grid = "NH * B", block = "QK // NH", smem = "4 * (QK // NH + NS)" }
tolerance = { rtol = 1e-4, atol = 1e-5, norm_rtol = 1e-5 }
shapes = [{ B = 3, NH = 2, QK = 512, NS = 9 }, { B = 5, NH = 1, QK = 256, NS = 1 }, { B = 1, NH = 4, QK = 1024, NS = 255 }]
[args]
q = { dtype = "f32", dir = "in", count = "B * QK", dist = "uniform(0, 1)" }
k = { dtype = "f32", dir = "in", count = "B * QK * NS", dist = "uniform(0, 1)" }
v = { dtype = "f32", dir = "in", count = "B * QK * NS", dist = "uniform(0, 1)" }
beam_size = { value = "B" }
n_steps = { value = "NS" }
qk_col = { value = "QK" }
v_col = { value = "QK" }
nhead = { value = "NH" }
scale = { value = "sqrt(float(NH) / QK)" }
THRESHOLD = { value = 64 }
dst = { dtype = "f32", dir = "out", count = "B * QK" }
*/
__global__
void mha (
   const float *__restrict__ q, 
   const float *__restrict__ k, 
   const float *__restrict__ v, 
   const int beam_size, 
   const int n_steps, 
   const int qk_col, 
   const int v_col, 
   const int nhead, 
   const float scale,
   const int THRESHOLD,
   float *__restrict__ dst)
{
  /* 
     Each block processes one head from one candidate.

     dim_per_head is the size of partition processed by each head.

     candidate_id is the index of candidate processed by this block. 
     We have beam_size candidates in total.

     head_id is the index of head processed by this block.

   */
  int dim_per_head = qk_col / nhead;
  int candidate_id = blockIdx.x / nhead;
  int head_id = blockIdx.x % nhead;

  typedef cub::BlockReduce<float, 256> BlockReduce;
  __shared__ typename BlockReduce::TempStorage temp_storage;
  /*
     sq is the query vector shared by all threads inside the same block.

     The size of sq should be dim_per_head.

     Each block only load the a part of the query vector that belongs to the corresponding candidate.
   */
  extern __shared__ float buffer[];
  float *sq = buffer;
  //float *logits = (float*)&(buffer[dim_per_head]);
  float *logits = buffer + dim_per_head;


  // pos is the start position of the corresponding query matrix prococessed by this block.
  int pos = candidate_id * qk_col + head_id * dim_per_head + threadIdx.x;
  if(threadIdx.x < dim_per_head)  {
    sq[threadIdx.x] = q[pos];
  }
  __syncthreads();


  // calculate the correlation between the query and key QK^T/sqrt(d_k)

  float summ = 0.f;
  if(threadIdx.x < n_steps)
  {   
    const float *k2 = k + candidate_id * qk_col * n_steps + head_id * dim_per_head + threadIdx.x * qk_col;
    for (int i = 0; i < dim_per_head; i++)
      summ += sq[i] * k2[i];
    summ *= scale;
  }   

  // calculate the softmax value of the first step softmax(QK^T/sqrt(d_k)) using warp shuffle.

  __shared__ float s_max_val;
  __shared__ float s_sum;

  float local_i = threadIdx.x < n_steps ? summ : -1e-20f;
  float local_o;

  float max_val = BlockReduce(temp_storage).Reduce(local_i, Max());

  if(threadIdx.x == 0) {
    s_max_val = max_val;
  }
  __syncthreads();

  local_i -= s_max_val;

  if(local_i < -THRESHOLD) local_i = -THRESHOLD;

  local_o = expf(local_i);

  float val = (threadIdx.x < n_steps) ? local_o : 0.f;
  val = BlockReduce(temp_storage).Sum(val);
  if(threadIdx.x == 0) s_sum = val;
  __syncthreads();

  if(threadIdx.x < n_steps) {
    logits[threadIdx.x] = local_o / s_sum;
  }
  __syncthreads();

  // calculate the weighted sum on value matrix V softmax(QK^T/sqrt(d_k))V 
  summ = 0.f;
  if(threadIdx.x < dim_per_head)
  {
    int tid = candidate_id * v_col * n_steps + head_id * dim_per_head + threadIdx.x;
    for(int i = 0; i < n_steps; ++i)
      summ += logits[i] * v[tid + i * v_col];
    dst[candidate_id * v_col + head_id * dim_per_head + threadIdx.x] = summ;
  }
}
