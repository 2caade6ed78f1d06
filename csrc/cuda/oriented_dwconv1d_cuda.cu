// CUDA kernels of the oriented depthwise 1D convolution.
//
// Design (see also docs in the README):
// * Per channel, the K taps collapse into the distinct points of the oriented line (truncation
//   makes neighbouring taps coincide, e.g. 21 points for K=31 at 45 degrees); a small kernel builds
//   (offset, merged weight) tables for every channel at each call, so one build serves every K,
//   angle, stride and size, and the residual ("++") form is +1 on the centre point's weight.
// * Forward and input-gradient are the same gather: out[p, q] = sum_j W_j * S[p*a + sgn*dh_j,
//   q*a + sgn*dw_j]. Forward reads x with a = stride, sgn = +1. The input gradient reads dy
//   "upsampled" by the stride (zeros off the stride grid) with a = 1, sgn = -1: no atomics, no
//   divisibility tests in the inner loop.
//   On the channels_last fast paths the stride-2 input and weight gradients are split by the
//   parities of the offsets instead (polyphase): four stride-1 gathers over dy that skip the
//   zeros, and four stride-1 weight gradients between dy and the phase planes x[a::2, b::2].
// * A block stages one zero-padded tile of its source in shared memory (converted to the
//   accumulation type: float for fp32/fp16/bf16, double for fp64), with a halo sized for its
//   own angle, and every thread accumulates several outputs per table entry.
// * NCHW: one block per (n, c) plane tile. NHWC (channels_last): one block per spatial tile and
//   8 consecutive channels; 4 pixels x 8 channels per warp make shared-memory reads conflict-free.
//   The fast paths (fp32/fp16/bf16, stride 1 and the polyphase stride-2 gradients) walk each
//   channel's points as runs along one axis with register windows; their channels_last kernels
//   take 32 bytes of channels per block, and the window gather stages tiles of up to 32 x 32
//   outputs in sub-tiles sized by the block's actual halo.
// * Weight gradient: per-block partial sums (warp reductions, per-warp slots, no float atomics)
//   written to a workspace, then a second kernel adds them in a fixed order: bitwise
//   deterministic.
#include <ATen/ATen.h>
#include <ATen/OpMathType.h>
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAGuard.h>
#include <torch/library.h>

#include <algorithm>
#include <climits>
#include <cmath>
#include <initializer_list>
#include <map>
#include <mutex>
#include <type_traits>
#include <utility>

#include "../oriented_dwconv1d.h"

namespace mmo1d {
namespace {

constexpr int kPerThread = 8;       // outputs accumulated per thread per pass
constexpr int kMaxThreads = 256;    // NCHW block size cap (4 blocks per SM at ~60 registers)
constexpr int kNhwcThreads = 256;   // NHWC block size
constexpr int kNhwcChannels = 8;    // channels per NHWC block
constexpr int kNhwcTile = 16;       // NHWC spatial tile (outputs)
constexpr int kNchwMaxTile = 64;    // NCHW tile side when a plane has more than 64x64 outputs

#define MMO1D_CUDA_CHECK(expr)                                                              \
  do {                                                                                      \
    const cudaError_t err__ = (expr);                                                       \
    TORCH_CHECK(err__ == cudaSuccess, "mmo1d CUDA error: ", cudaGetErrorString(err__), " (", \
                #expr, ")");                                                                \
  } while (0)

inline int ceil_div(int64_t a, int64_t b) { return static_cast<int>((a + b - 1) / b); }
__host__ __device__ constexpr size_t align16(size_t n) { return (n + 15) & ~size_t{15}; }

// ----------------------------------------------------------------------------------------------
// Tables: for every channel the distinct points of its oriented line, their merged weights, the
// tap -> point map and the halo (max |dh|, max |dw|).
// With classes = 4 (stride-2 weight gradient), entry cls * C + c holds the taps of channel c whose
// offsets have parities (cls >> 1, cls & 1), at offsets (dh >> 1, dw >> 1); the other taps map to
// point -1.
// ----------------------------------------------------------------------------------------------
// Whether the taps of channel c have the same offsets as those of channel c - 1 (theta: float angles),
// so that every table derived from them coincides: the NHWC kernels then give a lane's channels one
// vector load per point. Computed once per call here rather than by comparing tables in each block.
__device__ __forceinline__ bool same_offsets_as_prev(const float* __restrict__ theta, int c, int K,
                                                     bool floor_rounding) {
  if (c == 0) return false;
  const float a = theta[c - 1], b = theta[c];
  if (__float_as_int(a) == __float_as_int(b)) return true;
  float sa, ca, sb, cb;
  angle_sincos(a, &sa, &ca);
  angle_sincos(b, &sb, &cb);
  for (int t = 0; t < K; ++t) {
    int ha, wa, hb, wb;
    tap_offset(t, K, sa, ca, floor_rounding, &ha, &wa);
    tap_offset(t, K, sb, cb, floor_rounding, &hb, &wb);
    if (ha != hb || wa != wb) return false;
  }
  return true;
}

// Per quarter of a channel block (V channels from cq): whether all its channels share the first
// one's offsets, from per-channel same-as-previous flags (same(c) != 0: channel c has the offsets of
// channel c - 1; TablesT::same or SegInfo::same). Evaluated by threads 0-3.
template <int V, typename Same>
__device__ __forceinline__ bool quarter_uniform(Same same, int cq, int C) {
  if (cq + V > C) return false;
  bool u = true;
#pragma unroll
  for (int k = 1; k < V; ++k) u = u && same(cq + k) != 0;
  return u;
}

template <typename scalar_t, typename acc_t>
__global__ void build_tables_kernel(const float* __restrict__ theta, const scalar_t* __restrict__ weight,
                                    int C, int K, bool floor_rounding, bool residual, int classes,
                                    int2* __restrict__ off, acc_t* __restrict__ pw, int* __restrict__ npts,
                                    int* __restrict__ tap_pt, int2* __restrict__ halo, int* __restrict__ same) {
  const int idx = blockIdx.x * blockDim.x + threadIdx.x;
  if (idx >= C * classes) return;
  const int c = idx % C, cls = classes == 4 ? idx / C : -1;
  same[idx] = same_offsets_as_prev(theta, c, K, floor_rounding);
  float s, co;
  angle_sincos(theta[c], &s, &co);
  int n = -1, ph = 0, pwid = 0, prev_dh = INT_MIN, prev_dw = INT_MIN;
  const int64_t wbase = static_cast<int64_t>(c) * K, base = static_cast<int64_t>(idx) * K;
  // A point's weight is summed in a register (its taps are consecutive) and stored once.
  acc_t wsum = acc_t(0);
  for (int t = 0; t < K; ++t) {
    int dh, dw;
    tap_offset(t, K, s, co, floor_rounding, &dh, &dw);
    if (cls >= 0) {
      if ((dh & 1) != (cls >> 1) || (dw & 1) != (cls & 1)) {
        tap_pt[base + t] = -1;
        continue;
      }
      dh >>= 1;
      dw >>= 1;
    }
    if (dh != prev_dh || dw != prev_dw) {
      if (n >= 0 && pw != nullptr) pw[base + n] = wsum;
      ++n;
      off[base + n] = make_int2(dh, dw);
      wsum = acc_t(0);
      prev_dh = dh;
      prev_dw = dw;
      ph = max(ph, abs(dh));
      pwid = max(pwid, abs(dw));
    }
    wsum += static_cast<acc_t>(weight[wbase + t]) + ((residual && t == K / 2) ? acc_t(1) : acc_t(0));
    tap_pt[base + t] = n;
  }
  if (pw != nullptr && n >= 0) pw[base + n] = wsum;
  // Unused table slots: weight 0 at the centre, so padded loops read valid memory and add nothing.
  for (int j = n + 1; j < K; ++j) {
    off[base + j] = make_int2(0, 0);
    if (pw != nullptr) pw[base + j] = acc_t(0);
  }
  npts[idx] = n + 1;
  halo[idx] = make_int2(ph, pwid);
}

template <typename acc_t>
struct TablesT {
  at::Tensor ints;  // off (C*K*2) | halo (C*2) | npts (C) | tap_pt (C*K) | same (C): int2 arrays 8-byte aligned
  at::Tensor weights;
  int C, K;         // C: entries (channels x parity classes)
  const int2* off() const { return reinterpret_cast<const int2*>(ints.data_ptr<int>()); }
  const int2* halo() const { return reinterpret_cast<const int2*>(ints.data_ptr<int>() + 2 * int64_t(C) * K); }
  const int* npts() const { return ints.data_ptr<int>() + 2 * int64_t(C) * K + 2 * C; }
  const int* tap_pt() const { return npts() + C; }
  const int* same() const { return tap_pt() + int64_t(C) * K; }  // offsets as the previous channel's
  const acc_t* w() const { return weights.defined() ? weights.data_ptr<acc_t>() : nullptr; }
};

template <typename scalar_t, typename acc_t>
TablesT<acc_t> build_tables(const at::Tensor& theta, const at::Tensor& weight, bool floor_rounding,
                            bool residual, bool with_weights, int classes = 1) {
  const int channels = static_cast<int>(weight.size(0)), K = static_cast<int>(weight.size(1));
  const int C = channels * classes;
  TablesT<acc_t> t;
  t.C = C;
  t.K = K;
  t.ints = at::empty({int64_t(C) * K * 3 + int64_t(C) * 4}, weight.options().dtype(at::kInt));
  if (with_weights) {
    t.weights = at::empty({int64_t(C) * K}, weight.options().dtype(c10::CppTypeToScalarType<acc_t>::value));
  }
  const at::Tensor th = theta.to(at::kFloat).contiguous();
  const at::Tensor w = weight.contiguous();
  at::Tensor& ints_t = t.ints;
  int* ints = ints_t.data_ptr<int>();
  int2* off = reinterpret_cast<int2*>(ints);
  int* same = ints + 3 * int64_t(C) * K + 3 * C;
  int2* halo = reinterpret_cast<int2*>(ints + 2 * int64_t(C) * K);
  int* npts = ints + 2 * int64_t(C) * K + 2 * C;
  int* tap_pt = npts + C;
  acc_t* pw = nullptr;
  if (with_weights) {
    at::Tensor& w_t = t.weights;
    pw = w_t.data_ptr<acc_t>();
  }
  build_tables_kernel<scalar_t, acc_t><<<ceil_div(C, 128), 128, 0, at::cuda::getCurrentCUDAStream()>>>(
      th.data_ptr<float>(), w.data_ptr<scalar_t>(), channels, K, floor_rounding, residual, classes, off, pw, npts,
      tap_pt, halo, same);
  MMO1D_CUDA_CHECK(cudaGetLastError());
  return t;
}

// Value of the (possibly upsampled) source at (i, j); zero outside the image or off the grid.
template <typename scalar_t, typename acc_t>
__device__ __forceinline__ acc_t source_value(const scalar_t* __restrict__ src, int64_t row_stride,
                                              int64_t col_stride, int Hs, int Ws, int up, int i, int j) {
  if (i < 0 || j < 0) return acc_t(0);
  if (up != 1) {
    if (i % up != 0 || j % up != 0) return acc_t(0);
    i /= up;
    j /= up;
  }
  if (i >= Hs || j >= Ws) return acc_t(0);
  return static_cast<acc_t>(src[i * row_stride + j * col_stride]);
}

// Exact a / d for 0 <= a < 2^22 through a float reciprocal and one correction step (an integer
// division by a run-time value costs ~20 instructions; this is on every staged element).
struct FastDiv {
  int d;
  float inv;
  __device__ explicit FastDiv(int divisor) : d(divisor), inv(1.0f / static_cast<float>(divisor)) {}
  __device__ __forceinline__ int operator()(int a, int* rem) const {
    int q = static_cast<int>(static_cast<float>(a) * inv);
    int r = a - q * d;
    if (r < 0) {
      --q;
      r += d;
    } else if (r >= d) {
      ++q;
      r -= d;
    }
    *rem = r;
    return q;
  }
};

// Stages a zero-padded NCHW source tile of EH x EW pixels in shared memory, converted to the
// accumulation type. Each thread issues kLoadBatch independent loads before its first store, so
// that enough loads are in flight to cover the memory latency.
constexpr int kLoadBatch = 8;

template <typename scalar_t, typename acc_t>
__device__ __forceinline__ void stage_tile(acc_t* __restrict__ S, const scalar_t* __restrict__ src, int Hs, int Ws,
                                           int up, int i0, int j0, int EH, int EW) {
  const int total = EH * EW;
  const FastDiv div_ew(EW);
  for (int e0 = threadIdx.x; e0 < total; e0 += blockDim.x * kLoadBatch) {
    acc_t v[kLoadBatch];
#pragma unroll
    for (int b = 0; b < kLoadBatch; ++b) {
      const int e = e0 + b * blockDim.x;
      int ej;
      const int ei = div_ew(e, &ej);
      v[b] = e < total ? source_value<scalar_t, acc_t>(src, Ws, 1, Hs, Ws, up, i0 + ei, j0 + ej) : acc_t(0);
    }
#pragma unroll
    for (int b = 0; b < kLoadBatch; ++b) {
      const int e = e0 + b * blockDim.x;
      if (e < total) S[e] = v[b];
    }
  }
}

// The same for an NHWC tile of CB = 8 channels (channel fastest). When the 8 channels of a pixel
// are 16-byte aligned in memory (C a multiple of 8 for 16-bit types), each pixel is read with
// 16-byte vector loads.
template <typename scalar_t, typename acc_t>
__device__ __forceinline__ void stage_tile_nhwc(acc_t* __restrict__ S, const scalar_t* __restrict__ src, int C,
                                                int Hs, int Ws, int up, int i0, int j0, int EH, int EW,
                                                int channels_left) {
  constexpr int CB = 8;
  constexpr int kPix = 4;  // pixels per thread per batch
  constexpr int kVec = 16 / sizeof(scalar_t) < CB ? 16 / sizeof(scalar_t) : CB;
  constexpr int kChunks = CB / kVec;
  static_assert(CB % kVec == 0, "channel block must be a whole number of 16-byte vectors");
  const int64_t row_stride = int64_t(Ws) * C;
  const int total = EH * EW;
  const FastDiv div_ew(EW);
  const bool vec = channels_left >= CB &&
                   ((reinterpret_cast<uintptr_t>(src) | (uintptr_t(C) * sizeof(scalar_t))) & 15) == 0;
  if (!vec) {
    for (int e = threadIdx.x; e < total * CB; e += blockDim.x) {
      int ej;
      const int pix = e / CB, k = e % CB;
      const int ei = div_ew(pix, &ej);
      S[e] = k < channels_left
                 ? source_value<scalar_t, acc_t>(src + k, row_stride, C, Hs, Ws, up, i0 + ei, j0 + ej)
                 : acc_t(0);
    }
    return;
  }
  union Pixel {
    uint4 raw[kChunks];
    scalar_t v[CB];
  };
  for (int p0 = threadIdx.x; p0 < total; p0 += blockDim.x * kPix) {
    Pixel px[kPix];
#pragma unroll
    for (int b = 0; b < kPix; ++b) {
      const int pix = p0 + b * blockDim.x;
      int ej;
      int i = i0 + div_ew(pix, &ej);
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
        px[b].raw[u] = ok ? reinterpret_cast<const uint4*>(src + i * row_stride + int64_t(j) * C)[u]
                          : make_uint4(0, 0, 0, 0);
      }
    }
#pragma unroll
    for (int b = 0; b < kPix; ++b) {
      const int pix = p0 + b * blockDim.x;
      if (pix < total) {
#pragma unroll
        for (int k = 0; k < CB; ++k) S[pix * CB + k] = static_cast<acc_t>(px[b].v[k]);
      }
    }
  }
}

struct GatherGeometry {
  int C, K;
  int Hs, Ws, up;     // source size and upsampling factor (stride, for the input gradient)
  int Ho, Wo, a;      // output size and output-to-source step (stride, for the forward)
  int sign;           // +1 forward, -1 input gradient
  int TH, TW;         // output tile
  int tiles_w, tiles;
};

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
  const int p0 = (tile / g.tiles_w) * g.TH, q0 = (tile % g.tiles_w) * g.TW;
  const int th = min(g.TH, g.Ho - p0), twd = min(g.TW, g.Wo - q0);
  const int2 hl = thalo[c];
  const int EH = (th - 1) * g.a + 1 + 2 * hl.x, EW = (twd - 1) * g.a + 1 + 2 * hl.y;
  int* soff = reinterpret_cast<int*>(smem);
  acc_t* sw = reinterpret_cast<acc_t*>(smem + align16(sizeof(int) * g.K));
  acc_t* S = reinterpret_cast<acc_t*>(smem + align16(sizeof(int) * g.K) + align16(sizeof(acc_t) * g.K));
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
      const int o = base + r * blockDim.x + threadIdx.x;
      int q;
      const int p = div_tw(o, &q);
      sb[r] = o < nout ? p * g.a * EW + q * g.a : 0;
      acc[r] = b;
    }
    for (int j = 0; j < np; ++j) {
      const int so = soff[j];
      const acc_t wj = sw[j];
#pragma unroll
      for (int r = 0; r < kPerThread; ++r) acc[r] += wj * S[sb[r] + so];
    }
#pragma unroll
    for (int r = 0; r < kPerThread; ++r) {
      const int o = base + r * blockDim.x + threadIdx.x;
      if (o < nout) {
        int q;
        const int p = div_tw(o, &q);
        op[int64_t(p0 + p) * g.Wo + q0 + q] = static_cast<scalar_t>(acc[r]);
      }
    }
  }
}

