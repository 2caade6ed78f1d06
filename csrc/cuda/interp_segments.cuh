// Segment tables of the interpolated taps' points (interp_tables.cuh), in the layout of the rounded
// taps' SegTables (tables.cuh), for the segment-window kernels (channels_last window, NCHW gather and
// weight gradient): per channel the axis along which the points form the fewest runs, the runs
// (first point, length, first weight slot) and the merged weights in run order. Built at each call
// (the angles learn). A bilinear line near an axis is two or three long runs along it; between the
// axes and the diagonals, a run of a few points per row.
#pragma once

#include <ATen/ATen.h>
#include <ATen/cuda/CUDAContext.h>

#include "interp_tables.cuh"
#include "tables.cuh"

namespace mmo1d {
namespace cuda {

// The cells of the occupancy grid (2 h + 1)^2 over the offsets |dh|, |dw| <= h, and the most
// points a channel may have (a cell holds a point's index in a byte; 255 marks an empty one).
constexpr int kSegGridCells = 2048;
constexpr int kSegMaxPoints = 255;
constexpr int kSegWarps = 4;  // channels per block of the segment builder

// One warp per table entry (kSegWarps entries per block): the first npts[c] points of row c (offsets
// off, weights pw; rows per channel) as runs along one of the four axes of mode_step; the axis with
// the fewest runs (the first of equals). Runs are listed in the order of their first point's index;
// slots beyond the entry's points get weight 0. classes = 1: entry c, offsets sign * off. classes =
// 4 (stride 2, polyphase): entry cls * C + c holds the points of channel c whose offsets have the
// parities (cls >> 1, cls & 1), at offsets sign * floor(off / 2), as truncation's class tables do.
// same (optional): the channels' same-as-previous flags. slot_of (optional, classes = 1): each
// point's slot in run order (0 beyond the channel's points). halo (optional): each entry's largest
// |dh| and |dw|. The lanes take the points 32 at a time; a lane whose point starts a run walks it.
__global__ static void __launch_bounds__(32 * kSegWarps)
    interp_segments_kernel(const int2* __restrict__ off, const float* __restrict__ pw, const int* __restrict__ npts,
                           const int* __restrict__ same, int C, int classes, int rows, int h, int sign,
                           SegInfo* __restrict__ info, int4* __restrict__ segs, float* __restrict__ segw,
                           int* __restrict__ slot_of, int2* __restrict__ halo) {
  __shared__ unsigned char grids[kSegWarps][kSegGridCells];
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int idx = blockIdx.x * kSegWarps + warp;
  if (idx >= C * classes) return;  // a whole warp; the warps never synchronise with each other
  const int c = idx % C, cls = classes == 4 ? idx / C : -1;
  unsigned char* grid = grids[warp];
  const int side = 2 * h + 1, cells = side * side, n = npts[c];
  const int64_t base = int64_t(c) * rows, obase = int64_t(idx) * rows;
  // Point j's offset in this entry's coordinates; false: the point belongs to another class.
  auto point = [&](int j, int* dh, int* dw) {
    const int2 o = off[base + j];
    if (cls >= 0 && ((o.x & 1) != (cls >> 1) || (o.y & 1) != (cls & 1))) return false;
    *dh = sign * (cls >= 0 ? o.x >> 1 : o.x);  // >> 1: floor(x / 2)
    *dw = sign * (cls >= 0 ? o.y >> 1 : o.y);
    return true;
  };
  for (int i = lane; i < cells; i += 32) grid[i] = 255;
  __syncwarp();
  int ph = 0, pwid = 0;
  for (int j = lane; j < n; j += 32) {
    int dh, dw;
    if (!point(j, &dh, &dw)) continue;
    grid[(dh + h) * side + dw + h] = static_cast<unsigned char>(j);
    ph = max(ph, abs(dh));
    pwid = max(pwid, abs(dw));
  }
  __syncwarp();
  // The point at offset (dh, dw) from the centre cell, or 255.
  auto at = [&](int dh, int dw) -> int {
    return (dh < -h || dh > h || dw < -h || dw > h) ? 255 : grid[(dh + h) * side + dw + h];
  };
  int mode = 0, best = n + 1;
  for (int m = 0; m < 4; ++m) {
    int ui, uj;
    mode_step(m, &ui, &uj);
    int runs = 0;
    for (int j = lane; j < n; j += 32) {
      int dh, dw;
      if (point(j, &dh, &dw)) runs += at(dh - ui, dw - uj) == 255;
    }
#pragma unroll
    for (int d = 16; d > 0; d >>= 1) runs += __shfl_xor_sync(0xffffffffu, runs, d);
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
    const bool start = j < n && point(j, &dh, &dw) && at(dh - ui, dw - uj) == 255;
    while (start && at(dh + len * ui, dw + len * uj) != 255) ++len;
    const unsigned starts = __ballot_sync(0xffffffffu, start);
    int incl = len;  // the run lengths of this lane and the lanes before it
#pragma unroll
    for (int d = 1; d < 32; d <<= 1) {
      const int v = __shfl_up_sync(0xffffffffu, incl, d);
      if (lane >= d) incl += v;
    }
    if (start) {
      const int s0 = slot + incl - len;
      segs[obase + nseg + __popc(starts & ((1u << lane) - 1u))] = make_int4(dh, dw, len, s0);
      for (int l = 0; l < len; ++l) {
        const int q = at(dh + l * ui, dw + l * uj);
        segw[obase + s0 + l] = pw[base + q];
        if (slot_of != nullptr) slot_of[base + q] = s0 + l;
      }
    }
    nseg += __popc(starts);
    slot += __shfl_sync(0xffffffffu, incl, 31);
  }
  for (int k = slot + lane; k < rows; k += 32) {
    segw[obase + k] = 0.0f;
    if (slot_of != nullptr) slot_of[obase + k] = 0;
  }
  ph = warp_max(ph);
  pwid = warp_max(pwid);
  if (lane == 0) {
    info[idx] = SegInfo{mode, nseg, slot, same != nullptr ? same[c] : 0};
    if (halo != nullptr) halo[idx] = make_int2(ph, pwid);
  }
}

// The segment tables of a gather with offsets sign * off (classes = 4: per parity class, entries
// cls * C + c); with slots, also each point's slot (C, R); with halos, each entry's halo.
struct InterpSegments {
  at::Tensor ints, weights;  // ints: info (E * 4) | segs (E * R * 4) | slot_of (C * R) | halo (E * 2)
  int64_t C, R, E;           // E = C * classes entries
  bool slots = false;
  const SegInfo* info() const { return reinterpret_cast<const SegInfo*>(ints.data_ptr<int>()); }
  const int4* segs() const { return reinterpret_cast<const int4*>(ints.data_ptr<int>() + 4 * E); }
  const float* w() const { return weights.data_ptr<float>(); }
  at::Tensor slot_of() const { return ints.narrow(0, 4 * E + 4 * E * R, C * R).view({C, R}); }
  const int2* halo() const {
    return reinterpret_cast<const int2*>(ints.data_ptr<int>() + 4 * E + 4 * E * R + (slots ? C * R : 0));
  }
};

// The segment tables of points given as tables of rows per channel: offsets off, weights w, the
// first npts of each channel, same-as-previous flags `same` (null: none; the NCHW kernels take one
// channel per block). classes: 1, or 4 for the parity classes of stride 2 (then no slots).
inline InterpSegments build_interp_segments(const int2* off, const float* w, const int* npts, const int* same,
                                            int64_t C, int64_t R, const at::Tensor& like, int h, int sign,
                                            bool slots = false, int classes = 1) {
  TORCH_CHECK(classes == 1 || !slots, "build_interp_segments: slots are for one class");
  InterpSegments s;
  s.C = C;
  s.R = R;
  s.E = C * classes;
  s.slots = slots;
  s.ints = at::empty({4 * s.E + 4 * s.E * R + (slots ? C * R : 0) + 2 * s.E}, like.options().dtype(at::kInt));
  s.weights = at::empty({s.E * R}, like.options().dtype(at::kFloat));
  int* ip = s.ints.data_ptr<int>();
  interp_segments_kernel<<<ceil_div(s.E, int64_t(kSegWarps)), 32 * kSegWarps, 0, at::cuda::getCurrentCUDAStream()>>>(
      off, w, npts, same, static_cast<int>(C), classes, static_cast<int>(R), h, sign, reinterpret_cast<SegInfo*>(ip),
      reinterpret_cast<int4*>(ip + 4 * s.E), s.weights.data_ptr<float>(), slots ? ip + 4 * s.E + 4 * s.E * R : nullptr,
      reinterpret_cast<int2*>(ip + 4 * s.E + 4 * s.E * R + (slots ? C * R : 0)));
  MMO1D_CUDA_CHECK(cudaGetLastError());
  return s;
}

// The same from the first `npts` points of tables t (their same flags if built with_same).
inline InterpSegments build_interp_segments(const InterpTables<float>& t, const int* npts, int h, int sign,
                                            bool slots = false, int classes = 1) {
  const int* same = t.same.defined() ? t.same.data_ptr<int>() : nullptr;
  return build_interp_segments(t.off(), t.w(), npts, same, t.C, t.R, t.ints, h, sign, slots, classes);
}

}  // namespace cuda
}  // namespace mmo1d
