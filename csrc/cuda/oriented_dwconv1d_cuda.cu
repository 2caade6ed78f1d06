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
// * A block stages one zero-padded tile of its source in shared memory (converted to the
//   accumulation type: float for fp32/fp16/bf16, double for fp64), with a halo sized for its
//   own angle, and every thread accumulates several outputs per table entry.
// * NCHW: one block per (n, c) plane tile. NHWC (channels_last): one block per spatial tile and
//   8 consecutive channels; 4 pixels x 8 channels per warp make shared-memory reads conflict-free.
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
// ----------------------------------------------------------------------------------------------
template <typename scalar_t, typename acc_t>
__global__ void build_tables_kernel(const float* __restrict__ theta, const scalar_t* __restrict__ weight,
                                    int C, int K, bool floor_rounding, bool residual,
                                    int2* __restrict__ off, acc_t* __restrict__ pw, int* __restrict__ npts,
                                    int* __restrict__ tap_pt, int2* __restrict__ halo) {
  const int c = blockIdx.x * blockDim.x + threadIdx.x;
  if (c >= C) return;
  float s, co;
  angle_sincos(theta[c], &s, &co);
  int n = -1, ph = 0, pwid = 0, prev_dh = INT_MIN, prev_dw = INT_MIN;
  const int64_t base = static_cast<int64_t>(c) * K;
  for (int t = 0; t < K; ++t) {
    int dh, dw;
    tap_offset(t, K, s, co, floor_rounding, &dh, &dw);
    if (dh != prev_dh || dw != prev_dw) {
      ++n;
      off[base + n] = make_int2(dh, dw);
      if (pw != nullptr) pw[base + n] = acc_t(0);
      prev_dh = dh;
      prev_dw = dw;
      ph = max(ph, abs(dh));
      pwid = max(pwid, abs(dw));
    }
    if (pw != nullptr) pw[base + n] += static_cast<acc_t>(weight[base + t]);
    tap_pt[base + t] = n;
  }
  if (residual && pw != nullptr) pw[base + tap_pt[base + K / 2]] += acc_t(1);
  // Unused table slots: weight 0 at the centre, so padded loops read valid memory and add nothing.
  for (int j = n + 1; j < K; ++j) {
    off[base + j] = make_int2(0, 0);
    if (pw != nullptr) pw[base + j] = acc_t(0);
  }
  npts[c] = n + 1;
  halo[c] = make_int2(ph, pwid);
}

template <typename acc_t>
struct TablesT {
  at::Tensor ints;  // off (C*K*2) | halo (C*2) | npts (C) | tap_pt (C*K): int2 arrays 8-byte aligned
  at::Tensor weights;
  int C, K;
  const int2* off() const { return reinterpret_cast<const int2*>(ints.data_ptr<int>()); }
  const int2* halo() const { return reinterpret_cast<const int2*>(ints.data_ptr<int>() + 2 * int64_t(C) * K); }
  const int* npts() const { return ints.data_ptr<int>() + 2 * int64_t(C) * K + 2 * C; }
  const int* tap_pt() const { return npts() + C; }
  const acc_t* w() const { return weights.defined() ? weights.data_ptr<acc_t>() : nullptr; }
};

template <typename scalar_t, typename acc_t>
TablesT<acc_t> build_tables(const at::Tensor& theta, const at::Tensor& weight, bool floor_rounding,
                            bool residual, bool with_weights) {
  const int C = static_cast<int>(weight.size(0)), K = static_cast<int>(weight.size(1));
  TablesT<acc_t> t;
  t.C = C;
  t.K = K;
  t.ints = at::empty({int64_t(C) * K * 3 + int64_t(C) * 3}, weight.options().dtype(at::kInt));
  if (with_weights) {
    t.weights = at::empty({int64_t(C) * K}, weight.options().dtype(c10::CppTypeToScalarType<acc_t>::value));
  }
  const at::Tensor th = theta.to(at::kFloat).contiguous();
  const at::Tensor w = weight.contiguous();
  at::Tensor& ints_t = t.ints;
  int* ints = ints_t.data_ptr<int>();
  int2* off = reinterpret_cast<int2*>(ints);
  int2* halo = reinterpret_cast<int2*>(ints + 2 * int64_t(C) * K);
  int* npts = ints + 2 * int64_t(C) * K + 2 * C;
  int* tap_pt = npts + C;
  acc_t* pw = nullptr;
  if (with_weights) {
    at::Tensor& w_t = t.weights;
    pw = w_t.data_ptr<acc_t>();
  }
  build_tables_kernel<scalar_t, acc_t><<<ceil_div(C, 128), 128, 0, at::cuda::getCurrentCUDAStream()>>>(
      th.data_ptr<float>(), w.data_ptr<scalar_t>(), C, K, floor_rounding, residual, off, pw, npts, tap_pt,
      halo);
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

// dw[c, t] = sum over parts of partial[c][part][point(t)], in a fixed order.
template <typename scalar_t, typename acc_t>
__global__ void wgrad_reduce_kernel(const acc_t* __restrict__ partial, const int* __restrict__ tap_pt,
                                    scalar_t* __restrict__ dw, int C, int K, int parts) {
  const int64_t e = blockIdx.x * int64_t(blockDim.x) + threadIdx.x;
  if (e >= int64_t(C) * K) return;
  const int c = static_cast<int>(e / K);
  const int j = tap_pt[e];
  const acc_t* pp = partial + int64_t(c) * parts * K + j;
  acc_t v = acc_t(0);
  for (int u = 0; u < parts; ++u) v += pp[int64_t(u) * K];
  dw[e] = static_cast<scalar_t>(v);
}

// ----------------------------------------------------------------------------------------------
// Launch helpers
// ----------------------------------------------------------------------------------------------
template <typename Kernel>
void set_smem(Kernel kernel, size_t bytes) {
  int dev = 0, optin = 0;
  MMO1D_CUDA_CHECK(cudaGetDevice(&dev));
  MMO1D_CUDA_CHECK(cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, dev));
  TORCH_CHECK(bytes <= static_cast<size_t>(optin), "oriented_dwconv1d: a tile needs ", bytes,
              " bytes of shared memory, more than the device's ", optin);
  if (bytes > 48 * 1024) {
    MMO1D_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                          static_cast<int>(bytes)));
  }
}

