// Tensor-core gather (forward and input gradient, stride 1, float16/bfloat16 channels_last): along
// one axis an oriented line is a set of runs, and a run is a 1D convolution, which is a product of
// the input row with a Toeplitz matrix of the run's weights. A warp computes 16 output segments of
// 8 pixels at once as mma.m16n8k16 products: A = 16 input rows of 16 pixels (ldmatrix from the
// staged tile), B = a 16 x 8 Toeplitz slice of one run's weights, accumulated in float32.
//
// Geometry, per block: the axis of its first channel's line (mode 0: runs along rows, (a, b) =
// (dh, dw); mode 1: runs along columns, (a, b) = (dw, dh)) names the minor axis a and the major axis
// b. A channel's taps form groups of equal a; a group's offsets b are a contiguous run [bmin,
// bmin + len). For an output segment at minor r and major b0..b0+7:
//   y[r, b0 + n] = sum over groups, chunks e, k of  x[r + a, b0 + e + k] * W_a(e + k - n)
// with chunks e = floor8(bmin) + 16 j covering [bmin, bmin + len + 7).
//
// Exactness: the weights are not merged. Taps that fall on the same pixel (and the residual's +1)
// go to separate layers, one B matrix each, so every B entry is one weight of the input's dtype (or
// 1): every product is exact in float32 and only the order of the float32 additions differs from
// the other paths'.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <climits>

#include "../oriented_dwconv1d.h"
#include "common.cuh"

namespace mmo1d {
namespace cuda {

constexpr int kMmaCB = 16;       // channels per block: two 16-byte vectors of 16-bit values per pixel
constexpr int kMmaThreads = 256; // eight warps, each takes channels w and w + 8 in turn
constexpr int kMmaTiles = 8;     // mma row tiles (16 segments of 8 outputs) per warp and pass

// Table layout per (channel, mode): groups[(c * 2 + mode) * (K + 1)] is the header {number of
// groups, largest |a|, largest |b|, weights used}, followed by the groups {a, bmin, len | layers <<
// 16, first weight}; a group's weights are layer-major, weights[woff + l * len + (b - bmin)].
__host__ __device__ constexpr int mma_weight_capacity(int K) {
  return 4 * K + 4;
}

// Shared-memory bytes of one channel's table (header, groups, weights) in the gather.
__host__ __device__ constexpr int mma_table_bytes(int K) {
  return static_cast<int>(align16(static_cast<size_t>(K + 1) * 16 + static_cast<size_t>(mma_weight_capacity(K)) * 4));
}

// One thread per (channel, mode): the groups of the channel's taps at offsets sign * (dh, dw).
template <typename scalar_t>
__global__ void build_mma_tables_kernel(const float* __restrict__ theta, const scalar_t* __restrict__ weight, int C,
                                        int K, bool floor_rounding, bool residual, int sign, int4* __restrict__ groups,
                                        float* __restrict__ weights) {
  const int idx = blockIdx.x * blockDim.x + threadIdx.x;
  if (idx >= 2 * C) return;
  const int c = idx >> 1, mode = idx & 1;
  float s, co;
  angle_sincos(theta[c], &s, &co);
  auto ab = [&](int t, int* a, int* b) {
    int dh, dw;
    tap_offset(t, K, s, co, floor_rounding, &dh, &dw);
    *a = sign * (mode == 0 ? dh : dw);
    *b = sign * (mode == 0 ? dw : dh);
  };
  int4* hdr = groups + static_cast<int64_t>(idx) * (K + 1);
  float* wt = weights + static_cast<int64_t>(idx) * mma_weight_capacity(K);
  const int cap = mma_weight_capacity(K);
  int ng = 0, ha = 0, hb = 0, nw = 0;
  int t = 0;
  while (t < K) {
    // The group: taps t .. t1 - 1 share a (a is monotone in the tap index); their b are monotone,
    // so taps on one pixel are consecutive. A pixel's layers: its taps, and the residual's 1 on the
    // centre tap's pixel.
    int a, b;
    ab(t, &a, &b);
    int t1 = t, bmin = b, bmax = b, layers = 0;
    while (t1 < K) {
      int au, bu;
      ab(t1, &au, &bu);
      if (au != a) break;
      int v = t1 + 1, av, bv;
      while (v < K && (ab(v, &av, &bv), av == au && bv == bu)) ++v;
      const bool centre = residual && t1 <= K / 2 && K / 2 < v;
      layers = max(layers, v - t1 + (centre ? 1 : 0));
      bmin = min(bmin, bu);
      bmax = max(bmax, bu);
      t1 = v;
    }
    const int len = bmax - bmin + 1;
    if (nw + len * layers > cap) __trap();  // cannot happen: 4 layers at most, or one pixel (non-finite angle)
    for (int i = 0; i < len * layers; ++i) wt[nw + i] = 0.0f;
    for (int u = t; u < t1;) {
      int au, bu;
      ab(u, &au, &bu);
      int v = u + 1, av, bv;
      while (v < t1 && (ab(v, &av, &bv), bv == bu)) ++v;
      for (int l = 0; l < v - u; ++l) {
        wt[nw + l * len + (bu - bmin)] = static_cast<float>(weight[static_cast<int64_t>(c) * K + u + l]);
      }
      if (residual && u <= K / 2 && K / 2 < v) wt[nw + (v - u) * len + (bu - bmin)] = 1.0f;
      u = v;
    }
    hdr[1 + ng] = make_int4(a, bmin, len | (layers << 16), nw);
    ha = max(ha, abs(a));
    hb = max(hb, max(abs(bmin), abs(bmax)));
    nw += len * layers;
    ++ng;
    t = t1;
  }
  hdr[0] = make_int4(ng, ha, hb, nw);
}

template <typename scalar_t>
struct MmaType;

template <>
struct MmaType<c10::BFloat16> {
  __device__ static unsigned pack(float lo, float hi) {
    const __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);
    return *reinterpret_cast<const unsigned*>(&v);
  }
  __device__ static void mma(float (&d)[4], const unsigned (&a)[4], unsigned b0, unsigned b1) {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
        "{%0,%1,%2,%3};\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
  }
};

template <>
struct MmaType<c10::Half> {
  __device__ static unsigned pack(float lo, float hi) {
    const __half2 v = __floats2half2_rn(lo, hi);
    return *reinterpret_cast<const unsigned*>(&v);
  }
  __device__ static void mma(float (&d)[4], const unsigned (&a)[4], unsigned b0, unsigned b1) {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
        "{%0,%1,%2,%3};\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
  }
};

__device__ __forceinline__ void ldmatrix_x4(unsigned addr, unsigned (&r)[4]) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(addr));
}

