// The tensor-core weight gradient of the channels_last 16-bit oriented convolution at stride 1: the
// kernel that assigns each block of 16 channels its tiles (or leaves it to another family) from the
// call's point tables, the sums' kernel, and the reduction of its partial sums.
//
// dw(c, j) = sum_p dy(p, c) x(p + o_j, c) over the outputs p, for each distinct point o_j of channel
// c's line. For 16 outputs p_k, a group of 8 channels and two points j, j',
//   D[(i, c)][n] = sum_k A[(i, c)][k] B[k][n],   A[(i, c)][k] = x(p_k + o_i, c),   B[k][n] = dy(p_k, n)
// is one mma.m16n8k16 with float32 sums, whose diagonal c = n holds the wanted sums; the other entries
// pair one channel's x with another's dy and are dropped, so no channel's value (a NaN included)
// reaches another channel's sums. A is read from the staged x tile by `ldmatrix.trans` of 16-byte pixel
// pieces at the point's offset, B from the staged dy tile once per 16 outputs for all points; the bias
// gradient is one more product with A all ones.
#pragma once

#include "../common/tables.cuh"
#include "mma_ptx.cuh"
#include "mma_wgrad_tiles.cuh"

namespace mmo1d {
namespace cuda {

// The arguments of mma_wgrad_blocks_kernel.
struct MmaWgradBlocksParams {
  PointWgradTables tables;  // the call's point tables (C entries of pts.rows rows)
  MmaWgradBlock* blocks;    // C / 16
  int* taken;               // C / 16: 1 where the block is this family's (the vector kernel skips it)
  MmaWgradView view[2];
  MmaWgradPoints pts;
  int C, ph_cap, budget;
};

// One thread per block of 16 channels: its union halo and view, and whether this family takes it
// (each group of 8 channels holds at most kMmaMaxLists offset lists of at most pts.points points, and
// the halo across the lines is at most ph_cap, the bound the grid was sized for); then its lines a tile
// and its tiles.
__global__ void mma_wgrad_blocks_kernel(const MmaWgradBlocksParams p) {
  const int cb = blockIdx.x * blockDim.x + threadIdx.x;
  if (cb >= p.C / kMmaCB) return;
  int ph = 0, pw = 0, starts = 0;
  bool ok = true;
  for (int g = 0; g < 2; ++g) {
    int lists = 0;
    for (int k = 0; k < 8; ++k) {
      const int c = cb * kMmaCB + 8 * g + k;
      if (k == 0 || !p.tables.same[c]) {
        ++lists;
        starts |= 1 << (8 * g + k);
      }
      ok = ok && p.tables.npts[c] <= p.pts.points;
      const int2 h = p.tables.halo[c];
      ph = max(ph, h.x);
      pw = max(pw, h.y);
    }
    ok = ok && lists <= kMmaMaxLists;
  }
  const int col = ph > pw ? 1 : 0, across = col ? pw : ph;
  ok = ok && across <= p.ph_cap;
  const int tu = ok ? mma_tile_lines(p.view[col], across, p.pts, p.budget) : 0;
  const int tiles = mma_tiles(p.view[col], tu);
  p.blocks[cb] = MmaWgradBlock{tiles, col, across, tu, starts};
  p.taken[cb] = tiles > 0 ? 1 : 0;
}

// The bulk tensor copies' views of x and dy (N, H, W, C) channels_last: per view a line of a tile's box.
struct MmaWgradMaps {
  CUtensorMap x[2];   // boxes of 8 channels x one line of view.bw pixels (a row, or a column)
  CUtensorMap dy[2];  // boxes of 8 channels x one line of view.tv pixels
};

// The arguments of mma_wgrad_kernel, built by its launcher.
struct MmaWgradParams {
  PointWgradTables tables;      // C entries of pts.rows rows
  const MmaWgradBlock* blocks;  // C / 16, from mma_wgrad_blocks_kernel
  float* partial;               // (C, pts.points, chunks * grid_tiles): a block's sums at its points
  float* bpartial;              // (C, chunks * grid_tiles), or null: the bias gradient's
  MmaWgradView view[2];
  MmaWgradPoints pts;
  int N, C;
  int images;      // images a chunk: a block takes its tiles of each image of its chunk, one after the other
  int grid_tiles;  // blocks a (chunk, 16 channels): block b takes tiles b, b + grid_tiles, ...
};

// What a warp's pass over its blocks of 16 outputs reads: the x and dy planes of its group (shared
// addresses), the pixel tables, and its lane's ldmatrix rows.
struct MmaPass {
  uint32_t xg, dg;
  const int* pix_s;
  const int* pix_o;
  int apix, brow, first, nblk;
};

// R pairs of points (the lane's byte offsets off) over the warp's blocks of 16 outputs, first, first + 4,
// ...: per block dy's B fragment once, then R products into acc; BIAS: one more with A all ones (the
// bias gradient's sums of dy) into accb. A compile-time R keeps the products free of branches, so that
// each block's loads issue ahead of its products.
template <bool HALF, int R, bool BIAS>
__device__ __forceinline__ void mma_pass(const MmaPass& m, const int* off, float (&acc)[kMmaPassPairs][4],
                                         float (&accb)[4]) {
  constexpr uint32_t kOne = HALF ? 0x3c003c00u : 0x3f803f80u;
  constexpr uint32_t kOnes[4] = {kOne, kOne, kOne, kOne};
  int o[R];
#pragma unroll
  for (int jj = 0; jj < R; ++jj) o[jj] = off[jj];
  for (int blk = m.first; blk < m.nblk; blk += 4) {
    uint32_t b0, b1;
    ldsm_x2_trans(b0, b1, m.dg + m.pix_o[blk * 16 + m.brow]);
    const uint32_t xa = m.xg + m.pix_s[blk * 16 + m.apix];
#pragma unroll
    for (int jj = 0; jj < R; ++jj) {
      uint32_t f[4];
      ldsm_x4_trans(f, xa + o[jj]);
      mma_16816<HALF>(acc[jj], f, b0, b1);
    }
    if constexpr (BIAS) mma_16816<HALF>(accb, kOnes, b0, b1);
  }
}

// mma_pass for r (1 to kMmaPassPairs) pairs, chosen at run time.
template <bool HALF, bool BIAS, int R = kMmaPassPairs>
__device__ __forceinline__ void mma_pass_of(int r, const MmaPass& m, const int* off, float (&acc)[kMmaPassPairs][4],
                                            float (&accb)[4]) {
  if constexpr (R > 1) {
    if (r < R) return mma_pass_of<HALF, BIAS, R - 1>(r, m, off, acc, accb);
  }
  mma_pass<HALF, R, BIAS>(m, off, acc, accb);
}

// One block: the images of chunk blockIdx.x / grid_tiles, channels [16 blockIdx.y, + 16), its tiles
// blockIdx.x % grid_tiles, + grid_tiles, ... of its view in each image, one after the other. First the
// groups' offset lists into shared memory (byte offsets in the x tile; a group holds one list, or two
// where it straddles two angles). Per tile, warp 0 issues the copies (a line each: x's nu + 2 ph lines
// and dy's nu, both groups of 8 channels) while every thread writes the pixel tables. Warps 4g to 4g + 3
// take group g: each every fourth block of 16 outputs, for each list its points in passes of up to 8
// pairs held in registers; each pass's diagonal is added to the warp's row of sums (in the order of the
// block's tiles). Then the 4 warps' rows are added in order into partial[c][point][part], part = chunk *
// grid_tiles + blockIdx.x % grid_tiles.
template <bool HALF>
__global__ void __launch_bounds__(kMmaWarps * 32, 2)
    mma_wgrad_kernel(const __grid_constant__ MmaWgradParams p, const __grid_constant__ MmaWgradMaps maps) {
#if MMO1D_MMA_ARCH
  extern __shared__ __align__(128) unsigned char smem[];
  const int G = p.grid_tiles, chunk = blockIdx.x / G, gt = blockIdx.x - chunk * G, cb = blockIdx.y;
  const MmaWgradBlock b = p.blocks[cb];
  if (gt >= b.tiles) return;
  const MmaWgradPoints pts = p.pts;
  const int o = b.col, KH = pts.reach, ph = b.ph, tu = b.tu, P1 = pts.points + 1, cap = pts.cap;
  const int n0 = chunk * p.images, n1 = min(p.N, n0 + p.images);
  const MmaWgradView v = p.view[o];
  const int bw = v.bw, tv = v.tv;
  const int xplane = mma_x_plane_bytes(tu, ph, bw), dplane = mma_dy_plane_bytes(tu, tv);
  const int slots = mma_pixel_slots(tu, tv);
  int* pix_s = reinterpret_cast<int*>(smem + 2 * xplane + 2 * dplane);  // x tile byte offset of output i
  int* pix_o = pix_s + slots;                                           // dy tile byte offset of output i
  float* red = reinterpret_cast<float*>(pix_o + slots);                 // [warp][points + 1][8]
  int* lists = reinterpret_cast<int*>(red + kMmaWarps * P1 * 8);        // [group][list][cap]
  int* npts = lists + 2 * kMmaMaxLists * cap;                           // [group][list]
  uint64_t* mbar_p = reinterpret_cast<uint64_t*>(npts + 2 * kMmaMaxLists);
  const uint32_t s0 = smem_addr(smem), mbar = smem_addr(mbar_p);
  const int c0 = cb * kMmaCB, lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int grp = warp >> 2, wq = warp & 3, gq = lane >> 2, tq = lane & 3;
  // Lane (gq, tq) with gq / 2 == tq holds channel gq's sums: point 2j in acc[.][gq % 2], 2j + 1 in
  // acc[.][2 + gq % 2].
  const bool diag = (gq >> 1) == tq, odd = gq & 1;
  float* row = red + warp * P1 * 8;
  const int64_t parts = int64_t(gridDim.x);
  if (threadIdx.x == 0) mbar_init(mbar);
  for (int i = threadIdx.x; i < kMmaWarps * P1 * 8; i += blockDim.x) red[i] = 0.f;
  if (threadIdx.x < 2) {  // each dy plane's zero pixel, past its tile
    *reinterpret_cast<uint4*>(smem + 2 * xplane + threadIdx.x * dplane + tu * tv * 16) = make_uint4(0, 0, 0, 0);
  }
  // The lists: entry (g, l, j) of the l-th list of group g (its first channel c's points j, the last
  // repeated up to cap) as a byte offset in the x tile's view.
  for (int i = threadIdx.x; i < 2 * kMmaMaxLists * cap; i += blockDim.x) {
    const int g = i / (kMmaMaxLists * cap), l = (i / cap) % kMmaMaxLists, j = i % cap;
    int s = (b.starts >> (8 * g)) & 0xff;
    for (int k = 0; k < l && s != 0; ++k) s &= s - 1;  // drop the first l list starts
    if (s == 0) continue;
    const int c = c0 + 8 * g + __ffs(s) - 1, P = p.tables.npts[c];
    const int2 d = p.tables.off[int64_t(c) * pts.rows + min(j, P - 1)];
    lists[i] = ((o ? d.y : d.x) * bw + (o ? d.x : d.y)) * 16;
    if (j == 0) npts[g * kMmaMaxLists + l] = P;
  }
  __syncthreads();
  MmaPass m{s0 + grp * xplane, s0 + 2 * xplane + grp * dplane, pix_s, pix_o,
            8 * ((lane >> 4) & 1) + (lane & 7), lane & 15, wq, 0};
  // ldmatrix rows: lane l gives matrix l / 8's row l % 8, pixel 8 ((l / 16) % 2) + l % 8 of the block of
  // 16 at point 2j + (l / 8) % 2.
  const int sel = (lane >> 3) & 1;
  const int per_image = (b.tiles - gt + G - 1) / G;
  for (int it = 0; it < (n1 - n0) * per_image; ++it) {
    const int n = n0 + it / per_image, tile = gt + (it % per_image) * G;
    const int ti = tile / v.tiles_v, u0 = ti * tu, v0 = (tile - ti * v.tiles_v) * tv;
    const int nu = min(tu, v.lines - u0), nv = min(tv, v.along - v0);  // the tile's outputs in the plane
    const int npix = nu * nv, xlines = nu + 2 * ph;
    m.nblk = (npix + 15) / 16;
    if (warp == 0) {
      if (lane == 0) mbar_arrive_expect(mbar, uint32_t(2 * xlines * bw * 16 + 2 * nu * tv * 16));
      __syncwarp();
      // Copy i: x's lines (group, line), then dy's. A line at u across is a row (view 0: coordinates
      // (along, u)) or a column (view 1: (u, along)).
      for (int i = lane; i < 2 * (xlines + nu); i += 32) {
        const bool is_x = i < 2 * xlines;
        const int k = is_x ? i : i - 2 * xlines, lines = is_x ? xlines : nu, g = k / lines, line = k - g * lines;
        const int u = is_x ? u0 - ph + line : u0 + line, a = is_x ? v0 - KH : v0;
        const uint32_t dst = is_x ? s0 + g * xplane + line * bw * 16 : s0 + 2 * xplane + g * dplane + line * tv * 16;
        tma_load_4d(dst, is_x ? &maps.x[o] : &maps.dy[o], c0 + 8 * g, o ? u : a, o ? a : u, n, mbar);
      }
    }
    // Output i of the tile (line r, position q in the view); the pad of the last block of 16 reads the
    // last output's x and the zero dy pixel (its products add zeros).
    for (int i = threadIdx.x; i < m.nblk * 16; i += blockDim.x) {
      const int e = min(i, npix - 1), r = e / nv, q = e - r * nv;
      pix_s[i] = ((r + ph) * bw + q + KH) * 16;
      pix_o[i] = i < npix ? (r * tv + q) * 16 : tu * tv * 16;
    }
    float accb[4] = {0.f, 0.f, 0.f, 0.f};
    __syncthreads();  // the pixel tables
    mbar_wait(mbar, it & 1);
    int s = (b.starts >> (8 * grp)) & 0xff;
    for (int l = 0; s != 0; ++l) {  // the group's lists: channels [a, e) share channel a's points
      const int a = __ffs(s) - 1;
      s &= s - 1;
      const int e = s != 0 ? __ffs(s) - 1 : 8;
      const int P = npts[grp * kMmaMaxLists + l], pairs = (P + 1) / 2;
      const int* lo = lists + (grp * kMmaMaxLists + l) * cap + sel;
      const bool mine = diag && gq >= a && gq < e;
      for (int j0 = 0; j0 < pairs; j0 += kMmaPassPairs) {
        int off[kMmaPassPairs];
#pragma unroll
        for (int jj = 0; jj < kMmaPassPairs; ++jj) off[jj] = lo[min(2 * (j0 + jj), cap - 2)];
        float acc[kMmaPassPairs][4];
#pragma unroll
        for (int jj = 0; jj < kMmaPassPairs; ++jj) acc[jj][0] = acc[jj][1] = acc[jj][2] = acc[jj][3] = 0.f;
        const int r = min(pairs - j0, kMmaPassPairs);
        if (l == 0 && j0 == 0) {
          mma_pass_of<HALF, true>(r, m, off, acc, accb);
        } else {
          mma_pass_of<HALF, false>(r, m, off, acc, accb);
        }
        if (mine) {
#pragma unroll
          for (int jj = 0; jj < kMmaPassPairs; ++jj) {
            const int j = 2 * (j0 + jj);
            if (j < P) row[j * 8 + gq] += odd ? acc[jj][1] : acc[jj][0];
            if (j + 1 < P) row[(j + 1) * 8 + gq] += odd ? acc[jj][3] : acc[jj][2];
          }
        }
      }
    }
    if (gq == 0) {  // the bias: every row of accb holds the column sums
      row[pts.points * 8 + 2 * tq] += accb[0];
      row[pts.points * 8 + 2 * tq + 1] += accb[1];
    }
    __syncthreads();  // every read of this tile's planes and pixel tables done
  }
  const int64_t part = blockIdx.x;
  for (int i = threadIdx.x; i < kMmaCB * P1; i += blockDim.x) {
    const int cl = i / P1, t = i - cl * P1, g = cl >> 3, k = cl & 7, c = c0 + cl;
    const bool is_bias = t == pts.points;
    if (is_bias ? p.bpartial == nullptr : t >= p.tables.npts[c]) continue;
    float sum = 0.f;
#pragma unroll
    for (int w = 0; w < 4; ++w) sum += red[((4 * g + w) * P1 + t) * 8 + k];
    if (is_bias) {
      p.bpartial[int64_t(c) * parts + part] = sum;
    } else {
      p.partial[(int64_t(c) * pts.points + t) * parts + part] = sum;
    }
  }
#endif  // MMO1D_MMA_ARCH
}

// The arguments of mma_wgrad_reduce_kernel.
template <typename scalar_t>
struct MmaWgradReduceParams {
  const MmaWgradBlock* blocks;
  const float* partial;   // as MmaWgradParams
  const float* bpartial;  // or null
  const int* tap_pt;      // (C, E): each tap's point, the entries of dw; or null: the entries of sums
  const int* npts;        // (C): each channel's points (with sums)
  scalar_t* dw;           // (C, E), with tap_pt
  float* sums;            // (C, E), without tap_pt: each point's sum (E the tables' rows)
  scalar_t* db;           // (C), or null
  int C, E, points, chunks, grid_tiles;
};

// The entries c E + t (dw[c, t], or sums[c, t] for t below npts[c]) and C E + c (db[c]) of the channels
// whose block this family took, a warp an entry: lane l adds the parts l, l + 32, ... (chunks, then the
// blocks of a chunk) in order, then the lanes' sums by a fixed tree of shuffles.
template <typename scalar_t>
__global__ void mma_wgrad_reduce_kernel(const MmaWgradReduceParams<scalar_t> p) {
  const int64_t e = (int64_t(blockIdx.x) * blockDim.x + threadIdx.x) >> 5;
  const int lane = threadIdx.x & 31, E = p.E, G = p.grid_tiles;
  const int64_t CE = int64_t(p.C) * E;
  const bool is_bias = e >= CE;
  if (e >= CE + (p.db != nullptr ? p.C : 0)) return;
  const int c = is_bias ? int(e - CE) : int(e / E);
  const int used = min(p.blocks[c / kMmaCB].tiles, G);  // blocks of a chunk that wrote parts
  if (used == 0) return;
  const int t = is_bias ? 0 : int(e - int64_t(c) * E);
  if (!is_bias && p.tap_pt == nullptr && t >= p.npts[c]) return;
  const int64_t parts = int64_t(p.chunks) * G;
  const int point = is_bias ? 0 : (p.tap_pt != nullptr ? p.tap_pt[e] : t);
  const float* src = is_bias ? p.bpartial + int64_t(c) * parts : p.partial + (int64_t(c) * p.points + point) * parts;
  float s = 0.f;
  for (int64_t u = lane; u < int64_t(p.chunks) * used; u += 32) {
    const int64_t k = u / used;
    s += src[k * G + (u - k * used)];
  }
#pragma unroll
  for (int m = 16; m >= 1; m >>= 1) s += __shfl_xor_sync(0xffffffffu, s, m);
  if (lane != 0) return;
  if (is_bias) {
    p.db[c] = static_cast<scalar_t>(s);
  } else if (p.tap_pt != nullptr) {
    p.dw[e] = static_cast<scalar_t>(s);
  } else {
    p.sums[e] = s;
  }
}

}  // namespace cuda
}  // namespace mmo1d
