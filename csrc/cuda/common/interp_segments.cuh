// Segment tables of the interpolated taps' points (interp_tables.cuh), in the layout of the rounded
// taps' SegTables (tables.cuh), for the segment-window kernels (channels_last window, NCHW gather and
// weight gradient): per channel the axis along which the points form the fewest runs, the runs
// (first point, length, first weight slot) and the merged weights in run order. Built at each call
// (the angles learn). A bilinear line near an axis is two or three long runs along it; between the
// axes and the diagonals, a run of a few points per row.
#pragma once

#include <ATen/core/Tensor.h>
#include <ATen/ops/empty.h>

#include "cuda_context.h"
#include "interp_tables.cuh"
#include "tables.cuh"

namespace mmo1d {
namespace cuda {

// The cells of the occupancy grid (2 h + 1)^2 over the offsets |dh|, |dw| <= h, and the most
// points a channel may have (a cell holds a point's index in a byte; 255 marks an empty one).
constexpr int kSegGridCells = 2048;
constexpr int kSegMaxPoints = 255;
constexpr int kSegWarps = 4;  // channels per block of the segment builder

// A warp's byte grid of its points' indices over the offsets within h (side = 2 h + 1; 255: none).
struct PointGrid {
  const unsigned char* cells;
  int h, side;
  // The point at offset (dh, dw), or -1.
  __device__ __forceinline__ int operator()(int dh, int dw) const {
    if (dh < -h || dh > h || dw < -h || dw > h) return -1;
    const int q = cells[(dh + h) * side + dw + h];
    return q == 255 ? -1 : q;
  }
};

// How many of a warp's n points have no point before them along the axis `mode` (the runs along it),
// in every lane: offset(j) is point j's offset, at(dh, dw) the index of the point at an offset (-1: none).
template <typename Offset, typename At>
__device__ __forceinline__ int warp_axis_runs(int n, int mode, const Offset& offset, const At& at) {
  const int lane = threadIdx.x & 31;
  int ui, uj;
  mode_step(mode, &ui, &uj);
  int runs = 0;
  for (int j = lane; j < n; j += 32) {
    const int2 o = offset(j);
    runs += at(o.x - ui, o.y - uj) < 0;
  }
  return warp_sum(runs);
}

// One round of a warp's listing of runs, 32 points a round in the order of their index: the lane
// whose point `begins` a run of len points gets its place in the list and its first slot through
// run(index, s0); nseg and slot (the runs and points listed so far, the same in every lane) advance.
template <typename Run>
__device__ __forceinline__ void warp_list_runs(bool begins, int len, int* nseg, int* slot, const Run& run) {
  const unsigned starts = __ballot_sync(0xffffffffu, begins);
  const int incl = warp_inclusive_sum(len);  // the run lengths of this lane and the lanes before it
  if (begins) run(*nseg + __popc(starts & ((1u << (threadIdx.x & 31)) - 1u)), *slot + incl - len);
  *nseg += __popc(starts);
  *slot += __shfl_sync(0xffffffffu, incl, 31);
}

// A warp's runs of n points along one of the four axes of mode_step, the axis with the fewest runs
// (the first of equals), listed in the order of their first point's index (offset and at: as
// warp_axis_runs takes them). run(index, dh, dw, len, s0, ui, uj) in the lane that starts a run: its
// place in the list, its first point, its length and its first slot (the slots number the points in
// run order). The lanes take the points 32 at a time; a lane whose point starts a run walks it.
// Returns {axis, runs}, the same in every lane.
template <typename Offset, typename At, typename Run>
__device__ __forceinline__ int2 warp_point_runs(int n, const Offset& offset, const At& at, const Run& run) {
  const int lane = threadIdx.x & 31;
  int mode = 0, best = n + 1;
  for (int m = 0; m < 4; ++m) {
    const int runs = warp_axis_runs(n, m, offset, at);
    if (runs < best) {
      best = runs;
      mode = m;
    }
  }
  int ui, uj;
  mode_step(mode, &ui, &uj);
  int nseg = 0, slot = 0;  // the same in every lane
  for (int j0 = 0; j0 < n; j0 += 32) {
    const int j = j0 + lane;
    int dh = 0, dw = 0, len = 0;
    bool start = false;
    if (j < n) {
      const int2 o = offset(j);
      dh = o.x;
      dw = o.y;
      start = at(dh - ui, dw - uj) < 0;
      while (start && at(dh + len * ui, dw + len * uj) >= 0) ++len;
    }
    warp_list_runs(start, len, &nseg, &slot, [&](int s, int s0) { run(s, dh, dw, len, s0, ui, uj); });
  }
  return make_int2(mode, nseg);
}

// One warp per channel (kSegWarps channels per block): the first npts[c] points of row c (offsets
// sign * off, weights pw; rows per channel) as runs (warp_point_runs); slots beyond the channel's
// points get weight 0. same (optional): the channels' same-as-previous flags. slot_of (optional):
// each point's slot in run order (0 beyond the channel's points). The walks read the channel's
// offsets and weights staged in shared memory (a walk is a chain of dependent reads). The window
// family builds its tables from the blocks' unions instead (interp_win/interp_win_segments.cuh).
__global__ static void __launch_bounds__(32 * kSegWarps)
    interp_segments_kernel(const int2* __restrict__ off, const float* __restrict__ pw, const int* __restrict__ npts,
                           const int* __restrict__ same, int C, int rows, int h, int sign, SegInfo* __restrict__ info,
                           int4* __restrict__ segs, float* __restrict__ segw, int* __restrict__ slot_of) {
  __shared__ unsigned char grids[kSegWarps][kSegGridCells];
  __shared__ int2 offs[kSegWarps][kSegMaxPoints];
  __shared__ float weights[kSegWarps][kSegMaxPoints];
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int c = blockIdx.x * kSegWarps + warp;
  if (c >= C) return;  // a whole warp; the warps never synchronise with each other
  unsigned char* grid = grids[warp];
  int2* soff = offs[warp];
  float* sw = weights[warp];
  const int side = 2 * h + 1, cells = side * side, n = npts[c];
  const int64_t base = int64_t(c) * rows;
  for (int i = lane; i < cells; i += 32) grid[i] = 255;
  __syncwarp();
  for (int j = lane; j < n; j += 32) {
    const int2 g = off[base + j], o = make_int2(sign * g.x, sign * g.y);
    soff[j] = o;
    sw[j] = pw[base + j];
    grid[(o.x + h) * side + o.y + h] = static_cast<unsigned char>(j);
  }
  __syncwarp();
  const PointGrid at{grid, h, side};
  const int2 runs = warp_point_runs(
      n, [&](int j) { return soff[j]; }, at,
      [&](int s, int dh, int dw, int len, int s0, int ui, int uj) {
        segs[base + s] = make_int4(dh, dw, len, s0);
        for (int l = 0; l < len; ++l) {
          const int q = at(dh + l * ui, dw + l * uj);
          segw[base + s0 + l] = sw[q];
          if (slot_of != nullptr) slot_of[base + q] = s0 + l;
        }
      });
  for (int k = n + lane; k < rows; k += 32) {
    segw[base + k] = 0.0f;
    if (slot_of != nullptr) slot_of[base + k] = 0;
  }
  if (lane == 0) info[c] = SegInfo{runs.x, runs.y, n, same != nullptr ? same[c] : 0};
}

// The segment tables of a gather with offsets sign * off; with slots, also each point's slot (C, R).
struct InterpSegments {
  at::Tensor ints, weights;  // ints: info (C * 4) | segs (C * R * 4) | slot_of (C * R, with slots)
  int64_t C, R;
  // Uninitialised tables of C channels of R rows, on the device of `like`.
  static InterpSegments empty(int64_t C, int64_t R, const at::Tensor& like, bool slots = false) {
    return InterpSegments{at::empty({4 * C + (slots ? 5 : 4) * C * R}, like.options().dtype(at::kInt)),
                          at::empty({C * R}, like.options().dtype(at::kFloat)), C, R};
  }
  SegInfo* info() const { return reinterpret_cast<SegInfo*>(ints.data_ptr<int>()); }
  int4* segs() const { return reinterpret_cast<int4*>(ints.data_ptr<int>() + 4 * C); }
  float* w() const { return weights.data_ptr<float>(); }
  at::Tensor slot_of() const { return ints.narrow(0, 4 * C + 4 * C * R, C * R).view({C, R}); }
  // As the segment kernels read them, with the halos of the points they were built from.
  SegTableView view(const int2* halo) const { return SegTableView{info(), segs(), w(), halo}; }
};

// The segment tables of the first npts points of tables t (their same flags if built with_same):
// offsets sign * off, one warp a channel.
inline InterpSegments build_interp_segments(const InterpTables<float>& t, const int* npts, int h, int sign,
                                            bool slots = false) {
  const InterpSegments s = InterpSegments::empty(t.C, t.R, t.ints, slots);
  const int* same = t.same.defined() ? t.same.data_ptr<int>() : nullptr;
  interp_segments_kernel<<<ceil_div(t.C, int64_t(kSegWarps)), 32 * kSegWarps, 0, at::cuda::getCurrentCUDAStream()>>>(
      t.off(), t.w(), npts, same, static_cast<int>(t.C), static_cast<int>(t.R), h, sign, s.info(), s.segs(), s.w(),
      slots ? s.slot_of().data_ptr<int>() : nullptr);
  MMO1D_CUDA_CHECK(cudaGetLastError());
  return s;
}

}  // namespace cuda
}  // namespace mmo1d