// ----------------------------------------------------------------------------------------------
// NHWC gather: one block per (n, tile, group of 8 channels). Lane = 8 * pixel slot + channel.
// ----------------------------------------------------------------------------------------------
template <typename scalar_t, typename acc_t>
__global__ void __launch_bounds__(kNhwcThreads)
    gather_nhwc_kernel(const scalar_t* __restrict__ src, scalar_t* __restrict__ out,
                       const scalar_t* __restrict__ bias, const int2* __restrict__ toff,
                       const acc_t* __restrict__ tw, const int* __restrict__ tnpts,
                       const int2* __restrict__ thalo, const GatherGeometry g) {
  constexpr int CB = kNhwcChannels;
  extern __shared__ __align__(16) unsigned char smem[];
  const int groups = (g.C + CB - 1) / CB;
  const int tile = blockIdx.x % g.tiles;
  const int cg = (blockIdx.x / g.tiles) % groups;
  const int64_t n = blockIdx.x / (int64_t(g.tiles) * groups);
  const int p0 = (tile / g.tiles_w) * g.TH, q0 = (tile % g.tiles_w) * g.TW;
  const int th = min(g.TH, g.Ho - p0), twd = min(g.TW, g.Wo - q0);
  const int cl = threadIdx.x % CB, slot = threadIdx.x / CB;
  const int c = cg * CB + cl;
  const bool c_ok = c < g.C;

  __shared__ int s_np, s_ph, s_pw;
  if (threadIdx.x == 0) {
    int np = 0, ph = 0, pwid = 0;
    for (int k = 0; k < CB && cg * CB + k < g.C; ++k) {
      np = max(np, tnpts[cg * CB + k]);
      const int2 hl = thalo[cg * CB + k];
      ph = max(ph, hl.x);
      pwid = max(pwid, hl.y);
    }
    s_np = np;
    s_ph = ph;
    s_pw = pwid;
  }
  __syncthreads();
  const int np = s_np, ph = s_ph, pwid = s_pw;
  const int EH = (th - 1) * g.a + 1 + 2 * ph, EW = (twd - 1) * g.a + 1 + 2 * pwid;
  int* soff = reinterpret_cast<int*>(smem);
  acc_t* sw = reinterpret_cast<acc_t*>(smem + align16(sizeof(int) * g.K * CB));
  acc_t* S = reinterpret_cast<acc_t*>(smem + align16(sizeof(int) * g.K * CB) + align16(sizeof(acc_t) * g.K * CB));
  for (int e = threadIdx.x; e < np * CB; e += blockDim.x) {
    const int j = e / CB, k = e - j * CB, ch = cg * CB + k;
    int2 o = make_int2(0, 0);
    acc_t w = acc_t(0);
    if (ch < g.C && j < tnpts[ch]) {
      o = toff[int64_t(ch) * g.K + j];
      w = tw[int64_t(ch) * g.K + j];
    }
    soff[e] = ((g.sign * o.x + ph) * EW + (g.sign * o.y + pwid)) * CB;
    sw[e] = w;
  }
  const scalar_t* sp = src + n * g.Hs * g.Ws * g.C + cg * CB;
  const int i0 = p0 * g.a - ph, j0 = q0 * g.a - pwid;
  stage_tile_nhwc<scalar_t, acc_t>(S, sp, g.C, g.Hs, g.Ws, g.up, i0, j0, EH, EW, g.C - cg * CB);
  __syncthreads();
  const acc_t b = (bias != nullptr && c_ok) ? static_cast<acc_t>(bias[c]) : acc_t(0);
  const int nout = th * twd;
  const FastDiv div_tw(twd);
  const int slots = blockDim.x / CB;
  scalar_t* op = out + n * g.Ho * g.Wo * g.C + c;
  for (int base = 0; base < nout; base += slots * kPerThread) {
    int sb[kPerThread];
    acc_t acc[kPerThread];
#pragma unroll
    for (int r = 0; r < kPerThread; ++r) {
      const int o = base + r * slots + slot;
      int q;
      const int p = div_tw(o, &q);
      sb[r] = (o < nout ? p * g.a * EW + q * g.a : 0) * CB + cl;
      acc[r] = b;
    }
    for (int j = 0; j < np; ++j) {
      const int so = soff[j * CB + cl];
      const acc_t wj = sw[j * CB + cl];
#pragma unroll
      for (int r = 0; r < kPerThread; ++r) acc[r] += wj * S[sb[r] + so];
    }
    if (c_ok) {
#pragma unroll
      for (int r = 0; r < kPerThread; ++r) {
        const int o = base + r * slots + slot;
        if (o < nout) {
          int q;
          const int p = div_tw(o, &q);
          op[(int64_t(p0 + p) * g.Wo + q0 + q) * g.C] = static_cast<scalar_t>(acc[r]);
        }
      }
    }
  }
}

// ----------------------------------------------------------------------------------------------
// Weight gradient partial sums. Geometry as the forward gather (a = stride, sign = +1, up = 1).
// Each block covers one tile of one channel (NCHW) or 8 channels (NHWC) for a chunk of images and
// writes partial[c][part][j] for every point j; part = tile * chunks + chunk.
// ----------------------------------------------------------------------------------------------
template <typename acc_t>
__device__ __forceinline__ acc_t warp_sum(acc_t v) {
#pragma unroll
  for (int m = 16; m > 0; m >>= 1) v += __shfl_xor_sync(0xffffffffu, v, m);
  return v;
}

template <typename scalar_t, typename acc_t>
__global__ void wgrad_nchw_kernel(const scalar_t* __restrict__ x, const scalar_t* __restrict__ dy,
                                  const int2* __restrict__ toff, const int* __restrict__ tnpts,
                                  const int2* __restrict__ thalo, acc_t* __restrict__ partial,
                                  const GatherGeometry g, int N, int chunk) {
  extern __shared__ __align__(16) unsigned char smem[];
  const int chunks = (N + chunk - 1) / chunk;
  const int tile = blockIdx.x % g.tiles;
  const int ck = (blockIdx.x / g.tiles) % chunks;
  const int c = blockIdx.x / (g.tiles * chunks);
  const int p0 = (tile / g.tiles_w) * g.TH, q0 = (tile % g.tiles_w) * g.TW;
  const int th = min(g.TH, g.Ho - p0), twd = min(g.TW, g.Wo - q0);
  const int2 hl = thalo[c];
  const int EH = (th - 1) * g.a + 1 + 2 * hl.x, EW = (twd - 1) * g.a + 1 + 2 * hl.y;
  const int nwarps = blockDim.x / 32, warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  int* soff = reinterpret_cast<int*>(smem);
  acc_t* red = reinterpret_cast<acc_t*>(smem + align16(sizeof(int) * g.K));
  acc_t* S = reinterpret_cast<acc_t*>(smem + align16(sizeof(int) * g.K) + align16(sizeof(acc_t) * g.K * nwarps));
  const int np = tnpts[c];
  for (int j = threadIdx.x; j < np; j += blockDim.x) {
    const int2 o = toff[int64_t(c) * g.K + j];
    soff[j] = (o.x + hl.x) * EW + (o.y + hl.y);
  }
  for (int e = threadIdx.x; e < np * nwarps; e += blockDim.x) red[e] = acc_t(0);
  const int nout = th * twd;
  const FastDiv div_tw(twd);
  const int i0 = p0 * g.a - hl.x, j0 = q0 * g.a - hl.y;
  const int n_end = min(N, (ck + 1) * chunk);
  for (int n = ck * chunk; n < n_end; ++n) {
    const int64_t plane = int64_t(n) * g.C + c;
    const scalar_t* xp = x + plane * g.Hs * g.Ws;
    const scalar_t* dyp = dy + plane * g.Ho * g.Wo;
    __syncthreads();  // previous image's reads of S are done
    stage_tile<scalar_t, acc_t>(S, xp, g.Hs, g.Ws, 1, i0, j0, EH, EW);
    __syncthreads();
    for (int base = 0; base < nout; base += blockDim.x * kPerThread) {
      int sb[kPerThread];
      acc_t gv[kPerThread];
#pragma unroll
      for (int r = 0; r < kPerThread; ++r) {
        const int o = base + r * blockDim.x + threadIdx.x;
        int q;
        const int p = div_tw(o, &q);
        const bool ok = o < nout;
        sb[r] = ok ? p * g.a * EW + q * g.a : 0;
        gv[r] = ok ? static_cast<acc_t>(dyp[int64_t(p0 + p) * g.Wo + q0 + q]) : acc_t(0);
      }
      for (int j = 0; j < np; ++j) {
        const int so = soff[j];
        acc_t v = acc_t(0);
#pragma unroll
        for (int r = 0; r < kPerThread; ++r) v += gv[r] * S[sb[r] + so];
        v = warp_sum(v);
        if (lane == 0) red[warp * np + j] += v;
      }
    }
  }
  __syncthreads();
  const int parts = g.tiles * chunks;
  for (int j = threadIdx.x; j < np; j += blockDim.x) {
    acc_t v = acc_t(0);
    for (int w = 0; w < nwarps; ++w) v += red[w * np + j];
    partial[(int64_t(c) * parts + tile * chunks + ck) * g.K + j] = v;
  }
}

template <typename scalar_t, typename acc_t>
__global__ void __launch_bounds__(kNhwcThreads)
    wgrad_nhwc_kernel(const scalar_t* __restrict__ x, const scalar_t* __restrict__ dy,
                      const int2* __restrict__ toff, const int* __restrict__ tnpts,
                      const int2* __restrict__ thalo, acc_t* __restrict__ partial,
                      const GatherGeometry g, int N, int chunk) {
  constexpr int CB = kNhwcChannels;
  extern __shared__ __align__(16) unsigned char smem[];
  const int chunks = (N + chunk - 1) / chunk;
  const int tile = blockIdx.x % g.tiles;
  const int ck = (blockIdx.x / g.tiles) % chunks;
  const int cg = blockIdx.x / (g.tiles * chunks);
  const int p0 = (tile / g.tiles_w) * g.TH, q0 = (tile % g.tiles_w) * g.TW;
  const int th = min(g.TH, g.Ho - p0), twd = min(g.TW, g.Wo - q0);
  const int cl = threadIdx.x % CB, slot = threadIdx.x / CB;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, nwarps = blockDim.x / 32;
  const int c = cg * CB + cl;
  const bool c_ok = c < g.C;

  __shared__ int s_np, s_ph, s_pw;
  if (threadIdx.x == 0) {
    int np = 0, ph = 0, pwid = 0;
    for (int k = 0; k < CB && cg * CB + k < g.C; ++k) {
      np = max(np, tnpts[cg * CB + k]);
      const int2 hl = thalo[cg * CB + k];
      ph = max(ph, hl.x);
      pwid = max(pwid, hl.y);
    }
    s_np = np;
    s_ph = ph;
    s_pw = pwid;
  }
  __syncthreads();
  const int np = s_np, ph = s_ph, pwid = s_pw;
  const int EH = (th - 1) * g.a + 1 + 2 * ph, EW = (twd - 1) * g.a + 1 + 2 * pwid;
  int* soff = reinterpret_cast<int*>(smem);
  acc_t* red = reinterpret_cast<acc_t*>(smem + align16(sizeof(int) * g.K * CB));
  acc_t* S = reinterpret_cast<acc_t*>(smem + align16(sizeof(int) * g.K * CB) +
                                      align16(sizeof(acc_t) * g.K * CB * nwarps));
  for (int e = threadIdx.x; e < np * CB; e += blockDim.x) {
    const int j = e / CB, k = e - j * CB, ch = cg * CB + k;
    const int2 o = (ch < g.C && j < tnpts[ch]) ? toff[int64_t(ch) * g.K + j] : make_int2(0, 0);
    soff[e] = ((o.x + ph) * EW + (o.y + pwid)) * CB;
  }
  for (int e = threadIdx.x; e < np * CB * nwarps; e += blockDim.x) red[e] = acc_t(0);
  const int nout = th * twd;
  const FastDiv div_tw(twd);
  const int slots = blockDim.x / CB;
  const int i0 = p0 * g.a - ph, j0 = q0 * g.a - pwid;
  const int n_end = min(N, (ck + 1) * chunk);
  for (int n = ck * chunk; n < n_end; ++n) {
    const scalar_t* xp = x + int64_t(n) * g.Hs * g.Ws * g.C + cg * CB;
    const scalar_t* dyp = dy + int64_t(n) * g.Ho * g.Wo * g.C + c;
    __syncthreads();
    stage_tile_nhwc<scalar_t, acc_t>(S, xp, g.C, g.Hs, g.Ws, 1, i0, j0, EH, EW, g.C - cg * CB);
    __syncthreads();
    for (int base = 0; base < nout; base += slots * kPerThread) {
      int sb[kPerThread];
      acc_t gv[kPerThread];
#pragma unroll
      for (int r = 0; r < kPerThread; ++r) {
        const int o = base + r * slots + slot;
        int q;
        const int p = div_tw(o, &q);
        const bool ok = o < nout && c_ok;
        sb[r] = (o < nout ? p * g.a * EW + q * g.a : 0) * CB + cl;
        gv[r] = ok ? static_cast<acc_t>(dyp[(int64_t(p0 + p) * g.Wo + q0 + q) * g.C]) : acc_t(0);
      }
      for (int j = 0; j < np; ++j) {
        const int so = soff[j * CB + cl];
        acc_t v = acc_t(0);
#pragma unroll
        for (int r = 0; r < kPerThread; ++r) v += gv[r] * S[sb[r] + so];
        // Lanes cl, cl+8, cl+16, cl+24 hold the same channel.
#pragma unroll
        for (int m = CB; m < 32; m <<= 1) v += __shfl_xor_sync(0xffffffffu, v, m);
        if (lane < CB) red[(warp * np + j) * CB + cl] += v;
      }
    }
  }
  __syncthreads();
  const int parts = g.tiles * chunks;
  for (int e = threadIdx.x; e < np * CB; e += blockDim.x) {
    const int j = e / CB, k = e - j * CB, ch = cg * CB + k;
    if (ch >= g.C || j >= tnpts[ch]) continue;
    acc_t v = acc_t(0);
    for (int w = 0; w < nwarps; ++w) v += red[(w * np + j) * CB + k];
    partial[(int64_t(ch) * parts + tile * chunks + ck) * g.K + j] = v;
  }
}

// dw[c, t] = sum over parts of partial[c][part][point(t)], in a fixed order. With parity classes
// (tables of classes * C entries), the tap's point is in the one class whose map has it.
template <typename scalar_t, typename acc_t>
__global__ void wgrad_reduce_kernel(const acc_t* __restrict__ partial, const int* __restrict__ tap_pt,
                                    scalar_t* __restrict__ dw, int C, int K, int parts, int classes = 1) {
  const int64_t e = blockIdx.x * int64_t(blockDim.x) + threadIdx.x;
  if (e >= int64_t(C) * K) return;
  int64_t entry = e / K;  // cls * C + c
  int j = tap_pt[e];
  for (int cls = 1; j < 0 && cls < classes; ++cls) {
    entry += C;
    j = tap_pt[e + int64_t(cls) * C * K];
  }
  const acc_t* pp = partial + entry * parts * K + j;
  acc_t v = acc_t(0);
  for (int u = 0; u < parts; ++u) v += pp[int64_t(u) * K];
  dw[e] = static_cast<scalar_t>(v);
}

// ----------------------------------------------------------------------------------------------
// Stride-1 fast paths (float32, float16, bfloat16; forward and input gradient).
//
// NCHW: the distinct points of a channel's line are split into segments, runs of points that
// follow each other by one step u along one of four axes (0, 90, 45 or 135 degrees; the table
// kernel picks the axis that gives the fewest segments). A thread owns R outputs that also follow
// each other by u, so for a segment of L points it loads a window of R + L - 1 source values once
// and does R * L multiply-adds from registers (the window rotates through R registers): R times
// fewer shared-memory loads than one load per tap and output on straight and diagonal lines,
// about twice fewer on the in-between angles.
//
// NHWC: a tile of 32 bytes of channels per pixel (16 half-precision or 8 float32 channels) is
// copied to shared memory as it is (cp.async, zero-filled outside the image), four lanes share a
// pixel and each converts and accumulates a vector of channels; eight pixels per warp make the
// shared-memory reads conflict-free. When C is a multiple of the channel block, the gather uses
// the segment windows of the NCHW path on such tiles (win_gather_nhwc_kernel); otherwise, and for
// the weight gradient, a thread reads every tap of outputs 64 pixels apart.
// ----------------------------------------------------------------------------------------------
constexpr int kSegR = 8;          // outputs per thread along the segment axis (NCHW fast path)
constexpr int kFastThreads = 256;
constexpr int kWinRegion = 32;  // largest output tile side of a window-gather block
// NHWC fast path: outputs per thread, 8, or 4 for tiles of up to 256 pixels (small planes: 64
// pixel slots x 8 would leave most of them idle).
constexpr int kVecRLarge = 8, kVecRSmall = 4;

// Maximum over the 32 lanes of a warp (all lanes must call it).
__device__ __forceinline__ int warp_max(int v) {
#pragma unroll
  for (int d = 16; d > 0; d >>= 1) v = max(v, __shfl_xor_sync(0xffffffffu, v, d));
  return v;
}

struct SegInfo {
  int mode;  // 0: u = (0, 1), 1: u = (1, 0), 2: u = (1, 1), 3: u = (1, -1)
  int nseg;
  int npts;
  int same;  // the taps' offsets are those of the previous channel (same segments)
};