// A block: 16 channels of a T x T tile of one image. grid.x = N * tiles * (C / 16), channel blocks
// fastest (the blocks that run together share their pixels' 32-byte sectors). Shared memory: the 16
// channels' tables (mma_table_bytes each), then plane_budget bytes for the staged planes (at least
// one output row of the worst halo fits).
template <typename scalar_t>
__global__ void __launch_bounds__(kMmaThreads, 2)
    mma_gather_nhwc_kernel(const scalar_t* __restrict__ src, scalar_t* __restrict__ out,
                           const scalar_t* __restrict__ bias, const int4* __restrict__ groups,
                           const float* __restrict__ weights, int C, int H, int W, int K, int T, int tiles_w,
                           int tiles, int plane_budget) {
  extern __shared__ __align__(16) unsigned char smem_all[];
  const int table_bytes = mma_table_bytes(K);
  unsigned char* smem = smem_all + kMmaCB * table_bytes;
  unsigned short* planes = reinterpret_cast<unsigned short*>(smem);
  __shared__ int s_mode, s_ha[kMmaCB], s_hb[kMmaCB];

  const int CG = C / kMmaCB;
  const int cg = static_cast<int>(blockIdx.x % CG);
  const int64_t rest = blockIdx.x / CG;
  const int tile = static_cast<int>(rest % tiles);
  const int64_t n = rest / tiles;
  const int h0 = (tile / tiles_w) * T, w0 = (tile % tiles_w) * T;
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int cap = mma_weight_capacity(K);

  // The block's mode: the axis along which its first channel's line runs.
  if (threadIdx.x == 0) {
    const int4 m0 = groups[static_cast<int64_t>(cg * kMmaCB * 2) * (K + 1)];
    s_mode = m0.z >= m0.y ? 0 : 1;
  }
  __syncthreads();
  const int mode = s_mode;
  // The channels' tables in the block's mode, into shared memory: warp w copies channels w, w + 8.
#pragma unroll
  for (int half = 0; half < 2; ++half) {
    const int k = warp + 8 * half;
    const int64_t e = static_cast<int64_t>((cg * kMmaCB + k) * 2 + mode);
    const int4* gsrc = groups + e * (K + 1);
    const float* wsrc = weights + e * cap;
    const int4 hd = gsrc[0];
    int4* gdst = reinterpret_cast<int4*>(smem_all + k * table_bytes);
    float* wdst = reinterpret_cast<float*>(gdst + K + 1);
    for (int i = lane; i <= hd.x; i += 32) gdst[i] = gsrc[i];
    for (int i = lane; i < hd.w; i += 32) wdst[i] = wsrc[i];
    if (lane == 0) {
      s_ha[k] = hd.y;
      s_hb[k] = hd.z;
    }
  }
  __syncthreads();
  int HA = 0, HB = 0;
#pragma unroll
  for (int i = 0; i < kMmaCB; ++i) {
    HA = max(HA, s_ha[i]);
    HB = max(HB, s_hb[i]);
  }
  const int minor_size = mode == 0 ? H : W, major_size = mode == 0 ? W : H;
  const int minor0 = mode == 0 ? h0 : w0, major0 = mode == 0 ? w0 : h0;
  const int minor_n = min(T, minor_size - minor0), major_n = min(T, major_size - major0);
  const int nJB = (major_n + 7) >> 3;
  const int HL = (HB + 7) & ~7;
  // Plane row: HL left columns, the tile, the right halo and the last chunk's reach; PC = 8 (mod 16)
  // puts the 8 rows of an ldmatrix on distinct banks.
  const int PC = ((HL + nJB * 8 + HB + 15 - 8 + 15) & ~15) + 8;
  const int rows_fit = plane_budget / (kMmaCB * PC * 2) - 2 * HA;
  const int sh_max = max(1, min(rows_fit, kMmaTiles * 16 / nJB));
  const int npass = (minor_n + sh_max - 1) / sh_max;
  const int SH = (minor_n + npass - 1) / npass;
  const int PR = SH + 2 * HA;
  const int plane = PR * PC;
  const unsigned planes_saddr = static_cast<unsigned>(__cvta_generic_to_shared(planes));
  const int g = lane >> 2, q = lane & 3;
  const FastDiv div_pc(PC);

  for (int r0 = 0; r0 < minor_n; r0 += SH) {
    const int rows = min(SH, minor_n - r0);
    // Stage: plane cell (i, j) of channel k is the source at minor r0 + i - HA, major j - HL (tile
    // coordinates); zeros outside the image and beyond the halo the chunks may read.
    constexpr int kU = 8;  // cells per thread with their loads in flight together
    for (int cell0 = threadIdx.x; cell0 < plane; cell0 += kU * kMmaThreads) {
      uint4 v[kU][2];
#pragma unroll
      for (int u = 0; u < kU; ++u) {
        const int cell = cell0 + u * kMmaThreads;
        v[u][0] = v[u][1] = make_uint4(0, 0, 0, 0);
        int j;
        const int i = div_pc(cell, &j);
        const int mi = minor0 + r0 + i - HA, mj = major0 + j - HL;
        if (cell < plane && mi >= 0 && mi < minor_size && mj >= 0 && mj < major_size && j >= HL - HB &&
            j < HL + major_n + HB) {
          const int hh = mode == 0 ? mi : mj, ww = mode == 0 ? mj : mi;
          const uint4* p = reinterpret_cast<const uint4*>(src + ((n * H + hh) * W + ww) * C + cg * kMmaCB);
          v[u][0] = __ldg(p);
          v[u][1] = __ldg(p + 1);
        }
      }
#pragma unroll
      for (int u = 0; u < kU; ++u) {
        const int cell = cell0 + u * kMmaThreads;
        if (cell < plane) {
          const unsigned vs[8] = {v[u][0].x, v[u][0].y, v[u][0].z, v[u][0].w,
                                  v[u][1].x, v[u][1].y, v[u][1].z, v[u][1].w};
#pragma unroll
          for (int k = 0; k < kMmaCB; ++k) {
            planes[k * plane + cell] = static_cast<unsigned short>(vs[k >> 1] >> (16 * (k & 1)));
          }
        }
      }
    }
    __syncthreads();

    const int nseg = rows * nJB;
    const int nM = (nseg + 15) >> 4;
    // This lane's ldmatrix row per row tile: segment 16 m + (lane & 15), columns + 8 for lanes 16-31.
    int base[kMmaTiles];
#pragma unroll
    for (int m = 0; m < kMmaTiles; ++m) {
      const int sgm = min(16 * m + (lane & 15), nseg - 1);
      const int r = sgm % rows, jb = sgm / rows;
      base[m] = (r + HA) * PC + HL + jb * 8 + (lane >> 4) * 8;
    }
    float acc[2][kMmaTiles][4];
#pragma unroll
    for (int half = 0; half < 2; ++half) {
      const int k = warp + 8 * half;
      const int c = cg * kMmaCB + k;
      const float b = bias != nullptr ? static_cast<float>(bias[c]) : 0.0f;
#pragma unroll
      for (int m = 0; m < kMmaTiles; ++m) {
#pragma unroll
        for (int i = 0; i < 4; ++i) acc[half][m][i] = b;
      }
      const int4* gr = reinterpret_cast<const int4*>(smem_all + k * table_bytes);
      const float* wt = reinterpret_cast<const float*>(gr + K + 1);
      const int ng = gr[0].x;
      const unsigned psaddr = planes_saddr + 2u * static_cast<unsigned>(k * plane);
      for (int gi = 0; gi < ng; ++gi) {
        const int4 gd = gr[1 + gi];
        const int a = gd.x, bmin = gd.y, len = gd.z & 0xffff, layers = gd.z >> 16;
        const int e0 = bmin & ~7;  // floor to a multiple of 8
        const int nch = (bmin + len - 1 + 7 - e0) / 16 + 1;
        for (int ch = 0; ch < nch; ++ch) {
          const int e = e0 + 16 * ch;
          const unsigned off = 2u * static_cast<unsigned>(a * PC + e);
          const int i0 = e + 2 * q - g - bmin;
          for (int l0 = 0; l0 < layers; l0 += 2) {
            // B of layers l0 and l0 + 1: entries (k = 2q, 2q + 1, 2q + 8, 2q + 9; n = g).
            unsigned bb[2][2];
            bool any[2];
#pragma unroll
            for (int l = 0; l < 2; ++l) {
              const bool on = l0 + l < layers;
              const float* wl = wt + gd.w + (l0 + l) * len;
              auto wv = [&](int i) { return on && static_cast<unsigned>(i) < static_cast<unsigned>(len) ? wl[i] : 0.0f; };
              const float x0 = wv(i0), x1 = wv(i0 + 1), x8 = wv(i0 + 8), x9 = wv(i0 + 9);
              bb[l][0] = MmaType<scalar_t>::pack(x0, x1);
              bb[l][1] = MmaType<scalar_t>::pack(x8, x9);
              any[l] = __any_sync(0xffffffffu, (bb[l][0] | bb[l][1]) != 0u);
            }
            if (!any[0] && !any[1]) continue;
#pragma unroll
            for (int m = 0; m < kMmaTiles; ++m) {
              if (m < nM) {
                unsigned af[4];
                ldmatrix_x4(psaddr + 2u * static_cast<unsigned>(base[m]) + off, af);
                if (any[0]) MmaType<scalar_t>::mma(acc[half][m], af, bb[0][0], bb[0][1]);
                if (any[1]) MmaType<scalar_t>::mma(acc[half][m], af, bb[1][0], bb[1][1]);
              }
            }
          }
        }
      }
    }
    __syncthreads();
    // Outputs through shared memory, per channel [segment][8 pixels], then 16 channels per pixel.
    scalar_t* obuf = reinterpret_cast<scalar_t*>(smem);
    const int opix = nseg * 8;
#pragma unroll
    for (int half = 0; half < 2; ++half) {
      const int k = warp + 8 * half;
#pragma unroll
      for (int m = 0; m < kMmaTiles; ++m) {
        if (m < nM) {
#pragma unroll
          for (int hi = 0; hi < 2; ++hi) {
            const int sgm = 16 * m + g + 8 * hi;
            if (sgm < nseg) {
              const scalar_t lo = static_cast<scalar_t>(acc[half][m][2 * hi]);
              const scalar_t up = static_cast<scalar_t>(acc[half][m][2 * hi + 1]);
              const unsigned pk = static_cast<unsigned>(*reinterpret_cast<const unsigned short*>(&lo)) |
                                  (static_cast<unsigned>(*reinterpret_cast<const unsigned short*>(&up)) << 16);
              *reinterpret_cast<unsigned*>(obuf + k * opix + sgm * 8 + 2 * q) = pk;
            }
          }
        }
      }
    }
    __syncthreads();
    for (int pix = threadIdx.x; pix < opix; pix += kMmaThreads) {
      const int sgm = pix >> 3, col = pix & 7;
      const int r = sgm % rows, jb = sgm / rows;
      const int mj = jb * 8 + col;
      if (mj < major_n) {
        const int mi = minor0 + r0 + r, mjj = major0 + mj;
        const int hh = mode == 0 ? mi : mjj, ww = mode == 0 ? mjj : mi;
        unsigned vs[8];
#pragma unroll
        for (int k = 0; k < 8; ++k) {
          const unsigned short* ob = reinterpret_cast<const unsigned short*>(obuf);
          vs[k] = static_cast<unsigned>(ob[(2 * k) * opix + pix]) | (static_cast<unsigned>(ob[(2 * k + 1) * opix + pix]) << 16);
        }
        uint4* p = reinterpret_cast<uint4*>(out + ((n * H + hh) * W + ww) * C + cg * kMmaCB);
        p[0] = make_uint4(vs[0], vs[1], vs[2], vs[3]);
        p[1] = make_uint4(vs[4], vs[5], vs[6], vs[7]);
      }
    }
    __syncthreads();
  }
}

}  // namespace cuda
}  // namespace mmo1d
