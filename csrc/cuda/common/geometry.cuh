// Geometry of a launch shared by the host launchers and the kernels: the general gather's and the
// fast paths' output tiles, and the staged tiles and task lists of the segment-window paths.
#pragma once

#include "common.cuh"
#include "tiling.h"

namespace mmo1d {
namespace cuda {

struct GatherGeometry {
  int C, K;
  int Hs, Ws, up;  // source size and upsampling factor (stride, for the input gradient)
  int Ho, Wo, a;   // output size and output-to-source step (stride, for the forward)
  int sign;        // +1 forward, -1 input gradient
  int TH, TW;      // output tile
  int tiles_w, tiles;
  int P;  // bound of |dh| and |dw| over the table's points (K / 2 for rounded taps); K: table row length
};

struct FastGeometry {
  int C, K, H, W;  // stride 1: output size = source size
  int TH, TW, tiles_w, tiles;
};

__host__ __device__ __forceinline__ int round_up(int a, int b) {
  return (a + b - 1) / b * b;
}

// Shared-memory tile of the NCHW fast path: rows [p0 - ph, p0 + THr + ph), columns
// [q0 - pw - (R-1), q0 + TWr + pw + (R-1)) (THr, TWr: th, tw rounded up to R), stored with an odd
// row pitch (EW | 1) so that the lanes of a warp reading one column each hit distinct banks.
template <int R = kSegR>
__host__ __device__ __forceinline__ int seg_tile_rows(int th, int ph) {
  return round_up(th, R) + 2 * ph;
}
template <int R = kSegR>
__host__ __device__ __forceinline__ int seg_tile_cols(int tw, int pw) {
  return round_up(tw, R) + 2 * pw + 2 * (R - 1);
}

// Tasks of a th x tw output tile for axis `mode`: a task is R outputs (p, q) + r * u. Mode 0:
// one per row and group of R columns (lanes walk down the rows); mode 1: one per column and
// group of R rows; modes 2 and 3: diagonal runs that start up to R - 1 columns outside
// the tile (their outside outputs are computed on zero padding and not stored).
template <int R = kSegR>
__device__ __forceinline__ int seg_ntasks(int mode, int th, int tw) {
  const int row_blocks = round_up(th, R) / R;
  return mode == 0 ? th * (round_up(tw, R) / R) : (mode == 1 ? tw : tw + R - 1) * row_blocks;
}

template <int R = kSegR>
__device__ __forceinline__ void seg_task(int mode, int k, int th, int tw, int* p, int* q) {
  if (mode == 0) {
    const int cb = k / th;
    *p = k - cb * th;
    *q = cb * R;
  } else if (mode == 1) {
    const int rb = k / tw;
    *q = k - rb * tw;
    *p = rb * R;
  } else {
    const int span = tw + R - 1;
    const int rb = k / span;
    const int qq = k - rb * span;
    *p = rb * R;
    *q = mode == 2 ? qq - (R - 1) : qq;
  }
}

// Eight consecutive elements <-> floats, as 16-byte accesses (the address must be 8-element and
// 16-byte aligned); the row tasks of the NCHW fast path hold kSegR = 8 outputs.

// Channels_last fast paths: a block takes 32 bytes of channels per pixel, 4 lanes per pixel.
template <typename scalar_t>
struct VecTraits {
  static constexpr int kCB = 32 / sizeof(scalar_t);  // channels per block (32 bytes per pixel)
  static constexpr int kV = kCB / 4;                 // channels per lane (4 lanes per pixel)
};

// Window paths: R outputs per thread along the segment axis, R * V = 16 accumulators.
template <typename scalar_t>
struct WinTraits {
  static constexpr int kR = 16 / VecTraits<scalar_t>::kV;  // R * V = 16 accumulators per thread
};

}  // namespace cuda
}  // namespace mmo1d