__host__ __device__ __forceinline__ void mode_step(int mode, int* ui, int* uj) {
  *ui = mode == 0 ? 0 : 1;
  *uj = mode == 1 ? 0 : (mode == 3 ? -1 : 1);
}

// Segment tables of every channel for the gather with offsets sign * (dh, dw): per channel the
// axis, the segments {dh0, dw0, L, first weight} (point l of a segment is (dh0, dw0) + l * u) and
// the merged weights in segment order; the halo (max |dh|, max |dw|).
// With classes = 4 (polyphase input gradient at stride 2), entry cls * C + c holds the taps of
// channel c whose offsets have parities (cls >> 1, cls & 1), at offsets sign * (dh >> 1, dw >> 1);
// the other taps map to slot -1.
template <typename scalar_t>
__global__ void build_segments_kernel(const float* __restrict__ theta, const scalar_t* __restrict__ weight,
                                      int C, int K, bool floor_rounding, bool residual, int sign, int classes,
                                      SegInfo* __restrict__ info, int4* __restrict__ segs,
                                      float* __restrict__ segw, int2* __restrict__ halo,
                                      int* __restrict__ tap_sp, int scratch_bytes) {
  const int idx = blockIdx.x * blockDim.x + threadIdx.x;
  if (idx >= C * classes) return;
  const int c = idx % C, cls = classes == 4 ? idx / C : -1;
  const bool same = same_offsets_as_prev(theta, c, K, floor_rounding);
  float s, co;
  angle_sincos(theta[c], &s, &co);
  const int64_t wbase = static_cast<int64_t>(c) * K;  // weight row
  const int64_t base = static_cast<int64_t>(idx) * K;  // table rows
  // The tap's offset in this entry's coordinates; false: the tap belongs to another class.
  auto offset = [&](int t, int* dh, int* dw) {
    tap_offset(t, K, s, co, floor_rounding, dh, dw);
    if (cls >= 0) {
      if ((*dh & 1) != (cls >> 1) || (*dw & 1) != (cls & 1)) return false;
      *dh >>= 1;  // floor(dh / 2)
      *dw >>= 1;
    }
    *dh *= sign;
    *dw *= sign;
    return true;
  };
  // Weights and tap -> slot map are built in this thread's shared-memory scratch when the launch
  // gave one (K floats + K ints per thread), then copied out: pass 2 reads back and reverses them.
  extern __shared__ __align__(16) unsigned char scratch[];
  const bool in_smem = scratch_bytes > 0;
  float* w = in_smem ? reinterpret_cast<float*>(scratch) + int64_t(threadIdx.x) * K : segw + base;
  int* tsp = in_smem ? reinterpret_cast<int*>(scratch + sizeof(float) * K * blockDim.x) + int64_t(threadIdx.x) * K
                     : tap_sp + base;
  // Pass 1: number of distinct points, halo and, for each axis, the number of runs.
  int np = 0, ph = 0, pwid = 0;
  int runs[4] = {0, 0, 0, 0}, dir[4] = {0, 0, 0, 0};
  int prev_h = INT_MIN, prev_w = INT_MIN;
  for (int t = 0; t < K; ++t) {
    int dh, dw;
    if (!offset(t, &dh, &dw)) continue;
    if (dh == prev_h && dw == prev_w) continue;
    ph = max(ph, abs(dh));
    pwid = max(pwid, abs(dw));
#pragma unroll
    for (int m = 0; m < 4; ++m) {
      int ui, uj;
      mode_step(m, &ui, &uj);
      const int eh = dh - prev_h, ew = dw - prev_w;
      const int d = (np > 0 && eh == ui && ew == uj) ? 1 : ((np > 0 && eh == -ui && ew == -uj) ? -1 : 0);
      if (d != 0 && (dir[m] == 0 || dir[m] == d)) {
        dir[m] = d;
      } else {
        ++runs[m];
        dir[m] = 0;
      }
    }
    prev_h = dh;
    prev_w = dw;
    ++np;
  }
  int mode = 0;
#pragma unroll
  for (int m = 1; m < 4; ++m) {
    if (runs[m] < runs[mode]) mode = m;
  }
  int ui, uj;
  mode_step(mode, &ui, &uj);
  // Pass 2: the runs along the chosen axis, weights merged per point.
  int nseg = 0, nw = 0, run_len = 0, run_dir = 0;
  int run_h = 0, run_w = 0;  // first point of the current run (in tap order)
  prev_h = INT_MIN;
  prev_w = INT_MIN;
  auto close_run = [&](int taps_done) {
    if (run_len == 0) return;
    // Store the run so that l grows along +u: a run walked along -u starts at its last point and
    // its weights are reversed.
    int h0 = run_h, w0 = run_w;
    const int first = nw - run_len;
    if (run_dir < 0) {
      h0 = run_h - (run_len - 1) * ui;
      w0 = run_w - (run_len - 1) * uj;
      for (int a = first, b = nw - 1; a < b; ++a, --b) {
        const float tmp = w[a];
        w[a] = w[b];
        w[b] = tmp;
      }
    }
    segs[base + nseg] = make_int4(h0, w0, run_len, first);
    ++nseg;
    // Taps of a reversed run point at reversed weight slots.
    for (int t = 0; run_dir < 0 && t < taps_done; ++t) {
      const int j = tsp[t];
      if (j >= first && j < nw) tsp[t] = first + (nw - 1 - j);
    }
  };
  const int centre = K / 2;
  for (int t = 0; t < K; ++t) {
    int dh, dw;
    if (!offset(t, &dh, &dw)) {
      tsp[t] = -1;
      continue;
    }
    float wt = static_cast<float>(weight[wbase + t]) + ((residual && t == centre) ? 1.0f : 0.0f);
    if (dh == prev_h && dw == prev_w) {
      w[nw - 1] += wt;
      tsp[t] = nw - 1;
      continue;
    }
    const int eh = dh - prev_h, ew = dw - prev_w;
    const int d = (run_len > 0 && eh == ui && ew == uj) ? 1 : ((run_len > 0 && eh == -ui && ew == -uj) ? -1 : 0);
    if (d != 0 && (run_dir == 0 || run_dir == d)) {
      run_dir = d;
      ++run_len;
    } else {
      close_run(t);
      run_h = dh;
      run_w = dw;
      run_len = 1;
      run_dir = 0;
    }
    tsp[t] = nw;
    w[nw++] = wt;
    prev_h = dh;
    prev_w = dw;
  }
  close_run(K);
  if (in_smem) {
    for (int k = 0; k < nw; ++k) segw[base + k] = w[k];
    for (int t = 0; t < K; ++t) tap_sp[base + t] = tsp[t];
  }
  info[idx] = SegInfo{mode, nseg, np, same};
  halo[idx] = make_int2(ph, pwid);
}

// acc[r] += sum_l w[l] * S[a + (r + l) * ustep] for l < L: the window of R + L - 1 values is
// loaded once, each value into register (position mod R).
template <int R>
__device__ __forceinline__ void run_segment(const float* __restrict__ S, int a, int ustep, int L,
                                            const float* __restrict__ w, float (&acc)[R]) {
  float v[R];
#pragma unroll
  for (int k = 0; k < R - 1; ++k) v[k] = S[a + k * ustep];
  const float* sp = S + a + (R - 1) * ustep;
  for (int l0 = 0; l0 < L; l0 += R) {
#pragma unroll
    for (int i = 0; i < R; ++i) {
      if (l0 + i < L) {
        v[(i + R - 1) % R] = *sp;
        sp += ustep;
        const float wl = w[l0 + i];
#pragma unroll
        for (int r = 0; r < R; ++r) acc[r] += wl * v[(i + r) % R];
      }
    }
  }
}

// Copies rows [gi0, gi0 + EH) x columns [gj0, gj0 + EW) of an H x W plane into S (row pitch
// `pitch`), converted to float, zero outside the plane. Each warp copies rows; every lane keeps
// several loads in flight.
template <typename scalar_t>
__device__ __forceinline__ void stage_plane(float* __restrict__ S, int pitch, const scalar_t* __restrict__ src,
                                            int H, int W, int gi0, int gj0, int EH, int EW) {
  constexpr int kRows = 4, kCols = 2;
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nwarps = blockDim.x >> 5;
  for (int i0 = warp; i0 < EH; i0 += kRows * nwarps) {
    for (int j0 = lane; j0 < EW; j0 += 32 * kCols) {
      float v[kRows][kCols];
#pragma unroll
      for (int a = 0; a < kRows; ++a) {
        const int gi = gi0 + i0 + a * nwarps;
        const bool row_ok = i0 + a * nwarps < EH && static_cast<unsigned>(gi) < static_cast<unsigned>(H);
#pragma unroll
        for (int b = 0; b < kCols; ++b) {
          const int gj = gj0 + j0 + 32 * b;
          v[a][b] = (row_ok && static_cast<unsigned>(gj) < static_cast<unsigned>(W))
                        ? static_cast<float>(src[int64_t(gi) * W + gj])
                        : 0.0f;
        }
      }
#pragma unroll
      for (int a = 0; a < kRows; ++a) {
        const int i = i0 + a * nwarps;
#pragma unroll
        for (int b = 0; b < kCols; ++b) {
          const int j = j0 + 32 * b;
          if (i < EH && j < EW) S[i * pitch + j] = v[a][b];
        }
      }
    }
  }
}

struct FastGeometry {
  int C, K, H, W;          // stride 1: output size = source size
  int TH, TW, tiles_w, tiles;
};

__host__ __device__ __forceinline__ int round_up(int a, int b) { return (a + b - 1) / b * b; }

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
static_assert(kSegR == 8, "store8 / load8 move one row task");
template <typename scalar_t>
__device__ __forceinline__ void store8(scalar_t* __restrict__ p, const float (&f)[8]) {
  if constexpr (sizeof(scalar_t) == 4) {
    reinterpret_cast<float4*>(p)[0] = make_float4(f[0], f[1], f[2], f[3]);
    reinterpret_cast<float4*>(p)[1] = make_float4(f[4], f[5], f[6], f[7]);
  } else {
    union {
      scalar_t v[8];
      uint4 raw;
    } u;
#pragma unroll
    for (int k = 0; k < 8; ++k) u.v[k] = static_cast<scalar_t>(f[k]);
    *reinterpret_cast<uint4*>(p) = u.raw;
  }
}

template <typename scalar_t>
__device__ __forceinline__ void load8(const scalar_t* __restrict__ p, float (&f)[8]) {
  if constexpr (sizeof(scalar_t) == 4) {
    const float4 a = reinterpret_cast<const float4*>(p)[0], b = reinterpret_cast<const float4*>(p)[1];
    f[0] = a.x; f[1] = a.y; f[2] = a.z; f[3] = a.w;
    f[4] = b.x; f[5] = b.y; f[6] = b.z; f[7] = b.w;
  } else {
    union {
      scalar_t v[8];
      uint4 raw;
    } u;
    u.raw = *reinterpret_cast<const uint4*>(p);
#pragma unroll
    for (int k = 0; k < 8; ++k) f[k] = static_cast<float>(u.v[k]);
  }
}

// Whether row tasks (mode 0) of a tile starting at column q0 can use 16-byte accesses to a plane.
template <typename scalar_t>
__device__ __forceinline__ bool rows_vectorizable(const void* base, int W, int q0) {
  constexpr int E = 16 / sizeof(scalar_t);
  return W % E == 0 && q0 % E == 0 && (reinterpret_cast<uintptr_t>(base) & 15) == 0;
}

template <typename scalar_t>
__global__ void __launch_bounds__(kFastThreads)
    seg_gather_nchw_kernel(const scalar_t* __restrict__ src, scalar_t* __restrict__ out,
                           const scalar_t* __restrict__ bias, const SegInfo* __restrict__ info,
                           const int4* __restrict__ segs, const float* __restrict__ segw,
                           const int2* __restrict__ halo, const FastGeometry g) {
  constexpr int R = kSegR;
  extern __shared__ __align__(16) unsigned char smem[];
  const int64_t plane = blockIdx.x / g.tiles;
  const int tile = static_cast<int>(blockIdx.x - plane * g.tiles);
  const int c = static_cast<int>(plane % g.C);
  const int p0 = (tile / g.tiles_w) * g.TH, q0 = (tile % g.tiles_w) * g.TW;
  const int th = min(g.TH, g.H - p0), tw = min(g.TW, g.W - q0);
  const SegInfo inf = info[c];
  const int2 hl = halo[c];
  const int EH = seg_tile_rows(th, hl.x);
  const int EW = seg_tile_cols(tw, hl.y);
  const int pitch = EW | 1;
  int4* sseg = reinterpret_cast<int4*>(smem);
  float* sw = reinterpret_cast<float*>(smem + align16(sizeof(int4) * g.K));
  float* S = reinterpret_cast<float*>(smem + align16(sizeof(int4) * g.K) + align16(sizeof(float) * g.K));
  for (int s = threadIdx.x; s < inf.nseg; s += blockDim.x) {
    const int4 e = segs[int64_t(c) * g.K + s];
    sseg[s] = make_int4(e.x * pitch + e.y, e.z, e.w, 0);
  }
  for (int j = threadIdx.x; j < inf.npts; j += blockDim.x) sw[j] = segw[int64_t(c) * g.K + j];
  stage_plane<scalar_t>(S, pitch, src + plane * g.H * g.W, g.H, g.W, p0 - hl.x, q0 - hl.y - (R - 1), EH, EW);
  __syncthreads();

  int ui, uj;
  mode_step(inf.mode, &ui, &uj);
  const int ustep = ui * pitch + uj;
  const int ntasks = seg_ntasks(inf.mode, th, tw);
  const float b = bias != nullptr ? static_cast<float>(bias[c]) : 0.0f;
  scalar_t* op = out + plane * g.H * g.W;
  const bool vec_rows = inf.mode == 0 && rows_vectorizable<scalar_t>(out, g.W, q0);
  for (int k = threadIdx.x; k < ntasks; k += blockDim.x) {
    int p, q;
    seg_task(inf.mode, k, th, tw, &p, &q);
    const int b0 = (p + hl.x) * pitch + q + hl.y + (R - 1);
    float acc[R];
#pragma unroll
    for (int r = 0; r < R; ++r) acc[r] = b;
    for (int s = 0; s < inf.nseg; ++s) {
      const int4 e = sseg[s];
      run_segment<R>(S, b0 + e.x, ustep, e.y, sw + e.z, acc);
    }
    if (vec_rows && q + R <= tw) {
      // A row task's outputs are contiguous: 16-byte stores instead of one sector per lane and r.
      store8<scalar_t>(op + int64_t(p0 + p) * g.W + q0 + q, acc);
      continue;
    }
#pragma unroll
    for (int r = 0; r < R; ++r) {
      const int pr = p + r * ui, qr = q + r * uj;
      if (pr < th && qr >= 0 && qr < tw) op[int64_t(p0 + pr) * g.W + q0 + qr] = static_cast<scalar_t>(acc[r]);
    }
  }
}

// acc[l * stride] += sum_r g[r] * S[a + (r + l) * ustep] for l < L (the window of run_segment).
template <int R>
__device__ __forceinline__ void run_segment_wgrad(const float* __restrict__ S, int a, int ustep, int L,
                                                  float* __restrict__ acc, int stride, const float (&g)[R]) {
  float v[R];
#pragma unroll
  for (int k = 0; k < R - 1; ++k) v[k] = S[a + k * ustep];
  const float* sp = S + a + (R - 1) * ustep;
  for (int l0 = 0; l0 < L; l0 += R) {
#pragma unroll
    for (int i = 0; i < R; ++i) {
      if (l0 + i < L) {
        v[(i + R - 1) % R] = *sp;
        sp += ustep;
        float part = 0.0f;
#pragma unroll
        for (int r = 0; r < R; ++r) part += g[r] * v[(i + r) % R];
        acc[(l0 + i) * stride] += part;
      }
    }
  }
}

