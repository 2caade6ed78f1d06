// Per-call tables of the interpolated taps ('bilinear', 'gaussian'; interp.h): for every channel the
// distinct pixels its taps' samples read (the points), those read with a nonzero coefficient first,
// their merged weights, and for each sample its point, coefficient and derivative in the angle.
// The general kernels gather over the points (forward, input gradient) and sum dy * x at each
// point (weight and angle gradients); interp.cu launches this builder and contracts the sums.
#pragma once

#include <algorithm>
#include <cmath>

#include "../interp.h"
#include "common.cuh"

namespace mmo1d {
namespace cuda {

// Points per channel a table row holds: a bound of the distinct pixels the samples read.
// Bilinear: 4 per tap. Gaussian: at most (floor(2 radius) + 1)^2 per tap, and at most the pixels
// within the radius of the taps' segment: with the line closer to the horizontal (say), at most
// floor(K - 1 + 2 radius) + 1 columns, each crossing the band in at most 2 radius / |cos| <=
// 2 sqrt(2) radius rows (0.01 of margin for rounding). The table builder traps if a row overflows.
inline int interp_rows(const InterpSpec& spec, int K) {
  if (spec.mode == InterpMode::kBilinear) return 4 * K;
  const int side = static_cast<int>(std::floor(2 * spec.radius)) + 1;
  const int along = static_cast<int>(std::floor(K - 1 + 2 * spec.radius + 0.01)) + 1;
  const int across = static_cast<int>(std::floor(2 * 1.4142135623730951 * spec.radius + 0.01)) + 1;
  return std::min(K * std::min(spec.samples(), side * side), along * across);
}

// Bound of |dh| and |dw| over the points: a tap's position is within K / 2 of the output pixel, its
// samples within reach + 1 of the position's floor.
inline int interp_halo(const InterpSpec& spec, int K) {
  return K / 2 + spec.reach + 1;
}

// One thread per channel. Samples are merged into points in sample order; a sample can share its
// pixel only with the samples of taps within 2 * radius (bilinear: 2) of its own, so the search for
// an existing point looks back over the points of the last 2 * reach + 3 taps.
// Outputs (rows = table row length R): off, pw (C, R), the merged weights of the points with
// a nonzero coefficient (the residual form adds 1 to the centre pixel's); npts_gather, npts_all
// (C): points with a nonzero coefficient, all points; halo (C); spt, coef, dcoef (C, K, M): each
// sample's point (-1: outside the gaussian band, coefficient and derivative 0). Scratch:
// raw_off, raw_w, raw_nz, order (C, R).
template <typename scalar_t, typename acc_t>
__global__ void build_interp_tables_kernel(const acc_t* __restrict__ theta, const scalar_t* __restrict__ weight, int C,
                                           int K, int rows, const InterpSpec spec, bool residual,
                                           int2* __restrict__ off, acc_t* __restrict__ pw,
                                           int* __restrict__ npts_gather, int* __restrict__ npts_all,
                                           int2* __restrict__ halo, int* __restrict__ spt, acc_t* __restrict__ coef,
                                           acc_t* __restrict__ dcoef, int2* __restrict__ raw_off,
                                           acc_t* __restrict__ raw_w, int* __restrict__ raw_nz,
                                           int* __restrict__ order) {
  const int c = blockIdx.x * blockDim.x + threadIdx.x;
  if (c >= C) return;
  const int M = spec.samples();
  const int window = (2 * spec.reach + 3) * M;
  const int64_t rbase = int64_t(c) * rows, sbase = int64_t(c) * K * M;
  int dh[kMaxInterpSamples], dw[kMaxInterpSamples];
  acc_t cf[kMaxInterpSamples], dcf[kMaxInterpSamples];
  acc_t s, co;
  interp_sincos(theta[c], &s, &co);
  int n = 0;
  for (int t = 0; t < K; ++t) {
    tap_samples<acc_t>(spec, s, co, t - K / 2, dh, dw, cf, dcf);
    const acc_t wt = static_cast<acc_t>(weight[int64_t(c) * K + t]);
    for (int m = 0; m < M; ++m) {
      const int64_t si = sbase + int64_t(t) * M + m;
      coef[si] = cf[m];
      dcoef[si] = dcf[m];
      if (cf[m] == acc_t(0) && dcf[m] == acc_t(0)) {
        spt[si] = -1;
        continue;
      }
      int p = n - 1;
      const int stop = max(0, n - window);
      while (p >= stop && (raw_off[rbase + p].x != dh[m] || raw_off[rbase + p].y != dw[m])) --p;
      if (p < stop) {
        if (n == rows) __trap();  // beyond interp_rows' bound: a bug, never silently dropped
        p = n++;
        raw_off[rbase + p] = make_int2(dh[m], dw[m]);
        raw_w[rbase + p] = acc_t(0);
        raw_nz[rbase + p] = 0;
      }
      const bool centre = residual && t == K / 2 && dh[m] == 0 && dw[m] == 0;
      raw_w[rbase + p] += wt * cf[m] + (centre ? acc_t(1) : acc_t(0));
      raw_nz[rbase + p] |= cf[m] != acc_t(0);
      spt[si] = p;
    }
  }
  // Points with a nonzero coefficient first (in order), then the others.
  int next = 0, ph = 0, pwid = 0;
  for (int pass = 0; pass < 2; ++pass) {
    for (int p = 0; p < n; ++p) {
      if ((raw_nz[rbase + p] != 0) != (pass == 0)) continue;
      const int2 o = raw_off[rbase + p];
      order[rbase + p] = next;
      off[rbase + next] = o;
      pw[rbase + next] = raw_w[rbase + p];
      ph = max(ph, abs(o.x));
      pwid = max(pwid, abs(o.y));
      ++next;
    }
    if (pass == 0) npts_gather[c] = next;
  }
  for (int j = n; j < rows; ++j) {  // unused slots: weight 0 at the centre
    off[rbase + j] = make_int2(0, 0);
    pw[rbase + j] = acc_t(0);
  }
  npts_all[c] = n;
  halo[c] = make_int2(ph, pwid);
  for (int64_t si = sbase; si < sbase + int64_t(K) * M; ++si) {
    if (spt[si] >= 0) spt[si] = order[rbase + spt[si]];
  }
}

}  // namespace cuda
}  // namespace mmo1d
