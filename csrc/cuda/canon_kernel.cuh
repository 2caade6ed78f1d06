// The canonical-direction family: the stride-1 gathers (forward and input gradient) of channels_last
// float16 / bfloat16 tensors whose angles, channel block by channel block, are one of the eight
// directions k * 22.5 degrees with truncated offsets, as every model's stride-1 convolutions use.
//
// The tap offsets of those eight lines are known when the program is compiled, so each direction is
// a kernel body of its own in which every shared-memory address is an immediate: no per-call
// tables, no segment loop. A thread owns a block of kRH x kRW outputs of two channels and walks the
// input pixels that block reads, each loaded once from the staged tile and converted once, feeding
// every (output, point) pair that reads it from registers; the merged weights of the line's points
// (coinciding taps summed, as at 45 degrees) stay in registers for the whole tile. Sums are float32
// in a fixed order. The input gradient is the forward with the taps reversed (truncation is odd:
// the offsets of tap K - 1 - t are those of tap t negated).
#pragma once

#include <cstdint>
#include <utility>

#include "nhwc_common.cuh"

namespace mmo1d {
namespace cuda {

constexpr int kCanonDirs = 8;
constexpr int kCanonRH = 4, kCanonRW = 8;                             // outputs per thread
constexpr int kCanonWarps = 4;                                         // one row of thread blocks each
constexpr int kCanonTH = kCanonWarps * kCanonRH, kCanonTW = 4 * kCanonRW;  // outputs per block tile
constexpr int kCanonThreads = 32 * kCanonWarps;
constexpr int kCanonCB = 16;  // channels of a block: 32 bytes of float16 / bfloat16 per pixel

// Sine and cosine of k * 22.5 degrees; with them the offsets of the canonical lines are computed as
// the op defines them (float32 products, truncated). The launcher checks each call's angles against
// the offsets these give, tap by tap.
constexpr float kCanonSin[kCanonDirs] = {0.0f,        0.38268343f, 0.70710678f, 0.92387953f,
                                         1.0f,        0.92387953f, 0.70710678f, 0.38268343f};
constexpr float kCanonCos[kCanonDirs] = {1.0f,         0.92387953f,  0.70710678f,  0.38268343f,
                                         0.0f,         -0.38268343f, -0.70710678f, -0.92387953f};

struct CanonOffset {
  int dh, dw;
};

constexpr CanonOffset canon_offset(int dir, int K, int t) {
  const float d = static_cast<float>(t - K / 2);
  return {static_cast<int>(-d * kCanonSin[dir]), static_cast<int>(d * kCanonCos[dir])};
}

constexpr int canon_abs(int v) {
  return v < 0 ? -v : v;
}

// The thread's program for direction DIR and K taps: the line's distinct points (runs of taps with
// equal offsets), and the input pixels of a kRH x kRW output block in the order they are loaded, each
// with the (output, point) pairs it feeds. Rows and columns are relative to the block's first output
// shifted by the halo (PH, PW), so every index is >= 0.
template <int DIR, int K>
struct CanonProgram {
  struct Point {
    int dh, dw, t0, t1;  // taps [t0, t1)
  };
  struct Load {
    int xr, xc, f0, f1;  // pixel (xr, xc); fmas [f0, f1)
  };
  struct Fma {
    int i, j, p;  // output (i, j) += point p's weight * pixel
  };
  static constexpr int kRows = kCanonRH + 2 * (K / 2), kCols = kCanonRW + 2 * (K / 2);
  static constexpr int kMaxFmas = kCanonRH * kCanonRW * K;

  struct Tables {
    Point pts[K] = {};
    int npts = 0, ph = 0, pw = 0;
    Load loads[kRows * kCols] = {};
    int nloads = 0;
    Fma fmas[kMaxFmas] = {};
    int nfmas = 0;
  };

