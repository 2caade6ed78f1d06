// The tiles of the tensor-core weight gradient (mma_wgrad_kernel.cuh), on the host and the device:
// the shared memory of a tile and the lines a block takes.
//
// A block stages one output tile of one image and 16 channels at a time. Its pixels are taken along lines: the
// rows of the plane where the block's points spread no further across the rows than along them
// (halo ph <= pw), else its columns (the transposed view). In its view a tile is `tu` lines of `tv`
// outputs; x is staged as tu + 2 ph lines of bw = tv + 2 reach (rounded up to 8) pixels of 16 bytes, one
// plane per 8 channels, each line one bulk tensor copy, so a line's box is the same for every block
// of the view and only the number of lines (chosen per block here) follows its halo.
#pragma once

#include <cstdint>

#include "../common/tables.cuh"

namespace mmo1d {
namespace cuda {

constexpr int kMmaCB = 16;          // channels a block: two groups of 8, each one product's width
constexpr int kMmaWarps = 8;        // warps 0-3 the first group of 8 channels, 4-7 the second
constexpr int kMmaPassPairs = 8;    // pairs of points a warp's products hold at once (32 float32 registers)
constexpr int kMmaMaxLists = 2;     // offset lists a group of 8 channels may hold (one pass over each)
constexpr int kMmaAlong = 64;       // the longest tile along the lines
constexpr int kMmaMaxPoints = 64;   // a rounded line's list (K <= kMmaWgradMaxK)

// The point tables of a call: rows per channel (the tables' rows: K for rounded taps), the most points a
// taken block's list may hold (the warps' rows of sums and the partial sums' rows per channel), the
// capacity of a list in shared memory (even, at least `points`) and the points' reach along the lines
// (the tile's halo there: K/2 for rounded taps).
struct MmaWgradPoints {
  int rows, points, cap, reach;
};

// One view (0: rows, 1: columns) of a call: tiles of tv outputs along lines of `along` pixels, boxes
// of bw pixels; `lines` lines across.
struct MmaWgradView {
  int tv, bw, tiles_v, lines, along;
};

// A block of 16 channels: its view, halo across the lines (ph), lines a tile (tu), tiles and offset
// lists; tiles 0: the block is left to the vector weight gradient.
struct MmaWgradBlock {
  int tiles, col, ph, tu;
  int starts;  // bit 8 g + k: channel k of group g begins an offset list (k = 0, or offsets not its predecessor's)
};

__host__ __device__ __forceinline__ int mma_round_up(int a, int b) { return (a + b - 1) / b * b; }

// A tile's shared memory: the two x planes (tu + 2 ph lines of bw pixels), the two dy planes (tu x tv
// pixels and a zero pixel), the pixel tables, the warps' rows of sums (points + 1 rows of 8 channels:
// the points, then the bias), the groups' offset lists and the mbarrier.
__host__ __device__ __forceinline__ int mma_x_plane_bytes(int tu, int ph, int bw) { return (tu + 2 * ph) * bw * 16; }
__host__ __device__ __forceinline__ int mma_dy_plane_bytes(int tu, int tv) {
  return mma_round_up((tu * tv + 1) * 16, 128);
}
__host__ __device__ __forceinline__ int mma_pixel_slots(int tu, int tv) { return mma_round_up(tu * tv, 16); }
// Per group and list, the points' byte offsets in the x tile (cap, the last repeated), then per group
// and list its point count.
__host__ __device__ __forceinline__ int mma_list_bytes(const MmaWgradPoints& pts) {
  return 2 * kMmaMaxLists * (pts.cap + 1) * 4;
}
__host__ __device__ __forceinline__ int mma_rows_bytes(const MmaWgradPoints& pts) {
  return kMmaWarps * (pts.points + 1) * 8 * 4;
}
__host__ __device__ __forceinline__ int mma_wgrad_smem(int tu, int ph, const MmaWgradView& v,
                                                       const MmaWgradPoints& pts) {
  return 2 * mma_x_plane_bytes(tu, ph, v.bw) + 2 * mma_dy_plane_bytes(tu, v.tv) + 2 * mma_pixel_slots(tu, v.tv) * 4 +
         mma_rows_bytes(pts) + mma_list_bytes(pts) + 16;
}

// The lines of a tile of halo ph in view v within `budget` bytes: the most that fit (at most the
// plane's), then evened out over the plane; 0 where not one line fits. A tile takes at least `fixed` +
// `per_line` bytes a line, so the first guess is at most one line above the answer's.
__host__ __device__ __forceinline__ int mma_tile_lines(const MmaWgradView& v, int ph, const MmaWgradPoints& pts,
                                                       int budget) {
  const int per_line = 2 * v.bw * 16 + 2 * v.tv * 16 + 2 * v.tv * 4;
  const int fixed = 4 * ph * v.bw * 16 + mma_rows_bytes(pts) + mma_list_bytes(pts) + 16;
  int tu = budget > fixed ? (budget - fixed) / per_line + 1 : 0;
  tu = tu < v.lines ? tu : v.lines;
  while (tu > 0 && mma_wgrad_smem(tu, ph, v, pts) > budget) --tu;
  if (tu <= 0) return 0;
  const int tiles = (v.lines + tu - 1) / tu;
  return (v.lines + tiles - 1) / tiles;
}

__host__ __device__ __forceinline__ int mma_tiles(const MmaWgradView& v, int tu) {
  return tu > 0 ? (v.lines + tu - 1) / tu * v.tiles_v : 0;
}

}  // namespace cuda
}  // namespace mmo1d
