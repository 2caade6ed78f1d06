// Shared point lists for the channels_last kernels of the interpolated taps: the points of every
// channel of a block of CB channels (the channels one block of the window, vector and weight-gradient
// kernels stages) are replaced by the union of the block's points, in one order, each channel
// weighting the points it does not read by 0. The block's lanes then walk one list with one vector
// load per point, instead of walking their channels' lists one channel at a time (learned angles
// differ from channel to channel; neighbouring angles read almost the same pixels). A block whose
// union would not fit a table row keeps its channels' own lists. The vector families take the united
// rows (unite_interp_blocks); the window family the union's runs (interp_win/interp_win_segments.cuh).
#pragma once

#include <ATen/core/Tensor.h>
#include <ATen/ops/empty.h>

#include "cuda_context.h"
#include "interp_segments.cuh"
#include "interp_tables.cuh"

namespace mmo1d {
namespace cuda {

// The arguments of interp_block_union_kernel, built by its launcher.
struct InterpUnionParams {
  const int2* off;
  const float* pw;
  const int* npts;
  int C;
  int rows;
  int h;
  int cap;
  int2* uoff;
  float* uw;
  int* unpts;
  int* usame;
  int* umap;
};

// The union of the first npts[c] points (offsets off, rows per channel; within h) of the nch channels
// from c0, a warp per channel (CB warps, the whole block calls it): point_of (the (2 h + 1)^2 cells)
// marks the union's points. Returns their number (in every thread); when it is at most cap, also
// numbers them in the order of their offsets (row major): point_of[cell] = 1 + its index, s_off[index]
// its offset. s_warp: CB ints of scratch.
template <int CB>
__device__ __forceinline__ int unite_block_points(const int2* __restrict__ off, const int* __restrict__ npts, int c0,
                                                  int nch, int rows, int h, int cap, int* point_of, int2* s_off,
                                                  int* s_warp) {
  constexpr int kWarps = CB, kUnionThreads = 32 * CB;
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const int side = 2 * h + 1, cells = side * side;
  for (int i = tid; i < cells; i += kUnionThreads) point_of[i] = 0;
  __syncthreads();
  for (int k = warp; k < nch; k += kWarps) {  // channels in parallel: an atomic marks each cell
    const int64_t base = int64_t(c0 + k) * rows;
    for (int j = lane; j < npts[c0 + k]; j += 32) {
      const int2 o = off[base + j];
      atomicOr(&point_of[(o.x + h) * side + o.y + h], 1);
    }
  }
  __syncthreads();
  // Number the marked cells in order: each thread counts a contiguous range, then a prefix sum.
  const int per = (cells + kUnionThreads - 1) / kUnionThreads;
  const int beg = min(cells, tid * per), end = min(cells, beg + per);
  int count = 0;
  for (int i = beg; i < end; ++i) count += point_of[i];
  int incl = warp_inclusive_sum(count);
  if (lane == 31) s_warp[warp] = incl;
  __syncthreads();
  int total = 0;
#pragma unroll
  for (int w = 0; w < kWarps; ++w) {
    if (w < warp) incl += s_warp[w];
    total += s_warp[w];
  }
  if (total > cap) return total;
  int next = incl - count;
  for (int i = beg; i < end; ++i) {
    if (point_of[i] != 0) {
      s_off[next] = make_int2(i / side - h, i % side - h);
      point_of[i] = ++next;
    }
  }
  __syncthreads();
  return total;
}

// One block per block of CB channels (blockIdx.x; C need not be a multiple of CB), a warp per
// channel (the kernel waits on its loads: a warp that took several channels walked them one after
// the other). From the first npts[c] points of the tables (offsets off, weights pw, rows per channel;
// offsets within h): uoff, uw (C, rows) and unpts (C) the block's union of points in the order of
// their offsets (row major), each channel's weights scattered to its points and 0 elsewhere; or, when
// the union has more than `cap` points, each channel's own points. usame: channel c reads the points
// of channel c - 1 (within a united block every channel but the first). umap (optional, C x rows):
// the row of each of a channel's own points in its new row (0 beyond its points).
template <int CB>
__global__ void __launch_bounds__(32 * CB)
    interp_block_union_kernel(const InterpUnionParams params) {
  const int2* __restrict__ off = params.off;
  const float* __restrict__ pw = params.pw;
  const int* __restrict__ npts = params.npts;
  int rows = params.rows;
  int h = params.h;
  int2* __restrict__ uoff = params.uoff;
  float* __restrict__ uw = params.uw;
  int* __restrict__ unpts = params.unpts;
  int* __restrict__ usame = params.usame;
  int* __restrict__ umap = params.umap;
  constexpr int kWarps = CB;
  __shared__ int point_of[kSegGridCells];  // 1 + the union point at each offset, 0 for none
  __shared__ int2 s_off[kSegMaxPoints];
  __shared__ int s_warp[kWarps];
  const int c0 = blockIdx.x * CB, lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int side = 2 * h + 1, nch = min(CB, params.C - c0);
  const int total = unite_block_points<CB>(off, npts, c0, nch, rows, h, params.cap, point_of, s_off, s_warp);
  if (total > params.cap) {  // keep the own lists
    for (int k = warp; k < nch; k += kWarps) {
      const int c = c0 + k, n = npts[c];
      const int64_t base = int64_t(c) * rows;
      bool same = c > 0 && n == npts[c - 1];
      for (int j = lane; j < n; j += 32) {
        const int2 o = off[base + j];
        uoff[base + j] = o;
        uw[base + j] = pw[base + j];
        if (same) {
          const int2 p = off[base - rows + j];
          same = o.x == p.x && o.y == p.y;
        }
      }
      same = __all_sync(0xffffffffu, same);
      if (lane == 0) {
        unpts[c] = n;
        usame[c] = same;
      }
      for (int j = lane; umap != nullptr && j < rows; j += 32) umap[base + j] = j < n ? j : 0;
    }
    return;
  }
  for (int k = warp; k < nch; k += kWarps) {
    const int c = c0 + k;
    const int64_t base = int64_t(c) * rows;
    for (int u = lane; u < total; u += 32) {
      uoff[base + u] = s_off[u];
      uw[base + u] = 0.0f;
    }
    if (lane == 0) {
      unpts[c] = total;
      usame[c] = k > 0;
    }
    __syncwarp();  // the zeros are written before the weights
    for (int j = lane; j < npts[c]; j += 32) {
      const int2 o = off[base + j];
      const int u = point_of[(o.x + h) * side + o.y + h] - 1;
      uw[base + u] = pw[base + j];
      if (umap != nullptr) umap[base + j] = u;
    }
    for (int j = npts[c] + lane; umap != nullptr && j < rows; j += 32) umap[base + j] = 0;
  }
}

// The tables of unite_interp_blocks: off (C, R) | npts (C) | same (C) [| map (C, R)] and the weights
// (C, R).
struct InterpUnion {
  at::Tensor ints, weights;
  int64_t C = 0, R = 0;
  const int2* off() const { return reinterpret_cast<const int2*>(ints.data_ptr<int>()); }
  const int* npts() const { return ints.data_ptr<int>() + 2 * C * R; }
  const int* same() const { return npts() + C; }
  const float* w() const { return weights.data_ptr<float>(); }
  // The row of each point of tables t in the united rows (with_map).
  at::Tensor map() const { return ints.narrow(0, 2 * C * R + 2 * C, C * R).view({C, R}); }
  // As the point kernels read them, with the halos of the tables they unite.
  PointTableView<float> view(const int2* halo) const { return PointTableView<float>{off(), w(), npts(), halo, same()}; }
};

// The block-shared lists of the first npts[c] points of tables t, for blocks of CB channels;
// offsets within h (the grid of the segment builder: (2 h + 1)^2 <= kSegGridCells). with_map: also
// the row of each point of t in the new rows, for sums taken at the united points.
template <int CB>
InterpUnion unite_interp_blocks(const InterpTables<float>& t, const int* npts, int h, bool with_map = false) {
  InterpUnion u;
  u.C = t.C;
  u.R = t.R;
  u.ints = at::empty({2 * t.C * t.R + 2 * t.C + (with_map ? t.C * t.R : 0)}, t.ints.options());
  u.weights = at::empty({t.C * t.R}, t.accs.options());
  int* ip = u.ints.data_ptr<int>();
  const int cap = static_cast<int>(std::min<int64_t>(t.R, kSegMaxPoints));
  const InterpUnionParams params{
      .off = t.off(),
      .pw = t.w(),
      .npts = npts,
      .C = static_cast<int>(t.C),
      .rows = static_cast<int>(t.R),
      .h = h,
      .cap = cap,
      .uoff = reinterpret_cast<int2*>(ip),
      .uw = u.weights.data_ptr<float>(),
      .unpts = ip + 2 * t.C * t.R,
      .usame = ip + 2 * t.C * t.R + t.C,
      .umap = with_map ? ip + 2 * t.C * t.R + 2 * t.C : nullptr};
  launch_on_stream(interp_block_union_kernel<CB>, ceil_div(t.C, int64_t(CB)), 32 * CB, 0, params);
  return u;
}

}  // namespace cuda
}  // namespace mmo1d
