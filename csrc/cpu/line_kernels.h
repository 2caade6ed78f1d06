// Channels_last (NHWC) line kernels: one line of outputs of one run of channels.
//
// A line is a row of outputs j = 0 .. n-1, each a pixel whose channels [c0, c1) (a run) are
// contiguous. Every tap of the line reads the input pixels j * in_step + off of one input row
// (elements, channels included), where they exist ([j0, j1)), and multiplies them by the run's
// per-channel weights: out[j, c] = init[c] + sum over taps of w[c] * in[j * in_step + off, c].
//
// The run's channels are cut into pieces of one vector each, every piece aligned to its width in
// channels (the widest that fits: VB bytes, VB / 2, ..., 16 bytes), so that with a number of
// channels that is a multiple of 16 no load crosses a cache line. Consecutive pieces are computed
// in pairs, in one pass over the line with a register block of QB pixels x 2 vectors: the models'
// runs (12, 24, 48 ... channels from a multiple of 4) take one or two passes, and a pass reads
// whole cache lines of each pixel. Channels left over (fewer than a 16-byte vector, or not aligned
// to one) are computed as a 16-byte vector that overhangs the run into its neighbours' channels of
// the same pixels, and only the run's lanes count:
//  - upward (into the channels after them) where the pixel has them: the whole vector is stored,
//    and the lanes past the leftover are rewritten later, where the caller processes all pieces of
//    a pixel in increasing channel order on one thread (otherwise stored blended, as below);
//  - downward from the leftover's end (into the channels before it, already written) otherwise:
//    only the leftover's lanes are stored (the vector is blended with the memory).
// Channel pointers may therefore reach a vector beyond the run on either side, never outside the
// pixel; per-run arrays (weights, ones) carry that much padding. The weight gradient (dot_block) sums
// only the run's lanes.
#pragma once

#include <algorithm>
#include <cstdint>

#include "simd.h"