// Weight-gradient partial sums, NCHW fast path (stride 1): the tasks and windows of the forward
// kernel, with dy in registers; every thread accumulates its own column of per-point sums in
// shared memory, a block adds the columns in a fixed order and writes
// partial[c][part][point] (points in segment order, part = tile * chunks + chunk).
template <typename scalar_t>
__global__ void __launch_bounds__(kFastThreads)
    seg_wgrad_nchw_kernel(const scalar_t* __restrict__ x, const scalar_t* __restrict__ dy,
                          const SegInfo* __restrict__ info, const int4* __restrict__ segs,
                          const int2* __restrict__ halo, float* __restrict__ partial, const FastGeometry g, int N,
                          int chunk) {
  constexpr int R = kSegR;
  extern __shared__ __align__(16) unsigned char smem[];
  const int chunks = (N + chunk - 1) / chunk;
  const int tile = blockIdx.x % g.tiles;
  const int ck = (blockIdx.x / g.tiles) % chunks;
  const int c = blockIdx.x / (g.tiles * chunks);
  const int p0 = (tile / g.tiles_w) * g.TH, q0 = (tile % g.tiles_w) * g.TW;
  const int th = min(g.TH, g.H - p0), tw = min(g.TW, g.W - q0);
  const SegInfo inf = info[c];
  const int2 hl = halo[c];
  const int EH = seg_tile_rows(th, hl.x);
  const int EW = seg_tile_cols(tw, hl.y);
  const int pitch = EW | 1;
  const int nthreads = blockDim.x;
  int4* sseg = reinterpret_cast<int4*>(smem);
  float* acc = reinterpret_cast<float*>(smem + align16(sizeof(int4) * g.K));
  float* S = reinterpret_cast<float*>(smem + align16(sizeof(int4) * g.K) +
                                      align16(sizeof(float) * g.K * nthreads));
  for (int s = threadIdx.x; s < inf.nseg; s += nthreads) {
    const int4 e = segs[int64_t(c) * g.K + s];
    sseg[s] = make_int4(e.x * pitch + e.y, e.z, e.w, 0);
  }
  for (int e = threadIdx.x; e < inf.npts * nthreads; e += nthreads) acc[e] = 0.0f;
  int ui, uj;
  mode_step(inf.mode, &ui, &uj);
  const int ustep = ui * pitch + uj;
  const int ntasks = seg_ntasks(inf.mode, th, tw);
  const bool vec_rows = inf.mode == 0 && rows_vectorizable<scalar_t>(dy, g.W, q0);
  const int n_end = min(N, (ck + 1) * chunk);
  for (int n = ck * chunk; n < n_end; ++n) {
    const int64_t plane = int64_t(n) * g.C + c;
    __syncthreads();  // the previous image's reads of S are done
    stage_plane<scalar_t>(S, pitch, x + plane * g.H * g.W, g.H, g.W, p0 - hl.x, q0 - hl.y - (R - 1), EH, EW);
    __syncthreads();
    const scalar_t* dyp = dy + plane * g.H * g.W;
    for (int k = threadIdx.x; k < ntasks; k += nthreads) {
      int p, q;
      seg_task(inf.mode, k, th, tw, &p, &q);
      float gr[R];
      if (vec_rows && q + R <= tw) {
        load8<scalar_t>(dyp + int64_t(p0 + p) * g.W + q0 + q, gr);
      } else {
#pragma unroll
        for (int r = 0; r < R; ++r) {
          const int pr = p + r * ui, qr = q + r * uj;
          gr[r] = (pr < th && qr >= 0 && qr < tw) ? static_cast<float>(dyp[int64_t(p0 + pr) * g.W + q0 + qr]) : 0.0f;
        }
      }
      const int b0 = (p + hl.x) * pitch + q + hl.y + (R - 1);
      for (int s = 0; s < inf.nseg; ++s) {
        const int4 e = sseg[s];
        run_segment_wgrad<R>(S, b0 + e.x, ustep, e.y, acc + e.z * nthreads + threadIdx.x, nthreads, gr);
      }
    }
  }
  __syncthreads();
  // Point j: the columns of all threads, lane-strided then a butterfly, in a fixed order.
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nwarps = nthreads >> 5;
  const int parts = g.tiles * chunks;
  for (int j = warp; j < inf.npts; j += nwarps) {
    float v = 0.0f;
    for (int t = lane; t < nthreads; t += 32) v += acc[j * nthreads + t];
    v = warp_sum(v);
    if (lane == 0) partial[(int64_t(c) * parts + tile * chunks + ck) * g.K + j] = v;
  }
}

// ---- NHWC fast path --------------------------------------------------------------------------
template <typename scalar_t>
struct VecTraits {
  static constexpr int kCB = 32 / sizeof(scalar_t);  // channels per block (32 bytes per pixel)
  static constexpr int kV = kCB / 4;                // channels per lane (4 lanes per pixel)
};

__device__ __forceinline__ void cp_async16(void* dst, const void* src, bool valid) {
  const unsigned s = static_cast<unsigned>(__cvta_generic_to_shared(dst));
  const int bytes = valid ? 16 : 0;  // 0: no read, zero fill
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(s), "l"(src), "r"(bytes) : "memory");
}
__device__ __forceinline__ void cp_async_wait_all() { asm volatile("cp.async.wait_all;\n" ::: "memory"); }

// V consecutive channels <-> floats.
template <typename scalar_t, int V>
struct ChannelVec {
  scalar_t v[V];
};

template <typename scalar_t, int V>
union Raw8 {
  static_assert(sizeof(scalar_t) * V == 8, "a lane's channels are 8 bytes");
  ChannelVec<scalar_t, V> s;
  uint2 raw;
};

// bfloat16 -> float is a 16-bit shift: two integer ops per pair instead of conversion
// instructions (which run at a quarter of the rate of the multiply-adds they feed).
template <typename scalar_t, int V>
__device__ __forceinline__ void load_vec(const scalar_t* __restrict__ p, float (&f)[V]) {
  Raw8<scalar_t, V> u;
  u.raw = *reinterpret_cast<const uint2*>(p);
  if constexpr (std::is_same_v<scalar_t, c10::BFloat16>) {
    f[0] = __uint_as_float(u.raw.x << 16);
    f[1] = __uint_as_float(u.raw.x & 0xffff0000u);
    f[2] = __uint_as_float(u.raw.y << 16);
    f[3] = __uint_as_float(u.raw.y & 0xffff0000u);
  } else {
#pragma unroll
    for (int k = 0; k < V; ++k) f[k] = static_cast<float>(u.s.v[k]);
  }
}

template <typename scalar_t, int V>
__device__ __forceinline__ void store_vec(scalar_t* __restrict__ p, const float (&f)[V]) {
  Raw8<scalar_t, V> u;
#pragma unroll
  for (int k = 0; k < V; ++k) u.s.v[k] = static_cast<scalar_t>(f[k]);
  *reinterpret_cast<uint2*>(p) = u.raw;
}

// V consecutive floats from a 4 * V-byte aligned address (shared-memory weight tables).
template <int V>
__device__ __forceinline__ void load_floats(const float* __restrict__ p, float (&f)[V]) {
  if constexpr (V == 4) {
    const float4 u = *reinterpret_cast<const float4*>(p);
    f[0] = u.x;
    f[1] = u.y;
    f[2] = u.z;
    f[3] = u.w;
  } else if constexpr (V == 2) {
    const float2 u = *reinterpret_cast<const float2*>(p);
    f[0] = u.x;
    f[1] = u.y;
  } else {
#pragma unroll
    for (int k = 0; k < V; ++k) f[k] = p[k];
  }
}

// Sum of v[k] over the 8 lanes that share lane & 3 (lane bits 2, 3, 4), for V = 4 or 2 values,
// with V shuffles instead of 3 V: each step halves the values a lane keeps. Returns the sum of
// value `*k` (the same in lanes that differ only in bit 4, and for V = 2 also in bit 3), in a
// fixed order: deterministic.
template <int V>
__device__ __forceinline__ float slot_sum(const float (&v)[V], int lane, int* k) {
  const bool b2 = lane & 4, b3 = lane & 8;
  if constexpr (V == 4) {
    const float a0 = (b2 ? v[2] : v[0]) + __shfl_xor_sync(0xffffffffu, b2 ? v[0] : v[2], 4);
    const float a1 = (b2 ? v[3] : v[1]) + __shfl_xor_sync(0xffffffffu, b2 ? v[1] : v[3], 4);
    float b = (b3 ? a1 : a0) + __shfl_xor_sync(0xffffffffu, b3 ? a0 : a1, 8);
    b += __shfl_xor_sync(0xffffffffu, b, 16);
    *k = (b2 ? 2 : 0) + (b3 ? 1 : 0);
    return b;
  } else {
    static_assert(V == 2, "2 or 4 channels per lane");
    float a = (b2 ? v[1] : v[0]) + __shfl_xor_sync(0xffffffffu, b2 ? v[0] : v[1], 4);
    a += __shfl_xor_sync(0xffffffffu, a, 8);
    a += __shfl_xor_sync(0xffffffffu, a, 16);
    *k = b2 ? 1 : 0;
    return a;
  }
}

// Rows [gi0, gi0 + EH) x columns [gj0, gj0 + EW) of an H x W image, channels [c0, c0 + CB), into
// S (pixel-major, CB channels per pixel, `pitch` >= EW pixels per row), zero outside the image and
// beyond C. Pixel (i, j) is at img + (i * rstride + j * cstep) * C: rstride = W, cstep = 1 for an
// image; a phase plane x[a::2, b::2] of a W2-wide image has rstride = 2 W2, cstep = 2.
template <typename scalar_t>
__device__ __forceinline__ void stage_nhwc_tile(scalar_t* __restrict__ S, const scalar_t* __restrict__ img, int C,
                                                int H, int W, int c0, int gi0, int gj0, int EH, int EW,
                                                bool vec_ok, int pitch, int64_t rstride, int cstep) {
  constexpr int CB = VecTraits<scalar_t>::kCB;
  const int total = EH * EW;
  if (vec_ok) {
    // Two 16-byte halves per pixel; a warp copies 16 pixels of a row per step.
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nwarps = blockDim.x >> 5;
    const int half = lane & 1;
    for (int i = warp; i < EH; i += nwarps) {
      const int gi = gi0 + i;
      const bool row_ok = static_cast<unsigned>(gi) < static_cast<unsigned>(H);
      for (int j = lane >> 1; j < EW; j += 16) {
        const int gj = gj0 + j;
        const bool ok = row_ok && static_cast<unsigned>(gj) < static_cast<unsigned>(W);
        const scalar_t* g = ok ? img + (gi * rstride + int64_t(gj) * cstep) * C + c0 + half * (CB / 2) : img;
        cp_async16(S + (i * pitch + j) * CB + half * (CB / 2), g, ok);
      }
    }
    cp_async_wait_all();
    return;
  }
  for (int e = threadIdx.x; e < total * CB; e += blockDim.x) {
    const int pix = e / CB, k = e - pix * CB;
    const int i = pix / EW, j = pix - i * EW;
    const int gi = gi0 + i, gj = gj0 + j;
    const bool ok = c0 + k < C && static_cast<unsigned>(gi) < static_cast<unsigned>(H) &&
                    static_cast<unsigned>(gj) < static_cast<unsigned>(W);
    S[(i * pitch + j) * CB + k] = ok ? img[(gi * rstride + int64_t(gj) * cstep) * C + c0 + k] : scalar_t(0);
  }
}

// Warp 0 of a block over channels [c0, c0 + CB): the largest point count and halo, and per quarter of
// V channels whether they share the first one's points (`same`: the tables' same-as-previous flags).
template <int V>
__device__ __forceinline__ void block_channel_summary(const int* __restrict__ npts, const int2* __restrict__ halo,
                                                      const int* __restrict__ same, int c0, int CB, int C, int* s_np,
                                                      int* s_ph, int* s_pw, int* s_uniform) {
  if (threadIdx.x >= 32) return;
  int np = 0, ph = 0, pw = 0;
  const int c = c0 + static_cast<int>(threadIdx.x);
  if (static_cast<int>(threadIdx.x) < CB && c < C) {
    np = npts[c];
    const int2 hl = halo[c];
    ph = hl.x;
    pw = hl.y;
  }
  np = warp_max(np);
  ph = warp_max(ph);
  pw = warp_max(pw);
  if (threadIdx.x == 0) {
    *s_np = np;
    *s_ph = ph;
    *s_pw = pw;
  }
  if (threadIdx.x < 4) {
    s_uniform[threadIdx.x] = quarter_uniform<V>([&](int c) { return same[c]; }, c0 + threadIdx.x * V, C);
  }
}

// One block: image n, an output tile, CB channels. Lane = 4 * pixel slot + channel quarter;
// the thread owns R outputs 64 pixels apart (consecutive pixels across a warp's slots).
template <typename scalar_t, int R>
__global__ void __launch_bounds__(kFastThreads, 3)
    vec_gather_nhwc_kernel(const scalar_t* __restrict__ src, scalar_t* __restrict__ out,
                           const scalar_t* __restrict__ bias, const int2* __restrict__ toff,
                           const float* __restrict__ tw_, const int* __restrict__ tnpts,
                           const int2* __restrict__ thalo, const int* __restrict__ tsame, const FastGeometry g,
                           int sign, bool vec_ok, int tile_bytes) {
  constexpr int CB = VecTraits<scalar_t>::kCB, V = VecTraits<scalar_t>::kV;
  extern __shared__ __align__(16) unsigned char smem[];
  const int groups = (g.C + CB - 1) / CB;
  const int tile = blockIdx.x % g.tiles;
  const int cg = (blockIdx.x / g.tiles) % groups;
  const int64_t n = blockIdx.x / (int64_t(g.tiles) * groups);
  const int c0 = cg * CB;
  const int p0 = (tile / g.tiles_w) * g.TH, q0 = (tile % g.tiles_w) * g.TW;
  const int th = min(g.TH, g.H - p0), twd = min(g.TW, g.W - q0);
  const int lane = threadIdx.x & 31, quarter = lane & 3;
  const int slot = (threadIdx.x >> 5) * 8 + (lane >> 2);  // 0 .. blockDim / 4 - 1
  const int slots = blockDim.x >> 2;

  __shared__ int s_np, s_ph, s_pw, s_uniform[4];
  block_channel_summary<V>(tnpts, thalo, tsame, c0, CB, g.C, &s_np, &s_ph, &s_pw, s_uniform);
  __syncthreads();
  const int np = s_np, ph = s_ph, pwid = s_pw;
  const int EW = twd + 2 * pwid;
  // Output rows per strip: the whole tile, or fewer when channels at different angles together
  // need a larger halo than one line at any angle (the allocation's bound).
  const int strip = min(th, tile_bytes / (32 * EW) - 2 * ph);
  // Tables: soff[j][channel] pixel offsets, sw[j][channel] weights; taps beyond a channel's points
  // read the centre with weight 0.
  int* soff = reinterpret_cast<int*>(smem);
  float* sw = reinterpret_cast<float*>(smem + align16(sizeof(int) * g.K * CB));
  scalar_t* S = reinterpret_cast<scalar_t*>(smem + align16(sizeof(int) * g.K * CB) + align16(sizeof(float) * g.K * CB));
  for (int e = threadIdx.x; e < np * CB; e += blockDim.x) {
    const int j = e / CB, k = e - j * CB, ch = c0 + k;
    int2 o = make_int2(0, 0);
    float w = 0.0f;
    if (ch < g.C && j < tnpts[ch]) {
      o = toff[int64_t(ch) * g.K + j];
      w = tw_[int64_t(ch) * g.K + j];
    }
    soff[e] = (sign * o.x + ph) * EW + (sign * o.y + pwid);
    sw[e] = w;
  }
  const bool uniform = s_uniform[quarter] != 0;
  const int cq = c0 + quarter * V;
  float b[V];
#pragma unroll
  for (int k = 0; k < V; ++k) b[k] = (bias != nullptr && cq + k < g.C) ? static_cast<float>(bias[cq + k]) : 0.0f;
  const FastDiv div_tw(twd);
  scalar_t* op = out + n * g.H * g.W * g.C;
  for (int ps = 0; ps < th; ps += strip) {
    const int sh = min(strip, th - ps);
    if (ps > 0) __syncthreads();  // the previous strip's reads of S are done
    stage_nhwc_tile<scalar_t>(S, src + n * g.H * g.W * g.C, g.C, g.H, g.W, c0, p0 + ps - ph, q0 - pwid, sh + 2 * ph, EW,
                              vec_ok, EW, g.W, 1);
    __syncthreads();
    const int nout = sh * twd;
    for (int base = 0; base < nout; base += slots * R) {
      int sbB[R];  // byte offset of each output's pixel in S
      float acc[R][V];
#pragma unroll
      for (int r = 0; r < R; ++r) {
        const int o = min(base + r * slots + slot, nout - 1);
        int q;
        const int p = div_tw(o, &q);
        sbB[r] = (p * EW + q) * 32;
#pragma unroll
        for (int k = 0; k < V; ++k) acc[r][k] = b[k];
      }
      if (uniform) {
        // Byte addressing: 32 bytes per pixel, this lane's channels at quarter * 8.
        const unsigned char* Sq = reinterpret_cast<const unsigned char*>(S) + quarter * 8;
        for (int j = 0; j < np; ++j) {
          const unsigned char* St = Sq + soff[j * CB + quarter * V] * 32;
          float w[V];
          load_floats<V>(sw + j * CB + quarter * V, w);
#pragma unroll
          for (int r = 0; r < R; ++r) {
            float x[V];
            load_vec<scalar_t, V>(reinterpret_cast<const scalar_t*>(St + sbB[r]), x);
#pragma unroll
            for (int k = 0; k < V; ++k) acc[r][k] += w[k] * x[k];
          }
        }
      } else {
        for (int j = 0; j < np; ++j) {
#pragma unroll
          for (int k = 0; k < V; ++k) {
            const unsigned char* St = reinterpret_cast<const unsigned char*>(S + quarter * V + k) +
                                      soff[j * CB + quarter * V + k] * 32;
            const float w = sw[j * CB + quarter * V + k];
#pragma unroll
            for (int r = 0; r < R; ++r) {
              acc[r][k] += w * static_cast<float>(*reinterpret_cast<const scalar_t*>(St + sbB[r]));
            }
          }
        }
      }
#pragma unroll
      for (int r = 0; r < R; ++r) {
        const int o = base + r * slots + slot;
        if (o >= nout) continue;
        int q;
        const int p = div_tw(o, &q);
        scalar_t* dst = op + (int64_t(p0 + ps + p) * g.W + q0 + q) * g.C + cq;
        if (vec_ok) {
          store_vec<scalar_t, V>(dst, acc[r]);
        } else {
#pragma unroll
          for (int k = 0; k < V; ++k) {
            if (cq + k < g.C) dst[k] = static_cast<scalar_t>(acc[r][k]);
          }
        }
      }
  }
  }
}

