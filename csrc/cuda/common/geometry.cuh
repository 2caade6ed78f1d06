// Geometry of a launch shared by the host launchers and the kernels: the general gather's and the
// fast paths' output tiles, and the staged tiles and task lists of the segment-window paths. What
// only the kernels use compiles under nvcc alone (`#if defined(__CUDACC__)`): the C++ sources of
// the CUDA build (the entries, the dispatcher) include the rest.
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

// Tile `tile` of g's grid of output tiles: its origin (p0, q0) and size th x tw (the last tiles of
// a row or column may be smaller).
struct OutputTile {
  int p0, q0, th, tw;
};

#if defined(__CUDACC__)  // kernels only
__device__ __forceinline__ OutputTile output_tile(const GatherGeometry& g, int tile) {
  const int p0 = (tile / g.tiles_w) * g.TH, q0 = (tile % g.tiles_w) * g.TW;
  return OutputTile{p0, q0, min(g.TH, g.Ho - p0), min(g.TW, g.Wo - q0)};
}

__device__ __forceinline__ OutputTile output_tile(const FastGeometry& g, int tile) {
  const int p0 = (tile / g.tiles_w) * g.TH, q0 = (tile % g.tiles_w) * g.TW;
  return OutputTile{p0, q0, min(g.TH, g.H - p0), min(g.TW, g.W - q0)};
}
#endif

// What every weight-gradient kernel reads and writes: x and dy, N images summed in chunks of
// `chunk`, and the partial sums partial (C, parts, K) that wgrad_reduce_kernel adds up.
template <typename scalar_t, typename acc_t>
struct WgradOperands {
  const scalar_t* x;
  const scalar_t* dy;
  acc_t* partial;
  int N, chunk;
};

// The operands of x (N, ...) and dy, partial sums of acc_t allocated by the launcher.
template <typename scalar_t, typename acc_t>
WgradOperands<scalar_t, acc_t> wgrad_operands(const at::Tensor& x, const at::Tensor& dy, const at::Tensor& partial,
                                              int chunk) {
  return WgradOperands<scalar_t, acc_t>{x.data_ptr<scalar_t>(), dy.data_ptr<scalar_t>(), partial.data_ptr<acc_t>(),
                                        static_cast<int>(x.size(0)), chunk};
}

#if defined(__CUDACC__)  // kernels only
// Where a weight-gradient block works: output tile `tile` of `tiles`, chunk `ck` of the `chunks`
// chunks of images, and channel (or block of channels) `c`: blockIdx.x runs over the tiles, then the
// chunks, then the channels. Its sums go to partial's row row(ch) of channel ch (the part
// tile * chunks + ck of tiles * chunks).
struct WgradPart {
  int tile, ck, c, tiles, chunks;
  // The block's images [first_image, end_image) of the N in chunks of `chunk` (two ints: held as an
  // int2, the pair cost the float32 NCHW weight gradient 24 instructions and 8 bytes of stack).
  __device__ __forceinline__ int first_image(int chunk) const { return ck * chunk; }
  __device__ __forceinline__ int end_image(int N, int chunk) const { return min(N, (ck + 1) * chunk); }
  __device__ __forceinline__ int64_t row(int ch) const { return int64_t(ch) * (tiles * chunks) + tile * chunks + ck; }
};

__device__ __forceinline__ WgradPart wgrad_part(int tiles, int N, int chunk) {
  const int chunks = (N + chunk - 1) / chunk;
  return WgradPart{static_cast<int>(blockIdx.x % tiles), static_cast<int>((blockIdx.x / tiles) % chunks),
                   static_cast<int>(blockIdx.x / (tiles * chunks)), tiles, chunks};
}
#endif

__host__ __device__ __forceinline__ int round_up(int a, int b) {
  return (a + b - 1) / b * b;
}

// Shared-memory tile of the NCHW fast path (OUTPUTS outputs per thread): rows
// [p0 - ph, p0 + THr + ph), columns [q0 - pw - pad, q0 + TWr + pw + pad) (THr, TWr: th, tw rounded up
// to OUTPUTS; pad: OUTPUTS - 1 columns a side where diagonal tasks start outside the tile, which the
// channels_last window gather leaves out for row and column lines), stored with an odd row pitch
// (EW | 1) so that the lanes of a warp reading one column each hit distinct banks.
template <int OUTPUTS = kSegR>
__host__ __device__ __forceinline__ int seg_tile_rows(int th, int ph) {
  return round_up(th, OUTPUTS) + 2 * ph;
}
template <int OUTPUTS = kSegR>
__host__ __device__ __forceinline__ int seg_tile_cols(int tw, int pw, int pad = OUTPUTS - 1) {
  return round_up(tw, OUTPUTS) + 2 * pw + 2 * pad;
}

