// The general kernels (every dtype, stride, K and layout): the forward gather and the input
// gradient's gather over dy upsampled by the stride, in NCHW and channels_last.
#pragma once

#include <type_traits>

#include "../common/geometry.cuh"
#include "../common/tables.cuh"

namespace mmo1d {
namespace cuda {

template <typename scalar_t, typename acc_t>
__device__ __forceinline__ acc_t source_value(const scalar_t* __restrict__ src, int64_t row_stride, int64_t col_stride,
                                              int Hs, int Ws, int up, int i, int j) {
  if (i < 0 || j < 0) return acc_t(0);
  if (up != 1) {
    if (i % up != 0 || j % up != 0) return acc_t(0);
    i /= up;
    j /= up;
  }
  if (i >= Hs || j >= Ws) return acc_t(0);
  return static_cast<acc_t>(src[i * row_stride + j * col_stride]);
}

// Stages a zero-padded NCHW source tile of EH x EW pixels in shared memory, converted to the
// accumulation type. Each thread issues kLoadBatch independent loads before its first store, so
// that enough loads are in flight to cover the memory latency.
constexpr int kLoadBatch = 8;

// A thread's elements threadIdx.x + k * blockDim.x of [0, total), N at a time: load(b, e) for the N
// elements e of a batch (b < N; e may be past total), then store(b, e) for those below total, so
// that N independent loads are in flight before the first store.
template <int N, typename Load, typename Store>
__device__ __forceinline__ void batched_staging(int total, Load load, Store store) {
  for (int e0 = threadIdx.x; e0 < total; e0 += blockDim.x * N) {
#pragma unroll
    for (int b = 0; b < N; ++b) load(b, e0 + b * blockDim.x);
#pragma unroll
    for (int b = 0; b < N; ++b) {
      const int e = e0 + b * blockDim.x;
      if (e < total) store(b, e);
    }
  }
}

template <typename scalar_t, typename acc_t>
__device__ __forceinline__ void stage_tile(acc_t* __restrict__ S, const scalar_t* __restrict__ src, int Hs, int Ws,
                                           int up, int i0, int j0, int EH, int EW) {
  const int total = EH * EW;
  const FastDiv div_ew(EW);
  acc_t v[kLoadBatch];
  batched_staging<kLoadBatch>(
      total,
      [&](int b, int e) {
        const auto [ei, ej] = div_ew.divmod(e);
        v[b] = e < total ? source_value<scalar_t, acc_t>(src, Ws, 1, Hs, Ws, up, i0 + ei, j0 + ej) : acc_t(0);
      },
      [&](int b, int e) { S[e] = v[b]; });
}

// The same for an NHWC tile of CB = 8 channels (channel fastest), rows `pitch` acc_t apart (at least
// EW * CB; a multiple of 16 bytes). When the 8 channels of a pixel are 16-byte aligned in memory (C a
// multiple of 8 for 16-bit types), each pixel is read with 16-byte vector loads and stored with 16-byte
// vector stores.
template <typename scalar_t, typename acc_t>
__device__ __forceinline__ void stage_tile_nhwc(acc_t* __restrict__ S, const scalar_t* __restrict__ src, int C, int Hs,
                                                int Ws, int up, int i0, int j0, int EH, int EW, int channels_left,
                                                int pitch) {
  constexpr int CB = 8;
  constexpr int kPix = 4;  // pixels per thread per batch
  constexpr int kVec = 16 / sizeof(scalar_t) < CB ? 16 / sizeof(scalar_t) : CB;
  constexpr int kChunks = CB / kVec;
  constexpr int kStores = CB * sizeof(acc_t) / 16;
  static_assert(CB % kVec == 0 && CB * sizeof(acc_t) % 16 == 0, "a pixel must be whole 16-byte vectors");
  union Staged {
    uint4 raw[kStores];
    acc_t v[CB];
  };
  const int64_t row_stride = int64_t(Ws) * C;
  const int total = EH * EW;
  const FastDiv div_ew(EW);
  const bool vec =
      channels_left >= CB && ((reinterpret_cast<uintptr_t>(src) | (uintptr_t(C) * sizeof(scalar_t))) & 15) == 0;
  if (!vec) {
    for (int e = threadIdx.x; e < total * CB; e += blockDim.x) {
      const int pix = e / CB, k = e % CB;
      const auto [ei, ej] = div_ew.divmod(pix);
      S[ei * pitch + ej * CB + k] =
          k < channels_left ? source_value<scalar_t, acc_t>(src + k, row_stride, C, Hs, Ws, up, i0 + ei, j0 + ej)
                            : acc_t(0);
    }
    return;
  }
  union Pixel {
    uint4 raw[kChunks];
    scalar_t v[CB];
  };
  Pixel px[kPix];
  batched_staging<kPix>(
      total,
      [&](int b, int pix) {
        const auto [ei, ej] = div_ew.divmod(pix);
        int i = i0 + ei;
        int j = j0 + ej;
        bool ok = pix < total && i >= 0 && j >= 0;
        if (ok && up != 1) {
          ok = i % up == 0 && j % up == 0;
          i /= up;
          j /= up;
        }
        ok = ok && i < Hs && j < Ws;
#pragma unroll
        for (int u = 0; u < kChunks; ++u) {
          px[b].raw[u] =
              ok ? reinterpret_cast<const uint4*>(src + i * row_stride + int64_t(j) * C)[u] : make_uint4(0, 0, 0, 0);
        }
      },
      [&](int b, int pix) {
        const auto [ei, ej] = div_ew.divmod(pix);
        Staged st;
#pragma unroll
        for (int k = 0; k < CB; ++k) st.v[k] = static_cast<acc_t>(px[b].v[k]);
        uint4* dst = reinterpret_cast<uint4*>(S + ei * pitch + ej * CB);
#pragma unroll
        for (int u = 0; u < kStores; ++u) dst[u] = st.raw[u];
      });
}

// Output o (row-major) of a th x twd output tile: its position (p, q), whether it is one of the
// tile's nout outputs, and the offset of its source pixel in the staged tile (a source pixels between
// outputs, EW a row; 0 past the tile's outputs).
struct TileOutput {
  int p, q;
  bool valid;
  int source;
};

__device__ __forceinline__ TileOutput tile_output(const FastDiv& div_tw, int o, int nout, int a, int EW) {
  const auto [p, q] = div_tw.divmod(o);
  const bool valid = o < nout;
  return TileOutput{p, q, valid, valid ? p * a * EW + q * a : 0};
}

// The dynamic shared memory of a general block: the points' offsets in the staged tile (`points`
// ints), `values` acc_t (merged weights, or the warps' point sums), then the staged tile.
template <typename acc_t>
struct GeneralSmem {
  int* offsets;
  acc_t* values;
  acc_t* tile;
};

template <typename acc_t>
__device__ __forceinline__ GeneralSmem<acc_t> carve_general_smem(unsigned char* smem, size_t points, size_t values) {
  const size_t offset_bytes = align16(sizeof(int) * points);
  return GeneralSmem<acc_t>{reinterpret_cast<int*>(smem), reinterpret_cast<acc_t*>(smem + offset_bytes),
                            reinterpret_cast<acc_t*>(smem + offset_bytes + align16(sizeof(acc_t) * values))};
}

// The float at shared-memory address addr (a 32-bit shared-window address: one add from a row's to a
// point's, where an index into a generic pointer costs a shift and an add per load).
__device__ __forceinline__ float load_shared(uint32_t addr) {
  float v;
  asm volatile("ld.shared.f32 %0, [%1];" : "=f"(v) : "r"(addr));
  return v;
}

// Adds to each of a thread's R outputs (staged at sb[r]) its sum over the np points, in order:
// point j's offset off[j * stride] in the staged tile and its weight w[j * stride]. Offsets count
// values, or bytes with BYTES (float sums only: kByteOffsets).
template <typename acc_t, int R, bool BYTES = false>
__device__ __forceinline__ void sum_points(acc_t (&acc)[R], const int (&sb)[R],
                                           const acc_t* __restrict__ S, const int* __restrict__ off,
                                           const acc_t* __restrict__ w, int np, int stride) {
  if constexpr (BYTES) {
    static_assert(std::is_same_v<acc_t, float>, "byte offsets read floats");
    const uint32_t base = static_cast<uint32_t>(__cvta_generic_to_shared(S));
    uint32_t at[R];
#pragma unroll
    for (int r = 0; r < R; ++r) at[r] = base + sb[r];
    for (int j = 0; j < np; ++j) {
      const uint32_t so = off[j * stride];
      const acc_t wj = w[j * stride];
#pragma unroll
      for (int r = 0; r < R; ++r) acc[r] += wj * load_shared(at[r] + so);
    }
  } else {
    for (int j = 0; j < np; ++j) {
      const int so = off[j * stride];
      const acc_t wj = w[j * stride];
#pragma unroll
      for (int r = 0; r < R; ++r) acc[r] += wj * S[sb[r] + so];
    }
  }
}

// Whether the channels_last gathers that sum in acc_t count their staged tile's offsets in bytes
// (sum_points' BYTES): float's (the point loop's 32 multiply-adds then take 111 instructions, not 143).
template <typename acc_t>
constexpr bool kByteOffsets = std::is_same_v<acc_t, float>;

// ----------------------------------------------------------------------------------------------
// NCHW gather: one block per (plane, tile).
// ----------------------------------------------------------------------------------------------
template <typename scalar_t, typename acc_t>
__global__ void gather_nchw_kernel(const scalar_t* __restrict__ src, scalar_t* __restrict__ out,
                                   const scalar_t* __restrict__ bias, const int2* __restrict__ toff,
                                   const acc_t* __restrict__ tw, const int* __restrict__ tnpts,
                                   const int2* __restrict__ thalo, const GatherGeometry g) {
  extern __shared__ __align__(16) unsigned char smem[];
  const int64_t plane = blockIdx.x / g.tiles;
  const int tile = blockIdx.x - plane * g.tiles;
  const int c = static_cast<int>(plane % g.C);
  const auto [p0, q0, th, twd] = output_tile(g, tile);
  const int2 hl = thalo[c];
  const int EH = (th - 1) * g.a + 1 + 2 * hl.x, EW = (twd - 1) * g.a + 1 + 2 * hl.y;
  const auto [soff, sw, S] = carve_general_smem<acc_t>(smem, g.K, g.K);
  const int np = tnpts[c];
  for (int j = threadIdx.x; j < np; j += blockDim.x) {
    const int2 o = toff[int64_t(c) * g.K + j];
    soff[j] = (g.sign * o.x + hl.x) * EW + (g.sign * o.y + hl.y);
    sw[j] = tw[int64_t(c) * g.K + j];
  }
  const scalar_t* sp = src + plane * g.Hs * g.Ws;
  const int i0 = p0 * g.a - hl.x, j0 = q0 * g.a - hl.y;
  stage_tile<scalar_t, acc_t>(S, sp, g.Hs, g.Ws, g.up, i0, j0, EH, EW);
  __syncthreads();
  const acc_t b = bias != nullptr ? static_cast<acc_t>(bias[c]) : acc_t(0);
  const int nout = th * twd;
  const FastDiv div_tw(twd);
  scalar_t* op = out + plane * g.Ho * g.Wo;
  for (int base = 0; base < nout; base += blockDim.x * kPerThread) {
    int sb[kPerThread];
    acc_t acc[kPerThread];
#pragma unroll
    for (int r = 0; r < kPerThread; ++r) {
      sb[r] = tile_output(div_tw, base + r * blockDim.x + threadIdx.x, nout, g.a, EW).source;
      acc[r] = b;
    }
    sum_points(acc, sb, S, soff, sw, np, 1);
#pragma unroll
    for (int r = 0; r < kPerThread; ++r) {
      const int o = base + r * blockDim.x + threadIdx.x;
      if (o < nout) {
        const auto [p, q] = div_tw.divmod(o);
        op[int64_t(p0 + p) * g.Wo + q0 + q] = static_cast<scalar_t>(acc[r]);
      }
    }
  }
}

// The image n, group cg of kNhwcChannels channels and output tile of a channels_last gather block
// (blockIdx.x runs over the tiles, then the groups, then the images).
__device__ __forceinline__ void nhwc_block(const GatherGeometry& g, int64_t* n, int* cg, int* tile) {
  const int groups = (g.C + kNhwcChannels - 1) / kNhwcChannels;
  *tile = blockIdx.x % g.tiles;
  *cg = (blockIdx.x / g.tiles) % groups;
  *n = blockIdx.x / (int64_t(g.tiles) * groups);
}

// Where a channels_last gather's output o lies in its th x twd tile: row-major, or, with quads, in
// row-major 2 x 2 quads of four consecutive outputs (a warp's four pixel slots). Past the tile's
// outputs (o >= count(), or in the quads of an odd side) valid is false and the source 0.
struct OutputOrder {
  int h;  // 1 with quads, else 0
  int th, twd;
  FastDiv div_groups;  // quads (or outputs) a row