  static constexpr Tables build() {
    Tables tb;
    for (int t = 0; t < K; ++t) {
      const CanonOffset o = canon_offset(DIR, K, t);
      if (tb.npts > 0 && tb.pts[tb.npts - 1].dh == o.dh && tb.pts[tb.npts - 1].dw == o.dw) {
        tb.pts[tb.npts - 1].t1 = t + 1;
      } else {
        tb.pts[tb.npts++] = Point{o.dh, o.dw, t, t + 1};
      }
      tb.ph = canon_abs(o.dh) > tb.ph ? canon_abs(o.dh) : tb.ph;
      tb.pw = canon_abs(o.dw) > tb.pw ? canon_abs(o.dw) : tb.pw;
    }
    // Counting sort of the (output, point) pairs by the pixel they read, row-major.
    int count[kRows * kCols] = {};
    for (int i = 0; i < kCanonRH; ++i) {
      for (int p = 0; p < tb.npts; ++p) {
        for (int j = 0; j < kCanonRW; ++j) {
          ++count[(i + tb.ph + tb.pts[p].dh) * kCols + j + tb.pw + tb.pts[p].dw];
        }
      }
    }
    int start[kRows * kCols] = {};
    int next = 0;
    for (int k = 0; k < kRows * kCols; ++k) {
      start[k] = next;
      if (count[k] > 0) {
        tb.loads[tb.nloads++] = Load{k / kCols, k % kCols, next, next + count[k]};
      }
      next += count[k];
    }
    tb.nfmas = next;
    for (int i = 0; i < kCanonRH; ++i) {
      for (int p = 0; p < tb.npts; ++p) {
        for (int j = 0; j < kCanonRW; ++j) {
          const int k = (i + tb.ph + tb.pts[p].dh) * kCols + j + tb.pw + tb.pts[p].dw;
          tb.fmas[start[k]++] = Fma{i, j, p};
        }
      }
    }
    return tb;
  }

  static constexpr Tables kT = build();
  static constexpr int kPH = kT.ph, kPW = kT.pw;
  // The staged tile: (kCanonTH + 2 PH) rows of (kCanonTW + 2 PW) pixels, 32 bytes each, pixel
  // (r, c) at slot r * kPitch + c + c / 8: the four column blocks of a warp's threads (8 columns
  // apart) then read four different 32-byte bank groups.
  static constexpr int kTileRows = kCanonTH + 2 * kPH, kTileCols = kCanonTW + 2 * kPW;
  static constexpr int kPitch = kTileCols + (kTileCols - 1) / 8 + 1;
  static constexpr int kSmemBytes = kTileRows * kPitch * 32;