namespace mmo1d {
namespace cpu {

// A tap of a run, shared by all lines: output j of the line whose input row is `row` reads row
// row + dh at element j * in_step + off (channels included), for j in [j0, j1).
template <typename T>
struct Tap {
  int64_t dh;
  int64_t off;
  const T* w;  // the tap's weights, channel c0 of the run
  int64_t j0, j1;
};

// A line: its input image (channel c0 of the run), the row its taps are counted from, the rows of
// the image and the elements of one row.
template <typename T>
struct Line {
  const T* image;
  int64_t row, rows, row_elems;
};

// What of a piece belongs to the run: all lanes, or lanes [lo, hi) of an overhanging piece, stored
// whole (kUp: the lanes above are rewritten later) or blended with the memory (kBlend).
enum class Lanes { kAll, kUp, kBlend };

// One or two pieces: channels [c[i], c[i] + lanes of V_i) counted from the run's c0.
struct Pieces {
  int64_t c[2];
  int64_t lo, hi;  // lanes of piece 0 that belong to the run (kUp, kBlend)
};

// Outputs [jb, jb + QB) of a line of n outputs, pieces V0 (and V1 when NP == 2).
template <typename T, typename V0, typename V1, int NP, int QB, Lanes kLanes>
MMO1D_CPU_INLINE void gather_block(const Pieces& pc, const Tap<T>* taps, int64_t ntaps, const Line<T>& line,
                                   const T* init, T* out, int64_t jb, int64_t n, int64_t out_step, int64_t in_step) {
  const T* zeros = Zeros<T>::values;
  V0 acc0[QB];
  V1 acc1[QB];
  {
    V0 s0 = V0{};
    V1 s1 = V1{};
    if (init != nullptr) {
      vload(s0, init + pc.c[0]);
      if constexpr (NP == 2) {
        vload(s1, init + pc.c[1]);
      }
    }
    for (int j = 0; j < QB; ++j) {
      acc0[j] = s0;
      acc1[j] = s1;
    }
  }
  for (int64_t i = 0; i < ntaps; ++i) {
    const Tap<T>& tap = taps[i];
    const int64_t row = line.row + tap.dh;
    if (row < 0 || row >= line.rows || jb >= tap.j1 || jb + QB <= tap.j0) {
      continue;
    }
    V0 w0;
    V1 w1;
    vload(w0, tap.w + pc.c[0]);
    if constexpr (NP == 2) {
      vload(w1, tap.w + pc.c[1]);
    }
    const T* src = line.image + row * line.row_elems + tap.off;
    if (jb >= tap.j0 && jb + QB <= tap.j1) {
      const T* p = src + jb * in_step;
      for (int j = 0; j < QB; ++j) {
        V0 x0;
        vload(x0, p + pc.c[0]);
        acc0[j] += w0 * x0;
        if constexpr (NP == 2) {
          V1 x1;
          vload(x1, p + pc.c[1]);
          acc1[j] += w1 * x1;
        }
        p += in_step;
      }
    } else {
      // Edge block: outputs whose input is outside the row read zeros.
      for (int j = 0; j < QB; ++j) {
        const int64_t jj = jb + j;
        const bool inside = jj >= tap.j0 && jj < tap.j1;
        const T* p = src + jj * in_step;
        V0 x0;
        vload(x0, inside ? p + pc.c[0] : zeros);
        acc0[j] += w0 * x0;
        if constexpr (NP == 2) {
          V1 x1;
          vload(x1, inside ? p + pc.c[1] : zeros);
          acc1[j] += w1 * x1;
        }
      }
    }
  }
  using I = Vec<typename MaskInt<T>::type, sizeof(V0)>;
  I mask{};
  if constexpr (kLanes == Lanes::kBlend) {
    lane_mask<T>(mask, pc.lo, pc.hi);
  }
  const int64_t left = n - jb;
  for (int j = 0; j < QB; ++j) {
    if (j < left) {
      T* dst = out + (jb + j) * out_step;
      if constexpr (kLanes == Lanes::kBlend) {
        vstore_masked(dst + pc.c[0], acc0[j], mask);
      } else {
        vstore(dst + pc.c[0], acc0[j]);
      }
      if constexpr (NP == 2) {
        vstore(dst + pc.c[1], acc1[j]);
      }
    }
  }
}

// Adds the lanes of acc[0 .. QB) (summed in a fixed order) that belong to the run to sums + c.
template <typename T, typename V, int QB, Lanes kLanes>
MMO1D_CPU_INLINE void add_lanes(const V* acc, double* sums, int64_t c, int64_t lo, int64_t hi) {
  constexpr int kN = sizeof(V) / sizeof(T);
  V total = acc[0];
  for (int i = 1; i < QB; ++i) {
    total += acc[i];
  }
  T lanes[kN];
  vstore(lanes, total);
  for (int l = 0; l < kN; ++l) {
    if (kLanes == Lanes::kAll || (l >= lo && l < hi)) {
      sums[c + l] += static_cast<double>(lanes[l]);
    }
  }
}

// acc += dy * x for the pieces of one pixel.
template <typename T, int NP, typename V0, typename V1>
MMO1D_CPU_INLINE void dot_step(V0& acc0, V1& acc1, const Pieces& pc, const T* x, const T* dy) {
  V0 x0, d0;
  vload(x0, x + pc.c[0]);
  vload(d0, dy + pc.c[0]);
  acc0 += d0 * x0;
  if constexpr (NP == 2) {
    V1 x1, d1;
    vload(x1, x + pc.c[1]);
    vload(d1, dy + pc.c[1]);
    acc1 += d1 * x1;
  }
}

// Sum over outputs j in [tap.j0, tap.j1) of dy[j * out_step] * src[j * in_step] (src: the tap's
// input of output 0) for the pieces, added to sums (double, indexed by channel from the run's c0)
// in partial sums of at most kFlushBlocks products per lane (in T).
template <typename T, typename V0, typename V1, int NP, int QB, Lanes kLanes>
MMO1D_CPU_INLINE void dot_block(const Pieces& pc, const T* dy, const Tap<T>& tap, const T* src, double* sums,
                                int64_t out_step, int64_t in_step) {
  constexpr int64_t kFlushBlocks = 64;
  for (int64_t j = tap.j0; j < tap.j1;) {
    const int64_t chunk_end = std::min(tap.j1, j + kFlushBlocks * QB);
    V0 acc0[QB];
    V1 acc1[QB];
    for (int i = 0; i < QB; ++i) {
      acc0[i] = V0{};
      acc1[i] = V1{};
    }
    for (; j + QB <= chunk_end; j += QB) {
      for (int i = 0; i < QB; ++i) {
        dot_step<T, NP>(acc0[i], acc1[i], pc, src + (j + i) * in_step, dy + (j + i) * out_step);
      }
    }
    for (; j < chunk_end; ++j) {
      dot_step<T, NP>(acc0[0], acc1[0], pc, src + j * in_step, dy + j * out_step);
    }
    add_lanes<T, V0, QB, kLanes>(acc0, sums, pc.c[0], pc.lo, pc.hi);
    if constexpr (NP == 2) {
      add_lanes<T, V1, QB, Lanes::kAll>(acc1, sums, pc.c[1], 0, 0);
    }
  }
}

// The lines of a tile: consecutive output rows of one image, computed block by block of outputs so
// that the input rows they share stay in the L1 cache. Line r: input row row0 + r * row_step,
// outputs at out + r * out_line.
template <typename T>
struct TileLines {
  const Tap<T>* taps;
  int64_t ntaps;
  Line<T> line0;
  int64_t lines, row_step;
  const T* init;
  T* out;  // line 0, channel c0 of the run
  int64_t out_line, n, out_step, in_step;
};

// The lines of a tile, block by block.
template <typename T>
struct GatherTileOp {
  template <typename V0, typename V1, int NP, int QB, Lanes kLanes>
  static MMO1D_CPU_INLINE void apply(const Pieces& pc, const TileLines<T>& t) {
    for (int64_t jb = 0; jb < t.n; jb += QB) {
      Line<T> line = t.line0;
      for (int64_t r = 0; r < t.lines; ++r) {
        gather_block<T, V0, V1, NP, QB, kLanes>(pc, t.taps, t.ntaps, line, t.init, t.out + r * t.out_line, jb, t.n,
                                                t.out_step, t.in_step);
        line.row += t.row_step;
      }
    }
  }
};

template <typename T>
struct DotOp {
  template <typename V0, typename V1, int NP, int QB, Lanes kLanes>
  static MMO1D_CPU_INLINE void apply(const Pieces& pc, const T* dy, const Tap<T>& tap, const T* src, double* sums,
                                     int64_t out_step, int64_t in_step) {
    dot_block<T, V0, V1, NP, QB, kLanes>(pc, dy, tap, src, sums, out_step, in_step);
  }
};

// Register blocks: QB pixels of one piece, or of two.
template <int VB>
constexpr int kSingleBlock = 8;
template <int VB>
constexpr int kPairBlock = kAccumulators<VB> / 2;

// A pair of pieces of B0 and B1 bytes (B1 known at run time: b1, one of VB, VB / 2, ..., 16).
template <typename T, int VB, int B0, int B1, class Op, typename... Args>
MMO1D_CPU_INLINE void apply_pair(int b1, const Pieces& pc, const Args&... args) {
  if (b1 == B1) {
    Op::template apply<Vec<T, B0>, Vec<T, B1>, 2, kPairBlock<VB>, Lanes::kAll>(pc, args...);
  } else if constexpr (B1 > 16) {
    apply_pair<T, VB, B0, B1 / 2, Op>(b1, pc, args...);
  }
}

// One piece (np == 1) or two of b0 and b1 bytes.
template <typename T, int VB, int B0, class Op, typename... Args>
MMO1D_CPU_INLINE void apply_pieces(int np, int b0, int b1, const Pieces& pc, const Args&... args) {
  if (b0 == B0) {
    if (np == 1) {
      Op::template apply<Vec<T, B0>, Vec<T, B0>, 1, kSingleBlock<VB>, Lanes::kAll>(pc, args...);
    } else {
      apply_pair<T, VB, B0, VB, Op>(b1, pc, args...);
    }
  } else if constexpr (B0 > 16) {
    apply_pieces<T, VB, B0 / 2, Op>(np, b0, b1, pc, args...);
  }
}

// Op on every piece of the run [c0, c0 + len) of a pixel of C channels, in increasing channel order
// (see the top of the file). A pixel must hold at least 16 bytes of channels (C >= 4 floats, 2
// doubles): a leftover then always has room to overhang up or down. `blend`: every overhang is
// stored blended (for callers that do not process all runs of a pixel in order on one thread).
template <typename T, int VB, class Op, typename... Args>
MMO1D_CPU_INLINE void for_pieces(int64_t c0, int64_t len, int64_t C, bool blend, const Args&... args) {
  using V16 = Vec<T, 16>;
  constexpr int kLanes16 = 16 / static_cast<int>(sizeof(T));
  int pending_bytes = 0;  // a piece waiting for its pair partner
  int64_t pending_c = 0;
  int64_t c = 0;
  while (c < len) {
    int bytes = VB;
    while (bytes >= 16 &&
           ((c0 + c) % (bytes / static_cast<int>(sizeof(T))) != 0 || c + bytes / static_cast<int>(sizeof(T)) > len)) {
      bytes /= 2;
    }
    if (bytes >= 16) {
      if (pending_bytes > 0) {
        apply_pieces<T, VB, VB, Op>(2, pending_bytes, bytes, Pieces{{pending_c, c}, 0, 0}, args...);
        pending_bytes = 0;
      } else {
        pending_bytes = bytes;
        pending_c = c;
      }
      c += bytes / static_cast<int>(sizeof(T));
      continue;
    }
    if (pending_bytes > 0) {
      apply_pieces<T, VB, VB, Op>(1, pending_bytes, 0, Pieces{{pending_c, pending_c}, 0, 0}, args...);
      pending_bytes = 0;
    }
    // Leftover up to the next 16-byte boundary or the run's end.
    const int64_t stop = std::min(len, (c0 + c) / kLanes16 * kLanes16 + kLanes16 - c0);
    if (c0 + c + kLanes16 <= C && blend) {
      Op::template apply<V16, V16, 1, kSingleBlock<VB>, Lanes::kBlend>(Pieces{{c, c}, 0, stop - c}, args...);
    } else if (c0 + c + kLanes16 <= C) {
      Op::template apply<V16, V16, 1, kSingleBlock<VB>, Lanes::kUp>(Pieces{{c, c}, 0, stop - c}, args...);
    } else {  // then c0 + stop >= kLanes16, as the pixel holds at least kLanes16 channels
      Op::template apply<V16, V16, 1, kSingleBlock<VB>, Lanes::kBlend>(
          Pieces{{stop - kLanes16, stop - kLanes16}, kLanes16 - (stop - c), kLanes16}, args...);
    }
    c = stop;
  }
  if (pending_bytes > 0) {
    apply_pieces<T, VB, VB, Op>(1, pending_bytes, 0, Pieces{{pending_c, pending_c}, 0, 0}, args...);
  }
}

}  // namespace cpu
}  // namespace mmo1d
