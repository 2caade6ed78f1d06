// The general weight-gradient kernels (per-block partial sums, NCHW and channels_last).
#pragma once

#include "../common/cuda_context.h"
#include "../common/launch.cuh"
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

// The start of a channels_last weight-gradient block over the kNhwcChannels channels of group cg
// and a th x twd output tile: its channels' largest point count and halo (block_extent), and the
// extent EH x EW of its staged tile.
struct NhwcWgradBlock {
  int np, ph, pw, EH, EW;
};

__device__ __forceinline__ NhwcWgradBlock nhwc_wgrad_block(const PointWgradTables& tables, const GatherGeometry& g,
                                                           int cg, int th, int twd) {
  __shared__ int s_np, s_ph, s_pw;
  block_extent(tables.npts, tables.halo, cg * kNhwcChannels, kNhwcChannels, g.C, &s_np, &s_ph, &s_pw);
  __syncthreads();
  const int ph = s_ph, pw = s_pw;
  return NhwcWgradBlock{s_np, ph, pw, (th - 1) * g.a + 1 + 2 * ph, (twd - 1) * g.a + 1 + 2 * pw};
}

// Each of the block's points' offsets in its staged tile b, times kNhwcChannels (the staged
// pixel's first element), into soff[point * kNhwcChannels + channel]; a channel's points past its
// own count read the tile's origin.
__device__ __forceinline__ void nhwc_wgrad_offsets(const PointWgradTables& tables, const GatherGeometry& g, int cg,
                                                   const NhwcWgradBlock& b, int* soff) {
  constexpr int CB = kNhwcChannels;
  for (int e = threadIdx.x; e < b.np * CB; e += blockDim.x) {
    const int j = e / CB, k = e - j * CB, ch = cg * CB + k;
    const int2 o = (ch < g.C && j < tables.npts[ch]) ? tables.off[int64_t(ch) * g.K + j] : make_int2(0, 0);
    soff[e] = ((o.x + b.ph) * b.EW + (o.y + b.pw)) * CB;
  }
}

template <typename scalar_t, typename acc_t>
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

  const NhwcWgradBlock b = nhwc_wgrad_block(tables, g, cg, th, twd);
  const auto [np, ph, pwid, EH, EW] = b;
  extern __shared__ __align__(16) unsigned char smem[];
  const auto [soff, red, S] = carve_general_smem<acc_t>(smem, size_t(g.K) * CB, size_t(g.K) * CB * nwarps);
  nhwc_wgrad_offsets(tables, g, cg, b, soff);
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
    stage_tile_nhwc<scalar_t, acc_t>(S, xp, g.C, g.Hs, g.Ws, 1, i0, j0, EH, EW, g.C - cg * CB, EW * CB);
    __syncthreads();
    for (int base = 0; base < nout; base += slots * kPerThread) {
      int sb[kPerThread];
      acc_t gv[kPerThread];
#pragma unroll
      for (int r = 0; r < kPerThread; ++r) {
        const TileOutput pos = tile_output(div_tw, base + r * slots + slot, nout, g.a, EW);
        sb[r] = pos.source * CB + cl;
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

// The channels_last weight gradient on small tiles (stride 2 with long lines: a K=31 bilinear block
// covers 4 x 8 outputs, which wgrad_nhwc_kernel's 32 pixel slots x kPerThread would leave 7/8 idle):
// the points across the slots instead. Lane = 8 * point slot + channel; a thread owns points ps,
// ps + 32, ... (kGeneralAcrossPoints at a time) and sums dy x x over the tile's outputs in registers, with no
// sum across the slots. dy's tile (at most kNhwcTile^2 outputs) is staged beside x's.
template <typename scalar_t, typename acc_t>
__global__ void __launch_bounds__(kNhwcThreads, 2)
    wgrad_nhwc_across_kernel(const GeneralWgradParams<scalar_t, acc_t> params) {
  const PointWgradTables tables = params.tables;
  const GatherGeometry g = params.g;
  constexpr int CB = kNhwcChannels, SLOTS = kNhwcThreads / CB, PTS = kGeneralAcrossPoints;
  const WgradPart part = wgrad_part(g.tiles, params.io.N, params.io.chunk);
  const int cg = part.c;
  const auto [p0, q0, th, twd] = output_tile(g, part.tile);
  const int cl = threadIdx.x % CB, ps = threadIdx.x / CB;
  const int c = cg * CB + cl;

  const NhwcWgradBlock b = nhwc_wgrad_block(tables, g, cg, th, twd);
  const auto [np, ph, pwid, EH, EW] = b;
  extern __shared__ __align__(16) unsigned char smem[];
  const auto [soff, Sdy, S] = carve_general_smem<acc_t>(smem, size_t(g.K) * CB, size_t(kNhwcTile) * kNhwcTile * CB);
  nhwc_wgrad_offsets(tables, g, cg, b, soff);
  __syncthreads();
  const int nout = th * twd;
  const int i0 = p0 * g.a - ph, j0 = q0 * g.a - pwid;
  const int n_end = part.end_image(params.io.N, params.io.chunk);
  for (int jb0 = 0; jb0 < np; jb0 += SLOTS * PTS) {  // every thread: the loop holds barriers
    const int jb = jb0 + ps;
    int so[PTS];
    acc_t acc[PTS];
#pragma unroll
    for (int u = 0; u < PTS; ++u) {
      const int j = jb + u * SLOTS;
      so[u] = (j < np ? soff[j * CB + cl] : 0) + cl;
      acc[u] = acc_t(0);
    }
    for (int n = part.first_image(params.io.chunk); n < n_end; ++n) {
      const scalar_t* xp = params.io.x + int64_t(n) * g.Hs * g.Ws * g.C + cg * CB;
      const scalar_t* dyp = params.io.dy + int64_t(n) * g.Ho * g.Wo * g.C + cg * CB;
      __syncthreads();  // the previous image's reads of S and Sdy are done
      stage_tile_nhwc<scalar_t, acc_t>(S, xp, g.C, g.Hs, g.Ws, 1, i0, j0, EH, EW, g.C - cg * CB, EW * CB);
      for (int e = threadIdx.x; e < nout * CB; e += blockDim.x) {
        const int o = e / CB, k = e - o * CB, p = o / twd, q = o - p * twd;
        Sdy[e] = cg * CB + k < g.C ? static_cast<acc_t>(dyp[(int64_t(p0 + p) * g.Wo + q0 + q) * g.C + k]) : acc_t(0);
      }
      __syncthreads();
      for (int p = 0; p < th; ++p) {
        const acc_t* dyr = Sdy + p * twd * CB + cl;
        const acc_t* sr = S + p * g.a * EW * CB;
        for (int q = 0; q < twd; ++q) {
          const acc_t gv = dyr[q * CB];
          const acc_t* sq = sr + q * g.a * CB;
#pragma unroll
          for (int u = 0; u < PTS; ++u) acc[u] += gv * sq[so[u]];
        }
      }
    }
    if (c < g.C) {
#pragma unroll
      for (int u = 0; u < PTS; ++u) {
        const int j = jb + u * SLOTS;
        if (j < tables.npts[c]) params.io.partial[part.row(c) * g.K + j] = acc[u];
      }
    }
  }
}

}  // namespace cuda
}  // namespace mmo1d