// Tasks of a th x tw output tile for axis `mode`: a task is OUTPUTS outputs (p, q) + r * u. Mode 0:
// one per row and group of OUTPUTS columns (lanes walk down the rows); mode 1: one per column and
// group of OUTPUTS rows; modes 2 and 3: diagonal runs that start up to OUTPUTS - 1 columns outside
// the tile (their outside outputs are computed on zero padding and not stored).
template <int OUTPUTS = kSegR>
__device__ __forceinline__ int seg_ntasks(int mode, int th, int tw) {
  const int row_blocks = round_up(th, OUTPUTS) / OUTPUTS;
  return mode == 0 ? th * (round_up(tw, OUTPUTS) / OUTPUTS) : (mode == 1 ? tw : tw + OUTPUTS - 1) * row_blocks;
}

template <int OUTPUTS = kSegR>
__device__ __forceinline__ void seg_task(int mode, int k, int th, int tw, int* p, int* q) {
  if (mode == 0) {
    const int cb = k / th;
    *p = k - cb * th;
    *q = cb * OUTPUTS;
  } else if (mode == 1) {
    const int rb = k / tw;
    *q = k - rb * tw;
    *p = rb * OUTPUTS;
  } else {
    const int span = tw + OUTPUTS - 1;
    const int rb = k / span;
    const int qq = k - rb * span;
    *p = rb * OUTPUTS;
    *q = mode == 2 ? qq - (OUTPUTS - 1) : qq;
  }
}

// Diagonal tasks cut into pieces of OUTPUTS outputs along the tile's whole diagonals (instead of
// seg_task's bands of OUTPUTS rows, whose runs start outside the tile): piece j of the diagonal
// q - p = d starts OUTPUTS j outputs after its first, and the diagonals longer than m = OUTPUTS j,
// m - th < d < tw - m, have one, th + tw - 1 - 2 m of them. Mode 2 takes (p, q) + r (1, 1), mode 3
// the mirror image, q -> tw - 1 - q. A piece ends up to OUTPUTS - 1 outputs past its diagonal's last,
// below the tile's last row or right of its last column (computed, not stored).
template <int OUTPUTS>
__host__ __device__ __forceinline__ int diag_npieces(int th, int tw) {
  int n = 0;
  for (int m = 0; m < th && m < tw; m += OUTPUTS) n += th + tw - 1 - 2 * m;
  return n;
}

#if defined(__CUDACC__)  // kernels only
template <int OUTPUTS>
__device__ __forceinline__ void diag_piece(int mode, int k, int th, int tw, int* p, int* q) {
  int m = 0;
  for (int count = th + tw - 1; k >= count; count -= 2 * OUTPUTS) {
    k -= count;
    m += OUTPUTS;
  }
  const int d = m - th + 1 + k;
  *p = max(0, -d) + m;
  const int qd = max(0, d) + m;
  *q = mode == 2 ? qd : tw - 1 - qd;
}
#endif

// Channels_last fast paths: a block takes 32 bytes of channels per pixel, 4 lanes per pixel.
template <typename scalar_t>
struct VecTraits {
  static constexpr int kCB = 32 / sizeof(scalar_t);  // channels per block (32 bytes per pixel)
  static constexpr int kV = kCB / 4;                 // channels per lane (4 lanes per pixel)
};

// Window paths: kOutputs outputs per thread along the segment axis, kOutputs * V = 16 accumulators.
template <typename scalar_t>
struct WinTraits {
  static constexpr int kOutputs = 16 / VecTraits<scalar_t>::kV;  // kOutputs * V = 16 accumulators per thread
  // The several-images path (SMALL) skips the zero padding and stages a halo of at most kOutputs - 1
  // (16-bit; float32's loop spilled with it, so it stages the lines' clipped halo).
  static constexpr bool kSmallClips = sizeof(scalar_t) == 2;
  // The halo that path stages for lines of halo h (already clipped to the plane).
  __host__ __device__ static constexpr int small_halo(int h) {
    return kSmallClips && h > kOutputs - 1 ? kOutputs - 1 : h;
  }
};

}  // namespace cuda
}  // namespace mmo1d
