// Source: https://github.com/zjin-lcf/HeCBench/blob/280045f0659705899a18d289c3ed6c4fb0b3459b/src/convolution3D-cuda/main.cu (lines 1-5, 15-19, 48-77), license BSD-3-Clause
/*
  Reference
  Chapter 16 in Programming massively parallel processors,
  A hands-on approach (D. Kirk and W. Hwu)
 */
// License: BSD-3-Clause (zjin-lcf/HeCBench LICENSE: Copyright (c) 2020-2023, Zheming Jin. All rights reserved.). The source file has no header of its own.
// Multi-channel 2-D convolution (valid, stride 1): Y[n][m][h][w] = sum_c,p,q X[n][c][h+p][w+q] * W[m][c][p][q].
// solve() follows conv3D<float>() for the first grid organisation: grids_s1(N, M, Z) with
// Z = ceil(Hout/16) * ceil(Wout/16), blocks(TILE_WIDTH, TILE_WIDTH, 1).
#include <cuda_runtime.h>

#define TILE_WIDTH 16

#define II(n,c,h,w) ((n)*C*Hin*Win+(c)*Hin*Win+(h)*Win+w)
#define WI(n,c,h,w) ((n)*C*K*K+(c)*K*K+(h)*K+w)
#define OI(n,c,h,w) ((n)*M*Hout*Wout+(c)*Hout*Wout+(h)*Wout+w)

template<typename T>
__global__
void conv3d_s1(const T * __restrict__ X,
               const T * __restrict__ W,
                     T * __restrict__ Y,
               const int C,
               const int M,
               const int K,
               const int Hin,
               const int Win,
               const int Hout,
               const int Wout,
               const int W_grid)
{
  int n = blockIdx.x;
  int m = blockIdx.y;
  int h = blockIdx.z / W_grid * TILE_WIDTH + threadIdx.y;
  int w = blockIdx.z % W_grid * TILE_WIDTH + threadIdx.x;
  if (h < Hout && w < Wout) {
    T s = 0;
    for (int c = 0; c < C; c++) {
      for (int p = 0; p < K; p++) {
        for (int q = 0; q < K; q++) {
          s += X[II(n, c, h+p, w+q)] * W[WI(m, c, p, q)];
        }
      }
    }
    Y[OI(n, m, h, w)] = s;
  }
}

/* kernellsp
sizes = { BN = 8, CI = 16, MO = 32, HI = 258, WI = 258, KK = 3 }
tolerance = { rtol = 1e-4, atol = 1e-4, norm_rtol = 1e-5 }
shapes = [{ BN = 1, CI = 3, MO = 2, HI = 67, WI = 45, KK = 3 }, { BN = 2, CI = 1, MO = 5, HI = 33, WI = 33, KK = 5 }, { BN = 1, CI = 2, MO = 1, HI = 7, WI = 100, KK = 7 }]
[args]
X = { dtype = "f32", dir = "in", count = "BN * CI * HI * WI", dist = "uniform(0, 1)" }
W = { dtype = "f32", dir = "in", count = "MO * CI * KK * KK", dist = "uniform(-1, 1)" }
Y = { dtype = "f32", dir = "out", count = "BN * MO * (HI - KK + 1) * (WI - KK + 1)" }
N = { value = "BN" }
C = { value = "CI" }
M = { value = "MO" }
Hin = { value = "HI" }
Win = { value = "WI" }
K = { value = "KK" }
*/
extern "C" void solve(const float* X, const float* W, float* Y, int N, int C, int M, int Hin, int Win, int K)
{
  const int Hout = Hin-K+1;
  const int Wout = Win-K+1;
  int W_grid = (Wout + TILE_WIDTH - 1) / TILE_WIDTH;
  int H_grid = (Hout + TILE_WIDTH - 1) / TILE_WIDTH;
  int Z = H_grid * W_grid;
  dim3 grids_s1 (N, M, Z);
  dim3 blocks (TILE_WIDTH, TILE_WIDTH, 1);
  conv3d_s1 <<< grids_s1, blocks >>> (X, W, Y, C, M, K, Hin, Win, Hout, Wout, W_grid);
}
