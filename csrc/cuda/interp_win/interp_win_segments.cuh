// The interpolated window family's segment tables, built in one pass from the taps' points: the
// union of each block's points (unite_block_points) and the runs of that union (warp_point_runs),
// which every channel of the block shares. The tables are those that interp_segments_kernel builds
// from interp_block_union_kernel's united rows, value for value, without building the same runs
// once per channel of a block (and without the united rows in global memory between two kernels).
#pragma once

#include <ATen/core/Tensor.h>
#include <ATen/ops/empty.h>

#include <algorithm>

#include "../common/interp_segments.cuh"
#include "../common/interp_tables.cuh"
#include "../common/interp_union.cuh"
#include "../common/launch.cuh"

namespace mmo1d {
namespace cuda {

// The arguments of interp_united_segments_kernel, built by its launcher.
struct UnitedSegmentsParams {
  const int2* off;
  const float* pw;
  const int* npts;
  int C, rows, h, sign, cap;
  SegInfo* info;
  int4* segs;
  float* segw;
};

// A united block's shared memory: the union's runs and numbering, each channel's weights at its points.
template <int CB>
struct UnitedSegmentsSmem {
  int4 seg[kSegMaxPoints];          // the union's runs
  int point_of[kSegGridCells];      // 1 + the union point at each offset, 0 for none
  int2 off[kSegMaxPoints];          // the union's points, row major
  int slot[kSegMaxPoints];          // each union point's slot in run order
  float w[CB][kSegMaxPoints];       // each channel's weight at each union point, 0 where it reads none
};

// One block per block of CB channels (blockIdx.x), a warp per channel: the segment tables (offsets
// sign * off) of the first npts[c] points of each channel (offsets off, weights pw, rows per channel,
// within h). A block whose union has at most cap points: one warp finds the union's runs, and every
// channel gets them with its own weights in run order (info: the union's npts; same for every channel
// but the block's first). Otherwise each channel's own runs (same: its offsets are those of the
// previous channel), each warp over a byte grid of its own in the union's memory.
template <int CB>
__global__ void __launch_bounds__(32 * CB)
    interp_united_segments_kernel(const UnitedSegmentsParams params) {
  const int2* __restrict__ off = params.off;
  const float* __restrict__ pw = params.pw;
  const int* __restrict__ npts = params.npts;
  SegInfo* __restrict__ info = params.info;
  int4* __restrict__ segs = params.segs;
  float* __restrict__ segw = params.segw;
  const int rows = params.rows, h = params.h, sign = params.sign;
  __shared__ union {
    UnitedSegmentsSmem<CB> u;
    unsigned char grids[CB][kSegGridCells];  // the own lists' path
  } sm;
  __shared__ int s_warp[CB], s_runs[2];
  const int c0 = blockIdx.x * CB, lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int side = 2 * h + 1, nch = min(CB, params.C - c0);
  for (int e = threadIdx.x; e < CB * kSegMaxPoints; e += 32 * CB) (&sm.u.w[0][0])[e] = 0.0f;
  const int total = unite_block_points<CB>(off, npts, c0, nch, rows, h, params.cap, sm.u.point_of, sm.u.off, s_warp);
  if (total > params.cap) {  // each channel's own runs (point_of's counts are read: its memory is free)
    if (warp >= nch) return;
    const int c = c0 + warp, n = npts[c];
    const int64_t base = int64_t(c) * rows;
    unsigned char* grid = sm.grids[warp];
    for (int i = lane; i < side * side; i += 32) grid[i] = 255;
    __syncwarp();
    bool same = c > 0 && n == npts[c - 1];
    for (int j = lane; j < n; j += 32) {
      const int2 o = off[base + j];
      grid[(sign * o.x + h) * side + sign * o.y + h] = static_cast<unsigned char>(j);
      if (same) {
        const int2 p = off[base - rows + j];
        same = o.x == p.x && o.y == p.y;
      }
    }
    same = __all_sync(0xffffffffu, same);
    __syncwarp();
    auto at = [&](int dh, int dw) -> int {
      if (dh < -h || dh > h || dw < -h || dw > h) return -1;
      const int q = grid[(dh + h) * side + dw + h];
      return q == 255 ? -1 : q;
    };
    const int2 runs = warp_point_runs(
        n,
        [&](int j) {
          const int2 o = off[base + j];
          return make_int2(sign * o.x, sign * o.y);
        },
        at,
        [&](int s, int dh, int dw, int len, int s0, int ui, int uj) {
          segs[base + s] = make_int4(dh, dw, len, s0);
          for (int l = 0; l < len; ++l) segw[base + s0 + l] = pw[base + at(dh + l * ui, dw + l * uj)];
        });
    for (int k = n + lane; k < rows; k += 32) segw[base + k] = 0.0f;
    if (lane == 0) info[c] = SegInfo{runs.x, runs.y, n, same};
    return;
  }
  // The channels' weights at the union's points; warp 0 also finds the union's runs.
  for (int k = warp; k < nch; k += CB) {
    const int64_t base = int64_t(c0 + k) * rows;
    for (int j = lane; j < npts[c0 + k]; j += 32) {
      const int2 o = off[base + j];
      sm.u.w[k][sm.u.point_of[(o.x + h) * side + o.y + h] - 1] = pw[base + j];
    }
  }
  if (warp == 0) {
    auto at = [&](int dh, int dw) -> int {
      if (dh < -h || dh > h || dw < -h || dw > h) return -1;
      return sm.u.point_of[(sign * dh + h) * side + sign * dw + h] - 1;
    };
    const int2 runs = warp_point_runs(
        total,
        [&](int j) {
          const int2 o = sm.u.off[j];
          return make_int2(sign * o.x, sign * o.y);
        },
        at,
        [&](int s, int dh, int dw, int len, int s0, int ui, int uj) {
          sm.u.seg[s] = make_int4(dh, dw, len, s0);
          for (int l = 0; l < len; ++l) sm.u.slot[at(dh + l * ui, dw + l * uj)] = s0 + l;
        });
    if (lane == 0) {
      s_runs[0] = runs.x;
      s_runs[1] = runs.y;
    }
  }
  __syncthreads();
  const int mode = s_runs[0], nseg = s_runs[1];
  for (int k = warp; k < nch; k += CB) {
    const int c = c0 + k;
    const int64_t base = int64_t(c) * rows;
    for (int s = lane; s < nseg; s += 32) segs[base + s] = sm.u.seg[s];
    for (int u = lane; u < total; u += 32) segw[base + sm.u.slot[u]] = sm.u.w[k][u];
    for (int q = total + lane; q < rows; q += 32) segw[base + q] = 0.0f;
    if (lane == 0) info[c] = SegInfo{mode, nseg, total, k > 0};
  }
}

// The segment tables of a gather with offsets sign * off over the first npts points of tables t, each
// block of CB channels walking the union of its channels' points where it has at most as many points
// as a row holds (and kSegMaxPoints); offsets within h ((2 h + 1)^2 <= kSegGridCells).
template <int CB>
InterpSegments build_united_segments(const InterpTables<float>& t, const int* npts, int h, int sign) {
  InterpSegments s;
  s.C = t.C;
  s.R = t.R;
  s.ints = at::empty({4 * t.C + 4 * t.C * t.R}, t.ints.options());
  s.weights = at::empty({t.C * t.R}, t.accs.options());
  int* ip = s.ints.data_ptr<int>();
  const UnitedSegmentsParams params{.off = t.off(),
                                    .pw = t.w(),
                                    .npts = npts,
                                    .C = static_cast<int>(t.C),
                                    .rows = static_cast<int>(t.R),
                                    .h = h,
                                    .sign = sign,
                                    .cap = static_cast<int>(std::min<int64_t>(t.R, kSegMaxPoints)),
                                    .info = reinterpret_cast<SegInfo*>(ip),
                                    .segs = reinterpret_cast<int4*>(ip + 4 * t.C),
                                    .segw = s.weights.data_ptr<float>()};
  launch_on_stream(interp_united_segments_kernel<CB>, ceil_div(t.C, int64_t(CB)), 32 * CB, 0, params);
  return s;
}

}  // namespace cuda
}  // namespace mmo1d