int max_smem_optin() {
  int dev = 0, optin = 0;
  MMO1D_CUDA_CHECK(cudaGetDevice(&dev));
  MMO1D_CUDA_CHECK(cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, dev));
  return optin;
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
  TORCH_CHECK(choose_tile(g, false, sizeof(acc_t), fixed), "oriented_dwconv1d: kernel size ", g.K,
              " with stride ", g.a, " does not fit in shared memory");
  const size_t smem = fixed + tile_bytes(g, sizeof(acc_t), false);
  auto kernel = gather_nchw_kernel<scalar_t, acc_t>;
  set_smem(kernel, smem);
  const int64_t blocks = N * g.C * g.tiles;
  kernel<<<blocks, nchw_threads(g), smem, stream>>>(src.data_ptr<scalar_t>(), out.data_ptr<scalar_t>(), bias,
                                                    t.off(), t.w(), t.npts(), t.halo(), g);
  MMO1D_CUDA_CHECK(cudaGetLastError());
}

// dw = sum over images and pixels of dy * x at each tap (two deterministic passes).
template <typename scalar_t, typename acc_t>
void launch_wgrad(const at::Tensor& x, const at::Tensor& dy, at::Tensor& dw, const TablesT<acc_t>& t,
                  GatherGeometry g, int64_t N, bool nhwc) {
  const auto stream = at::cuda::getCurrentCUDAStream();
  const size_t fixed = wgrad_fixed_bytes<acc_t>(g.K, nhwc);
  if (!choose_tile(g, nhwc, sizeof(acc_t), fixed)) {
    TORCH_CHECK(nhwc, "oriented_dwconv1d: kernel size ", g.K, " with stride ", g.a,
                " does not fit in shared memory");
    launch_wgrad<scalar_t, acc_t>(x.contiguous(), dy.contiguous(), dw, t, g, N, false);
    return;
  }
  const int64_t cgroups = nhwc ? ceil_div(g.C, kNhwcChannels) : g.C;
  // Enough blocks to fill the GPU several times over; each block loops over a chunk of images.
  const int64_t want_blocks = 16 * int64_t(at::cuda::getCurrentDeviceProperties()->multiProcessorCount);
  const int64_t chunks_wanted = std::clamp<int64_t>(want_blocks / (cgroups * g.tiles), 1, N);
  const int chunk = ceil_div(N, chunks_wanted);
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

void check_cuda_tensor(const at::Tensor& t, const char* name) {
  TORCH_CHECK(t.is_cuda(), "oriented_dwconv1d (CUDA kernel): ", name, " is on ", t.device());
}

void check_grad_output(const at::Tensor& grad_output, const at::Tensor& input, int64_t stride) {
  check_cuda_tensor(grad_output, "grad_output");
  const int64_t N = input.size(0), C = input.size(1);
  const int64_t Ho = out_size(input.size(2), stride), Wo = out_size(input.size(3), stride);
  TORCH_CHECK(grad_output.dim() == 4 && grad_output.size(0) == N && grad_output.size(1) == C &&
                        grad_output.size(2) == Ho && grad_output.size(3) == Wo,
                    "oriented_dwconv1d backward: grad_output has shape ", grad_output.sizes(),
                    ", expected (", N, ", ", C, ", ", Ho, ", ", Wo, ")");
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
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, input.scalar_type(), "oriented_dwconv1d_cuda", [&] {
    using acc_t = at::opmath_type<scalar_t>;
    const auto tables = build_tables<scalar_t, acc_t>(theta, weight, floor_rounding, residual, true);
    launch_gather<scalar_t, acc_t>(x, out, has_bias ? b.data_ptr<scalar_t>() : nullptr, tables, g,
                                   input.size(0), fmt == at::MemoryFormat::ChannelsLast);
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
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, input.scalar_type(), "oriented_dwconv1d_backward_input_cuda", [&] {
    using acc_t = at::opmath_type<scalar_t>;
    const auto tables = build_tables<scalar_t, acc_t>(theta, weight, floor_rounding, residual, true);
    launch_gather<scalar_t, acc_t>(dy, dx, nullptr, tables, g, input.size(0), fmt == at::MemoryFormat::ChannelsLast);
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
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, input.scalar_type(), "oriented_dwconv1d_backward_weight_cuda", [&] {
    using acc_t = at::opmath_type<scalar_t>;
    const auto tables = build_tables<scalar_t, acc_t>(theta, weight, floor_rounding, false, false);
    launch_wgrad<scalar_t, acc_t>(x, dy, dw, tables, g, input.size(0), fmt == at::MemoryFormat::ChannelsLast);
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