// Weight-gradient partial sums, NHWC fast path: per tap, each thread sums dy * x over its outputs,
// the eight pixel slots of a warp are added with shuffles, each warp accumulates into its own
// shared-memory row; the block writes partial[c][part][point] (part = tile * chunks + chunk).
// g: dy's plane (stride 1: also x's). P = 2 (stride 2): blockIdx.y is a parity class (a, b), and
// the class's taps, at halved offsets, pair dy with the phase plane x[a::2, b::2] of the Hx x Wx
// input; each class has its own tables and partial sums.
template <typename scalar_t, int R, int P>
__global__ void __launch_bounds__(kFastThreads, 3)
    vec_wgrad_nhwc_kernel(const scalar_t* __restrict__ x, const scalar_t* __restrict__ dy,
                          const int2* __restrict__ toff, const int* __restrict__ tnpts,
                          const int2* __restrict__ thalo, const int* __restrict__ tsame,
                          float* __restrict__ partial, const FastGeometry g, int Hx, int Wx, int N, int chunk,
                          bool vec_ok, int tile_bytes) {
  constexpr int CB = VecTraits<scalar_t>::kCB, V = VecTraits<scalar_t>::kV;
  extern __shared__ __align__(16) unsigned char smem[];
  const int chunks = (N + chunk - 1) / chunk;
  const int cls = P == 1 ? 0 : blockIdx.y;
  const int pa = cls >> 1, pb = cls & 1;
  toff += int64_t(cls) * g.C * g.K;
  tnpts += int64_t(cls) * g.C;
  thalo += int64_t(cls) * g.C;
  tsame += int64_t(cls) * g.C;
  partial += int64_t(cls) * g.C * g.tiles * chunks * g.K;
  const int Hs = (Hx - pa + P - 1) / P, Ws = (Wx - pb + P - 1) / P;  // source plane
  const int tile = blockIdx.x % g.tiles;
  const int ck = (blockIdx.x / g.tiles) % chunks;
  const int cg = blockIdx.x / (g.tiles * chunks);
  const int c0 = cg * CB;
  const int p0 = (tile / g.tiles_w) * g.TH, q0 = (tile % g.tiles_w) * g.TW;
  const int th = min(g.TH, g.H - p0), twd = min(g.TW, g.W - q0);
  const int lane = threadIdx.x & 31, quarter = lane & 3, warp = threadIdx.x >> 5, nwarps = blockDim.x >> 5;
  const int slot = warp * 8 + (lane >> 2);
  const int slots = blockDim.x >> 2;

  __shared__ int s_np, s_ph, s_pw, s_uniform[4];
  block_channel_summary<V>(tnpts, thalo, tsame, c0, CB, g.C, &s_np, &s_ph, &s_pw, s_uniform);
  __syncthreads();
  const int np = s_np, ph = s_ph, pwid = s_pw;
  const int EW = twd + 2 * pwid;
  const int strip = min(th, tile_bytes / (32 * EW) - 2 * ph);  // as in vec_gather_nhwc_kernel
  int* soff = reinterpret_cast<int*>(smem);
  float* red = reinterpret_cast<float*>(smem + align16(sizeof(int) * g.K * CB));
  scalar_t* S = reinterpret_cast<scalar_t*>(smem + align16(sizeof(int) * g.K * CB) +
                                            align16(sizeof(float) * g.K * CB * (kFastThreads / 32)));
  for (int e = threadIdx.x; e < np * CB; e += blockDim.x) {
    const int j = e / CB, k = e - j * CB, ch = c0 + k;
    const int2 o = (ch < g.C && j < tnpts[ch]) ? toff[int64_t(ch) * g.K + j] : make_int2(0, 0);
    soff[e] = (o.x + ph) * EW + (o.y + pwid);
  }
  for (int e = threadIdx.x; e < np * CB * nwarps; e += blockDim.x) red[e] = 0.0f;
  const bool uniform = s_uniform[quarter] != 0;
  const int cq = c0 + quarter * V;
  const FastDiv div_tw(twd);
  const int n_end = min(N, (ck + 1) * chunk);
  for (int n = ck * chunk; n < n_end; ++n) {
    for (int ps = 0; ps < th; ps += strip) {
      const int sh = min(strip, th - ps);
      __syncthreads();  // the previous strip's reads of S are done
      stage_nhwc_tile<scalar_t>(S, x + (int64_t(n) * Hx * Wx + int64_t(pa) * Wx + pb) * g.C, g.C, Hs, Ws, c0,
                                p0 + ps - ph, q0 - pwid, sh + 2 * ph, EW, vec_ok, EW, int64_t(P) * Wx, P);
      __syncthreads();
      const scalar_t* dyn = dy + int64_t(n) * g.H * g.W * g.C;
      const int nout = sh * twd;
      for (int base = 0; base < nout; base += slots * R) {
        int sbB[R];  // byte offset of each output's pixel in S
        float gv[R][V];
#pragma unroll
        for (int r = 0; r < R; ++r) {
          const int o = base + r * slots + slot;
          int q;
          const int p = div_tw(min(o, nout - 1), &q);
          sbB[r] = (p * EW + q) * 32;
          const scalar_t* src = dyn + (int64_t(p0 + ps + p) * g.W + q0 + q) * g.C + cq;
          if (o < nout && vec_ok) {
            load_vec<scalar_t, V>(src, gv[r]);
          } else {
#pragma unroll
            for (int k = 0; k < V; ++k) gv[r][k] = (o < nout && cq + k < g.C) ? static_cast<float>(src[k]) : 0.0f;
          }
        }
        for (int j = 0; j < np; ++j) {
          float part[V];
#pragma unroll
          for (int k = 0; k < V; ++k) part[k] = 0.0f;
          if (uniform) {
            const unsigned char* St =
                reinterpret_cast<const unsigned char*>(S) + quarter * 8 + soff[j * CB + quarter * V] * 32;
#pragma unroll
            for (int r = 0; r < R; ++r) {
              float xv[V];
              load_vec<scalar_t, V>(reinterpret_cast<const scalar_t*>(St + sbB[r]), xv);
#pragma unroll
              for (int k = 0; k < V; ++k) part[k] += gv[r][k] * xv[k];
            }
          } else {
#pragma unroll
            for (int k = 0; k < V; ++k) {
              const unsigned char* St = reinterpret_cast<const unsigned char*>(S + quarter * V + k) +
                                        soff[j * CB + quarter * V + k] * 32;
#pragma unroll
              for (int r = 0; r < R; ++r) {
                part[k] += gv[r][k] * static_cast<float>(*reinterpret_cast<const scalar_t*>(St + sbB[r]));
              }
            }
          }
          // Lanes quarter, quarter + 4, ..., quarter + 28 hold the same channels.
          int k;
          const float sum = slot_sum<V>(part, lane, &k);
          if (lane < 16 && (V == 4 || lane < 8)) red[(warp * np + j) * CB + quarter * V + k] += sum;
        }
      }
    }
  }
  __syncthreads();
  const int parts = g.tiles * chunks;
  for (int e = threadIdx.x; e < np * CB; e += blockDim.x) {
    const int j = e / CB, k = e - j * CB, ch = c0 + k;
    if (ch >= g.C || j >= tnpts[ch]) continue;
    float v = 0.0f;
    for (int w = 0; w < nwarps; ++w) v += red[(w * np + j) * CB + k];
    partial[(int64_t(ch) * parts + tile * chunks + ck) * g.K + j] = v;
  }
}

// ---- NHWC window path (C a multiple of the channel block) --------------------------------------
// The segment windows of the NCHW fast path on an NHWC tile: four lanes share a pixel, each
// holding V channels; a thread owns R outputs that follow each other along its channels' segment
// axis and, for a segment of L points, loads R + L - 1 channel vectors from shared memory (each
// converted to float once) for R * L * V multiply-adds. The eight pixel slots of a warp take
// neighbouring tasks (neighbouring rows for the row axis, neighbouring columns otherwise), which
// the odd row pitch makes conflict-free. Lanes whose V channels have different segment lists (at
// the boundary of two angle groups that splits a lane's channels) walk them one channel at a time.
// Forward and input gradient at stride 1; at stride 2 the input gradient, polyphase:
// dx[2i + a, 2j + b] gathers dy over the taps whose offsets have parities (a, b), at halved offsets,
// so each parity class is a stride-1 gather over dy with its own segment tables that writes every
// other pixel of dx (output step OS = 2).
template <typename scalar_t>
struct WinTraits {
  static constexpr int kR = 16 / VecTraits<scalar_t>::kV;  // R * V = 16 accumulators per thread
};

// NV consecutive channels of a pixel <-> floats: the lane's vector (NV = V) or one channel (NV = 1).
template <typename scalar_t, int NV>
__device__ __forceinline__ void load_channels(const unsigned char* __restrict__ p, float (&f)[NV]) {
  if constexpr (NV == 1) {
    f[0] = static_cast<float>(*reinterpret_cast<const scalar_t*>(p));
  } else {
    load_vec<scalar_t, NV>(reinterpret_cast<const scalar_t*>(p), f);
  }
}

template <typename scalar_t, int NV>
__device__ __forceinline__ void store_channels(scalar_t* __restrict__ p, const float (&f)[NV]) {
  if constexpr (NV == 1) {
    *p = static_cast<scalar_t>(f[0]);
  } else {
    store_vec<scalar_t, NV>(p, f);
  }
}

// acc[r][k] += sum_l w[l * wstride + k] * S[a + (r + l) * ustep][k] for NV channels: the channels of
// pixel i start at Sc + 32 * i.
template <typename scalar_t, int R, int NV>
__device__ __forceinline__ void run_segment_px(const unsigned char* __restrict__ Sc, int a, int ustep, int L,
                                               const float* __restrict__ w, int wstride, float (&acc)[R][NV]) {
  float v[R][NV];
#pragma unroll
  for (int k = 0; k < R - 1; ++k) load_channels<scalar_t, NV>(Sc + (a + k * ustep) * 32, v[k]);
  const unsigned char* sp = Sc + (a + (R - 1) * ustep) * 32;
  const int bstep = ustep * 32;
  for (int l0 = 0; l0 < L; l0 += R) {
#pragma unroll
    for (int i = 0; i < R; ++i) {
      if (l0 + i < L) {
        load_channels<scalar_t, NV>(sp, v[(i + R - 1) % R]);
        sp += bstep;
        float wl[NV];
        load_floats<NV>(w + (l0 + i) * wstride, wl);
#pragma unroll
        for (int r = 0; r < R; ++r) {
#pragma unroll
          for (int k = 0; k < NV; ++k) acc[r][k] += wl[k] * v[(i + r) % R][k];
        }
      }
    }
  }
}

// The sub-tile of a th x tw output tile that the block stages at a time (sh x sw outputs; the last
// ones along each axis may be smaller): among the heights R, 2R, ... (one per lane of warp 0, all
// 32 lanes call this) with the widest width whose staged tile (halo ph, pw) fits in tile_bytes, split
// evenly, the one with the least estimated work in warp instructions: about one per staged pixel,
// 3 K per task (a warp runs 8 tasks of about 26 K) and a latency allowance per round of tasks over
// the block's slots.
template <int R>
__device__ __forceinline__ int2 choose_subtile(int th, int tw, int ph, int pw, int mode, int K, int tile_bytes,
                                               int slots) {
  const int lane = threadIdx.x & 31;
  float cost = __int_as_float(0x7f800000);  // +inf: no candidate
  int2 sub = make_int2(R, R);
  const int cand = (lane + 1) * R;
  if (cand < round_up(th, R) + R) {
    const int nsh = (th + cand - 1) / cand;
    const int sh = round_up((th + nsh - 1) / nsh, R);
    const int rows = seg_tile_rows<R>(sh, ph);
    const int cols_max = tile_bytes / (32 * rows) - 1;  // (cols | 1) <= cols + 1
    const int sw_max = (cols_max - 2 * pw - 2 * (R - 1)) / R * R;
    if (sw_max >= R) {
      const int nsw = (tw + min(sw_max, round_up(tw, R)) - 1) / min(sw_max, round_up(tw, R));
      const int sw = round_up((tw + nsw - 1) / nsw, R);
      const int pitch = seg_tile_cols<R>(sw, pw) | 1;
      const int tasks = seg_ntasks<R>(mode, min(sh, th), min(sw, tw));
      const int rounds = (tasks + slots - 1) / slots;
      cost = float(nsh * nsw) * (float(rows * pitch) + 3.0f * float(K) * float(tasks) + 2000.0f * float(rounds));
      sub = make_int2(min(sh, th), min(sw, tw));
    }
  }
  int best = lane;
#pragma unroll
  for (int d = 16; d > 0; d >>= 1) {
    const float oc = __shfl_xor_sync(0xffffffffu, cost, d);
    const int ob = __shfl_xor_sync(0xffffffffu, best, d);
    if (oc < cost || (oc == cost && ob < best)) {
      cost = oc;
      best = ob;
    }
  }
  return make_int2(__shfl_sync(0xffffffffu, sub.x, best), __shfl_sync(0xffffffffu, sub.y, best));
}

// The tasks of one staged sub-tile (sth x stw task positions at (p0s, q0s)) for NV channels starting
// at channel kc of the block (c in the tensor) that share one segment list. Task position (p, q)
// writes output pixel (OS p + oa, OS q + ob) of the OH x OW image plane `op`.
// ACC: instead of storing, add the sums into the block's fp32 tile `accs` (CB floats per output
// pixel, stw pixels per row), one class of the stride-2 forward at a time.
template <typename scalar_t, int R, int OS, int NV, bool ACC = false>
__device__ __forceinline__ void win_tasks(const scalar_t* __restrict__ S, scalar_t* __restrict__ op, int kc, int c,
                                          int mode, int nseg, const int4* __restrict__ sseg,
                                          const float* __restrict__ sw, const float (&b)[NV], int sth, int stw,
                                          int p0s, int q0s, int ph, int pw, int pitch, int OH, int OW, int oa,
                                          int ob, int C, int slot, int slots, float* __restrict__ accs = nullptr) {
  constexpr int CB = VecTraits<scalar_t>::kCB;
  int ui, uj;
  mode_step(mode, &ui, &uj);
  const int ustep = ui * pitch + uj;
  const int ntasks = seg_ntasks<R>(mode, sth, stw);
  const unsigned char* Sc = reinterpret_cast<const unsigned char*>(S) + kc * sizeof(scalar_t);
  for (int t = slot; t < ntasks; t += slots) {
    int p, q;
    seg_task<R>(mode, t, sth, stw, &p, &q);
    const int b0 = (p + ph) * pitch + q + pw + (R - 1);
    float acc[R][NV];
#pragma unroll
    for (int r = 0; r < R; ++r) {
#pragma unroll
      for (int k = 0; k < NV; ++k) acc[r][k] = b[k];
    }
    for (int s = 0; s < nseg; ++s) {
      const int4 e = sseg[s];
      run_segment_px<scalar_t, R, NV>(Sc, b0 + e.x, ustep, e.y, sw + e.z * CB + kc, CB, acc);
    }
#pragma unroll
    for (int r = 0; r < R; ++r) {
      const int pr = p + r * ui, qr = q + r * uj;
      const int oi = OS * (p0s + pr) + oa, oj = OS * (q0s + qr) + ob;
      if (pr < sth && qr >= 0 && qr < stw && (OS == 1 || (oi < OH && oj < OW))) {
        if constexpr (ACC) {
          float* d = accs + (pr * stw + qr) * CB + kc;
#pragma unroll
          for (int k = 0; k < NV; ++k) d[k] += acc[r][k];
        } else {
          store_channels<scalar_t, NV>(op + (int64_t(oi) * OW + oj) * C + c, acc[r]);
        }
      }
    }
  }
}

// Where a window-gather block works: CB channels from c0 of image n, the tile of th x tw positions
// from (p0, q0) of g's plane (blockIdx.x runs over tiles, then channel blocks, then images), and
// its threads' roles: lane, quarter (V channels of the block's CB), pixel slot and slot count (4
// threads per slot).
struct WinBlock {
  int c0;
  int64_t n;
  int p0, q0, th, tw;
  int lane, quarter, slot, slots;
};

template <int CB>
__device__ __forceinline__ WinBlock win_block(const FastGeometry& g) {
  WinBlock b;
  const int groups = g.C / CB;
  const int tile = blockIdx.x % g.tiles;
  b.c0 = static_cast<int>((blockIdx.x / g.tiles) % groups) * CB;
  b.n = blockIdx.x / (int64_t(g.tiles) * groups);
  b.p0 = (tile / g.tiles_w) * g.TH;
  b.q0 = (tile % g.tiles_w) * g.TW;
  b.th = min(g.TH, g.H - b.p0);
  b.tw = min(g.TW, g.W - b.q0);
  b.lane = threadIdx.x & 31;
  b.quarter = b.lane & 3;
  b.slot = (threadIdx.x >> 5) * 8 + (b.lane >> 2);
  b.slots = blockDim.x >> 2;
  return b;
}

