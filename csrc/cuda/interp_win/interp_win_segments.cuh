// The interpolated window family's segment tables, built in one pass from the taps' points: the
// union of each block's points (unite_block_points) and the runs of that union (united_runs), which
// every channel of the block shares. The tables are those that interp_segments_kernel builds
// from interp_block_union_kernel's united rows, value for value, without building the same runs
// once per channel of a block (and without the united rows in global memory between two kernels).
#pragma once

#include <ATen/core/Tensor.h>

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
  int4 seg[kSegMaxPoints];      // the union's runs
  int point_of[kSegGridCells];  // 1 + the union point at each offset, 0 for none
  int2 off[kSegMaxPoints];      // the union's points, row major
  int slot[kSegMaxPoints];      // each union point's place in its run, then its slot in run order
  int start[kSegMaxPoints];     // each union point's run's first point (while found: a point before it)
  int first[kSegMaxPoints];     // at a run's first point: its length, then its first slot
  float w[CB][kSegMaxPoints];   // each channel's weight at each union point, 0 where it reads none
};

// The runs of a united block's n points (sm.off, numbered in sm.point_of; offsets sign * off, within
// h), as warp_point_runs lists them, into sm.seg and each point's slot into sm.slot; the whole block
// calls it (CB >= 4 warps). Warps 0-3 count the runs along one axis each; warp 0 then finds each
// point's run and place in it by pointer jumping (log2 of the longest run rounds of the points, where
// warp_point_runs walks each run point by point), lengths at the runs' last points, first slots by a
// prefix sum over the runs in the order of their first points, while the other warps run `others`.
// Returns {axis, runs}.
template <int CB, typename Others>
__device__ __forceinline__ int2 united_runs(UnitedSegmentsSmem<CB>& sm, int n, int h, int sign, int* s_count,
                                            int* s_runs, const Others& others) {
  static_assert(CB >= 4, "one warp per axis");
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, side = 2 * h + 1;
  auto at = [&](int dh, int dw) -> int {
    if (dh < -h || dh > h || dw < -h || dw > h) return -1;
    return sm.point_of[(sign * dh + h) * side + sign * dw + h] - 1;
  };
  auto offset = [&](int j) { return make_int2(sign * sm.off[j].x, sign * sm.off[j].y); };
  if (warp < 4) {
    const int runs = warp_axis_runs(n, warp, offset, at);
    if (lane == 0) s_count[warp] = runs;
  }
  __syncthreads();
  if (warp > 0) others();
  if (warp == 0) {
    int mode = 0, best = n + 1;  // the first of equals
    for (int m = 0; m < 4; ++m) {
      if (s_count[m] < best) {
        best = s_count[m];
        mode = m;
      }
    }
    int ui, uj;
    mode_step(mode, &ui, &uj);
    constexpr int kPer = (kSegMaxPoints + 31) / 32;  // points per lane
    for (int j = lane; j < n; j += 32) {
      const int2 o = offset(j);
      const int p = at(o.x - ui, o.y - uj);
      sm.start[j] = p < 0 ? j : p;
      sm.slot[j] = p < 0 ? 0 : 1;
    }
    __syncwarp();
    for (bool moved = true; __any_sync(0xffffffffu, moved);) {
      moved = false;
      int a[kPer], d[kPer];
#pragma unroll
      for (int i = 0; i < kPer; ++i) {
        const int j = lane + 32 * i;
        if (j < n) {
          a[i] = sm.start[j];
          d[i] = sm.slot[j];
          const int b = sm.start[a[i]];
          if (b != a[i]) {
            d[i] += sm.slot[a[i]];
            a[i] = b;
            moved = true;
          }
        }
      }
      __syncwarp();
#pragma unroll
      for (int i = 0; i < kPer; ++i) {
        const int j = lane + 32 * i;
        if (j < n) {
          sm.start[j] = a[i];
          sm.slot[j] = d[i];
        }
      }
      __syncwarp();
    }
    for (int j = lane; j < n; j += 32) {  // a run's length, at its last point
      const int2 o = offset(j);
      if (at(o.x + ui, o.y + uj) < 0) sm.first[sm.start[j]] = sm.slot[j] + 1;
    }
    __syncwarp();
    int nseg = 0, slot = 0;  // the same in every lane
    for (int j0 = 0; j0 < n; j0 += 32) {
      const int j = j0 + lane;
      const bool begins = j < n && sm.start[j] == j;
      const int len = begins ? sm.first[j] : 0;
      warp_list_runs(begins, len, &nseg, &slot, [&](int s, int s0) {
        const int2 o = offset(j);
        sm.first[j] = s0;
        sm.seg[s] = make_int4(o.x, o.y, len, s0);
      });
    }
    __syncwarp();
    for (int j = lane; j < n; j += 32) sm.slot[j] += sm.first[sm.start[j]];
    if (lane == 0) {
      s_runs[0] = mode;
      s_runs[1] = nseg;
    }
  }
  __syncthreads();
  return make_int2(s_runs[0], s_runs[1]);
}

// One block per block of CB channels (blockIdx.x), a warp per channel: the segment tables (offsets
// sign * off) of the first npts[c] points of each channel (offsets off, weights pw, rows per channel,
// within h). A block whose union has at most cap points: the union's runs are found once (united_runs),
// and every channel gets them with its own weights in run order (info: the union's npts; same for every
// channel but the block's first). Otherwise each channel's own runs (same: its offsets are those of the
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
  __shared__ int s_warp[CB], s_runs[2], s_count[4];
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
    const PointGrid at{grid, h, side};
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
  // The union's runs; meanwhile the other warps put the channels' weights at the union's points.
  const int2 runs = united_runs<CB>(sm.u, total, h, sign, s_count, s_runs, [&] {
    for (int k = warp - 1; k < nch; k += CB - 1) {
      const int64_t base = int64_t(c0 + k) * rows;
      for (int j = lane; j < npts[c0 + k]; j += 32) {
        const int2 o = off[base + j];
        sm.u.w[k][sm.u.point_of[(o.x + h) * side + o.y + h] - 1] = pw[base + j];
      }
    }
  });
  const int mode = runs.x, nseg = runs.y;
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
  const InterpSegments s = InterpSegments::empty(t.C, t.R, t.ints);
  const UnitedSegmentsParams params{.off = t.off(),
                                    .pw = t.w(),
                                    .npts = npts,
                                    .C = static_cast<int>(t.C),
                                    .rows = static_cast<int>(t.R),
                                    .h = h,
                                    .sign = sign,
                                    .cap = static_cast<int>(std::min<int64_t>(t.R, kSegMaxPoints)),
                                    .info = s.info(),
                                    .segs = s.segs(),
                                    .segw = s.w()};
  launch_on_stream(interp_united_segments_kernel<CB>, ceil_div(t.C, int64_t(CB)), 32 * CB, 0, params);
  return s;
}

}  // namespace cuda
}  // namespace mmo1d
