// The general weight-gradient kernels (per-block partial sums, NCHW and channels_last).
#pragma once

#include <ATen/cuda/CUDAContext.h>

#include "../common/launch.cuh"
#include "general_classes_kernel.cuh"
#include "general_kernel.cuh"

namespace mmo1d {
namespace cuda {

// The arguments of wgrad_nchw_kernel and wgrad_nhwc_kernel, built by their launcher.
template <typename scalar_t, typename acc_t>
struct GeneralWgradParams {
  WgradOperands<scalar_t, acc_t> io;
  PointWgradTables tables;
  GatherGeometry g;
};

// ----------------------------------------------------------------------------------------------
// Weight gradient partial sums. Geometry as the forward gather (a = stride, sign = +1, up = 1).
// Each block covers one tile of one channel (NCHW) or 8 channels (NHWC) for a chunk of images and
// writes partial[c][part][j] for every point j; part = tile * chunks + chunk.
// ----------------------------------------------------------------------------------------------
template <typename scalar_t, typename acc_t>
__global__ void wgrad_nchw_kernel(const GeneralWgradParams<scalar_t, acc_t> params) {
  const scalar_t* __restrict__ dy = params.io.dy;
  const int2* __restrict__ toff = params.tables.off;
  const GatherGeometry g = params.g;
  extern __shared__ __align__(16) unsigned char smem[];
  const WgradPart part = wgrad_part(g.tiles, params.io.N, params.io.chunk);
  const int c = part.c;
  const auto [p0, q0, th, twd] = output_tile(g, part.tile);
  const int2 hl = params.tables.halo[c];
  const int EH = (th - 1) * g.a + 1 + 2 * hl.x, EW = (twd - 1) * g.a + 1 + 2 * hl.y;
  const int nwarps = blockDim.x / 32, warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const auto [soff, red, S] = carve_general_smem<acc_t>(smem, g.K, size_t(g.K) * nwarps);
  const int np = params.tables.npts[c];
  for (int j = threadIdx.x; j < np; j += blockDim.x) {
    const int2 o = toff[int64_t(c) * g.K + j];
    soff[j] = (o.x + hl.x) * EW + (o.y + hl.y);
  }
  for (int e = threadIdx.x; e < np * nwarps; e += blockDim.x) red[e] = acc_t(0);
  const int nout = th * twd;
  const FastDiv div_tw(twd);
  const int i0 = p0 * g.a - hl.x, j0 = q0 * g.a - hl.y;
  const int n_end = part.end_image(params.io.N, params.io.chunk);
  for (int n = part.first_image(params.io.chunk); n < n_end; ++n) {
    const int64_t plane = int64_t(n) * g.C + c;
    const scalar_t* xp = params.io.x + plane * g.Hs * g.Ws;
    const scalar_t* dyp = dy + plane * g.Ho * g.Wo;
    __syncthreads();  // previous image's reads of S are done
    stage_tile<scalar_t, acc_t>(S, xp, g.Hs, g.Ws, 1, i0, j0, EH, EW);
    __syncthreads();
    for (int base = 0; base < nout; base += blockDim.x * kPerThread) {
      int sb[kPerThread];
      acc_t gv[kPerThread];
#pragma unroll
      for (int r = 0; r < kPerThread; ++r) {
        const TileOutput pos = tile_output(div_tw, base + r * blockDim.x + threadIdx.x, nout, g.a, EW);
        sb[r] = pos.source;
        gv[r] = pos.valid ? static_cast<acc_t>(dyp[int64_t(p0 + pos.p) * g.Wo + q0 + pos.q]) : acc_t(0);
      }
      for (int j = 0; j < np; ++j) {
        const int so = soff[j];
        acc_t v = acc_t(0);
#pragma unroll
        for (int r = 0; r < kPerThread; ++r) v += gv[r] * S[sb[r] + so];
        v = warp_sum(v);
        if (lane == 0) red[warp * np + j] += v;
      }
    }
  }
  __syncthreads();
  for (int j = threadIdx.x; j < np; j += blockDim.x) {
    acc_t v = acc_t(0);
    for (int w = 0; w < nwarps; ++w) v += red[w * np + j];
    params.io.partial[part.row(c) * g.K + j] = v;
  }
}

// PHASES (stride 2): x staged as its four phase planes (gather_nhwc_phases_kernel), so that neighbouring
// outputs read neighbouring staged pixels; the points and their sums in the same order.
template <typename scalar_t, typename acc_t, bool PHASES = false>
__global__ void __launch_bounds__(kNhwcThreads)
    wgrad_nhwc_kernel(const GeneralWgradParams<scalar_t, acc_t> params) {
  const scalar_t* __restrict__ dy = params.io.dy;
  const PointWgradTables tables = params.tables;
  const GatherGeometry g = params.g;
  constexpr int CB = kNhwcChannels;
  const WgradPart part = wgrad_part(g.tiles, params.io.N, params.io.chunk);
  const int cg = part.c;
  const auto [p0, q0, th, twd] = output_tile(g, part.tile);
  const int cl = threadIdx.x % CB, slot = threadIdx.x / CB;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, nwarps = blockDim.x / 32;
  const int c = cg * CB + cl;
  const bool c_ok = c < g.C;

  __shared__ int s_np, s_ph, s_pw;
  block_extent(tables.npts, tables.halo, cg * CB, CB, g.C, &s_np, &s_ph, &s_pw);
  __syncthreads();
  const int np = s_np, ph = s_ph, pwid = s_pw;
  const int lh = (ph + 1) / 2, lw = (pwid + 1) / 2;  // PHASES: a plane's rows (columns) before the tile's
  const int EH = PHASES ? th + ph : (th - 1) * g.a + 1 + 2 * ph;
  const int EW = PHASES ? twd + pwid : (twd - 1) * g.a + 1 + 2 * pwid;
  extern __shared__ __align__(16) unsigned char smem[];
  const auto [soff, red, S] = carve_general_smem<acc_t>(smem, size_t(g.K) * CB, size_t(g.K) * CB * nwarps);
  for (int e = threadIdx.x; e < np * CB; e += blockDim.x) {
    const int j = e / CB, k = e - j * CB, ch = cg * CB + k;
    const int2 o = (ch < g.C && j < tables.npts[ch]) ? tables.off[int64_t(ch) * g.K + j] : make_int2(0, 0);
    if constexpr (PHASES) {
      soff[e] = (((2 * (o.x & 1) + (o.y & 1)) * EH + (o.x >> 1) + lh) * EW + (o.y >> 1) + lw) * CB;
    } else {
      soff[e] = ((o.x + ph) * EW + (o.y + pwid)) * CB;
    }
  }
  for (int e = threadIdx.x; e < np * CB * nwarps; e += blockDim.x) red[e] = acc_t(0);
  const int nout = th * twd;
  const FastDiv div_tw(twd);
  const int slots = blockDim.x / CB;
  const int i0 = p0 * g.a - ph, j0 = q0 * g.a - pwid;
  const int n_end = part.end_image(params.io.N, params.io.chunk);
  for (int n = part.first_image(params.io.chunk); n < n_end; ++n) {
    const scalar_t* xp = params.io.x + int64_t(n) * g.Hs * g.Ws * g.C + cg * CB;
    const scalar_t* dyp = dy + int64_t(n) * g.Ho * g.Wo * g.C + c;
    __syncthreads();
    if constexpr (PHASES) {
      stage_phase_planes_nhwc<scalar_t, acc_t>(S, xp, g.C, g.Hs, g.Ws, p0 - lh, q0 - lw, EH, EW, g.C - cg * CB);
    } else {
      stage_tile_nhwc<scalar_t, acc_t>(S, xp, g.C, g.Hs, g.Ws, 1, i0, j0, EH, EW, g.C - cg * CB);
    }
    __syncthreads();
    for (int base = 0; base < nout; base += slots * kPerThread) {
      int sb[kPerThread];
      acc_t gv[kPerThread];
#pragma unroll
      for (int r = 0; r < kPerThread; ++r) {
        const TileOutput pos = tile_output(div_tw, base + r * slots + slot, nout, g.a, EW);
        sb[r] = (PHASES ? (pos.valid ? pos.p * EW + pos.q : 0) : pos.source) * CB + cl;
        gv[r] = pos.valid && c_ok ? static_cast<acc_t>(dyp[(int64_t(p0 + pos.p) * g.Wo + q0 + pos.q) * g.C]) : acc_t(0);
      }
      for (int j = 0; j < np; ++j) {
        const int so = soff[j * CB + cl];
        acc_t v = acc_t(0);
#pragma unroll
        for (int r = 0; r < kPerThread; ++r) v += gv[r] * S[sb[r] + so];
        v = across_groups_sum(v, CB);  // lanes cl, cl+8, cl+16, cl+24 hold the same channel
        if (lane < CB) red[(warp * np + j) * CB + cl] += v;
      }
    }
  }
  __syncthreads();
  for (int e = threadIdx.x; e < np * CB; e += blockDim.x) {
    const int j = e / CB, k = e - j * CB, ch = cg * CB + k;
    if (ch >= g.C || j >= tables.npts[ch]) continue;
    acc_t v = acc_t(0);
    for (int w = 0; w < nwarps; ++w) v += red[(w * np + j) * CB + k];
    params.io.partial[part.row(ch) * g.K + j] = v;
  }
}

}  // namespace cuda
}  // namespace mmo1d