// One block: image n, a tile of the source plane's task positions, CB channels (C % CB == 0, 16-byte
// aligned tensors); with OS = 2 the parity class blockIdx.y, whose tables follow the previous
// class's (C entries each) and whose outputs go to (2p + a, 2q + b) of the OH x OW output plane.
// The tile (up to kWinRegion a side) is staged (cp.async, storage dtype) in sub-tiles that fit the
// allocation with the block's own halo (choose_subtile): the whole tile when it fits.
template <typename scalar_t, int R, int OS>
__global__ void __launch_bounds__(kFastThreads, 3)
    win_gather_nhwc_kernel(const scalar_t* __restrict__ src, scalar_t* __restrict__ out,
                           const scalar_t* __restrict__ bias, const SegInfo* __restrict__ info,
                           const int4* __restrict__ segs, const float* __restrict__ segw,
                           const int2* __restrict__ halo, const FastGeometry g, int OH, int OW, int tile_bytes) {
  constexpr int CB = VecTraits<scalar_t>::kCB, V = VecTraits<scalar_t>::kV;
  extern __shared__ __align__(16) unsigned char smem[];
  const WinBlock blk = win_block<CB>(g);
  const int c0 = blk.c0, p0 = blk.p0, q0 = blk.q0, th = blk.th, tw = blk.tw;
  const int64_t n = blk.n;
  const int lane = blk.lane, quarter = blk.quarter, slot = blk.slot, slots = blk.slots;
  const int cls = OS == 1 ? 0 : blockIdx.y;
  const int oa = cls >> 1, ob = cls & 1;
  info += int64_t(cls) * g.C;
  halo += int64_t(cls) * g.C;
  segs += int64_t(cls) * g.C * g.K;
  segw += int64_t(cls) * g.C * g.K;

  __shared__ int s_mode[CB], s_nseg[CB], s_uniform[4], s_ph, s_pw, s_sh, s_sw;
  if (threadIdx.x < 32) {
    // Warp 0: the channels' axes and segment counts, the block's halo, the sub-tile, and per quarter
    // whether its V channels walk the same segments (then one vector load per point).
    int ph = 0, pw = 0, mode = 0;
    if (threadIdx.x < CB) {
      const SegInfo f = info[c0 + threadIdx.x];
      mode = f.mode;
      s_mode[threadIdx.x] = f.mode;
      s_nseg[threadIdx.x] = f.nseg;
      const int2 hl = halo[c0 + threadIdx.x];
      ph = hl.x;
      pw = hl.y;
    }
    ph = warp_max(ph);
    pw = warp_max(pw);
    mode = __shfl_sync(0xffffffffu, mode, 0);  // the first channel's axis stands for the block's
    const int2 sub = choose_subtile<R>(th, tw, ph, pw, mode, g.K, tile_bytes, slots);
    if (threadIdx.x == 0) {
      s_ph = ph;
      s_pw = pw;
      s_sh = sub.x;
      s_sw = sub.y;
    }
    if (threadIdx.x < 4) {
      s_uniform[threadIdx.x] = quarter_uniform<V>([&](int c) { return info[c].same; }, c0 + threadIdx.x * V, g.C);
    }
  }
  __syncthreads();
  const int ph = s_ph, pw = s_pw, sh = s_sh, sw_ = s_sw;
  const int pitch = seg_tile_cols<R>(sw_, pw) | 1;
  // Tables: sseg[channel][s] = {offset of the segment's first point in S, L, first weight}, sw[point][channel].
  int4* sseg = reinterpret_cast<int4*>(smem);
  float* sw = reinterpret_cast<float*>(smem + align16(sizeof(int4) * g.K * CB));
  scalar_t* S = reinterpret_cast<scalar_t*>(smem + align16(sizeof(int4) * g.K * CB) + align16(sizeof(float) * g.K * CB));
  for (int e = threadIdx.x; e < CB * g.K; e += blockDim.x) {
    const int k = e / g.K, s = e - k * g.K;
    if (s < s_nseg[k]) {
      const int4 sg = segs[int64_t(c0 + k) * g.K + s];
      sseg[e] = make_int4(sg.x * pitch + sg.y, sg.z, sg.w, 0);
    }
    sw[s * CB + k] = segw[int64_t(c0 + k) * g.K + s];
  }
  const int k0 = quarter * V;
  float b[V];
#pragma unroll
  for (int k = 0; k < V; ++k) b[k] = bias != nullptr ? static_cast<float>(bias[c0 + k0 + k]) : 0.0f;
  const scalar_t* img = src + n * g.H * g.W * g.C;
  scalar_t* op = out + n * OH * OW * g.C;
  const int subs_w = (tw + sw_ - 1) / sw_, subs = (th + sh - 1) / sh * subs_w;
  for (int sub = 0; sub < subs; ++sub) {
    const int ps = (sub / subs_w) * sh, qs = (sub % subs_w) * sw_;
    const int sth = min(sh, th - ps), stw = min(sw_, tw - qs);
    __syncthreads();  // tables written; the previous sub-tile's reads of S are done
    stage_nhwc_tile<scalar_t>(S, img, g.C, g.H, g.W, c0, p0 + ps - ph, q0 + qs - pw - (R - 1),
                              seg_tile_rows<R>(sth, ph), seg_tile_cols<R>(stw, pw), true, pitch, g.W, 1);
    __syncthreads();
    if (s_uniform[quarter]) {
      win_tasks<scalar_t, R, OS, V>(S, op, k0, c0 + k0, s_mode[k0], s_nseg[k0], sseg + k0 * g.K, sw, b, sth, stw,
                                    p0 + ps, q0 + qs, ph, pw, pitch, OH, OW, oa, ob, g.C, slot, slots);
    } else {
      // The quarter's channels straddle two angle groups: one channel at a time.
#pragma unroll
      for (int kk = 0; kk < V; ++kk) {
        const int kc = k0 + kk;
        const float bk[1] = {b[kk]};
        win_tasks<scalar_t, R, OS, 1>(S, op, kc, c0 + kc, s_mode[kc], s_nseg[kc], sseg + kc * g.K, sw, bk, sth,
                                      stw, p0 + ps, q0 + qs, ph, pw, pitch, OH, OW, oa, ob, g.C, slot, slots);
      }
    }
  }
}

// Stride-2 forward, polyphase: y[i, j] = sum over the parity classes (a, b) of a stride-1 window
// gather over the phase plane x[a::2, b::2] with the class's taps at halved offsets. One block:
// image n, an output tile, CB channels (C % CB == 0, 16-byte aligned tensors). The four classes'
// sums meet in an fp32 tile in shared memory (bias first), so the output is rounded once; each
// class is staged in turn into one buffer whose halo (the largest over the classes and the block's
// channels) and pitch serve all four.
template <typename scalar_t, int R>
__global__ void __launch_bounds__(kFastThreads, 3)
    win_gather_s2_nhwc_kernel(const scalar_t* __restrict__ x, scalar_t* __restrict__ out,
                              const scalar_t* __restrict__ bias, const SegInfo* __restrict__ info,
                              const int4* __restrict__ segs, const float* __restrict__ segw,
                              const int2* __restrict__ halo, const FastGeometry g, int Hx, int Wx) {
  constexpr int CB = VecTraits<scalar_t>::kCB, V = VecTraits<scalar_t>::kV;
  extern __shared__ __align__(16) unsigned char smem[];
  const WinBlock blk = win_block<CB>(g);  // g: the output plane
  const int c0 = blk.c0, p0 = blk.p0, q0 = blk.q0, th = blk.th, tw = blk.tw;
  const int64_t n = blk.n;
  const int lane = blk.lane, quarter = blk.quarter, slot = blk.slot, slots = blk.slots;

  __shared__ int s_mode[4][CB], s_nseg[4][CB], s_uniform[4][4], s_ph, s_pw;
  if (threadIdx.x < 32) {
    int ph = 0, pw = 0;
    for (int cls = 0; cls < 4; ++cls) {
      if (threadIdx.x < CB) {
        const SegInfo f = info[int64_t(cls) * g.C + c0 + threadIdx.x];
        s_mode[cls][threadIdx.x] = f.mode;
        s_nseg[cls][threadIdx.x] = f.nseg;
        const int2 hl = halo[int64_t(cls) * g.C + c0 + threadIdx.x];
        ph = max(ph, hl.x);
        pw = max(pw, hl.y);
      }
      if (threadIdx.x < 4) {
        const SegInfo* cinfo = info + int64_t(cls) * g.C;
        s_uniform[cls][threadIdx.x] =
            quarter_uniform<V>([&](int c) { return cinfo[c].same; }, c0 + threadIdx.x * V, g.C);
      }
    }
    ph = warp_max(ph);
    pw = warp_max(pw);
    if (threadIdx.x == 0) {
      s_ph = ph;
      s_pw = pw;
    }
  }
  // Shared memory: tables of one class (sseg[channel][s], sw[point][channel]), the fp32 sums of
  // the tile (CB per pixel), the staged phase-plane tile.
  int4* sseg = reinterpret_cast<int4*>(smem);
  float* sw = reinterpret_cast<float*>(smem + align16(sizeof(int4) * g.K * CB));
  float* accs = reinterpret_cast<float*>(smem + align16(sizeof(int4) * g.K * CB) + align16(sizeof(float) * g.K * CB));
  scalar_t* S = reinterpret_cast<scalar_t*>(reinterpret_cast<unsigned char*>(accs) +
                                            align16(sizeof(float) * g.TH * g.TW * CB));
  for (int e = threadIdx.x; e < th * tw * CB; e += blockDim.x) {
    const int k = e % CB;
    accs[e] = bias != nullptr ? static_cast<float>(bias[c0 + k]) : 0.0f;
  }
  __syncthreads();
  const int ph = s_ph, pw = s_pw;
  const int pitch = seg_tile_cols<R>(tw, pw) | 1;
  const int k0 = quarter * V;
  const float zero[V] = {};
  const scalar_t* img = x + n * int64_t(Hx) * Wx * g.C;
  for (int cls = 0; cls < 4; ++cls) {
    const int a = cls >> 1, b = cls & 1;
    bool any = false;
#pragma unroll
    for (int k = 0; k < CB; ++k) any = any || s_nseg[cls][k] > 0;
    if (!any) continue;  // no tap of the block's channels has these parities
    const int64_t base = int64_t(cls) * g.C;
    __syncthreads();  // the previous class's reads of S and the tables are done
    for (int e = threadIdx.x; e < CB * g.K; e += blockDim.x) {
      const int k = e / g.K, sg = e - k * g.K;
      if (sg < s_nseg[cls][k]) {
        const int4 v = segs[(base + c0 + k) * g.K + sg];
        sseg[e] = make_int4(v.x * pitch + v.y, v.z, v.w, 0);
      }
      sw[sg * CB + k] = segw[(base + c0 + k) * g.K + sg];
    }
    const int Hs = (Hx - a + 1) / 2, Ws = (Wx - b + 1) / 2;  // phase plane x[a::2, b::2]
    stage_nhwc_tile<scalar_t>(S, img + (int64_t(a) * Wx + b) * g.C, g.C, Hs, Ws, c0, p0 - ph, q0 - pw - (R - 1),
                              seg_tile_rows<R>(th, ph), seg_tile_cols<R>(tw, pw), true, pitch, 2 * int64_t(Wx), 2);
    __syncthreads();
    if (s_uniform[cls][quarter]) {
      win_tasks<scalar_t, R, 1, V, true>(S, nullptr, k0, c0 + k0, s_mode[cls][k0], s_nseg[cls][k0], sseg + k0 * g.K,
                                         sw, zero, th, tw, p0, q0, ph, pw, pitch, g.H, g.W, 0, 0, g.C, slot, slots,
                                         accs);
    } else {
#pragma unroll
      for (int kk = 0; kk < V; ++kk) {
        const int kc = k0 + kk;
        const float z1[1] = {0.0f};
        win_tasks<scalar_t, R, 1, 1, true>(S, nullptr, kc, c0 + kc, s_mode[cls][kc], s_nseg[cls][kc],
                                           sseg + kc * g.K, sw, z1, th, tw, p0, q0, ph, pw, pitch, g.H, g.W, 0, 0,
                                           g.C, slot, slots, accs);
      }
    }
  }
  __syncthreads();
  // The tile's sums, rounded once: a lane's V channels per store.
  scalar_t* op = out + n * int64_t(g.H) * g.W * g.C;
  for (int e = threadIdx.x; e < th * tw * 4; e += blockDim.x) {
    const int pix = e >> 2, qd = e & 3;
    const int i = pix / tw, j = pix - i * tw;
    float v[V];
#pragma unroll
    for (int k = 0; k < V; ++k) v[k] = accs[pix * CB + qd * V + k];
    store_vec<scalar_t, V>(op + (int64_t(p0 + i) * g.W + q0 + j) * g.C + c0 + qd * V, v);
  }
}

struct SegTables {
  at::Tensor ints;     // info (C * 4) | halo (C * 2) | pad | segs (C * K * 4) | tap -> weight slot (C * K)
  at::Tensor weights;  // C * K
  int C, K;            // C: entries (channels x parity classes)
  int64_t head;        // ints before segs (6 * C rounded up to 4: int4 alignment)
  const SegInfo* info() const { return reinterpret_cast<const SegInfo*>(ints.data_ptr<int>()); }
  const int2* halo() const { return reinterpret_cast<const int2*>(ints.data_ptr<int>() + 4 * int64_t(C)); }
  const int4* segs() const { return reinterpret_cast<const int4*>(ints.data_ptr<int>() + head); }
  const float* w() const { return weights.data_ptr<float>(); }
  const int* tap_sp() const { return ints.data_ptr<int>() + head + 4 * int64_t(C) * K; }
};

template <typename scalar_t>
SegTables build_segments(const at::Tensor& theta, const at::Tensor& weight, bool floor_rounding, bool residual,
                         int sign, int classes = 1) {
  SegTables t;
  const int C = static_cast<int>(weight.size(0));
  t.C = C * classes;
  t.K = static_cast<int>(weight.size(1));
  const int64_t head = (6 * int64_t(t.C) + 3) / 4 * 4;
  t.head = head;
  t.ints = at::empty({head + 5 * int64_t(t.C) * t.K}, weight.options().dtype(at::kInt));
  t.weights = at::empty({int64_t(t.C) * t.K}, weight.options().dtype(at::kFloat));
  const at::Tensor th = theta.to(at::kFloat).contiguous();
  const at::Tensor w = weight.contiguous();
  int* ints = t.ints.data_ptr<int>();
  // One thread per channel, 32 per block (the channels spread over many SMs: the per-thread work is
  // a serial walk over the taps), with K floats + K ints of shared-memory scratch each when they fit.
  const int threads = 32;
  const int64_t scratch = int64_t(threads) * t.K * (sizeof(float) + sizeof(int));
  const int scratch_bytes = scratch <= 32 * 1024 ? static_cast<int>(scratch) : 0;
  build_segments_kernel<scalar_t><<<ceil_div(t.C, threads), threads, scratch_bytes, at::cuda::getCurrentCUDAStream()>>>(
      th.data_ptr<float>(), w.data_ptr<scalar_t>(), C, t.K, floor_rounding, residual, sign, classes,
      reinterpret_cast<SegInfo*>(ints), reinterpret_cast<int4*>(ints + head), t.weights.data_ptr<float>(),
      reinterpret_cast<int2*>(ints + 4 * int64_t(t.C)), ints + head + 4 * int64_t(t.C) * t.K, scratch_bytes);
  MMO1D_CUDA_CHECK(cudaGetLastError());
  return t;
}

// ----------------------------------------------------------------------------------------------
// Launch helpers
// ----------------------------------------------------------------------------------------------
// The device's opt-in limit of shared memory per block (ATen caches the device properties).
int max_smem_optin() { return static_cast<int>(at::cuda::getCurrentDeviceProperties()->sharedMemPerBlockOptin); }

// Lets `kernel` use `bytes` of dynamic shared memory on the current device. The attribute is set
// once per device and kernel for the largest size asked so far, not at every launch.
template <typename Kernel>
void set_smem(Kernel kernel, size_t bytes) {
  const int optin = max_smem_optin();
  TORCH_CHECK(bytes <= static_cast<size_t>(optin), "oriented_dwconv1d: a tile needs ", std::to_string(bytes),
              " bytes of shared memory, more than the device's ", std::to_string(optin));
  if (bytes <= 48 * 1024) return;
  int dev = 0;
  MMO1D_CUDA_CHECK(cudaGetDevice(&dev));
  static std::mutex mutex;
  static std::map<std::pair<int, const void*>, size_t> set_bytes;
  const std::lock_guard<std::mutex> lock(mutex);
  size_t& done = set_bytes[{dev, reinterpret_cast<const void*>(kernel)}];
  if (bytes <= done) return;
  MMO1D_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(bytes)));
  done = bytes;
}

// Source tile extent (one axis) for an output tile of T outputs with halo P.
inline int64_t extent(int T, int a, int P) { return int64_t(T - 1) * a + 1 + 2 * P; }

// Picks the output tile so that the worst-case (halo K/2) shared-memory tile stays within a soft
// budget that leaves room for several blocks per multiprocessor, or at least within the device
// limit. Returns false when not even a single output fits.
bool choose_tile(GatherGeometry& g, bool nhwc, size_t elem_bytes, size_t fixed_bytes) {
  const int P = g.K / 2;
  const int64_t hard = max_smem_optin() - static_cast<int64_t>(fixed_bytes);
  const int64_t soft = std::min<int64_t>(hard, 100 * 1024 - static_cast<int64_t>(fixed_bytes));
  const int64_t per_elem = static_cast<int64_t>(elem_bytes) * (nhwc ? kNhwcChannels : 1);
  int TH, TW;
  if (nhwc) {
    TH = std::min(g.Ho, kNhwcTile);
    TW = std::min(g.Wo, kNhwcTile);
  } else if (int64_t(g.Ho) * g.Wo <= int64_t(kNchwMaxTile) * kNchwMaxTile) {
    TH = g.Ho;
    TW = g.Wo;
  } else {
    TH = std::min(g.Ho, kNchwMaxTile);
    TW = std::min(g.Wo, kNchwMaxTile);
  }
  auto bytes = [&](int th, int tw) { return extent(th, g.a, P) * extent(tw, g.a, P) * per_elem; };
  while ((bytes(TH, TW) > soft && (TH > 4 || TW > 4)) || (bytes(TH, TW) > hard && (TH > 1 || TW > 1))) {
    if (TH >= TW) TH = (TH + 1) / 2; else TW = (TW + 1) / 2;
  }
  g.TH = TH;
  g.TW = TW;
  g.tiles_w = ceil_div(g.Wo, TW);
  g.tiles = ceil_div(g.Ho, TH) * g.tiles_w;
  return bytes(TH, TW) <= hard;
}

