// The sizes of the interpolated taps' tables (interp_tables.cuh) and the kernels that build them: one
// thread per channel (any size), one warp per channel (tables within the grid and shared-memory
// limits below), and the channels' same-as-previous flags.
#pragma once

#include <algorithm>
#include <cmath>

#include "../../interp.h"
#include "common.cuh"

namespace mmo1d {
namespace cuda {

// Points per channel a table row holds: a bound of the distinct pixels the samples read.
// Bilinear: 4 per tap. Gaussian: at most (floor(2 radius) + 1)^2 per tap, and at most the pixels
// within the radius of the taps' segment: with the line closer to the horizontal (say), at most
// floor(K - 1 + 2 radius) + 1 columns, each crossing the band in at most 2 radius / |cos| <=
// 2 sqrt(2) radius rows (0.01 of margin for rounding). The table builder traps if a row overflows.
inline int interp_rows(const TapRule& rule, int K) {
  if (rule.mode == TapMode::kBilinear) return 4 * K;
  const int side = static_cast<int>(std::floor(2 * rule.radius)) + 1;
  const int along = static_cast<int>(std::floor(K - 1 + 2 * rule.radius + 0.01)) + 1;
  const int across = static_cast<int>(std::floor(2 * 1.4142135623730951 * rule.radius + 0.01)) + 1;
  return std::min(K * std::min(rule.samples(), side * side), along * across);
}

// Bound of |dh| and |dw| over the points: a tap's position is within K / 2 of the output pixel, its
// samples within reach + 1 of the position's floor.
inline int interp_halo(const TapRule& rule, int K) {
  return K / 2 + rule.reach + 1;
}

// The tables that build_interp_tables_kernel and build_interp_tables_warp_kernel write (InterpTables'
// layout): off, pw (C, rows) the points' offsets and merged weights, npts_gather and npts_all (C)
// the counts of the points with a nonzero coefficient and of all of them, halo (C), and spt, coef,
// dcoef (C, K, M) each sample's point, coefficient and derivative.
template <typename acc_t>
struct InterpTableOutputs {
  int2* off;
  acc_t* pw;
  int* npts_gather;
  int* npts_all;
  int2* halo;
  int* spt;
  acc_t* coef;
  acc_t* dcoef;
};

// The one-thread builder's scratch (C, rows): the points in sample order, their offsets, summed
// weights and whether a sample with a nonzero coefficient reads them, and their place in the tables.
template <typename acc_t>
struct InterpTableScratch {
  int2* raw_off;
  acc_t* raw_w;
  int* raw_nz;
  int* order;
};

// The arguments of both table builders, built by build_interp_tables: C channels of K taps (angles
// theta, weight (C, K)), rows per channel, h = interp_halo (read by the warp builder), and the
// one-thread builder's scratch (null for the warp builder).
template <typename scalar_t, typename acc_t>
struct InterpTablesParams {
  const acc_t* theta;
  const scalar_t* weight;
  int C, K, rows, h;
  TapRule rule;
  bool residual;
  InterpTableOutputs<acc_t> out;
  InterpTableScratch<acc_t> scratch;
};

// One thread per channel. Samples are merged into points in sample order; a sample can share its
// pixel only with the samples of taps within 2 * radius (bilinear: 2) of its own, so the search for
// an existing point looks back over the points of the last 2 * reach + 3 taps.
// Outputs (rows = table row length R): off, pw (C, R), the merged weights of the points with
// a nonzero coefficient (the residual form adds 1 to the centre pixel's); npts_gather, npts_all
// (C): points with a nonzero coefficient, all points; halo (C); spt, coef, dcoef (C, K, M): each
// sample's point (-1: outside the gaussian band, coefficient and derivative 0). Scratch:
// raw_off, raw_w, raw_nz, order (C, R).
template <typename scalar_t, typename acc_t>
__global__ void build_interp_tables_kernel(const InterpTablesParams<scalar_t, acc_t> params) {
  const acc_t* __restrict__ theta = params.theta;
  const scalar_t* __restrict__ weight = params.weight;
  int2* __restrict__ raw_off = params.scratch.raw_off;
  acc_t* __restrict__ raw_w = params.scratch.raw_w;
  int* __restrict__ raw_nz = params.scratch.raw_nz;
  int* __restrict__ order = params.scratch.order;
  const int C = params.C, K = params.K, rows = params.rows;
  const TapRule rule = params.rule;
  const bool residual = params.residual;
  const InterpTableOutputs<acc_t> out = params.out;
  const int c = blockIdx.x * blockDim.x + threadIdx.x;
  if (c >= C) return;
  const int M = rule.samples();
  const int window = (2 * rule.reach + 3) * M;
  const int64_t rbase = int64_t(c) * rows, sbase = int64_t(c) * K * M;
  int dh[kMaxInterpSamples], dw[kMaxInterpSamples];
  acc_t cf[kMaxInterpSamples], dcf[kMaxInterpSamples];
  acc_t s, co;
  interp_sincos(theta[c], &s, &co);
  int n = 0;
  for (int t = 0; t < K; ++t) {
    tap_samples<acc_t>(rule, s, co, t - K / 2, dh, dw, cf, dcf);
    const acc_t wt = static_cast<acc_t>(weight[int64_t(c) * K + t]);
    for (int m = 0; m < M; ++m) {
      const int64_t si = sbase + int64_t(t) * M + m;
      out.coef[si] = cf[m];
      out.dcoef[si] = dcf[m];
      if (cf[m] == acc_t(0) && dcf[m] == acc_t(0)) {
        out.spt[si] = -1;
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
      out.spt[si] = p;
    }
  }
  // Points with a nonzero coefficient first (in order), then the others.
  int next = 0, ph = 0, pwid = 0;
  for (int pass = 0; pass < 2; ++pass) {
    for (int p = 0; p < n; ++p) {
      if ((raw_nz[rbase + p] != 0) != (pass == 0)) continue;
      const int2 o = raw_off[rbase + p];
      order[rbase + p] = next;
      out.off[rbase + next] = o;
      out.pw[rbase + next] = raw_w[rbase + p];
      ph = max(ph, abs(o.x));
      pwid = max(pwid, abs(o.y));
      ++next;
    }
    if (pass == 0) out.npts_gather[c] = next;
  }
  for (int j = n; j < rows; ++j) {  // unused slots: weight 0 at the centre
    out.off[rbase + j] = make_int2(0, 0);
    out.pw[rbase + j] = acc_t(0);
  }
  out.npts_all[c] = n;
  out.halo[c] = make_int2(ph, pwid);
  for (int64_t si = sbase; si < sbase + int64_t(K) * M; ++si) {
    if (out.spt[si] >= 0) out.spt[si] = order[rbase + out.spt[si]];
  }
}

// The warp-per-channel builder's limits: points per channel (a point's index is a byte of the
// offset grid) and cells of that grid ((2 h + 1)^2 for offsets within h = K / 2 + reach + 1).
constexpr int kInterpWarpRows = 255;
constexpr int kInterpWarpCells = 8192;

// Its dynamic shared memory: each sample's cell (then point) and coefficient, and the taps' weights.
template <typename acc_t>
int64_t interp_warp_smem(const TapRule& rule, int K) {
  const int64_t S = int64_t(K) * rule.samples();
  return (S * (sizeof(int) + sizeof(acc_t)) + K * sizeof(acc_t) + 15) / 16 * 16;
}
constexpr int64_t kInterpWarpSmem = 30 * 1024;  // beside its static 17 KB (float64): within the default 48 KB

// Whether build_interp_tables_warp_kernel takes tables of this rule and K.
template <typename acc_t>
bool interp_warp_builder(const TapRule& rule, int K) {
  const int side = 2 * interp_halo(rule, K) + 1;
  return interp_rows(rule, K) <= kInterpWarpRows && side * side <= kInterpWarpCells &&
         interp_warp_smem<acc_t>(rule, K) <= kInterpWarpSmem;
}

// The tables of build_interp_tables_kernel, the same values in the same order, one warp per channel
// (blockDim.x == 32, blockIdx.x the channel; h = interp_halo): the lanes compute the taps' samples
// into shared memory (interp_warp_smem bytes), number the points in the order of their first samples
// through a shared-memory grid over the offsets (a lookup instead of a search), sum each point's
// terms in sample order (the same sums in the same order), order the points (those of nonzero
// coefficient first) and map the samples to them.
template <typename scalar_t, typename acc_t>
__global__ void __launch_bounds__(32)
    build_interp_tables_warp_kernel(const InterpTablesParams<scalar_t, acc_t> params) {
  const acc_t* __restrict__ theta = params.theta;
  const scalar_t* __restrict__ weight = params.weight;
  const int K = params.K, rows = params.rows, h = params.h;
  const TapRule rule = params.rule;
  const bool residual = params.residual;
  int2* __restrict__ off = params.out.off;
  acc_t* __restrict__ pw = params.out.pw;
  int* __restrict__ npts_gather = params.out.npts_gather;
  int* __restrict__ npts_all = params.out.npts_all;
  int2* __restrict__ halo = params.out.halo;
  int* __restrict__ spt = params.out.spt;
  acc_t* __restrict__ coef = params.out.coef;
  acc_t* __restrict__ dcoef = params.out.dcoef;
  __shared__ unsigned char grid[kInterpWarpCells];
  __shared__ int2 p_off[kInterpWarpRows];
  __shared__ acc_t p_w[kInterpWarpRows];
  __shared__ int p_nz[kInterpWarpRows], p_order[kInterpWarpRows], p_first[kInterpWarpRows], p_count[kInterpWarpRows];
  extern __shared__ __align__(16) unsigned char dyn[];
  const int c = blockIdx.x, lane = threadIdx.x;
  const int M = rule.samples(), S = K * M, side = 2 * h + 1;
  acc_t* s_cf = reinterpret_cast<acc_t*>(dyn);  // S coefficients, K weights, S cells
  acc_t* s_wt = s_cf + S;
  int* s_pt = reinterpret_cast<int*>(s_wt + K);
  const int64_t rbase = int64_t(c) * rows, sbase = int64_t(c) * S;
  for (int i = lane; i < side * side; i += 32) grid[i] = 255;
  acc_t s, co;
  interp_sincos(theta[c], &s, &co);
  // The samples, a tap per lane: coefficients, derivatives, and in s_pt the offsets (dh, dw) packed
  // as (dh + h) * side + (dw + h), or -1 for a sample outside the band.
  for (int t = lane; t < K; t += 32) {
    int dh[kMaxInterpSamples], dw[kMaxInterpSamples];
    acc_t cf[kMaxInterpSamples], dcf[kMaxInterpSamples];
    tap_samples<acc_t>(rule, s, co, t - K / 2, dh, dw, cf, dcf);
    s_wt[t] = static_cast<acc_t>(weight[int64_t(c) * K + t]);
    for (int m = 0; m < M; ++m) {
      const int64_t si = sbase + int64_t(t) * M + m;
      coef[si] = cf[m];
      dcoef[si] = dcf[m];
      s_cf[t * M + m] = cf[m];
      s_pt[t * M + m] = (cf[m] == acc_t(0) && dcf[m] == acc_t(0)) ? -1 : (dh[m] + h) * side + dw[m] + h;
    }
  }
  __syncwarp();
  // The points, numbered in the order of their first samples: 32 samples at a time, the lowest lane
  // of those that read one new cell numbers it.
  int n = 0;
  for (int b = 0; b < S; b += 32) {
    const int si = b + lane;
    const int cell = si < S ? s_pt[si] : -1;
    int p = cell >= 0 ? grid[cell] : 255;
    const unsigned same = __match_any_sync(0xffffffffu, cell);
    const int leader = __ffs(same) - 1;
    const bool fresh = cell >= 0 && p == 255 && leader == lane;
    const unsigned fresh_mask = __ballot_sync(0xffffffffu, fresh);
    __syncwarp();  // every lane's read of the grid before a leader writes it
    if (fresh) {
      p = n + __popc(fresh_mask & ((1u << lane) - 1u));
      if (p >= rows) __trap();  // beyond interp_rows' bound: a bug, never silently dropped
      grid[cell] = static_cast<unsigned char>(p);
      p_off[p] = make_int2(cell / side - h, cell % side - h);
      p_first[p] = si;
      p_count[p] = 0;
      p_nz[p] = 0;
    }
    p = __shfl_sync(0xffffffffu, p, leader);
    __syncwarp();
    if (cell >= 0) {
      s_pt[si] = p;
      atomicAdd(&p_count[p], 1);
      if (s_cf[si] != acc_t(0)) atomicOr(&p_nz[p], 1);
    }
    n += __popc(fresh_mask);
    __syncwarp();
  }
  // Each point's weight, its samples' terms summed in sample order from its first sample.
  for (int p = lane; p < n; p += 32) {
    acc_t w = acc_t(0);
    for (int si = p_first[p], left = p_count[p]; left > 0; ++si) {
      if (s_pt[si] != p) continue;
      const int t = si / M;
      const bool centre = residual && t == K / 2 && p_off[p].x == 0 && p_off[p].y == 0;
      w += s_wt[t] * s_cf[si] + (centre ? acc_t(1) : acc_t(0));
      --left;
    }
    p_w[p] = w;
  }
  __syncwarp();
  // Points with a nonzero coefficient first (in order), then the others.
  int next = 0, ph = 0, pwid = 0;
  for (int pass = 0; pass < 2; ++pass) {
    for (int b = 0; b < n; b += 32) {
      const int p = b + lane;
      const bool take = p < n && (p_nz[p] != 0) == (pass == 0);
      const unsigned mask = __ballot_sync(0xffffffffu, take);
      if (take) {
        const int o = next + __popc(mask & ((1u << lane) - 1u));
        p_order[p] = o;
        off[rbase + o] = p_off[p];
        pw[rbase + o] = p_w[p];
        ph = max(ph, abs(p_off[p].x));
        pwid = max(pwid, abs(p_off[p].y));
      }
      next += __popc(mask);
    }
    if (pass == 0 && lane == 0) npts_gather[c] = next;
  }
  for (int j = n + lane; j < rows; j += 32) {  // unused slots: weight 0 at the centre
    off[rbase + j] = make_int2(0, 0);
    pw[rbase + j] = acc_t(0);
  }
  ph = warp_max(ph);
  pwid = warp_max(pwid);
  if (lane == 0) {
    npts_all[c] = n;
    halo[c] = make_int2(ph, pwid);
  }
  __syncwarp();
  for (int i = lane; i < S; i += 32) {
    const int p = s_pt[i];
    spt[sbase + i] = p >= 0 ? p_order[p] : -1;
  }
}

// same[c] = 1 when channel c has the points of channel c - 1 (the same counts and offsets, in
// order), so that the channels_last vector kernels give a lane's channels one load per point.
static __global__ void interp_same_kernel(const int2* __restrict__ off, const int* __restrict__ npts_gather,
                                          const int* __restrict__ npts_all, int C, int rows, int* __restrict__ same) {
  const int c = blockIdx.x * blockDim.x + threadIdx.x;
  if (c >= C) return;
  bool s = c > 0 && npts_gather[c] == npts_gather[c - 1] && npts_all[c] == npts_all[c - 1];
  const int2* a = off + int64_t(c) * rows;
  for (int j = 0; s && j < npts_all[c]; ++j) s = a[j].x == a[j - rows].x && a[j].y == a[j - rows].y;
  same[c] = s;
}

}  // namespace cuda
}  // namespace mmo1d
