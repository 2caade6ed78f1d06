// Every tile chooser of the CUDA kernels, in one place. Each sizes an output tile so that its
// shared memory (tables + staged tile) stays within a soft budget (tiling.h), or at least within
// `hard`: the largest dynamic shared memory the kernel may use on the current device
// (launch.cuh's max_dynamic_smem), and says when not even the smallest tile fits.
#pragma once

#include <algorithm>
#include <cmath>
#include <iterator>

#include "cuda_context.h"
#include "geometry.cuh"

namespace mmo1d {
namespace cuda {

// Blocks that fill the current device's multiprocessors per_sm times over.
inline int64_t device_blocks(int per_sm) {
  return int64_t(per_sm) * at::cuda::getCurrentDeviceProperties()->multiProcessorCount;
}

// ---- General kernels ----
// Source tile extent (one axis) for an output tile of T outputs with halo P.
inline int64_t extent(int T, int a, int P) {
  return int64_t(T - 1) * a + 1 + 2 * P;
}

template <typename acc_t>
int64_t gather_fixed_bytes(int K, bool nhwc) {
  const int cb = nhwc ? kNhwcChannels : 1;
  return align16(sizeof(int) * K * cb) + align16(sizeof(acc_t) * K * cb);
}

template <typename acc_t>
int64_t wgrad_fixed_bytes(int K, bool nhwc) {
  const int cb = nhwc ? kNhwcChannels : 1;
  const int warps = (nhwc ? kNhwcThreads : kMaxThreads) / 32;
  return align16(sizeof(int) * K * cb) + align16(sizeof(acc_t) * K * cb * warps);
}

// ... of the channels_last weight gradient with the points across the slots: the points' offsets and
// dy's tile (at most kNhwcTile x kNhwcTile outputs).
template <typename acc_t>
int64_t wgrad_across_fixed_bytes(int K) {
  return align16(sizeof(int) * K * kNhwcChannels) + align16(sizeof(acc_t) * kNhwcTile * kNhwcTile * kNhwcChannels);
}

// Extent of the dy tile that the input gradient at stride 2 stages by parity class (dy itself, not
// upsampled) for an output tile of T rows with halo P in the upsampled plane, at any origin: T / 2 + 1
// rows of the outputs' own, (P + 1) / 2 a side.
inline int64_t class_extent(int T, int P) {
  return T / 2 + 1 + 2 * ((P + 1) / 2);
}

// Pixels of the tile a general block stages for th x tw outputs (classes: the input gradient at stride 2
// by parity class).
inline int64_t staged_pixels(const GatherGeometry& g, int th, int tw, bool classes) {
  return classes ? class_extent(th, g.P) * class_extent(tw, g.P) : extent(th, g.a, g.P) * extent(tw, g.a, g.P);
}

// Whether the channels_last gather takes its outputs in 2 x 2 quads (a warp's four pixel slots) on rows
// padded by kGeneralRowPad bytes: the forward at stride 2, whose four slots along a row would read pixels two
// apart, every other one on the same banks (gather_nhwc_kernel).
inline bool quad_gather(const GatherGeometry& g, bool nhwc, bool classes) {
  return nhwc && !classes && g.a == 2;
}

// The staged tile of a general block for th x tw outputs (rows padded where the gather takes quads).
inline int64_t staged_bytes(const GatherGeometry& g, int th, int tw, size_t elem_bytes, bool nhwc, bool classes) {
  const int64_t pad = quad_gather(g, nhwc, classes) ? extent(th, g.a, g.P) * kGeneralRowPad : 0;
  return staged_pixels(g, th, tw, classes) * int64_t(elem_bytes) * (nhwc ? kNhwcChannels : 1) + pad;
}

// ... for the block's tile.
inline int64_t tile_bytes(const GatherGeometry& g, size_t elem_bytes, bool nhwc, bool classes = false) {
  return staged_bytes(g, g.TH, g.TW, elem_bytes, nhwc, classes);
}

// Halves the longer side of a TH x TW tile (TH on a tie) until bytes(TH, TW) is within `soft` (no
// side halved below min_side for it) and within `hard` (down to a single output).
template <typename Bytes>
void halve_to_budget(int* TH, int* TW, int64_t soft, int64_t hard, int min_side, Bytes bytes) {
  while ((bytes(*TH, *TW) > soft && (*TH > min_side || *TW > min_side)) ||
         (bytes(*TH, *TW) > hard && (*TH > 1 || *TW > 1))) {
    if (*TH >= *TW)
      *TH = (*TH + 1) / 2;
    else
      *TW = (*TW + 1) / 2;
  }
}

// Picks the output tile so that the worst-case (halo P) shared-memory tile stays within a soft
// budget that leaves room for several blocks per multiprocessor, or at least within `hard` (fixed
// bytes included). Returns false when not even a single output fits.
inline bool choose_tile(GatherGeometry& g, bool nhwc, size_t elem_bytes, int64_t fixed_bytes, int64_t hard_total,
                        bool classes = false) {
  const int64_t hard = hard_total - fixed_bytes;
  const int64_t soft = std::min<int64_t>(hard, kGeneralBudget - fixed_bytes);
  int TH, TW;
  if (nhwc) {
    TH = std::min(g.Ho, classes ? kNhwcClassTile : kNhwcTile);
    TW = std::min(g.Wo, classes ? kNhwcClassTile : kNhwcTile);
  } else if (int64_t(g.Ho) * g.Wo <= int64_t(kNchwMaxTile) * kNchwMaxTile) {
    TH = g.Ho;
    TW = g.Wo;
  } else {
    TH = std::min(g.Ho, kNchwMaxTile);
    TW = std::min(g.Wo, kNchwMaxTile);
  }
  auto bytes = [&](int th, int tw) { return staged_bytes(g, th, tw, elem_bytes, nhwc, classes); };
  halve_to_budget(&TH, &TW, soft, hard, kGeneralMinTile, bytes);
  g.TH = TH;
  g.TW = TW;
  g.tiles_w = ceil_div(g.Wo, TW);
  g.tiles = ceil_div(g.Ho, TH) * g.tiles_w;
  return bytes(TH, TW) <= hard;
}

// Outputs per thread of the NHWC gather: kNhwcRSmall where the tile has at most two rounds of them.
inline int nhwc_outputs_per_thread(const GatherGeometry& g) {
  constexpr int slots = kNhwcThreads / kNhwcChannels;
  return int64_t(g.TH) * g.TW <= 2 * slots * kNhwcRSmall ? kNhwcRSmall : kPerThread;
}

inline int nchw_threads(const GatherGeometry& g) {
  return std::min(kMaxThreads, ceil_div(ceil_div(int64_t(g.TH) * g.TW, kPerThread), 32) * 32);
}

// Threads of the NCHW input gradient at stride 2 by parity class: four groups of a multiple of 32, each
// enough for its class's outputs (at most ceil(TH / 2) x ceil(TW / 2)) in as few rounds as kMaxThreads
// allows.
inline int nchw_class_threads(const GatherGeometry& g) {
  const int64_t outputs = int64_t(ceil_div(g.TH, 2)) * ceil_div(g.TW, 2);
  return 4 * std::min(kMaxThreads / 4, ceil_div(ceil_div(outputs, kPerThread), 32) * 32);
}

// The most chunks of images whose partial sums (part_bytes per chunk) stay within the weight-gradient
// workspace: a sixteenth of x, at least kWgradMinWorkspace (32 MiB); a bound in bytes, as one chunk per
// image on small planes would make the workspace a multiple of the input. At least one.
inline int64_t wgrad_max_chunks(int64_t part_bytes, int64_t x_bytes) {
  return std::max<int64_t>(1, std::max<int64_t>(x_bytes / kWgradWorkspaceShare, kWgradMinWorkspace) / part_bytes);
}

// Images per weight-gradient block (each block loops over a chunk of images): enough blocks
// (blocks_per_chunk per chunk) to fill the GPU several times over, the partial sums within the workspace.
inline int wgrad_chunk(int64_t N, int64_t blocks_per_chunk, int64_t part_bytes, int64_t x_bytes) {
  const int64_t want_blocks = device_blocks(kWgradBlocksPerSM);
  const int64_t max_chunks = wgrad_max_chunks(part_bytes, x_bytes);
  const int64_t chunks = std::clamp<int64_t>(want_blocks / blocks_per_chunk, 1, std::min<int64_t>(N, max_chunks));
  return ceil_div(N, chunks);
}

// ---- Fast paths ----
// Largest value of tile_elems(ph, pw) over the halos a line of K taps can have at any angle:
// ph, pw <= K/2 and ph + pw <= K/2 * sqrt(2) + 2 (|dh| <= h |sin| + 1, |dw| <= h |cos| + 1).
template <typename F>
int64_t max_over_halos(int K, F tile_elems) {
  const int h = K / 2;
  const int sum = static_cast<int>(std::floor(h * 1.41421356 + 2.0));
  int64_t best = 0;
  for (int ph = 0; ph <= h; ++ph) {
    const int pw = std::min(h, sum - ph);
    if (pw < 0) break;
    best = std::max(best, tile_elems(ph, pw));
  }
  return best;
}

// Tiles of at most TH x TW outputs: the same number of tiles, split evenly (no tile smaller, none
// mostly empty at the plane's edge).
inline void set_even_tiles(FastGeometry& g, int TH, int TW) {
  g.TH = ceil_div(g.H, ceil_div(g.H, TH));
  g.TW = ceil_div(g.W, ceil_div(g.W, TW));
  g.tiles_w = ceil_div(g.W, g.TW);
  g.tiles = ceil_div(g.H, g.TH) * g.tiles_w;
}

// Output tile of a fast path: the whole plane up to `start` x `start`, halved (longer side first)
// until the worst-case tile of any angle (the halos of a line of halo_k taps; default K) fits in
// `soft` bytes (or only in `hard`; both include `fixed`), then evened out over the plane.
template <typename F>
bool choose_fast_tile(FastGeometry& g, int start, int64_t fixed, int64_t soft, int64_t hard_total, F tile_bytes,
                      int halo_k = 0) {
  if (halo_k == 0) halo_k = g.K;
  const int64_t hard = hard_total - fixed;
  soft = std::min(soft - fixed, hard);
  int TH = std::min(g.H, start), TW = std::min(g.W, start);
  if (int64_t(g.H) * g.W <= int64_t(start) * start) {
    TH = g.H;
    TW = g.W;
  }
  auto bytes = [&](int th, int tw) {
    return max_over_halos(halo_k, [&](int ph, int pw) { return tile_bytes(th, tw, ph, pw); });
  };
  halve_to_budget(&TH, &TW, soft, hard, kFastMinTile, bytes);
  set_even_tiles(g, TH, TW);
  return bytes(g.TH, g.TW) <= hard;
}

// NCHW fast path.
inline int64_t seg_tile_bytes(int th, int tw, int ph, int pw) {
  return int64_t(seg_tile_rows(th, ph)) * (seg_tile_cols(tw, pw) | 1) * int64_t(sizeof(float));
}

inline int64_t seg_fixed_bytes(int K) {
  return align16(sizeof(int4) * K) + align16(sizeof(float) * K);
}

// The NCHW fast path's largest task count of a tile (over the four axes, seg_ntasks).
inline int64_t seg_max_tasks(const FastGeometry& g) {
  const int OUTPUTS = kSegR;
  const int rb = ceil_div(g.TH, OUTPUTS);
  return std::max<int64_t>({int64_t(g.TH) * ceil_div(g.TW, OUTPUTS), int64_t(g.TW + OUTPUTS - 1) * rb});
}

// Threads for the NCHW fast path: enough for the largest task count of a tile, in as few rounds of
// up to kFastThreads as possible, balanced.
inline int seg_threads(const FastGeometry& g) {
  const int64_t tasks = seg_max_tasks(g);
  const int64_t rounds = (tasks + kFastThreads - 1) / kFastThreads;
  return static_cast<int>(std::max<int64_t>(32, (((tasks + rounds - 1) / rounds) + 31) / 32 * 32));
}

// Channels_last vector path.
template <typename scalar_t>
int64_t vec_tile_bytes(int th, int tw, int ph, int pw) {
  return int64_t(th + 2 * ph) * (tw + 2 * pw) * 32;  // 32 bytes of channels per pixel
}

// Shared memory for the NHWC tile: the worst single line at any angle, and at least one output row
// with the largest halo on both axes, so that blocks whose channels have different angles can walk
// their tile in strips of rows.
template <typename scalar_t>
int64_t vec_tile_alloc(const FastGeometry& g, int halo_k = 0) {
  if (halo_k == 0) halo_k = g.K;
  const int h = halo_k / 2;
  return std::max(max_over_halos(halo_k, [&](int ph, int pw) { return vec_tile_bytes<scalar_t>(g.TH, g.TW, ph, pw); }),
                  vec_tile_bytes<scalar_t>(1, g.TW, h, h));
}

// The vector kernels' tables of K points: their offsets and, for the weight gradient, its sums: a row
// of K points per warp of a group (groups of warps take disjoint points and share the rows).
template <typename scalar_t>
int64_t vec_fixed_bytes(int K, bool wgrad, int groups = 1) {
  constexpr int CB = VecTraits<scalar_t>::kCB;
  return align16(sizeof(int) * K * CB) + align16(sizeof(float) * K * CB * (wgrad ? kFastThreads / 32 / groups : 1));
}

// Outputs per thread of the vector kernels: kVecRSmall for tiles of up to 64 pixel slots x kVecRSmall.
inline int vec_variant(const FastGeometry& g) {
  return int64_t(g.TH) * g.TW <= 64 * kVecRSmall ? kVecRSmall : kVecRLarge;
}

// The stride-1 vector weight gradient's work split (tiling.h): outputs per thread and groups of
// warps for a tile of g.TH x g.TW outputs and `points` points per block; wide: outputs above
// kVecRLarge allowed.
struct VecWgradShape {
  int outputs, groups;
};

// Tiles on which one group of the block's 64 slots at kVecRSmall outputs would leave more than half
// of them idle (up to 128 pixels): the grouped kernel's.
inline bool vec_wgrad_grouped_tile(int64_t pixels) {
  return 2 * pixels <= int64_t(kFastThreads / 4) * kVecRSmall;
}

inline VecWgradShape vec_wgrad_shape(const FastGeometry& g, int points, bool wide) {
  const int64_t pixels = int64_t(g.TH) * g.TW;
  VecWgradShape best{std::end(kVecWgradOutputs)[-1], 1};
  for (const int r : kVecWgradOutputs) {
    if (pixels <= int64_t(kFastThreads / 4) * r) {
      best.outputs = r;
      break;
    }
  }
  if (best.outputs > kVecRLarge && !wide) best.outputs = kVecRLarge;
  // Groups only where one group would leave more than half of its outputs idle.
  if (best.outputs != kVecRSmall || !vec_wgrad_grouped_tile(pixels)) return best;
  auto cost = [&](int r, int groups) {
    return ceil_div(points, groups) * (r + kVecWgradPointCost) + r * kVecWgradDyCost;
  };
  float best_cost = cost(kVecRSmall, 1);
  for (const int groups : kVecWgradGroups) {
    for (const int r : kVecWgradGroupedOutputs) {
      if (pixels > int64_t(kFastThreads / 4 / groups) * r || cost(r, groups) >= best_cost) continue;
      best = VecWgradShape{r, groups};
      best_cost = cost(r, groups);
    }
  }
  return best;
}

// The halo of a line that a window-gather block stages on a plane of n task positions along an
// axis: points |d| >= n away read only zero padding, and the blocks drop them (clip_segment).
inline int win_clipped_halo(int h, int n) {
  return std::min(h, n - 1);
}

// The halo that a block of several images a plane (the window gather's SMALL) stages: the clipped
// halo, in 16-bit at most OUTPUTS - 1 (WinTraits::kSmallClips). Its tasks there skip the points that
// read the zero padding for all of their outputs (win_tasks' CLIP), so they read at most OUTPUTS - 1
// positions past the plane along their lines.
template <typename scalar_t>
int win_small_halo(int h, int n) {
  return WinTraits<scalar_t>::small_halo(win_clipped_halo(h, n));
}

// Channels_last window path: a single line at any angle over the whole tile, and OUTPUTS x OUTPUTS
// outputs with the largest halos mh, mw on both axes (the smallest sub-tile of blocks whose
// channels have different angles).
template <typename scalar_t>
int64_t win_tile_bytes(int th, int tw, int ph, int pw, int mh, int mw) {
  constexpr int OUTPUTS = WinTraits<scalar_t>::kOutputs;
  auto bytes = [](int rows, int cols) { return int64_t(rows) * (cols | 1) * 32; };
  return std::max(bytes(seg_tile_rows<OUTPUTS>(th, ph), seg_tile_cols<OUTPUTS>(tw, pw)),
                  bytes(seg_tile_rows<OUTPUTS>(OUTPUTS, mh), seg_tile_cols<OUTPUTS>(OUTPUTS, mw)));
}

// The largest count from `start` down to 1 at which blocks of `unit` x count images (blocks_per_image
// blocks an image) keep kWinBlocksPerSM blocks per multiprocessor in the grid (`start` if below 1).
inline int64_t win_count_keeping_grid(int64_t start, int64_t N, int64_t unit, int64_t blocks_per_image) {
  const int64_t min_blocks = device_blocks(kWinBlocksPerSM);
  int64_t m = start;
  while (m > 1 && ceil_div(N, unit * m) * blocks_per_image < min_blocks) --m;
  return m;
}

// Images per window-gather block on a plane that one block covers (g.tiles == 1): enough for the
// plane's tasks along its rows or its columns (the fewer) to fill the block's pixel slots, up to
// kWinMaxImages and the batch of N, while the grid (blocks_per_image per image) keeps
// kWinBlocksPerSM blocks per multiprocessor and the images' staged tiles (image_bytes each) fit
// `budget`; 0 where one image's tile does not fit.
template <typename scalar_t>
int win_images(const FastGeometry& g, int64_t N, int64_t blocks_per_image, int64_t image_bytes, int64_t budget) {
  constexpr int OUTPUTS = WinTraits<scalar_t>::kOutputs;
  const int64_t tasks = std::min(int64_t(g.H) * ceil_div(g.W, OUTPUTS), int64_t(g.W) * ceil_div(g.H, OUTPUTS));
  const int64_t fill = std::max<int64_t>(kFastThreads / 4 / tasks, 1);  // images whose tasks fill the slots
  const int64_t m = std::min<int64_t>({fill, kWinMaxImages, N, budget / image_bytes});
  return static_cast<int>(win_count_keeping_grid(m, N, 1, blocks_per_image));
}

// Groups of `images` images that such a block takes one after the other: up to kWinMaxGroups, while
// the grid keeps kWinBlocksPerSM blocks per multiprocessor.
inline int win_image_groups(int64_t N, int images, int64_t blocks_per_image) {
  return static_cast<int>(win_count_keeping_grid(kWinMaxGroups, N, images, blocks_per_image));
}

// The window gather's tables: the segments of each of the CB channels (one_list: of one channel)
// and the weights of all.
template <typename scalar_t>
int64_t win_fixed_bytes(int K, bool one_list = false) {
  constexpr int CB = VecTraits<scalar_t>::kCB;
  return align16(sizeof(int4) * K * (one_list ? 1 : CB)) + align16(sizeof(float) * K * CB);
}

// The output tile of each window-gather block, from the tile that the allocation holds at any
// angle (g.TH x g.TW): up to kWinRegion outputs a side, the plane split evenly, where that leaves
// the grid at least kWinBlocksPerSM blocks per multiprocessor. Blocks stage their tile in sub-tiles
// that fit the allocation with their channels' actual halo (choose_subtile): lines with small
// halos stage larger sub-tiles, a block's fixed costs (tables, halo) are spread over more outputs
// and the plane's edge tiles are no longer mostly empty.
inline void win_region(FastGeometry& g, int64_t planes) {
  const int64_t min_blocks = device_blocks(kWinBlocksPerSM);
  for (int side = kWinRegion; side > std::max(g.TH, g.TW); side /= 2) {
    const int nh = ceil_div(g.H, side), nw = ceil_div(g.W, side);
    if (planes * nh * nw < min_blocks) continue;
    g.TH = std::max(g.TH, ceil_div(g.H, nh));
    g.TW = std::max(g.TW, ceil_div(g.W, nw));
    g.tiles_w = ceil_div(g.W, g.TW);
    g.tiles = ceil_div(g.H, g.TH) * g.tiles_w;
    return;
  }
}

// A line of this many taps bounds the halos of the parity-class tables: |dh >> 1| <= (|dh| + 1) / 2.
inline int class_halo_k(int K) {
  return 2 * ((K / 2 + 1) / 2 + 1) + 1;
}

// Stride-2 polyphase forward: the fp32 sums of the output tile (rows of tw | 1 pixels) and one staged
// phase-plane tile with the largest halved halo on both axes (a block's channels may have different
// angles).
template <typename scalar_t>
int64_t s2_tile_bytes(int th, int tw, int K) {
  constexpr int CB = VecTraits<scalar_t>::kCB, OUTPUTS = WinTraits<scalar_t>::kOutputs;
  const int h = class_halo_k(K) / 2;
  return int64_t(align16(sizeof(float) * th * (tw | 1) * CB)) +
         int64_t(seg_tile_rows<OUTPUTS>(th, h)) * (seg_tile_cols<OUTPUTS>(tw, h) | 1) * 32;
}

// Its output tile (g: the output plane): up to kS2StartTile a side, halved down to
// OUTPUTS x OUTPUTS while over the budget; false when not even OUTPUTS x OUTPUTS outputs fit in
// `hard` (fixed bytes included). Then grown (sides in steps of OUTPUTS up to kWinRegion, the plane
// split evenly) to the tile of least estimated work over the plane, its staged pixels and
// kSubtileCostPerSubtile per block, among those that keep as many blocks per multiprocessor
// (`blocks_per_sm(bytes)`) and leave the grid (`planes` images x channel blocks) at least
// kWinBlocksPerSM blocks per multiprocessor or no fewer blocks than before: larger tiles stage less
// halo per output and spread each block's tables over more outputs.
template <typename scalar_t, typename BlocksPerSM>
bool choose_s2_tile(FastGeometry& g, int64_t fixed, int64_t hard, int64_t planes, BlocksPerSM blocks_per_sm) {
  constexpr int OUTPUTS = WinTraits<scalar_t>::kOutputs;
  int TH = std::min(g.H, kS2StartTile), TW = std::min(g.W, kS2StartTile);
  while (fixed + s2_tile_bytes<scalar_t>(TH, TW, g.K) > kS2Budget && (TH > OUTPUTS || TW > OUTPUTS)) {
    if (TH >= TW)
      TH = std::max(OUTPUTS, TH / 2);
    else
      TW = std::max(OUTPUTS, TW / 2);
  }
  if (fixed + s2_tile_bytes<scalar_t>(TH, TW, g.K) > hard) return false;
  set_even_tiles(g, TH, TW);
  const int h = class_halo_k(g.K) / 2;
  auto work = [&](const FastGeometry& t) {
    const double staged = double(seg_tile_rows<OUTPUTS>(t.TH, h)) * (seg_tile_cols<OUTPUTS>(t.TW, h) | 1);
    return double(t.tiles) * (staged + kSubtileCostPerSubtile);
  };
  const int blocks = blocks_per_sm(fixed + s2_tile_bytes<scalar_t>(g.TH, g.TW, g.K));
  const int64_t min_blocks = device_blocks(kWinBlocksPerSM);
  FastGeometry best = g;
  for (int th = OUTPUTS; th <= std::min(kWinRegion, round_up(g.H, OUTPUTS)); th += OUTPUTS) {
    for (int tw = OUTPUTS; tw <= std::min(kWinRegion, round_up(g.W, OUTPUTS)); tw += OUTPUTS) {
      FastGeometry t = g;
      set_even_tiles(t, std::min(th, g.H), std::min(tw, g.W));
      const int64_t bytes = fixed + s2_tile_bytes<scalar_t>(t.TH, t.TW, g.K);
      if (bytes > hard || blocks_per_sm(bytes) < blocks) continue;
      if (planes * t.tiles < min_blocks && t.tiles < g.tiles) continue;
      if (work(t) < work(best)) best = t;
    }
  }
  g = best;
  return true;
}

}  // namespace cuda
}  // namespace mmo1d
