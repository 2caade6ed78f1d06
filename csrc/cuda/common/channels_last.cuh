// Building blocks of the channels_last fast paths: 32 bytes of channels per pixel staged with
// cp.async, channel vectors <-> floats, shuffled sums and the block's channel summary.
#pragma once

#include <type_traits>
#include "geometry.cuh"
#include "tables.cuh"

namespace mmo1d {
namespace cuda {

// ---- NHWC fast path --------------------------------------------------------------------------

__device__ __forceinline__ void cp_async16(void* dst, const void* src, bool valid) {
  const unsigned s = static_cast<unsigned>(__cvta_generic_to_shared(dst));
  const int bytes = valid ? 16 : 0;  // 0: no read, zero fill
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(s), "l"(src), "r"(bytes) : "memory");
}
__device__ __forceinline__ void cp_async_wait_all() {
  asm volatile("cp.async.wait_all;\n" ::: "memory");
}
// The copies issued since the last commit as one group; waiting until at most PENDING of the most
// recent groups are still in flight (this thread's copies only: a barrier shares them).
__device__ __forceinline__ void cp_async_commit() {
  asm volatile("cp.async.commit_group;\n" ::: "memory");
}
template <int PENDING>
__device__ __forceinline__ void cp_async_wait_group() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(PENDING) : "memory");
}

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
__device__ __forceinline__ void unpack_vec(uint2 raw, float (&f)[V]) {
  Raw8<scalar_t, V> u;
  u.raw = raw;
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
__device__ __forceinline__ void load_vec(const scalar_t* __restrict__ p, float (&f)[V]) {
  unpack_vec<scalar_t, V>(*reinterpret_cast<const uint2*>(p), f);
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

// p[k] += f[k] for V consecutive floats at a 4 * V-byte aligned address: one vector load and store
// (a fp32 tile in shared memory).
template <int V>
__device__ __forceinline__ void add_floats(float* __restrict__ p, const float (&f)[V]) {
  if constexpr (V == 4) {
    float4 u = *reinterpret_cast<const float4*>(p);
    u.x += f[0];
    u.y += f[1];
    u.z += f[2];
    u.w += f[3];
    *reinterpret_cast<float4*>(p) = u;
  } else if constexpr (V == 2) {
    float2 u = *reinterpret_cast<const float2*>(p);
    u.x += f[0];
    u.y += f[1];
    *reinterpret_cast<float2*>(p) = u;
  } else {
#pragma unroll
    for (int k = 0; k < V; ++k) p[k] += f[k];
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

// The cp.async copies of rows [gi0, gi0 + EH) x columns [gj0, gj0 + EW) of an H x W image,
// channels [c0, c0 + CB), into S (pixel-major, CB channels per pixel, `pitch` >= EW pixels per row;
// C % CB == 0, 16-byte aligned), zero outside the image; the caller waits for them. Pixel (i, j) is
// at img + (i * rstride + j * cstep) * C: rstride = W, cstep = 1 for an image; a phase plane
// x[a::2, b::2] of a W2-wide image has rstride = 2 W2, cstep = 2.
template <typename scalar_t>
__device__ __forceinline__ void issue_nhwc_tile(scalar_t* __restrict__ S, const scalar_t* __restrict__ img, int C,
                                                int H, int W, int c0, int gi0, int gj0, int EH, int EW, int pitch,
                                                int64_t rstride, int cstep) {
  constexpr int CB = VecTraits<scalar_t>::kCB;
  // Two 16-byte halves per pixel; a warp copies 16 pixels of a row per step.
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nwarps = blockDim.x >> 5;
  const int half = lane & 1;
  const int jstep = cstep * C;  // elements from one pixel of a row to the next
  for (int i = warp; i < EH; i += nwarps) {
    const int gi = gi0 + i;
    const bool row_ok = static_cast<unsigned>(gi) < static_cast<unsigned>(H);
    // gp: where this lane's pixel (gi, gj0 + j) would be (only pixels inside the image are read).
    const scalar_t* gp =
        img + (gi * rstride + int64_t(gj0) * cstep) * C + c0 + half * (CB / 2) + int64_t(lane >> 1) * jstep;
    scalar_t* srow = S + i * pitch * CB + half * (CB / 2);
    for (int j = lane >> 1; j < EW; j += 16, gp += 16 * int64_t(jstep)) {
      const int gj = gj0 + j;
      const bool ok = row_ok && static_cast<unsigned>(gj) < static_cast<unsigned>(W);
      cp_async16(srow + j * CB, ok ? gp : img, ok);
    }
  }
}

// The same tile staged (issue_nhwc_tile, then waited for) when vec_ok, else copied element by
// element, also beyond C (zeros).
template <typename scalar_t>
__device__ __forceinline__ void stage_nhwc_tile(scalar_t* __restrict__ S, const scalar_t* __restrict__ img, int C,
                                                int H, int W, int c0, int gi0, int gj0, int EH, int EW, bool vec_ok,
                                                int pitch, int64_t rstride, int cstep) {
  constexpr int CB = VecTraits<scalar_t>::kCB;
  const int total = EH * EW;
  if (vec_ok) {
    issue_nhwc_tile<scalar_t>(S, img, C, H, W, c0, gi0, gj0, EH, EW, pitch, rstride, cstep);
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

// Where a block of the window gathers works (C a multiple of CB): CB channels from c0 of image n
// (blockIdx.x runs over g's tiles, then the blocks of channels, then the images), the tile of
// th x tw positions from (p0, q0) of g's plane, and its threads' roles: lane, quarter (V channels of
// the block's CB), pixel slot and slot count (4 threads per slot).
struct FastBlock {
  int c0;
  int64_t n;
  int p0, q0, th, tw;
  int lane, quarter, slot, slots;
};

template <int CB>
__device__ __forceinline__ FastBlock fast_block(const FastGeometry& g) {
  FastBlock b;
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

// Output o of a strip of nout outputs twd wide (past the strip: its last output): its position (p, q)
// and the byte offset of its pixel in a staged tile EW pixels wide, 32 bytes a pixel.
struct StripOutput {
  int p, q, byte;
};

__device__ __forceinline__ StripOutput strip_output(const FastDiv& div_tw, int o, int nout, int EW) {
  const auto [p, q] = div_tw.divmod(min(o, nout - 1));
  return StripOutput{p, q, (p * EW + q) * 32};
}

// The byte offsets, in a staged tile EW pixels wide, of the pixels of the OUTPUTS outputs a thread
// owns in the round from `base`: outputs base + r * slots + slot (strip_output's).
template <int OUTPUTS>
__device__ __forceinline__ void round_pixel_bytes(int (&bytes)[OUTPUTS], const FastDiv& div_tw, int base, int slots,
                                                  int slot, int nout, int EW) {
#pragma unroll
  for (int r = 0; r < OUTPUTS; ++r) bytes[r] = strip_output(div_tw, base + r * slots + slot, nout, EW).byte;
}

// Warp 0 of a block over channels [c0, c0 + CB): block_extent, and per quarter of
// V channels whether they share the first one's points (`same`: the tables' same-as-previous flags).
template <int V>
__device__ __forceinline__ void block_channel_summary(const int* __restrict__ npts, const int2* __restrict__ halo,
                                                      const int* __restrict__ same, int c0, int CB, int C, int* s_np,
                                                      int* s_ph, int* s_pw, int* s_uniform) {
  if (threadIdx.x >= 32) return;
  const int k = static_cast<int>(threadIdx.x);
  const bool same_k = k < CB && c0 + k < C && same[c0 + k] != 0;  // in flight with block_extent's loads
  block_extent(npts, halo, c0, CB, C, s_np, s_ph, s_pw);
  const bool u = quarter_uniform<V>(same_k, c0, C);
  if (k < 4) s_uniform[k] = u;
}

}  // namespace cuda
}  // namespace mmo1d
