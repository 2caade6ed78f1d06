// The window gather's ring of lines: a block streams its output tile, a step of
// kWinRingStepTasks * OUTPUTS rows at a time, through a ring of staged source rows (lines), the next
// step's lines copied (cp.async) while a step computes. Only the rows a step adds are staged: the
// halo rows between two steps once, not once per sub-tile.
#pragma once

#include "../common/channels_last.cuh"
#include "../common/geometry.cuh"

namespace mmo1d {
namespace cuda {

// The copies of rows [r0, r1) of a block's staged tile (row r: source row gi0 + r, columns
// [gj0, gj0 + EW)) into their lines of a ring of `lines` lines (row r in line r % lines; r1 - r0 <=
// lines), channels [c0, c0 + CB) of the H x W image img.
template <typename scalar_t>
__device__ __forceinline__ void issue_ring_rows(scalar_t* __restrict__ ring, int lines, const scalar_t* __restrict__ img,
                                                int C, int H, int W, int c0, int gi0, int gj0, int EW, int pitch,
                                                int r0, int r1) {
  constexpr int CB = VecTraits<scalar_t>::kCB;
  if (r0 >= r1) return;
  const int l0 = r0 % lines, first = min(r1 - r0, lines - l0);
  issue_nhwc_tile<scalar_t>(ring + l0 * pitch * CB, img, C, H, W, c0, gi0 + r0, gj0, first, EW, pitch, W, 1);
  if (first < r1 - r0) {
    issue_nhwc_tile<scalar_t>(ring, img, C, H, W, c0, gi0 + r0 + first, gj0, r1 - r0 - first, EW, pitch, W, 1);
  }
}

// A block's th x tw output tile at (p0, q0) of image img, lines of halo (ph, pw), through the ring at
// `ring` (win_ring_lines lines of `pitch` pixels; the tile's staged row r, source row p0 - ph + r,
// in line r % lines). Step s computes the tile's rows [s STEP, s STEP + sth): its rows of the
// staged tile are [s STEP, s STEP + round_up(sth, OUTPUTS) + 2 ph), of which the rows past the
// previous step's are copied while step s - 1 computes. stage_tables() runs while the first step's
// copies are in flight; step(lines, ps, sth, ring_bytes) runs a step's tasks over its first line
// `lines` (the tile's rows from ps; reads wrap past the ring's end: WinRing).
// One barrier a step: after it, every thread's copies of the step have landed and the previous
// step's reads are done, so the copies of the next step may overwrite the lines that only the
// previous step read.
template <typename scalar_t, int OUTPUTS, typename StageTables, typename Step>
__device__ __forceinline__ void win_ring_steps(scalar_t* __restrict__ ring, const scalar_t* __restrict__ img,
                                               const FastGeometry& g, int c0, int p0, int q0, int th, int tw, int ph,
                                               int pw, int pitch, StageTables&& stage_tables, Step&& step) {
  constexpr int CB = VecTraits<scalar_t>::kCB, STEP = kWinRingStepTasks * OUTPUTS;
  const int lines = win_ring_lines<OUTPUTS>(th, ph), rows = seg_tile_rows<OUTPUTS>(th, ph);
  const int EW = seg_tile_cols<OUTPUTS>(tw, pw), steps = (th + STEP - 1) / STEP;
  const int gi0 = p0 - ph, gj0 = q0 - pw - (OUTPUTS - 1);
  // The rows that step s adds to the ring: all of its own for the first step.
  auto issue_step = [&](int s) {
    const int r0 = s == 0 ? 0 : s * STEP + 2 * ph, r1 = min((s + 1) * STEP + 2 * ph, rows);
    issue_ring_rows<scalar_t>(ring, lines, img, g.C, g.H, g.W, c0, gi0, gj0, EW, pitch, r0, r1);
    cp_async_commit();
  };
  issue_step(0);
  stage_tables();
  for (int s = 0; s < steps; ++s) {
    cp_async_wait_all();
    __syncthreads();  // step s's lines (the first time, the tables) written; step s - 1's reads done
    if (s + 1 < steps) issue_step(s + 1);
    step(ring + ((s * STEP) % lines) * pitch * CB, s * STEP, min(STEP, th - s * STEP), lines * pitch * 32);
  }
}

}  // namespace cuda
}  // namespace mmo1d
