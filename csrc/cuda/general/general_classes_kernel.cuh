// The general input gradient at stride 2 by parity class, channels_last and NCHW. The gather over dy
// upsampled by 2 reads a nonzero value for an output of parity class (a, b) (the parities of its row
// and column) only at the points of the same parities, so each class walks a list of its own points,
// and the block stages dy itself, not its upsampled zeros: output row P reads dy row
// P / 2 + (a + sign * dh) / 2 at a point of row offset dh (an exact division), columns alike.
#pragma once

#include "general_kernel.cuh"

namespace mmo1d {
namespace cuda {

constexpr int kParityClasses = 4;
constexpr int kClassSlots = 8;  // pixel slots of a class: two warps of 4 slots x kNhwcChannels lanes

// One warp sorts channel ch's np points into the four parity classes' lists, in table order: store(k,
// rank, so, w) puts class k's point number rank (its dy offset so in the staged tile, EW pixels a row
// with a halo of hh rows and hw columns, and its weight w); count[k] ends as class k's number of points.
template <typename acc_t, typename Store>
__device__ __forceinline__ void sort_points_by_class(const int2* __restrict__ toff, const acc_t* __restrict__ tw,
                                                     int ch, int np, const GatherGeometry& g, int hh, int hw, int EW,
                                                     int lane, int (&count)[kParityClasses], Store store) {
  for (int j0 = 0; j0 < np; j0 += 32) {
    const int j = j0 + lane;
    int q = -1, so = 0;
    acc_t w = acc_t(0);
    if (j < np) {
      const int2 o = toff[int64_t(ch) * g.K + j];
      w = tw[int64_t(ch) * g.K + j];
      q = 2 * (o.x & 1) + (o.y & 1);
      so = (((o.x & 1) + g.sign * o.x) / 2 + hh) * EW + ((o.y & 1) + g.sign * o.y) / 2 + hw;
    }
#pragma unroll
    for (int k = 0; k < kParityClasses; ++k) {
      const unsigned m = __ballot_sync(0xffffffffu, q == k);
      if (q == k) store(k, count[k] + __popc(m & ((1u << lane) - 1)), so, w);
      count[k] += __popc(m);
    }
  }
}

// One block per (image, output tile, 8 channels) as gather_nhwc_kernel; warps 2k and 2k + 1 take
// parity class k = 2a + b, each thread 8 of its outputs. The lists keep the table's order of points,
// so each output's sum is gather_nhwc_kernel's without its zero terms.
template <typename scalar_t, typename acc_t>
__global__ void __launch_bounds__(kNhwcThreads, kNhwcGatherMinBlocks<scalar_t>)
    gather_nhwc_classes_kernel(const scalar_t* __restrict__ src, scalar_t* __restrict__ out,
                               const scalar_t* __restrict__ bias, const int2* __restrict__ toff,
                               const acc_t* __restrict__ tw, const int* __restrict__ tnpts,
                               const int2* __restrict__ thalo, const GatherGeometry g) {
  constexpr int CB = kNhwcChannels;
  static_assert(kNhwcThreads == kParityClasses * kClassSlots * CB && kNhwcThreads / 32 == CB,
                "two warps a parity class, one warp a channel to sort the points");
  extern __shared__ __align__(16) unsigned char smem[];
  int64_t n;
  int cg, tile;
  nhwc_block(g, &n, &cg, &tile);
  const auto [p0, q0, th, twd] = output_tile(g, tile);
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, cl = threadIdx.x % CB;
  const int cls = threadIdx.x / (kClassSlots * CB), slot = (threadIdx.x / CB) % kClassSlots;
  const int c = cg * CB + cl;

  __shared__ int s_np, s_ph, s_pw;
  __shared__ int s_count[kParityClasses][CB], s_class_np[kParityClasses];
  block_extent(tnpts, thalo, cg * CB, CB, g.C, &s_np, &s_ph, &s_pw);
  __syncthreads();
  const int hh = (s_ph + 1) / 2, hw = (s_pw + 1) / 2;
  const int EH = (p0 + th - 1) / 2 - p0 / 2 + 1 + 2 * hh, EW = (q0 + twd - 1) / 2 - q0 / 2 + 1 + 2 * hw;
  const size_t list = size_t(g.K) * CB;  // a class's list: up to K points of each channel
  constexpr bool kBytes = kByteOffsets<acc_t>;
  constexpr int kUnit = kBytes ? sizeof(acc_t) : 1;  // of the offsets in the staged tile
  const auto [soff, sw, S] = carve_general_smem<acc_t>(smem, kParityClasses * list, kParityClasses * list);
  {
    // Warp k sorts channel k's points into the classes' lists, in table order.
    const int ch = cg * CB + warp;
    const int np = ch < g.C ? tnpts[ch] : 0;
    int count[kParityClasses] = {0, 0, 0, 0};
    sort_points_by_class(toff, tw, ch, np, g, hh, hw, EW, lane, count, [&](int k, int rank, int so, acc_t w) {
      const size_t e = k * list + size_t(rank) * CB + warp;
      soff[e] = so * CB * kUnit;
      sw[e] = w;
    });
    if (lane == 0) {
#pragma unroll
      for (int k = 0; k < kParityClasses; ++k) s_count[k][warp] = count[k];
    }
  }
  __syncthreads();
  if (threadIdx.x < kParityClasses) {
    int m = 0;
    for (int k = 0; k < CB; ++k) m = max(m, s_count[threadIdx.x][k]);
    s_class_np[threadIdx.x] = m;
  }
  __syncthreads();
  // Each class's list padded to its longest channel's with zero weights at the centre.
  for (int e = threadIdx.x; e < kParityClasses * g.K * CB; e += blockDim.x) {
    const int k = e / (g.K * CB), j = (e / CB) % g.K, ch = e % CB;
    if (j >= s_count[k][ch] && j < s_class_np[k]) {
      soff[e] = (hh * EW + hw) * CB * kUnit;
      sw[e] = acc_t(0);
    }
  }
  const scalar_t* sp = src + n * g.Hs * g.Ws * g.C + cg * CB;
  stage_tile_nhwc<scalar_t, acc_t>(S, sp, g.C, g.Hs, g.Ws, 1, p0 / 2 - hh, q0 / 2 - hw, EH, EW, g.C - cg * CB, EW * CB);
  __syncthreads();

  // This class's outputs: rows ps, ps + 2, ... of the tile (rows_c of them), columns alike.
  const int a = cls >> 1, b = cls & 1;
  const int ps = (a - p0) & 1, qs = (b - q0) & 1;
  const int rows_c = th > ps ? (th - ps + 1) / 2 : 0, cols_c = twd > qs ? (twd - qs + 1) / 2 : 0;
  const int nout = rows_c * cols_c;
  const int r0 = (p0 + ps) / 2 - p0 / 2, c0 = (q0 + qs) / 2 - q0 / 2;  // dy rows and columns past the tile's first
  const int np = s_class_np[cls];
  const int* __restrict__ loff = soff + cls * list + cl;
  const acc_t* __restrict__ lw = sw + cls * list + cl;
  const acc_t bv = (bias != nullptr && c < g.C) ? static_cast<acc_t>(bias[c]) : acc_t(0);
  const FastDiv div_c(max(cols_c, 1));
  scalar_t* op = out + n * g.Ho * g.Wo * g.C + c;
  for (int base = 0; base < nout; base += kClassSlots * kPerThread) {
    int sb[kPerThread];
    acc_t acc[kPerThread];
#pragma unroll
    for (int r = 0; r < kPerThread; ++r) {
      const int t = base + r * kClassSlots + slot;
      const auto [u, v] = div_c.divmod(t);
      sb[r] = (t < nout ? ((r0 + u) * EW + c0 + v) * CB + cl : cl) * kUnit;
      acc[r] = bv;
    }
    sum_points<acc_t, kPerThread, kBytes>(acc, sb, S, loff, lw, np, CB);
    if (c < g.C) {
#pragma unroll
      for (int r = 0; r < kPerThread; ++r) {
        const int t = base + r * kClassSlots + slot;
        if (t < nout) {
          const auto [u, v] = div_c.divmod(t);
          op[(int64_t(p0 + ps + 2 * u) * g.Wo + q0 + qs + 2 * v) * g.C] = static_cast<scalar_t>(acc[r]);
        }
      }
    }
  }
}

// The NCHW input gradient at stride 2 by parity class, as gather_nhwc_classes_kernel: one block per
// (plane, output tile), blockDim / 4 threads a class (a multiple of 32, nchw_class_threads), each 8 of
// its outputs a round; warp 0 sorts the channel's points into the classes' lists.
template <typename scalar_t, typename acc_t>
__global__ void gather_nchw_classes_kernel(const scalar_t* __restrict__ src, scalar_t* __restrict__ out,
                                           const scalar_t* __restrict__ bias, const int2* __restrict__ toff,
                                           const acc_t* __restrict__ tw, const int* __restrict__ tnpts,
                                           const int2* __restrict__ thalo, const GatherGeometry g) {
  extern __shared__ __align__(16) unsigned char smem[];
  __shared__ int s_count[kParityClasses];
  const int64_t plane = blockIdx.x / g.tiles;
  const int c = static_cast<int>(plane % g.C);
  const auto [p0, q0, th, twd] = output_tile(g, static_cast<int>(blockIdx.x % g.tiles));
  const int2 hl = thalo[c];
  const int hh = (hl.x + 1) / 2, hw = (hl.y + 1) / 2;
  const int EH = (p0 + th - 1) / 2 - p0 / 2 + 1 + 2 * hh, EW = (q0 + twd - 1) / 2 - q0 / 2 + 1 + 2 * hw;
  const auto [soff, sw, S] = carve_general_smem<acc_t>(smem, kParityClasses * g.K, kParityClasses * g.K);
  if (threadIdx.x < 32) {
    const int lane = threadIdx.x;
    const int np = tnpts[c];
    int count[kParityClasses] = {0, 0, 0, 0};
    sort_points_by_class(toff, tw, c, np, g, hh, hw, EW, lane, count, [&](int k, int rank, int so, acc_t w) {
      soff[k * g.K + rank] = so;
      sw[k * g.K + rank] = w;
    });
    if (lane == 0) {
#pragma unroll
      for (int k = 0; k < kParityClasses; ++k) s_count[k] = count[k];
    }
  }
  stage_tile<scalar_t, acc_t>(S, src + plane * g.Hs * g.Ws, g.Hs, g.Ws, 1, p0 / 2 - hh, q0 / 2 - hw, EH, EW);
  __syncthreads();

  const int group = blockDim.x / kParityClasses;
  const int cls = threadIdx.x / group, slot = threadIdx.x % group;
  const int a = cls >> 1, b = cls & 1;
  const int ps = (a - p0) & 1, qs = (b - q0) & 1;
  const int rows_c = th > ps ? (th - ps + 1) / 2 : 0, cols_c = twd > qs ? (twd - qs + 1) / 2 : 0;
  const int nout = rows_c * cols_c;
  const int r0 = (p0 + ps) / 2 - p0 / 2, c0 = (q0 + qs) / 2 - q0 / 2;
  const int np = s_count[cls];
  const int* __restrict__ loff = soff + cls * g.K;
  const acc_t* __restrict__ lw = sw + cls * g.K;
  const acc_t bv = bias != nullptr ? static_cast<acc_t>(bias[c]) : acc_t(0);
  const FastDiv div_c(max(cols_c, 1));
  scalar_t* op = out + plane * g.Ho * g.Wo;
  for (int base = 0; base < nout; base += group * kPerThread) {
    int sb[kPerThread];
    acc_t acc[kPerThread];
#pragma unroll
    for (int r = 0; r < kPerThread; ++r) {
      const int t = base + r * group + slot;
      const auto [u, v] = div_c.divmod(t);
      sb[r] = t < nout ? (r0 + u) * EW + c0 + v : 0;
      acc[r] = bv;
    }
    sum_points(acc, sb, S, loff, lw, np, 1);
#pragma unroll
    for (int r = 0; r < kPerThread; ++r) {
      const int t = base + r * group + slot;
      if (t < nout) {
        const auto [u, v] = div_c.divmod(t);
        op[int64_t(p0 + ps + 2 * u) * g.Wo + q0 + qs + 2 * v] = static_cast<scalar_t>(acc[r]);
      }
    }
  }
}

}  // namespace cuda
}  // namespace mmo1d
