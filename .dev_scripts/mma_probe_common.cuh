// Pieces shared by the standalone tensor-core probes (.dev_scripts/mma_gather_probe.cu,
// .dev_scripts/mma_wgrad_diag_probe.cu, .dev_scripts/mma_wgrad_shear_probe.cu): the PTX wrappers of
// csrc/cuda/mma_wgrad/mma_ptx.cuh and those only the probes use (m16n8k8, ldmatrix without transpose, bulk
// tensor stores), the tiles of a direction and the tensor maps that stage them, 16-bit conversions,
// truncated taps, the weight gradient's float64 reference and a timer.
#pragma once

#include <cuda.h>
#include <cudaTypedefs.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

// The wrappers the extension's tensor-core weight gradient uses (mma_16816, ldsm_x4_trans, ldsm_x2_trans,
// mbarrier, tma_load_4d); those only the probes use follow below.
#include "../csrc/cuda/mma_wgrad/mma_ptx.cuh"

using namespace mmo1d::cuda;  // NOLINT: the probes are standalone programs

#define CK(x)                                                                              \
  do {                                                                                     \
    cudaError_t e = (x);                                                                   \
    if (e != cudaSuccess) {                                                                \
      fprintf(stderr, "%s:%d %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e)); \
      exit(1);                                                                             \
    }                                                                                      \
  } while (0)

constexpr int kThreads = 256;
constexpr int kCB = 16;   // channels a block: two planes of 8

constexpr int kMaxMaps = 8;
constexpr int kSmemBudget = 72 * 1024;  // a block's tiles: three blocks per SM

// The tiles of one direction (its blocks of 16 channels): output tiles of th x tw, staged as a box of
// bh x bw pixels from (h0 - ph, w0 - pw); pixels taken in rows (col 0) or down columns (col 1).
// axis: 0, or the taps one chain o_t = o_0 + t u along an axis (0 or 90 degrees): 1 for u = (0, us), 2 for
// u = (us, 0) (mma_axis_kernel).
struct Plan {
  int col, th, tw, ph, pw, bh, bw, tiles_w, ntiles, map;
  int axis, us;
};

struct Maps {
  CUtensorMap x[kMaxMaps];  // per plan shape: x with box (8, bw, bh, 1)
  CUtensorMap y[kMaxMaps];  // y with box (8, tw, th, 1)
};


template <bool HALF>
__device__ __forceinline__ void mma1688(float (&d)[4], uint32_t a0, uint32_t a1, uint32_t b0) {
  if constexpr (HALF) {
    asm volatile("mma.sync.aligned.m16n8k8.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5}, {%6}, {%0,%1,%2,%3};\n"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
                 : "r"(a0), "r"(a1), "r"(b0));
  } else {
    asm volatile("mma.sync.aligned.m16n8k8.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5}, {%6}, {%0,%1,%2,%3};\n"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
                 : "r"(a0), "r"(a1), "r"(b0));
  }
}

__device__ __forceinline__ void ldsm_x4(uint32_t (&r)[4], uint32_t addr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(addr));
}

__device__ __forceinline__ void ldsm_x2(uint32_t& r0, uint32_t& r1, uint32_t addr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x2.shared.b16 {%0,%1}, [%2];\n" : "=r"(r0), "=r"(r1) : "r"(addr));
}

__device__ __forceinline__ void tma_store(const CUtensorMap* map, uint32_t src, int c, int w, int h, int n) {
  asm volatile("cp.async.bulk.tensor.4d.global.shared::cta.tile.bulk_group [%0, {%1, %2, %3, %4}], [%5];\n" ::"l"(map),
               "r"(c), "r"(w), "r"(h), "r"(n), "r"(src)
               : "memory");
}

template <bool HALF>
__device__ __forceinline__ uint32_t pack2(float a, float b) {
  if constexpr (HALF) {
    const __half2 h = __floats2half2_rn(a, b);
    return *reinterpret_cast<const uint32_t*>(&h);
  } else {
    const __nv_bfloat162 h = __floats2bfloat162_rn(a, b);
    return *reinterpret_cast<const uint32_t*>(&h);
  }
}

template <bool HALF>
__device__ __forceinline__ float to_float(uint16_t v) {
  if constexpr (HALF) {
    return __half2float(__ushort_as_half(v));
  } else {
    return __bfloat162float(__ushort_as_bfloat16(v));
  }
}

// Tile pixel i of plan pl in its order (along rows, or down columns where pl.col), clamped into the tile.
__device__ __forceinline__ void tile_pixel(const Plan& pl, int i, int& r, int& c) {
  i = min(i, pl.th * pl.tw - 1);
  if (pl.col) {
    c = i / pl.th, r = i - c * pl.th;
  } else {
    r = i / pl.tw, c = i - r * pl.tw;
  }
}

// A lane's part of a block-diagonal B (8 channels): lane (gq, tq) holds channel gq's value v where gq is
// 2tq (low half) or 2tq + 1 (high half), else 0.
struct DiagB {
  bool diag;
  int shift;
  __device__ __forceinline__ explicit DiagB(int lane)
      : diag(((lane >> 2) >> 1) == (lane & 3)), shift(16 * ((lane >> 2) & 1)) {}
  __device__ __forceinline__ uint32_t operator()(uint16_t v) const { return diag ? uint32_t(v) << shift : 0u; }
};

// Host side -----------------------------------------------------------------------------------------

static float h2f(uint16_t v, bool half) {
  if (half) return __half2float(__ushort_as_half(v));
  uint32_t u = uint32_t(v) << 16;
  float f;
  memcpy(&f, &u, 4);
  return f;
}

static uint16_t f2h(float f, bool half) {
  if (half) return __half_as_ushort(__float2half_rn(f));
  return __bfloat16_as_ushort(__float2bfloat16_rn(f));
}

// Truncated taps of angle a (radians, float32), as mmo1d.ops.reference.tap_offsets.
static void trunc_taps(float a, int K, int2* out) {
  const float s = float(std::sin(double(a))), c = float(std::cos(double(a)));
  for (int t = 0; t < K; ++t) {
    const float d = float(t - K / 2);
    out[t] = make_int2(int(std::trunc(-d * s)), int(std::trunc(d * c)));
  }
}

// The shared memory of a block of plan pl: two x planes, two y planes, the pixel tables.
static int plan_smem(const Plan& pl) {
  auto a128 = [](int v) { return (v + 127) / 128 * 128; };
  return 2 * a128(pl.bh * pl.bw * 16) + 2 * a128(pl.th * pl.tw * 16) + (pl.th * pl.tw + 15) / 16 * 16 * 8;
}

// The tiles of a direction of halo (ph, pw) on an H x W plane: pixels taken along rows where ph <= pw,
// else down columns. Along the pixel order the tile takes 64, 32 or 16 pixels (evened out over the
// plane), across it as many as kSmemBudget allows; the plan of least estimated shared-memory traffic
// per output (a staged pixel is an eighth of a 128-byte wavefront a plane, an output's 31 taps about 8
// of ldmatrix, also for the outputs a partial tile computes beyond the plane). A row tile's box is wider
// than its halo by a multiple of 8 pixels (an ldmatrix block that wraps to the next row stays on
// distinct banks); a column tile's box width is odd (8 pixels down a column on distinct banks).
static Plan make_plan(int ph, int pw, int H, int W) {
  const bool col = ph > pw;
  auto even = [](int full, int size) {
    const int tiles = (full + size - 1) / size;
    return (full + tiles - 1) / tiles;
  };
  auto shape = [&](int th, int tw) {
    Plan pl{};
    pl.col = col, pl.ph = ph, pl.pw = pw, pl.th = th, pl.tw = tw, pl.bh = th + 2 * ph, pl.bw = tw + 2 * pw;
    if (col) {
      pl.bw |= 1;
    } else {
      pl.bw += (8 - (2 * pw) % 8) % 8;
    }
    pl.tiles_w = (W + tw - 1) / tw;
    pl.ntiles = (H + th - 1) / th * pl.tiles_w;
    return pl;
  };
  Plan best{};
  double best_cost = 1e30;
  for (const int along : {64, 32, 16}) {
    const int full_along = col ? H : W, full_across = col ? W : H;
    const int a = even(full_along, along);
    int c = full_across;
    for (; c > 1; --c) {
      if (plan_smem(col ? shape(a, c) : shape(c, a)) <= kSmemBudget) break;
    }
    c = even(full_across, c);
    const Plan pl = col ? shape(a, c) : shape(c, a);
    const double computed = double(pl.ntiles) * pl.th * pl.tw;
    const double cost = (double(pl.ntiles) * pl.bh * pl.bw * 2 / 8 + computed * 8) / (double(H) * W);
    if (cost < best_cost) best_cost = cost, best = pl;
  }
  return best;
}

// The tiles of an axis line (mma_axis_kernel): axis 1 (taps along a row) rows of the plane in tiles of
// 8k rows and an even width, the box width odd (8 pixels down a column on distinct banks); axis 2 the
// transpose (8k columns, an even height).
static Plan make_axis_plan(int axis, int us, int ph, int pw, int H, int W) {
  auto even = [](int full, int size) {
    const int tiles = (full + size - 1) / size;
    return (full + tiles - 1) / tiles;
  };
  Plan pl{};
  pl.col = axis == 2, pl.ph = ph, pl.pw = pw, pl.axis = axis, pl.us = us;
  const int along = (even(axis == 1 ? W : H, 64) + 1) / 2 * 2;
  for (int across = 64; across >= 8; across -= 8) {
    pl.th = axis == 1 ? across : along, pl.tw = axis == 1 ? along : across;
    pl.bh = pl.th + 2 * ph, pl.bw = pl.tw + 2 * pw;
    if (axis == 1) pl.bw |= 1;
    if (plan_smem(pl) <= kSmemBudget && across <= ((axis == 1 ? H : W) + 7) / 8 * 8) break;
  }
  pl.tiles_w = (W + pl.tw - 1) / pl.tw;
  pl.ntiles = (H + pl.th - 1) / pl.th * pl.tiles_w;
  return pl;
}

static PFN_cuTensorMapEncodeTiled_v12000 encoder() {
  static PFN_cuTensorMapEncodeTiled_v12000 fn = nullptr;
  if (fn == nullptr) {
    cudaDriverEntryPointQueryResult q;
    CK(cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", reinterpret_cast<void**>(&fn), 12000,
                                        cudaEnableDefault, &q));
    if (q != cudaDriverEntryPointSuccess || fn == nullptr) {
      fprintf(stderr, "cuTensorMapEncodeTiled not found\n");
      exit(1);
    }
  }
  return fn;
}

// A map of the N x H x W x C channels_last tensor at ptr with boxes of 8 channels x bw x bh pixels.
static CUtensorMap tensor_map(void* ptr, bool half, int N, int H, int W, int C, int bw, int bh) {
  CUtensorMap m;
  const cuuint64_t dims[4] = {cuuint64_t(C), cuuint64_t(W), cuuint64_t(H), cuuint64_t(N)};
  const cuuint64_t strides[3] = {cuuint64_t(C) * 2, cuuint64_t(W) * C * 2, cuuint64_t(H) * W * C * 2};
  const cuuint32_t box[4] = {8, cuuint32_t(bw), cuuint32_t(bh), 1}, es[4] = {1, 1, 1, 1};
  const CUresult r = encoder()(&m, half ? CU_TENSOR_MAP_DATA_TYPE_FLOAT16 : CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, 4, ptr,
                               dims, strides, box, es, CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_NONE,
                               CU_TENSOR_MAP_L2_PROMOTION_L2_128B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  if (r != CUDA_SUCCESS) {
    fprintf(stderr, "cuTensorMapEncodeTiled failed (%d): box %d x %d\n", int(r), bw, bh);
    exit(1);
  }
  return m;
}

// The truncated taps of channel block cb (C channels, K taps) into out, angle in degrees or, below 0,
// the 8 directions in groups of C / 8 channels (the block's first channel's); returns the halo (ph, pw).
static int2 block_taps(double angle, int cb, int C, int K, int2* out) {
  const float a = angle < 0 ? float((cb * kCB) / (C / 8)) * float(M_PI / 8) : float(angle * M_PI / 180);
  trunc_taps(a, K, out);
  int2 halo = make_int2(0, 0);
  for (int t = 0; t < K; ++t) halo = make_int2(std::max(halo.x, std::abs(out[t].x)), std::max(halo.y, std::abs(out[t].y)));
  return halo;
}

// The float64 reference of one weight-gradient entry of channel c: the sum over the N x H x W outputs p of
// dy(p) x(p + o) (x zero outside the plane), or with bias of dy(p) alone, and the sum of the terms'
// magnitudes (the bound's scale); x and dy N x H x W x C, channels_last, 16-bit.
static void host_wgrad_sum(const std::vector<uint16_t>& hx, const std::vector<uint16_t>& hdy, bool half, int N, int H,
                           int W, int C, int c, int2 o, bool bias, double& sum, double& mag) {
  sum = 0, mag = 0;
  for (int n = 0; n < N; ++n) {
    for (int h = 0; h < H; ++h) {
      for (int w = 0; w < W; ++w) {
        const int hh = h + o.x, ww = w + o.y;
        if (!bias && (hh < 0 || hh >= H || ww < 0 || ww >= W)) continue;
        const double g = h2f(hdy[((int64_t(n) * H + h) * W + w) * C + c], half);
        const double v = bias ? g : g * h2f(hx[((int64_t(n) * H + hh) * W + ww) * C + c], half);
        sum += v;
        mag += std::abs(v);
      }
    }
  }
}

// The mean time in ms of `reps` calls of timed() after 5 calls of warm() (CUDA events).
template <typename Warm, typename Timed>
static float mean_ms(Warm&& warm, Timed&& timed, int reps) {
  cudaEvent_t t0, t1;
  CK(cudaEventCreate(&t0));
  CK(cudaEventCreate(&t1));
  for (int i = 0; i < 5; ++i) warm();
  CK(cudaEventRecord(t0));
  for (int i = 0; i < reps; ++i) timed();
  CK(cudaEventRecord(t1));
  CK(cudaEventSynchronize(t1));
  float ms;
  CK(cudaEventElapsedTime(&ms, t0, t1));
  CK(cudaGetLastError());
  CK(cudaEventDestroy(t0));
  CK(cudaEventDestroy(t1));
  return ms / reps;
}

// pl.map: the index of pl's tile shape (box and tile) in shapes, added there if new (one tensor map each).
static void assign_map(Plan& pl, std::vector<Plan>& shapes) {
  for (size_t i = 0; i < shapes.size(); ++i) {
    const Plan& q = shapes[i];
    if (q.bh == pl.bh && q.bw == pl.bw && q.th == pl.th && q.tw == pl.tw) {
      pl.map = int(i);
      return;
    }
  }
  if (shapes.size() == size_t(kMaxMaps)) {
    fprintf(stderr, "more than %d tile shapes\n", kMaxMaps);
    exit(2);
  }
  pl.map = int(shapes.size());
  shapes.push_back(pl);
}
