// The NCHW segment-window gather (float32, float16, bfloat16; stride 1) over a staged plane tile,
// forward / input gradient, and the staging and windows the weight gradient shares.
#pragma once

#include "../common/geometry.cuh"
#include "../common/tables.cuh"
#include "../common/tap_weights.cuh"
#include "../common/window_walk.cuh"

namespace mmo1d {
namespace cuda {

// ----------------------------------------------------------------------------------------------
// Stride-1 fast paths (float32, float16, bfloat16; forward and input gradient).
//
// NCHW: the distinct points of a channel's line are split into segments, runs of points that follow
// each other by one step u along one of four axes (0, 90, 45 or 135 degrees; the table kernel picks
// the axis that gives the fewest segments). A thread owns OUTPUTS outputs that also follow each
// other by u, so for a segment of L points it loads a window of OUTPUTS + L - 1 source values once
// and does OUTPUTS * L multiply-adds from registers (the window rotates through OUTPUTS registers):
// OUTPUTS times fewer shared-memory loads than one load per tap and output on straight and diagonal
// lines, about twice fewer on the in-between angles.
//
// NHWC: a tile of 32 bytes of channels per pixel (16 half-precision or 8 float32 channels) is
// copied to shared memory as it is (cp.async, zero-filled outside the image), four lanes share a
// pixel and each converts and accumulates a vector of channels; eight pixels per warp make the
// shared-memory reads conflict-free. When C is a multiple of the channel block, the gather uses
// the segment windows of the NCHW path on such tiles (win_gather_nhwc_kernel); otherwise, and for
// the weight gradient, a thread reads every tap of outputs 64 pixels apart.
// ----------------------------------------------------------------------------------------------

template <int OUTPUTS>
__device__ __forceinline__ void run_segment(const float* __restrict__ S, int a, int axis_step, int L,
                                            const float* __restrict__ w, float (&acc)[OUTPUTS]) {
  float v[OUTPUTS];
  walk_segment<OUTPUTS, false>(
      S + a, axis_step, L, v, [](const float* p, float& dst) { dst = *p; },
      [&](int l, auto i) {
        constexpr int I = decltype(i)::value;
        const float wl = w[l];
#pragma unroll
        for (int r = 0; r < OUTPUTS; ++r) acc[r] += wl * v[(I + r) % OUTPUTS];
      });
}

// Copies rows [gi0, gi0 + EH) x columns [gj0, gj0 + EW) of an H x W plane into S (row pitch
// `pitch`), converted to float, zero outside the plane. Each warp copies rows; every lane keeps
// several loads in flight.
template <typename scalar_t>
__device__ __forceinline__ void stage_plane(float* __restrict__ S, int pitch, const scalar_t* __restrict__ src, int H,
                                            int W, int gi0, int gj0, int EH, int EW) {
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
    f[0] = a.x;
    f[1] = a.y;
    f[2] = a.z;
    f[3] = a.w;
    f[4] = b.x;
    f[5] = b.y;
    f[6] = b.z;
    f[7] = b.w;
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

// One block: a tile of one (image, channel) plane. Weights: tables.segw, merged; or, when it is null,
// the (C, K) weight taps.w merged by the block through the tables' tap -> slot map taps.tap_sp
// (stage_merged_weights; one class of rounded taps).
// The tensors' pointers are parameters of their own, __restrict__ (not a GatherIO member): with src
// and out in a struct nvcc may no longer take them for distinct arrays, and the float32 kernel took 54
// registers instead of 48 and ran 2-4% slower (sm_90; docs/development.md).
template <typename scalar_t>
__global__ void __launch_bounds__(kFastThreads)
    seg_gather_nchw_kernel(const scalar_t* __restrict__ src, scalar_t* __restrict__ out,
                           const scalar_t* __restrict__ bias, const SegTableView tables, const FastGeometry g,
                           const TapWeights<scalar_t> taps) {
  const SegInfo* __restrict__ info = tables.info;
  const int2* __restrict__ halo = tables.halo;
  constexpr int OUTPUTS = kSegR;
  extern __shared__ __align__(16) unsigned char smem[];
  const int64_t plane = blockIdx.x / g.tiles;
  const int tile = static_cast<int>(blockIdx.x - plane * g.tiles);
  const int c = static_cast<int>(plane % g.C);
  const auto [p0, q0, th, tw] = output_tile(g, tile);
  const SegInfo inf = info[c];
  const int2 hl = halo[c];
  const int EH = seg_tile_rows(th, hl.x);
  const int EW = seg_tile_cols(tw, hl.y);
  const int pitch = EW | 1;
  int4* seg_smem = reinterpret_cast<int4*>(smem);
  float* sw = reinterpret_cast<float*>(smem + align16(sizeof(int4) * g.K));
  float* S = reinterpret_cast<float*>(smem + align16(sizeof(int4) * g.K) + align16(sizeof(float) * g.K));
  stage_channel_segments(seg_smem, tables.segs + int64_t(c) * g.K, inf.nseg, pitch);
  if (tables.segw != nullptr) {
    stage_channel_weights(sw, tables.segw + int64_t(c) * g.K, inf.npts);
  } else {
    stage_merged_weights<scalar_t, 1>(sw, taps.w, taps.tap_sp, c, g.K, taps.residual);
  }
  stage_plane<scalar_t>(S, pitch, src + plane * g.H * g.W, g.H, g.W, p0 - hl.x, q0 - hl.y - (OUTPUTS - 1), EH,
                        EW);
  __syncthreads();

  int ui, uj;
  mode_step(inf.mode, &ui, &uj);
  const int axis_step = ui * pitch + uj;
  const int ntasks = seg_ntasks(inf.mode, th, tw);
  const float b = bias != nullptr ? static_cast<float>(bias[c]) : 0.0f;
  scalar_t* op = out + plane * g.H * g.W;
  const bool vec_rows = inf.mode == 0 && rows_vectorizable<scalar_t>(out, g.W, q0);
  for (int k = threadIdx.x; k < ntasks; k += blockDim.x) {
    int p, q;
    seg_task(inf.mode, k, th, tw, &p, &q);
    const int b0 = (p + hl.x) * pitch + q + hl.y + (OUTPUTS - 1);
    float acc[OUTPUTS];
#pragma unroll
    for (int r = 0; r < OUTPUTS; ++r) acc[r] = b;
    for (int s = 0; s < inf.nseg; ++s) {
      const int4 e = seg_smem[s];
      run_segment<OUTPUTS>(S, b0 + e.x, axis_step, e.y, sw + e.z, acc);
    }
    if (vec_rows && q + OUTPUTS <= tw) {
      // A row task's outputs are contiguous: 16-byte stores instead of one sector per lane and r.
      store8<scalar_t>(op + int64_t(p0 + p) * g.W + q0 + q, acc);
      continue;
    }
#pragma unroll
    for (int r = 0; r < OUTPUTS; ++r) {
      const int pr = p + r * ui, qr = q + r * uj;
      if (pr < th && qr >= 0 && qr < tw) op[int64_t(p0 + pr) * g.W + q0 + qr] = static_cast<scalar_t>(acc[r]);
    }
  }
}

}  // namespace cuda
}  // namespace mmo1d