  static constexpr int slot(int r, int c) {
    return r * kPitch + c + c / 8;
  }
};

template <typename F, int... I>
__device__ __forceinline__ void canon_unroll(F&& f, std::integer_sequence<int, I...>) {
  (f(std::integral_constant<int, I>{}), ...);
}

// Two channels (4 bytes) <-> two floats.
template <typename scalar_t>
__device__ __forceinline__ void canon_load2(const unsigned char* p, float& a, float& b) {
  const uint32_t u = *reinterpret_cast<const uint32_t*>(p);
  if constexpr (std::is_same_v<scalar_t, c10::BFloat16>) {
    a = __uint_as_float(u << 16);
    b = __uint_as_float(u & 0xffff0000u);
  } else {
    const float2 f = __half22float2(*reinterpret_cast<const __half2*>(&u));
    a = f.x;
    b = f.y;
  }
}

template <typename scalar_t>
__device__ __forceinline__ void canon_store2(scalar_t* p, float a, float b) {
  uint32_t u;
  if constexpr (std::is_same_v<scalar_t, c10::BFloat16>) {
    const __nv_bfloat162 v = __floats2bfloat162_rn(a, b);
    u = *reinterpret_cast<const uint32_t*>(&v);
  } else {
    const __half2 v = __floats2half2_rn(a, b);
    u = *reinterpret_cast<const uint32_t*>(&v);
  }
  *reinterpret_cast<uint32_t*>(p) = u;
}

// One block tile of one direction: stage the input tile, then each thread its kRH x kRW outputs of
// two channels. src/out: the image's channels_last planes; c0: the block's first channel.
template <typename scalar_t, int DIR, int K, bool REV>
__device__ __forceinline__ void canon_tile(const scalar_t* __restrict__ src, scalar_t* __restrict__ out,
                                           const scalar_t* __restrict__ bias, const scalar_t* __restrict__ weight,
                                           bool residual, int C, int H, int W, int c0, int p0, int q0,
                                           unsigned char* S) {
  using Prog = CanonProgram<DIR, K>;
  constexpr int PH = Prog::kPH, PW = Prog::kPW;
  // Stage: every pixel of the tile as two 16-byte halves, zero outside the image.
  for (int e = threadIdx.x; e < Prog::kTileRows * Prog::kTileCols * 2; e += kCanonThreads) {
    const int half = e & 1, pix = e >> 1;
    const int r = pix / Prog::kTileCols, c = pix - r * Prog::kTileCols;
    const int gi = p0 - PH + r, gj = q0 - PW + c;
    const bool ok = static_cast<unsigned>(gi) < static_cast<unsigned>(H) &&
                    static_cast<unsigned>(gj) < static_cast<unsigned>(W);
    const scalar_t* g = ok ? src + (int64_t(gi) * W + gj) * C + c0 + half * 8 : src;
    cp_async16(S + Prog::slot(r, c) * 32 + half * 16, g, ok);
  }
  cp_async_wait_all();
  __syncthreads();

  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int s = lane >> 3, l = lane & 7;  // column block of the warp's row, channel pair
  const int i0 = warp * kCanonRH, j0 = s * kCanonRW;
  if (p0 + i0 >= H || q0 + j0 >= W) return;  // the whole block lies outside the output
  const int c = c0 + 2 * l;

  // The merged weights of the line's points for the two channels (taps reversed for dx).
  float w[Prog::kT.npts][2];
  canon_unroll(
      [&](auto P) {
        constexpr auto pt = Prog::kT.pts[decltype(P)::value];
        float a = 0.0f, b = 0.0f;
#pragma unroll
        for (int t = pt.t0; t < pt.t1; ++t) {
          const int tt = REV ? K - 1 - t : t;
          a += static_cast<float>(weight[int64_t(c) * K + tt]);
          b += static_cast<float>(weight[int64_t(c + 1) * K + tt]);
        }
        w[decltype(P)::value][0] = a;
        w[decltype(P)::value][1] = b;
      },
      std::make_integer_sequence<int, Prog::kT.npts>{});

  float acc[kCanonRH][kCanonRW][2];
  const float b0 = bias != nullptr ? static_cast<float>(bias[c]) : 0.0f;
  const float b1 = bias != nullptr ? static_cast<float>(bias[c + 1]) : 0.0f;
#pragma unroll
  for (int i = 0; i < kCanonRH; ++i) {
#pragma unroll
    for (int j = 0; j < kCanonRW; ++j) {
      acc[i][j][0] = b0;
      acc[i][j][1] = b1;
    }
  }

  // Slot (i0, j0) of the tile is this thread's pixel (0, 0) of the program: (j0 + x) / 8 = s + x / 8.
  const unsigned char* base = S + (i0 * Prog::kPitch + j0 + s) * 32 + l * 4;
  canon_unroll(
      [&](auto L) {
        constexpr auto ld = Prog::kT.loads[decltype(L)::value];
        float v0, v1;
        canon_load2<scalar_t>(base + Prog::slot(ld.xr, ld.xc) * 32, v0, v1);
        canon_unroll(
            [&](auto F) {
              constexpr auto f = Prog::kT.fmas[ld.f0 + decltype(F)::value];
              acc[f.i][f.j][0] = fmaf(w[f.p][0], v0, acc[f.i][f.j][0]);
              acc[f.i][f.j][1] = fmaf(w[f.p][1], v1, acc[f.i][f.j][1]);
            },
            std::make_integer_sequence<int, ld.f1 - ld.f0>{});
      },
      std::make_integer_sequence<int, Prog::kT.nloads>{});

#pragma unroll
  for (int i = 0; i < kCanonRH; ++i) {
#pragma unroll
    for (int j = 0; j < kCanonRW; ++j) {
      const int p = p0 + i0 + i, q = q0 + j0 + j;
      if (p < H && q < W) {
        float a = acc[i][j][0], b = acc[i][j][1];
        if (residual) {
          float x0, x1;
          canon_load2<scalar_t>(base + Prog::slot(i + PH, j + PW) * 32, x0, x1);
          a += x0;
          b += x1;
        }
        canon_store2<scalar_t>(out + (int64_t(p) * W + q) * C + c, a, b);
      }
    }
  }
}

// One block per (channel block, image, tile); dirs[channel block] is its direction. Forward (REV
// false: src = x, with bias) and input gradient (REV true: src = dy).
template <typename scalar_t, int K, bool REV>
__global__ void __launch_bounds__(kCanonThreads)
    canon_gather_nhwc_kernel(const scalar_t* __restrict__ src, scalar_t* __restrict__ out,
                             const scalar_t* __restrict__ bias, const scalar_t* __restrict__ weight,
                             const int8_t* __restrict__ dirs, bool residual, int C, int H, int W, int tiles_w,
                             int tiles) {
  extern __shared__ __align__(16) unsigned char smem[];
  // Images vary before channel blocks: blocks that run at the same time mostly share a direction,
  // and so the instructions of one body (with the eight, the kernel's code exceeds the instruction
  // cache: interleaved directions took 1.7x the time of one).
  const int N = static_cast<int>(gridDim.x / (int64_t(tiles) * (C / kCanonCB)));
  const int tile = blockIdx.x % tiles;
  const int64_t n = (blockIdx.x / tiles) % N;
  const int cb = static_cast<int>(blockIdx.x / (int64_t(tiles) * N));
  const int p0 = (tile / tiles_w) * kCanonTH, q0 = (tile % tiles_w) * kCanonTW;
  const scalar_t* img = src + n * H * W * C;
  scalar_t* op = out + n * H * W * C;
  const int c0 = cb * kCanonCB;
  switch (dirs[cb]) {
#define MMO1D_CANON_CASE(D)                                                                                   \
  case D:                                                                                                     \
    canon_tile<scalar_t, D, K, REV>(img, op, bias, weight, residual, C, H, W, c0, p0, q0, smem); \
    break;
    MMO1D_CANON_CASE(0)
    MMO1D_CANON_CASE(1)
    MMO1D_CANON_CASE(2)
    MMO1D_CANON_CASE(3)
    MMO1D_CANON_CASE(4)
    MMO1D_CANON_CASE(5)
    MMO1D_CANON_CASE(6)
    MMO1D_CANON_CASE(7)
#undef MMO1D_CANON_CASE
    default:
      break;
  }
}

// Bytes of the staged tile of direction dir (the block's dynamic shared memory).
template <int K>
int canon_smem_bytes(int dir) {
  constexpr int bytes[kCanonDirs] = {CanonProgram<0, K>::kSmemBytes, CanonProgram<1, K>::kSmemBytes,
                                     CanonProgram<2, K>::kSmemBytes, CanonProgram<3, K>::kSmemBytes,
                                     CanonProgram<4, K>::kSmemBytes, CanonProgram<5, K>::kSmemBytes,
                                     CanonProgram<6, K>::kSmemBytes, CanonProgram<7, K>::kSmemBytes};
  return bytes[dir];
}

}  // namespace cuda
}  // namespace mmo1d
