// Shared point lists for the channels_last window gathers of the interpolated taps: the points of
// every channel of a block of CB channels (the channels a window-gather block stages) are replaced
// by the union of the block's points, in one order, each channel weighting the points it does not
// read by 0. The block's lanes then walk one run list with one vector load per point, instead of
// walking their channels' lists one channel at a time (learned angles differ from channel to
// channel; neighbouring angles read almost the same pixels). A block whose union would not fit a
// table row keeps its channels' own lists.
#pragma once

#include <ATen/ATen.h>
#include <ATen/cuda/CUDAContext.h>

#include "interp_segments.cuh"
#include "interp_tables.cuh"

namespace mmo1d {
namespace cuda {

// One warp per block of CB channels (blockIdx.x; C need not be a multiple of CB). From the first
// npts[c] points of the tables (offsets off, weights pw, rows per channel; offsets within h):
// uoff, uw (C, rows) and unpts (C) the block's union of points in the order of their offsets (row
// major), each channel's weights scattered to its points and 0 elsewhere; or, when the union has more
// than `cap` points, each channel's own points. usame: channel c reads the points of channel c - 1
// (within a united block every channel but the first).
template <int CB>
__global__ void __launch_bounds__(32)
    interp_block_union_kernel(const int2* __restrict__ off, const float* __restrict__ pw, const int* __restrict__ npts,
                              int C, int rows, int h, int cap, int2* __restrict__ uoff, float* __restrict__ uw,
                              int* __restrict__ unpts, int* __restrict__ usame) {
  __shared__ short point_of[kSegGridCells];  // 1 + the union point at each offset, 0 for none
  const int c0 = blockIdx.x * CB, lane = threadIdx.x, side = 2 * h + 1, cells = side * side;
  const int nch = min(CB, C - c0);
  for (int i = lane; i < cells; i += 32) point_of[i] = 0;
  __syncwarp();
  for (int k = 0; k < nch; ++k) {  // a channel's points have distinct offsets: one writer per cell
    const int64_t base = int64_t(c0 + k) * rows;
    for (int j = lane; j < npts[c0 + k]; j += 32) {
      const int2 o = off[base + j];
      point_of[(o.x + h) * side + o.y + h] = 1;
    }
    __syncwarp();
  }
  // Number the marked cells in order: each lane counts a contiguous range, then a prefix sum.
  const int per = (cells + 31) / 32, beg = min(cells, lane * per), end = min(cells, beg + per);
  int count = 0;
  for (int i = beg; i < end; ++i) count += point_of[i];
  int incl = count;
#pragma unroll
  for (int d = 1; d < 32; d <<= 1) {
    const int v = __shfl_up_sync(0xffffffffu, incl, d);
    if (lane >= d) incl += v;
  }
  const int total = __shfl_sync(0xffffffffu, incl, 31);
  if (total > cap) {  // keep the own lists
    for (int k = 0; k < nch; ++k) {
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
    }
    return;
  }
  int next = incl - count;
  for (int i = beg; i < end; ++i) {
    if (point_of[i] != 0) point_of[i] = static_cast<short>(++next);
  }
  __syncwarp();
  for (int k = 0; k < nch; ++k) {
    const int c = c0 + k;
    const int64_t base = int64_t(c) * rows;
    for (int i = beg; i < end; ++i) {
      const int u = point_of[i] - 1;
      if (u >= 0) {
        uoff[base + u] = make_int2(i / side - h, i % side - h);
        uw[base + u] = 0.0f;
      }
    }
    if (lane == 0) {
      unpts[c] = total;
      usame[c] = k > 0;
    }
  }
  __syncwarp();  // the zeros are written before the weights
  for (int k = 0; k < nch; ++k) {
    const int64_t base = int64_t(c0 + k) * rows;
    for (int j = lane; j < npts[c0 + k]; j += 32) {
      const int2 o = off[base + j];
      uw[base + point_of[(o.x + h) * side + o.y + h] - 1] = pw[base + j];
    }
  }
}

// The tables of unite_interp_blocks: off (C, R) | npts (C) | same (C) and the weights (C, R).
struct InterpUnion {
  at::Tensor ints, weights;
  int64_t C, R;
  const int2* off() const { return reinterpret_cast<const int2*>(ints.data_ptr<int>()); }
  const int* npts() const { return ints.data_ptr<int>() + 2 * C * R; }
  const int* same() const { return npts() + C; }
  const float* w() const { return weights.data_ptr<float>(); }
};

// The block-shared lists of the gather points (npts_gather) of tables t, for blocks of CB channels;
// offsets within h (the grid of the segment builder: (2 h + 1)^2 <= kSegGridCells).
template <int CB>
InterpUnion unite_interp_blocks(const InterpTables<float>& t, int h) {
  InterpUnion u;
  u.C = t.C;
  u.R = t.R;
  u.ints = at::empty({2 * t.C * t.R + 2 * t.C}, t.ints.options());
  u.weights = at::empty({t.C * t.R}, t.accs.options());
  int* ip = u.ints.data_ptr<int>();
  const int cap = static_cast<int>(std::min<int64_t>(t.R, kSegMaxPoints));
  interp_block_union_kernel<CB><<<ceil_div(t.C, int64_t(CB)), 32, 0, at::cuda::getCurrentCUDAStream()>>>(
      t.off(), t.w(), t.npts_gather(), static_cast<int>(t.C), static_cast<int>(t.R), h, cap,
      reinterpret_cast<int2*>(ip), u.weights.data_ptr<float>(), ip + 2 * t.C * t.R, ip + 2 * t.C * t.R + t.C);
  MMO1D_CUDA_CHECK(cudaGetLastError());
  return u;
}

}  // namespace cuda
}  // namespace mmo1d