template <typename acc_t>
size_t gather_fixed_bytes(int K, bool nhwc) {
  const int cb = nhwc ? kNhwcChannels : 1;
  return align16(sizeof(int) * K * cb) + align16(sizeof(acc_t) * K * cb);
}

template <typename acc_t>
size_t wgrad_fixed_bytes(int K, bool nhwc) {
  const int cb = nhwc ? kNhwcChannels : 1;
  const int warps = (nhwc ? kNhwcThreads : kMaxThreads) / 32;
  return align16(sizeof(int) * K * cb) + align16(sizeof(acc_t) * K * cb * warps);
}

size_t tile_bytes(const GatherGeometry& g, size_t elem_bytes, bool nhwc) {
  return extent(g.TH, g.a, g.K / 2) * extent(g.TW, g.a, g.K / 2) * elem_bytes * (nhwc ? kNhwcChannels : 1);
}

int nchw_threads(const GatherGeometry& g) {
  return std::min(kMaxThreads, ceil_div(ceil_div(int64_t(g.TH) * g.TW, kPerThread), 32) * 32);
}

// out = gather(src). NHWC tensors use the channels-last kernel unless even its smallest tile does
// not fit in shared memory (float64 with a very long kernel), where the NCHW kernel runs on
// NCHW copies.
template <typename scalar_t, typename acc_t>
void launch_gather(const at::Tensor& src, at::Tensor& out, const scalar_t* bias, const TablesT<acc_t>& t,
                   GatherGeometry g, int64_t N, bool nhwc) {
  const auto stream = at::cuda::getCurrentCUDAStream();
  if (nhwc) {
    const size_t fixed = gather_fixed_bytes<acc_t>(g.K, true);
    if (choose_tile(g, true, sizeof(acc_t), fixed)) {
      const size_t smem = fixed + tile_bytes(g, sizeof(acc_t), true);
      auto kernel = gather_nhwc_kernel<scalar_t, acc_t>;
      set_smem(kernel, smem);
      const int64_t blocks = N * g.tiles * ceil_div(g.C, kNhwcChannels);
      kernel<<<blocks, kNhwcThreads, smem, stream>>>(src.data_ptr<scalar_t>(), out.data_ptr<scalar_t>(),
                                                     bias, t.off(), t.w(), t.npts(), t.halo(), g);
      MMO1D_CUDA_CHECK(cudaGetLastError());
      return;
    }
    at::Tensor out_nchw = at::empty(out.sizes(), out.options().memory_format(at::MemoryFormat::Contiguous));
    launch_gather<scalar_t, acc_t>(src.contiguous(), out_nchw, bias, t, g, N, false);
    out.copy_(out_nchw);
    return;
  }
  const size_t fixed = gather_fixed_bytes<acc_t>(g.K, false);
  TORCH_CHECK(choose_tile(g, false, sizeof(acc_t), fixed), "oriented_dwconv1d: kernel size ", std::to_string(g.K),
              " with stride ", std::to_string(g.a), " does not fit in shared memory");
  const size_t smem = fixed + tile_bytes(g, sizeof(acc_t), false);
  auto kernel = gather_nchw_kernel<scalar_t, acc_t>;
  set_smem(kernel, smem);
  const int64_t blocks = N * g.C * g.tiles;
  kernel<<<blocks, nchw_threads(g), smem, stream>>>(src.data_ptr<scalar_t>(), out.data_ptr<scalar_t>(), bias,
                                                    t.off(), t.w(), t.npts(), t.halo(), g);
  MMO1D_CUDA_CHECK(cudaGetLastError());
}

// Images per weight-gradient block (each block loops over a chunk of images): enough blocks
// (blocks_per_chunk per chunk) to fill the GPU several times over, with the partial sums
// (part_bytes per chunk) held to a sixteenth of x, at least 256 KiB: on small planes one chunk per
// image would make the workspace a sizeable fraction of the input.
int wgrad_chunk(int64_t N, int64_t blocks_per_chunk, int64_t part_bytes, int64_t x_bytes) {
  const int64_t want_blocks = 16 * int64_t(at::cuda::getCurrentDeviceProperties()->multiProcessorCount);
  const int64_t max_chunks = std::max<int64_t>(1, std::max<int64_t>(x_bytes / 16, 256 << 10) / part_bytes);
  const int64_t chunks = std::clamp<int64_t>(want_blocks / blocks_per_chunk, 1, std::min<int64_t>(N, max_chunks));
  return ceil_div(N, chunks);
}

// dw = sum over images and pixels of dy * x at each tap (two deterministic passes).
template <typename scalar_t, typename acc_t>
void launch_wgrad(const at::Tensor& x, const at::Tensor& dy, at::Tensor& dw, const TablesT<acc_t>& t,
                  GatherGeometry g, int64_t N, bool nhwc) {
  const auto stream = at::cuda::getCurrentCUDAStream();
  const size_t fixed = wgrad_fixed_bytes<acc_t>(g.K, nhwc);
  if (!choose_tile(g, nhwc, sizeof(acc_t), fixed)) {
    TORCH_CHECK(nhwc, "oriented_dwconv1d: kernel size ", std::to_string(g.K), " with stride ", std::to_string(g.a),
                " does not fit in shared memory");
    launch_wgrad<scalar_t, acc_t>(x.contiguous(), dy.contiguous(), dw, t, g, N, false);
    return;
  }
  const int64_t cgroups = nhwc ? ceil_div(g.C, kNhwcChannels) : g.C;
  const int chunk = wgrad_chunk(N, cgroups * g.tiles, int64_t(g.C) * g.tiles * g.K * int64_t(sizeof(acc_t)), x.nbytes());
  const int chunks = ceil_div(N, chunk);
  const int parts = g.tiles * chunks;
  at::Tensor partial = at::empty({int64_t(g.C) * parts * g.K},
                                 x.options().dtype(c10::CppTypeToScalarType<acc_t>::value));
  const size_t smem = fixed + tile_bytes(g, sizeof(acc_t), nhwc);
  const int64_t blocks = cgroups * g.tiles * chunks;
  if (nhwc) {
    auto kernel = wgrad_nhwc_kernel<scalar_t, acc_t>;
    set_smem(kernel, smem);
    kernel<<<blocks, kNhwcThreads, smem, stream>>>(x.data_ptr<scalar_t>(), dy.data_ptr<scalar_t>(), t.off(),
                                                   t.npts(), t.halo(), partial.data_ptr<acc_t>(), g,
                                                   static_cast<int>(N), chunk);
  } else {
    auto kernel = wgrad_nchw_kernel<scalar_t, acc_t>;
    set_smem(kernel, smem);
    kernel<<<blocks, nchw_threads(g), smem, stream>>>(x.data_ptr<scalar_t>(), dy.data_ptr<scalar_t>(), t.off(),
                                                      t.npts(), t.halo(), partial.data_ptr<acc_t>(), g,
                                                      static_cast<int>(N), chunk);
  }
  MMO1D_CUDA_CHECK(cudaGetLastError());
  wgrad_reduce_kernel<scalar_t, acc_t><<<ceil_div(int64_t(g.C) * g.K, 256), 256, 0, stream>>>(
      partial.data_ptr<acc_t>(), t.tap_pt(), dw.data_ptr<scalar_t>(), g.C, g.K, parts);
  MMO1D_CUDA_CHECK(cudaGetLastError());
}

// ---- Fast-path launches ------------------------------------------------------------------------
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

// Output tile of a fast path: the whole plane up to `start` x `start`, halved (longer side first)
// until the worst-case tile of any angle (the halos of a line of halo_k taps; default K) fits in
// `soft` bytes (or only in the device limit), then evened out over the plane.
// Tiles of at most TH x TW outputs: the same number of tiles, split evenly (no tile smaller, none
// mostly empty at the plane's edge).
void set_even_tiles(FastGeometry& g, int TH, int TW) {
  g.TH = ceil_div(g.H, ceil_div(g.H, TH));
  g.TW = ceil_div(g.W, ceil_div(g.W, TW));
  g.tiles_w = ceil_div(g.W, g.TW);
  g.tiles = ceil_div(g.H, g.TH) * g.tiles_w;
}

template <typename F>
bool choose_fast_tile(FastGeometry& g, int start, int64_t fixed, int64_t soft, F tile_bytes, int halo_k = 0) {
  if (halo_k == 0) halo_k = g.K;
  const int64_t hard = max_smem_optin() - fixed;
  soft = std::min(soft - fixed, hard);
  int TH = std::min(g.H, start), TW = std::min(g.W, start);
  if (int64_t(g.H) * g.W <= int64_t(start) * start) {
    TH = g.H;
    TW = g.W;
  }
  auto bytes = [&](int th, int tw) {
    return max_over_halos(halo_k, [&](int ph, int pw) { return tile_bytes(th, tw, ph, pw); });
  };
  while ((bytes(TH, TW) > soft && (TH > 8 || TW > 8)) || (bytes(TH, TW) > hard && (TH > 1 || TW > 1))) {
    if (TH >= TW) TH = (TH + 1) / 2; else TW = (TW + 1) / 2;
  }
  set_even_tiles(g, TH, TW);
  return bytes(g.TH, g.TW) <= hard;
}

int64_t seg_tile_bytes(int th, int tw, int ph, int pw) {
  return int64_t(seg_tile_rows(th, ph)) * (seg_tile_cols(tw, pw) | 1) * int64_t(sizeof(float));
}

int64_t seg_fixed_bytes(int K) { return align16(sizeof(int4) * K) + align16(sizeof(float) * K); }

// Threads for the NCHW fast path: enough for the largest task count of a tile, in as few rounds of
// up to kFastThreads as possible, balanced.
int seg_threads(const FastGeometry& g) {
  const int R = kSegR;
  const int rb = ceil_div(g.TH, R);
  const int64_t tasks = std::max<int64_t>({int64_t(g.TH) * ceil_div(g.TW, R), int64_t(g.TW + R - 1) * rb});
  const int64_t rounds = (tasks + kFastThreads - 1) / kFastThreads;
  return static_cast<int>(std::max<int64_t>(32, (((tasks + rounds - 1) / rounds) + 31) / 32 * 32));
}

template <typename scalar_t>
bool launch_seg_gather(const at::Tensor& src, at::Tensor& out, const scalar_t* bias, const SegTables& t,
                       FastGeometry g, int64_t N) {
  const int64_t fixed = seg_fixed_bytes(g.K);
  if (!choose_fast_tile(g, 64, fixed, 100 * 1024, seg_tile_bytes)) return false;
  const int64_t smem = fixed + max_over_halos(g.K, [&](int ph, int pw) { return seg_tile_bytes(g.TH, g.TW, ph, pw); });
  auto kernel = seg_gather_nchw_kernel<scalar_t>;
  set_smem(kernel, smem);
  const int64_t blocks = N * g.C * g.tiles;
  kernel<<<blocks, seg_threads(g), smem, at::cuda::getCurrentCUDAStream()>>>(
      src.data_ptr<scalar_t>(), out.data_ptr<scalar_t>(), bias, t.info(), t.segs(), t.w(), t.halo(), g);
  MMO1D_CUDA_CHECK(cudaGetLastError());
  return true;
}

template <typename scalar_t>
bool launch_seg_wgrad(const at::Tensor& x, const at::Tensor& dy, at::Tensor& dw, const SegTables& t, FastGeometry g,
                      int64_t N) {
  // Per-thread point sums: K floats per thread (the block size is fixed before the tile: the
  // largest a tile of up to 64 x 64 can use).
  FastGeometry probe = g;
  probe.TH = std::min(g.H, 64);
  probe.TW = std::min(g.W, 64);
  const int threads = seg_threads(probe);
  const int64_t fixed = align16(sizeof(int4) * g.K) + align16(sizeof(float) * g.K * threads);
  if (!choose_fast_tile(g, 64, fixed, 120 * 1024, seg_tile_bytes)) return false;
  const int64_t smem = fixed + max_over_halos(g.K, [&](int ph, int pw) { return seg_tile_bytes(g.TH, g.TW, ph, pw); });
  const auto stream = at::cuda::getCurrentCUDAStream();
  const int chunk = wgrad_chunk(N, int64_t(g.C) * g.tiles, int64_t(g.C) * g.tiles * g.K * int64_t(sizeof(float)),
                                x.nbytes());
  const int chunks = ceil_div(N, chunk);
  const int parts = g.tiles * chunks;
  at::Tensor partial = at::empty({int64_t(g.C) * parts * g.K}, x.options().dtype(at::kFloat));
  auto kernel = seg_wgrad_nchw_kernel<scalar_t>;
  set_smem(kernel, smem);
  kernel<<<int64_t(g.C) * g.tiles * chunks, threads, smem, stream>>>(
      x.data_ptr<scalar_t>(), dy.data_ptr<scalar_t>(), t.info(), t.segs(), t.halo(), partial.data_ptr<float>(), g,
      static_cast<int>(N), chunk);
  MMO1D_CUDA_CHECK(cudaGetLastError());
  wgrad_reduce_kernel<scalar_t, float><<<ceil_div(int64_t(g.C) * g.K, 256), 256, 0, stream>>>(
      partial.data_ptr<float>(), t.tap_sp(), dw.data_ptr<scalar_t>(), g.C, g.K, parts);
  MMO1D_CUDA_CHECK(cudaGetLastError());
  return true;
}

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

template <typename scalar_t>
int64_t vec_fixed_bytes(int K, bool wgrad) {
  constexpr int CB = VecTraits<scalar_t>::kCB;
  return align16(sizeof(int) * K * CB) + align16(sizeof(float) * K * CB * (wgrad ? kFastThreads / 32 : 1));
}

template <typename scalar_t>
bool vec_aligned(std::initializer_list<const at::Tensor*> ts, int C) {
  constexpr int CB = VecTraits<scalar_t>::kCB;
  if (C % CB != 0) return false;
  for (const at::Tensor* x : ts) {
    if ((reinterpret_cast<uintptr_t>(x->data_ptr()) & 15) != 0) return false;
  }
  return true;
}

template <typename scalar_t>
bool launch_vec_gather(const at::Tensor& src, at::Tensor& out, const scalar_t* bias, const TablesT<float>& t,
                       FastGeometry g, int64_t N, int sign) {
  constexpr int CB = VecTraits<scalar_t>::kCB;
  const int64_t fixed = vec_fixed_bytes<scalar_t>(g.K, false);
  if (!choose_fast_tile(g, 32, fixed, 80 * 1024, vec_tile_bytes<scalar_t>)) return false;
  const int64_t tile = vec_tile_alloc<scalar_t>(g);
  const int64_t smem = fixed + tile;
  auto kernel = int64_t(g.TH) * g.TW <= 64 * kVecRSmall ? vec_gather_nhwc_kernel<scalar_t, kVecRSmall>
                                                         : vec_gather_nhwc_kernel<scalar_t, kVecRLarge>;
  set_smem(kernel, smem);
  const int64_t blocks = N * g.tiles * ceil_div(g.C, CB);
  const bool vec_ok = vec_aligned<scalar_t>({&src, &out}, g.C);
  kernel<<<blocks, kFastThreads, smem, at::cuda::getCurrentCUDAStream()>>>(
      src.data_ptr<scalar_t>(), out.data_ptr<scalar_t>(), bias, t.off(), t.w(), t.npts(), t.halo(), t.same(), g,
      sign, vec_ok, static_cast<int>(tile));
  MMO1D_CUDA_CHECK(cudaGetLastError());
  return true;
}

// Shared memory of the NHWC window kernel's tile: a single line at any angle over the whole tile,
// and R x R outputs with the largest halo on both axes (the smallest sub-tile of blocks whose
// channels have different angles); halos of a line of halo_k taps.
template <typename scalar_t>
int64_t win_tile_bytes(int th, int tw, int ph, int pw, int halo_k) {
  constexpr int R = WinTraits<scalar_t>::kR;
  auto bytes = [](int rows, int cols) { return int64_t(rows) * (cols | 1) * 32; };
  return std::max(bytes(seg_tile_rows<R>(th, ph), seg_tile_cols<R>(tw, pw)),
                  bytes(seg_tile_rows<R>(R, halo_k / 2), seg_tile_cols<R>(R, halo_k / 2)));
}

