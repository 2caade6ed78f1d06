// NCHW plane kernels: a plane is copied into a zero-padded, phase-split buffer, then every tap is
// a contiguous read of it.
//
// The buffer holds the plane with `ph` zero rows above and below (and more below, for the last
// block of rows) and `pw` zero columns left and right; its columns are split into the s phases of
// the stride, column u = w + pw stored at phase u % s, index u / s. The input of output (p, q) at
// tap (dh, dw) is then buffer row p*s + dh + ph, phase (dw + pw) % s, index q + (dw + pw) / s:
// consecutive outputs read consecutive elements at any stride, and no tap needs a bounds test
// (taps outside the plane read the padding's zeros, as the op defines).
//
// Outputs are computed in register blocks of R rows x VQ vectors; (R, VQ) is chosen per call from
// the output width so that narrow planes still fill the block.
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstring>

#include "simd.h"

namespace mmo1d {
namespace cpu {

struct PlaneLayout {
  int64_t H, W, ph, pw, s;
  int64_t L;     // elements of one phase of a buffer row
  int64_t rows;  // buffer rows
  int64_t row_stride() const { return s * L; }
  int64_t size() const { return rows * s * L; }
  // Offset in the buffer of the input of output (0, 0) at tap (dh, dw).
  int64_t tap_offset(int64_t dh, int64_t dw) const {
    return (dh + ph) * row_stride() + ((dw + pw) % s) * L + (dw + pw) / s;
  }
};

// Register block of an output plane of width Wo: VQ vectors of `lanes` per row, R rows.
struct Block {
  int R, VQ;
  int64_t cols;  // columns computed per row: a multiple of VQ * lanes, >= Wo
};

inline Block choose_block(int64_t Wo, int lanes, int accumulators) {
  const int64_t nvec = (Wo + lanes - 1) / lanes;
  int VQ = 1;
  while (VQ < accumulators && VQ < nvec) {
    VQ *= 2;
  }
  const int64_t width = static_cast<int64_t>(VQ) * lanes;
  return {accumulators / VQ, VQ, (Wo + width - 1) / width * width};
}

// A kernel family (simd.h) of NCHW planes computed in register blocks: the block is chosen from the
// output width (Args::Wout), and Blocks<T, VB, R, VQ>::run(args, block, begin, end) computes the
// work items [begin, end) with it.
template <typename T, template <typename, int, int, int> class Blocks>
struct BlockedPlanes {
  template <int VB, typename Args>
  static MMO1D_CPU_INLINE void run(const Args& a, int64_t begin, int64_t end) {
    constexpr int kLanes = VB / sizeof(T);
    constexpr int kAcc = kAccumulators<VB>;
    const Block block = choose_block(a.Wout, kLanes, kAcc);
    switch (block.VQ) {
      case 1:
        return Blocks<T, VB, kAcc, 1>::run(a, block, begin, end);
      case 2:
        return Blocks<T, VB, kAcc / 2, 2>::run(a, block, begin, end);
      case 4:
        return Blocks<T, VB, kAcc / 4, 4>::run(a, block, begin, end);
      case 8:
        return Blocks<T, VB, kAcc / 8, 8>::run(a, block, begin, end);
      default:
        if constexpr (kAcc >= 16) {
          return Blocks<T, VB, kAcc / 16, 16>::run(a, block, begin, end);
        }
    }
  }
};

// The layout for a plane of H x W at stride s, outputs Ho x Wo, taps within |dh| <= ph, |dw| <= pw.
inline PlaneLayout make_layout(int64_t H, int64_t W, int64_t Ho, int64_t s, int64_t ph, int64_t pw,
                               const Block& block) {
  PlaneLayout lay{H, W, ph, pw, s, 0, 0};
  lay.L = block.cols + (2 * pw) / s + 1;
  lay.rows = std::max(H + 2 * ph, (Ho + block.R - 2) * s + 2 * ph + 1);
  return lay;
}

// Copies plane x (H x W, contiguous) into buf (lay.size() elements), zeros everywhere else.
template <typename T>
MMO1D_CPU_INLINE void fill_plane(T* buf, const T* x, const PlaneLayout& lay) {
  const int64_t rs = lay.row_stride();
  std::memset(buf, 0, sizeof(T) * lay.ph * rs);
  for (int64_t r = 0; r < lay.H; ++r) {
    T* row = buf + (r + lay.ph) * rs;
    const T* src = x + r * lay.W;
    if (lay.s == 1) {
      std::memset(row, 0, sizeof(T) * lay.pw);
      std::memcpy(row + lay.pw, src, sizeof(T) * lay.W);
      std::memset(row + lay.pw + lay.W, 0, sizeof(T) * (lay.L - lay.pw - lay.W));
    } else {
      std::memset(row, 0, sizeof(T) * rs);
      for (int64_t w = 0; w < lay.W; ++w) {
        const int64_t u = w + lay.pw;
        row[(u % lay.s) * lay.L + u / lay.s] = src[w];
      }
    }
  }
  std::memset(buf + (lay.H + lay.ph) * rs, 0, sizeof(T) * (lay.rows - lay.H - lay.ph) * rs);
}

template <typename T>
struct PlaneTap {
  int64_t off;  // PlaneLayout::tap_offset
  T w;
};

// out (Ho x Wo, contiguous) = init + sum over taps of w * buffer at the tap.
template <typename T, int VB, int R, int VQ>
MMO1D_CPU_INLINE void conv_plane(const T* buf, const PlaneLayout& lay, const PlaneTap<T>* taps, int64_t ntaps, T init,
                                 T* out, int64_t Ho, int64_t Wo) {
  using V = Vec<T, VB>;
  constexpr int kLanes = VB / sizeof(T);
  const int64_t rs = lay.s * lay.row_stride();  // buffer elements between consecutive output rows
  V start;
  vbroadcast(start, init);
  for (int64_t p0 = 0; p0 < Ho; p0 += R) {
    for (int64_t q0 = 0; q0 < Wo; q0 += VQ * kLanes) {
      V acc[R][VQ];
      for (int r = 0; r < R; ++r) {
        for (int v = 0; v < VQ; ++v) {
          acc[r][v] = start;
        }
      }
      const T* block = buf + p0 * rs + q0;
      for (int64_t i = 0; i < ntaps; ++i) {
        V w;
        vbroadcast(w, taps[i].w);
        const T* src = block + taps[i].off;
        for (int r = 0; r < R; ++r) {
          for (int v = 0; v < VQ; ++v) {
            V x;
            vload(x, src + r * rs + v * kLanes);
            acc[r][v] += w * x;
          }
        }
      }
      for (int r = 0; r < R; ++r) {
        if (p0 + r >= Ho) {
          break;
        }
        T* dst = out + (p0 + r) * Wo;
        for (int v = 0; v < VQ; ++v) {
          const int64_t col = q0 + v * kLanes;
          if (col + kLanes <= Wo) {
            vstore(dst + col, acc[r][v]);
          } else if (col < Wo) {
            T tail[kLanes];
            vstore(tail, acc[r][v]);
            std::memcpy(dst + col, tail, sizeof(T) * (Wo - col));
          }
        }
      }
    }
  }
}

// Adds the lanes of the n accumulators acc (summed in a fixed order) to *sum, and zeros them.
template <typename T, int VB, int n>
MMO1D_CPU_INLINE void flush_sum(Vec<T, VB>* acc, double* sum) {
  using V = Vec<T, VB>;
  constexpr int kLanes = VB / sizeof(T);
  V total = V{};
  for (int i = 0; i < n; ++i) {
    total += acc[i];
    acc[i] = V{};
  }
  T lanes[kLanes];
  vstore(lanes, total);
  for (int l = 0; l < kLanes; ++l) {
    *sum += static_cast<double>(lanes[l]);
  }
}

// sum over outputs (p, q) of the plane of dy[p, q] * buffer at the tap (offset off), in partial
// sums of at most kFlushBlocks products per lane (in T), added to *sum (double). dy is Ho rows of
// `cols` elements (zeros beyond Wo); lanes beyond Wo are masked out, so they add nothing even where
// the buffer holds an infinity.
template <typename T, int VB, int R, int VQ>
MMO1D_CPU_INLINE void dot_plane(const T* buf, const PlaneLayout& lay, int64_t off, const T* dy, int64_t cols,
                                int64_t Ho, int64_t Wo, double* sum) {
  using V = Vec<T, VB>;
  using I = Vec<typename MaskInt<T>::type, VB>;
  constexpr int kLanes = VB / sizeof(T);
  constexpr int kFlushBlocks = 64;
  const int64_t rs = lay.s * lay.row_stride();
  // Lanes of the vector that holds column Wo - 1 and those before it are kept.
  const int64_t last_vec = (Wo - 1) / kLanes;
  I tail_mask;
  lane_mask<T>(tail_mask, 0, Wo - last_vec * kLanes);
  V acc[R][VQ];
  int blocks = 0;
  for (int r = 0; r < R; ++r) {
    for (int v = 0; v < VQ; ++v) {
      acc[r][v] = V{};
    }
  }
  for (int64_t p0 = 0; p0 < Ho; p0 += R) {
    for (int64_t q0 = 0; q0 < Wo; q0 += VQ * kLanes) {
      const T* src = buf + off + p0 * rs + q0;
      const T* g = dy + p0 * cols + q0;
      const int64_t vec0 = q0 / kLanes;
      for (int r = 0; r < R; ++r) {
        if (p0 + r >= Ho) {
          break;
        }
        for (int v = 0; v < VQ; ++v) {
          if (vec0 + v > last_vec) {
            break;
          }
          V x, d;
          vload(x, src + r * rs + v * kLanes);
          vload(d, g + r * cols + v * kLanes);
          V prod = d * x;
          if (vec0 + v == last_vec) {
            vkeep(prod, tail_mask);
          }
          acc[r][v] += prod;
        }
      }
      if (++blocks == kFlushBlocks) {
        flush_sum<T, VB, R * VQ>(&acc[0][0], sum);
        blocks = 0;
      }
    }
  }
  flush_sum<T, VB, R * VQ>(&acc[0][0], sum);
}

}  // namespace cpu
}  // namespace mmo1d