  __device__ __forceinline__ OutputOrder(bool quads, int th_, int twd_)
      : h(quads ? 1 : 0), th(th_), twd(twd_), div_groups(quads ? (twd_ + 1) / 2 : twd_) {}

  // Outputs (quads: four a quad) a round of the tile covers.
  __device__ __forceinline__ int count() const {
    return h ? 4 * ((th + 1) / 2) * div_groups.d : th * twd;
  }

  __device__ __forceinline__ TileOutput at(int o, int a, int pitch) const {
    const auto [gi, gj] = div_groups.divmod(o >> (2 * h));
    const int s = o & (3 * h);
    const int p = (gi << h) + (s >> h), q = (gj << h) + (s & h);
    const bool valid = p < th && q < twd;
    return TileOutput{p, q, valid, valid ? p * a * pitch + q * a * kNhwcChannels : 0};
  }
};

// ----------------------------------------------------------------------------------------------
// NHWC gather: one block per (n, tile, group of 8 channels). Lane = 8 * pixel slot + channel; R outputs
// a thread per round (nhwc_outputs_per_thread). At stride 2 (quad_gather) a warp's four slots take a
// 2 x 2 quad of outputs on rows padded by kGeneralRowPad bytes: four slots along a row would read
// pixels two apart, every other one on the same banks.
// ----------------------------------------------------------------------------------------------
template <typename scalar_t, typename acc_t, int R = kPerThread>
__global__ void __launch_bounds__(kNhwcThreads, kNhwcGatherMinBlocks<scalar_t>)
    gather_nhwc_kernel(const scalar_t* __restrict__ src, scalar_t* __restrict__ out, const scalar_t* __restrict__ bias,
                       const int2* __restrict__ toff, const acc_t* __restrict__ tw, const int* __restrict__ tnpts,
                       const int2* __restrict__ thalo, const GatherGeometry g) {
  constexpr int CB = kNhwcChannels;
  static_assert(kGeneralRowPad % sizeof(acc_t) == 0, "the row pad must be whole values");
  extern __shared__ __align__(16) unsigned char smem[];
  int64_t n;
  int cg, tile;
  nhwc_block(g, &n, &cg, &tile);
  const auto [p0, q0, th, twd] = output_tile(g, tile);
  const int cl = threadIdx.x % CB, slot = threadIdx.x / CB;
  const int c = cg * CB + cl;
  const bool c_ok = c < g.C;

  __shared__ int s_np, s_ph, s_pw;
  block_extent(tnpts, thalo, cg * CB, CB, g.C, &s_np, &s_ph, &s_pw);
  __syncthreads();
  const int np = s_np, ph = s_ph, pwid = s_pw;
  const int EH = (th - 1) * g.a + 1 + 2 * ph, EW = (twd - 1) * g.a + 1 + 2 * pwid;
  const bool quads = g.a == 2;  // quad_gather
  const int pitch = EW * CB + (quads ? kGeneralRowPad / int(sizeof(acc_t)) : 0);
  constexpr bool kBytes = kByteOffsets<acc_t>;
  constexpr int kUnit = kBytes ? sizeof(acc_t) : 1;  // of the offsets in the staged tile
  const auto [soff, sw, S] = carve_general_smem<acc_t>(smem, size_t(g.K) * CB, size_t(g.K) * CB);
  for (int e = threadIdx.x; e < np * CB; e += blockDim.x) {
    const int j = e / CB, k = e - j * CB, ch = cg * CB + k;
    int2 o = make_int2(0, 0);
    acc_t w = acc_t(0);
    if (ch < g.C && j < tnpts[ch]) {
      o = toff[int64_t(ch) * g.K + j];
      w = tw[int64_t(ch) * g.K + j];
    }
    soff[e] = ((g.sign * o.x + ph) * pitch + (g.sign * o.y + pwid) * CB) * kUnit;
    sw[e] = w;
  }
  const scalar_t* sp = src + n * g.Hs * g.Ws * g.C + cg * CB;
  const int i0 = p0 * g.a - ph, j0 = q0 * g.a - pwid;
  stage_tile_nhwc<scalar_t, acc_t>(S, sp, g.C, g.Hs, g.Ws, g.up, i0, j0, EH, EW, g.C - cg * CB, pitch);
  __syncthreads();
  const acc_t b = (bias != nullptr && c_ok) ? static_cast<acc_t>(bias[c]) : acc_t(0);
  const OutputOrder order(quads, th, twd);
  const int nout = order.count();
  const int slots = blockDim.x / CB;
  scalar_t* op = out + n * g.Ho * g.Wo * g.C + c;
  for (int base = 0; base < nout; base += slots * R) {
    int sb[R];
    acc_t acc[R];
#pragma unroll
    for (int r = 0; r < R; ++r) {
      sb[r] = (order.at(base + r * slots + slot, g.a, pitch).source + cl) * kUnit;
      acc[r] = b;
    }
    sum_points<acc_t, R, kBytes>(acc, sb, S, soff + cl, sw + cl, np, CB);
    if (c_ok) {
#pragma unroll
      for (int r = 0; r < R; ++r) {
        const TileOutput t = order.at(base + r * slots + slot, g.a, pitch);
        if (t.valid) op[(int64_t(p0 + t.p) * g.Wo + q0 + t.q) * g.C] = static_cast<scalar_t>(acc[r]);
      }
    }
  }
}

}  // namespace cuda
}  // namespace mmo1d