// The output tile of each window-gather block, from the tile that the allocation holds at any
// angle (g.TH x g.TW): up to kWinRegion outputs a side, the plane split evenly, where that leaves
// the grid at least 8 blocks per multiprocessor. Blocks stage their tile in sub-tiles that fit the
// allocation with their channels' actual halo (choose_subtile): lines with small halos stage larger
// sub-tiles, a block's fixed costs (tables, halo) are spread over more outputs and the plane's edge
// tiles are no longer mostly empty.
void win_region(FastGeometry& g, int64_t planes) {
  const int64_t min_blocks = 8 * int64_t(at::cuda::getCurrentDeviceProperties()->multiProcessorCount);
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
int class_halo_k(int K) { return 2 * ((K / 2 + 1) / 2 + 1) + 1; }

// out = window gather of src. classes = 1: stride 1 (output plane = source plane); classes = 4: the
// input gradient at stride 2 from parity-class tables (source dy, output dx: OH x OW).
template <typename scalar_t>
bool launch_win_gather(const at::Tensor& src, at::Tensor& out, const scalar_t* bias, const SegTables& t,
                       FastGeometry g, int64_t N, int classes) {
  constexpr int CB = VecTraits<scalar_t>::kCB, R = WinTraits<scalar_t>::kR;
  const int K = g.K, halo_k = classes == 1 ? K : class_halo_k(K);
  const int64_t fixed = align16(sizeof(int4) * K * CB) + align16(sizeof(float) * K * CB);
  auto tile_bytes = [halo_k](int th, int tw, int ph, int pw) { return win_tile_bytes<scalar_t>(th, tw, ph, pw, halo_k); };
  if (!choose_fast_tile(g, 32, fixed, 80 * 1024, tile_bytes, halo_k)) return false;
  const int64_t tile = max_over_halos(halo_k, [&](int ph, int pw) { return tile_bytes(g.TH, g.TW, ph, pw); });
  const int64_t smem = fixed + tile;
  win_region(g, N * (g.C / CB) * classes);
  auto kernel = classes == 1 ? win_gather_nhwc_kernel<scalar_t, R, 1> : win_gather_nhwc_kernel<scalar_t, R, 2>;
  set_smem(kernel, smem);
  const dim3 grid(static_cast<unsigned>(N * g.tiles * (g.C / CB)), static_cast<unsigned>(classes));
  kernel<<<grid, kFastThreads, smem, at::cuda::getCurrentCUDAStream()>>>(
      src.data_ptr<scalar_t>(), out.data_ptr<scalar_t>(), bias, t.info(), t.segs(), t.w(), t.halo(), g,
      static_cast<int>(out.size(2)), static_cast<int>(out.size(3)), static_cast<int>(tile));
  MMO1D_CUDA_CHECK(cudaGetLastError());
  return true;
}

FastGeometry fast_geometry(const at::Tensor& input, int64_t K) {
  return FastGeometry{static_cast<int>(input.size(1)), static_cast<int>(K), static_cast<int>(input.size(2)),
                      static_cast<int>(input.size(3)), 0, 0, 0, 0};
}

// y = stride-2 forward of x through the polyphase window kernel (t: parity-class tables, sign +1).
// The staged tile is sized for the largest halved halo on both axes (a block's channels may have
// different angles); false when not even R x R outputs fit (the general kernel runs instead).
template <typename scalar_t>
bool launch_win_gather_s2(const at::Tensor& x, at::Tensor& out, const scalar_t* bias, const SegTables& t,
                          int64_t N) {
  constexpr int CB = VecTraits<scalar_t>::kCB, R = WinTraits<scalar_t>::kR;
  FastGeometry g = fast_geometry(out, t.K);  // the output plane
  const int h = class_halo_k(g.K) / 2;
  const int64_t fixed = align16(sizeof(int4) * g.K * CB) + align16(sizeof(float) * g.K * CB);
  auto bytes = [h](int th, int tw) {
    return int64_t(align16(sizeof(float) * th * tw * CB)) +
           int64_t(seg_tile_rows<R>(th, h)) * (seg_tile_cols<R>(tw, h) | 1) * 32;
  };
  const int64_t hard = max_smem_optin();
  int TH = std::min(g.H, 16), TW = std::min(g.W, 16);
  while (fixed + bytes(TH, TW) > 80 * 1024 && (TH > R || TW > R)) {
    if (TH >= TW) TH = std::max(R, TH / 2); else TW = std::max(R, TW / 2);
  }
  if (fixed + bytes(TH, TW) > hard) return false;
  set_even_tiles(g, TH, TW);
  const int64_t smem = fixed + bytes(g.TH, g.TW);
  auto kernel = win_gather_s2_nhwc_kernel<scalar_t, R>;
  set_smem(kernel, smem);
  kernel<<<static_cast<unsigned>(N * g.tiles * (g.C / CB)), kFastThreads, smem, at::cuda::getCurrentCUDAStream()>>>(
      x.data_ptr<scalar_t>(), out.data_ptr<scalar_t>(), bias, t.info(), t.segs(), t.w(), t.halo(), g,
      static_cast<int>(x.size(2)), static_cast<int>(x.size(3)));
  MMO1D_CUDA_CHECK(cudaGetLastError());
  return true;
}

// dw through the NHWC weight gradient: stride 1 (classes = 1, g: the plane of x and dy) or stride 2
// (classes = 4: t holds parity-class tables; g: dy's plane).
template <typename scalar_t>
bool launch_vec_wgrad(const at::Tensor& x, const at::Tensor& dy, at::Tensor& dw, const TablesT<float>& t,
                      FastGeometry g, int64_t N, int classes = 1) {
  constexpr int CB = VecTraits<scalar_t>::kCB;
  const int halo_k = classes == 1 ? g.K : class_halo_k(g.K);
  const int64_t fixed = vec_fixed_bytes<scalar_t>(g.K, true);
  // Up to 120 KiB with the tables: larger tiles stage less halo per output (on an H100, K=31, bf16:
  // 4-10% faster than with 100 KiB; 76 and 64 KiB, for more blocks per SM, were slower).
  if (!choose_fast_tile(g, 32, fixed, 120 * 1024, vec_tile_bytes<scalar_t>, halo_k)) return false;
  const int64_t tile = vec_tile_alloc<scalar_t>(g, halo_k);
  const int64_t smem = fixed + tile;
  const auto stream = at::cuda::getCurrentCUDAStream();
  const int64_t cgroups = ceil_div(g.C, CB);
  const int chunk = wgrad_chunk(N, cgroups * g.tiles * classes,
                                int64_t(classes) * g.C * g.tiles * g.K * int64_t(sizeof(float)), x.nbytes());
  const int chunks = ceil_div(N, chunk);
  const int parts = g.tiles * chunks;
  at::Tensor partial = at::empty({int64_t(classes) * g.C * parts * g.K}, x.options().dtype(at::kFloat));
  const bool small = int64_t(g.TH) * g.TW <= 64 * kVecRSmall;
  auto kernel = classes == 1 ? (small ? vec_wgrad_nhwc_kernel<scalar_t, kVecRSmall, 1>
                                      : vec_wgrad_nhwc_kernel<scalar_t, kVecRLarge, 1>)
                             : (small ? vec_wgrad_nhwc_kernel<scalar_t, kVecRSmall, 2>
                                      : vec_wgrad_nhwc_kernel<scalar_t, kVecRLarge, 2>);
  set_smem(kernel, smem);
  const bool vec_ok = vec_aligned<scalar_t>({&x, &dy}, g.C);
  const dim3 grid(static_cast<unsigned>(cgroups * g.tiles * chunks), static_cast<unsigned>(classes));
  kernel<<<grid, kFastThreads, smem, stream>>>(
      x.data_ptr<scalar_t>(), dy.data_ptr<scalar_t>(), t.off(), t.npts(), t.halo(), t.same(), partial.data_ptr<float>(),
      g, static_cast<int>(x.size(2)), static_cast<int>(x.size(3)), static_cast<int>(N), chunk, vec_ok,
      static_cast<int>(tile));
  MMO1D_CUDA_CHECK(cudaGetLastError());
  wgrad_reduce_kernel<scalar_t, float><<<ceil_div(int64_t(g.C) * g.K, 256), 256, 0, stream>>>(
      partial.data_ptr<float>(), t.tap_pt(), dw.data_ptr<scalar_t>(), g.C, g.K, parts, classes);
  MMO1D_CUDA_CHECK(cudaGetLastError());
  return true;
}

// The fast paths for float32, float16 and bfloat16 (false: use the general kernels): forward
// (sign +1, src = x) and input gradient (sign -1, src = dy) at stride 1; in channels_last with C a
// multiple of the channel block also the forward and the input gradient at stride 2, per parity
// class.
template <typename scalar_t>
bool fast_gather(const at::Tensor& src, at::Tensor& out, const scalar_t* bias, const at::Tensor& theta,
                 const at::Tensor& weight, bool floor_rounding, bool residual, bool nhwc, int sign,
                 int64_t stride) {
  const FastGeometry fg = fast_geometry(src, weight.size(1));
  const bool win = nhwc && vec_aligned<scalar_t>({&src, &out}, fg.C);
  if (stride == 2 && sign < 0 && win) {
    const auto segs = build_segments<scalar_t>(theta, weight, floor_rounding, residual, -1, 4);
    return launch_win_gather<scalar_t>(src, out, nullptr, segs, fg, src.size(0), 4);
  }
  if (stride == 2 && sign > 0 && win) {
    const auto segs = build_segments<scalar_t>(theta, weight, floor_rounding, residual, 1, 4);
    return launch_win_gather_s2<scalar_t>(src, out, bias, segs, src.size(0));
  }
  if (stride != 1) return false;
  if (nhwc) {
    if (win) {
      const auto segs = build_segments<scalar_t>(theta, weight, floor_rounding, residual, sign);
      if (launch_win_gather<scalar_t>(src, out, bias, segs, fg, src.size(0), 1)) return true;
    }
    const auto tables = build_tables<scalar_t, float>(theta, weight, floor_rounding, residual, true);
    return launch_vec_gather<scalar_t>(src, out, bias, tables, fg, src.size(0), sign);
  }
  const auto segs = build_segments<scalar_t>(theta, weight, floor_rounding, residual, sign);
  return launch_seg_gather<scalar_t>(src, out, bias, segs, fg, src.size(0));
}

template <>
bool fast_gather<double>(const at::Tensor&, at::Tensor&, const double*, const at::Tensor&, const at::Tensor&, bool,
                         bool, bool, int, int64_t) {
  return false;
}

// The weight-gradient fast paths (false: use the general kernels): stride 1 in both layouts; in
// channels_last also stride 2, per parity class.
template <typename scalar_t>
bool fast_wgrad(const at::Tensor& x, const at::Tensor& dy, at::Tensor& dw, const at::Tensor& theta,
                const at::Tensor& weight, bool floor_rounding, bool nhwc, int64_t stride) {
  if (stride == 2 && nhwc) {
    const auto tables = build_tables<scalar_t, float>(theta, weight, floor_rounding, false, false, 4);
    return launch_vec_wgrad<scalar_t>(x, dy, dw, tables, fast_geometry(dy, weight.size(1)), x.size(0), 4);
  }
  if (stride != 1) return false;
  const FastGeometry fg = fast_geometry(x, weight.size(1));
  if (nhwc) {
    const auto tables = build_tables<scalar_t, float>(theta, weight, floor_rounding, false, false);
    return launch_vec_wgrad<scalar_t>(x, dy, dw, tables, fg, x.size(0));
  }
  const auto segs = build_segments<scalar_t>(theta, weight, floor_rounding, false, 1);
  return launch_seg_wgrad<scalar_t>(x, dy, dw, segs, fg, x.size(0));
}

template <>
bool fast_wgrad<double>(const at::Tensor&, const at::Tensor&, at::Tensor&, const at::Tensor&, const at::Tensor&, bool,
                        bool, int64_t) {
  return false;
}

void check_cuda_tensor(const at::Tensor& t, const char* name) {
  TORCH_CHECK(t.is_cuda(), "oriented_dwconv1d (CUDA kernel): ", name, " is on ", t.device());
}

void check_grad_output(const at::Tensor& grad_output, const at::Tensor& input, int64_t stride) {
  check_cuda_tensor(grad_output, "grad_output");
  const int64_t N = input.size(0), C = input.size(1);
  const int64_t Ho = out_size(input.size(2), stride), Wo = out_size(input.size(3), stride);
  TORCH_CHECK(grad_output.dim() == 4 && grad_output.size(0) == N && grad_output.size(1) == C &&
                        grad_output.size(2) == Ho && grad_output.size(3) == Wo,
                    "oriented_dwconv1d backward: grad_output has shape ", shape_str(grad_output),
                    ", expected ", shape_str({N, C, Ho, Wo}));
  TORCH_CHECK(grad_output.scalar_type() == input.scalar_type(), "oriented_dwconv1d backward: grad_output dtype ",
              grad_output.scalar_type(), " differs from input dtype ", input.scalar_type());
}

// Geometry of the forward gather (and of the weight gradient).
GatherGeometry forward_geometry(const at::Tensor& input, int64_t K, int64_t stride) {
  const int64_t H = input.size(2), W = input.size(3);
  TORCH_CHECK(H < INT_MAX / 4 && W < INT_MAX / 4 && input.size(1) < INT_MAX, "oriented_dwconv1d: input too large");
  return GatherGeometry{static_cast<int>(input.size(1)), static_cast<int>(K), static_cast<int>(H),
                        static_cast<int>(W), 1, static_cast<int>(out_size(H, stride)),
                        static_cast<int>(out_size(W, stride)), static_cast<int>(stride), 1, 0, 0, 0, 0};
}

at::Tensor forward_cuda(const at::Tensor& input, const at::Tensor& weight, const at::Tensor& theta,
                        const c10::optional<at::Tensor>& bias, int64_t stride, bool floor_rounding,
                        bool residual) {
  check_forward_args(input, weight, theta, bias, stride);
  check_cuda_tensor(input, "input");
  const c10::cuda::CUDAGuard guard(input.device());
  const auto fmt = output_memory_format(input);
  const GatherGeometry g = forward_geometry(input, weight.size(1), stride);
  at::Tensor out = at::empty({input.size(0), input.size(1), g.Ho, g.Wo}, input.options().memory_format(fmt));
  if (out.numel() == 0) return out;
  const at::Tensor x = input.contiguous(fmt);
  const bool has_bias = bias.has_value() && bias->defined();
  const at::Tensor b = has_bias ? bias->contiguous() : at::Tensor();
  const bool nhwc = fmt == at::MemoryFormat::ChannelsLast;
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, input.scalar_type(), "oriented_dwconv1d_cuda", [&] {
    using acc_t = at::opmath_type<scalar_t>;
    const scalar_t* bp = has_bias ? b.data_ptr<scalar_t>() : nullptr;
    if (fast_gather<scalar_t>(x, out, bp, theta, weight, floor_rounding, residual, nhwc, 1, stride)) return;
    const auto tables = build_tables<scalar_t, acc_t>(theta, weight, floor_rounding, residual, true);
    launch_gather<scalar_t, acc_t>(x, out, bp, tables, g, input.size(0), nhwc);
  });
  return out;
}

at::Tensor backward_input_cuda(const at::Tensor& grad_output, const at::Tensor& input,
                               const at::Tensor& weight, const at::Tensor& theta, int64_t stride,
                               bool floor_rounding, bool residual) {
  check_forward_args(input, weight, theta, c10::nullopt, stride);
  check_cuda_tensor(input, "input");
  check_grad_output(grad_output, input, stride);
  const c10::cuda::CUDAGuard guard(input.device());
  const auto fmt = output_memory_format(input);
  at::Tensor dx = at::empty(input.sizes(), input.options().memory_format(fmt));
  if (dx.numel() == 0) return dx;
  const at::Tensor dy = grad_output.contiguous(fmt);
  const GatherGeometry f = forward_geometry(input, weight.size(1), stride);
  // The input gradient gathers from dy upsampled by the stride, with negated offsets.
  const GatherGeometry g{f.C, f.K, f.Ho, f.Wo, f.a, f.Hs, f.Ws, 1, -1, 0, 0, 0, 0};
  const bool nhwc = fmt == at::MemoryFormat::ChannelsLast;
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, input.scalar_type(), "oriented_dwconv1d_backward_input_cuda", [&] {
    using acc_t = at::opmath_type<scalar_t>;
    // Stride 1: the forward gather over dy with every offset negated; stride 2: per parity class.
    if (fast_gather<scalar_t>(dy, dx, nullptr, theta, weight, floor_rounding, residual, nhwc, -1, stride)) {
      return;
    }
    const auto tables = build_tables<scalar_t, acc_t>(theta, weight, floor_rounding, residual, true);
    launch_gather<scalar_t, acc_t>(dy, dx, nullptr, tables, g, input.size(0), nhwc);
  });
  return dx;
}

at::Tensor backward_weight_cuda(const at::Tensor& grad_output, const at::Tensor& input,
                                const at::Tensor& weight, const at::Tensor& theta, int64_t stride,
                                bool floor_rounding) {
  check_forward_args(input, weight, theta, c10::nullopt, stride);
  check_cuda_tensor(input, "input");
  check_grad_output(grad_output, input, stride);
  const c10::cuda::CUDAGuard guard(input.device());
  at::Tensor dw = at::empty(weight.sizes(), weight.options().memory_format(at::MemoryFormat::Contiguous));
  if (input.numel() == 0) return dw.zero_();
  const auto fmt = output_memory_format(input);
  const at::Tensor x = input.contiguous(fmt);
  const at::Tensor dy = grad_output.contiguous(fmt);
  const GatherGeometry g = forward_geometry(input, weight.size(1), stride);
  const bool nhwc = fmt == at::MemoryFormat::ChannelsLast;
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, input.scalar_type(), "oriented_dwconv1d_backward_weight_cuda", [&] {
    using acc_t = at::opmath_type<scalar_t>;
    if (fast_wgrad<scalar_t>(x, dy, dw, theta, weight, floor_rounding, nhwc, stride)) return;
    const auto tables = build_tables<scalar_t, acc_t>(theta, weight, floor_rounding, false, false);
    launch_wgrad<scalar_t, acc_t>(x, dy, dw, tables, g, input.size(0), nhwc);
  });
  return dw;
}

}  // namespace

TORCH_LIBRARY_IMPL(mmo1d, CUDA, m) {
  m.impl("oriented_dwconv1d", &forward_cuda);
  m.impl("oriented_dwconv1d_backward_input", &backward_input_cuda);
  m.impl("oriented_dwconv1d_backward_weight", &backward_weight_cuda);
}

}  // namespace mmo1d
