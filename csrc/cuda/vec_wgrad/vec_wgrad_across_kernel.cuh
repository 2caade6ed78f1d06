// The channels_last weight gradient with the points across the pixel slots: each thread sums one
// point per pass over its warp's share of the tile's outputs, so no sum over the slots runs per
// point (stride 1).
#pragma once

#include "vec_wgrad_kernel.cuh"

namespace mmo1d {
namespace cuda {

// Where vec_wgrad_across_kernel's dynamic shared memory holds, for `points` points a block, CB
// channels and up to nout outputs a tile: the points' offsets (from byte 0), the outputs' offsets,
// dy in float32, and one region that holds the x tile and then the warps' sums (byte offsets).
struct AcrossLayout {
  int64_t outx, dy, region;
};

__host__ __device__ __forceinline__ AcrossLayout across_layout(int points, int CB, int64_t nout) {
  const int64_t outx = align16(sizeof(int) * points * CB);
  const int64_t dy = outx + int64_t(align16(sizeof(int) * nout));
  return AcrossLayout{outx, dy, dy + int64_t(align16(sizeof(float) * nout * CB))};
}

// Bytes of that memory for output tiles of up to TH x TW whose staged halo is at most (ph, pw)
// (clipped to the plane): the x tile's pitch is one wider than the tile, for its parity.
template <typename scalar_t>
int64_t vec_wgrad_across_bytes(int TH, int TW, int ph, int pw, int points) {
  constexpr int CB = VecTraits<scalar_t>::kCB;
  const int64_t tile = int64_t(TH + 2 * ph) * (TW + 2 * pw + 1) * 32;
  const int64_t sums = int64_t(kFastThreads / 32) * points * CB * sizeof(float);
  return across_layout(points, CB, int64_t(TH) * TW).region + std::max(tile, sums);
}

// dy of the tile's nout outputs (tw a row, from (p0, q0) of a W-wide image) at channels [c0, c0 + CB)
// into D (float32, CB per output), 16 bytes a thread and step (C % CB == 0, aligned); bsum[k] adds
// this thread's values of channel (threadIdx.x & 1) * CB / 2 + k (blockDim.x is even).
template <typename scalar_t>
__device__ __forceinline__ void stage_dy_vec(float* __restrict__ D, const scalar_t* __restrict__ dy, int C, int W,
                                             int c0, int p0, int q0, int tw, int nout, float (&bsum)[8]) {
  constexpr int CB = VecTraits<scalar_t>::kCB, E = CB / 2, V = VecTraits<scalar_t>::kV;
  const int half = threadIdx.x & 1;
  for (int e = threadIdx.x; e < 2 * nout; e += blockDim.x) {
    const int o = e >> 1, r = o / tw;
    const scalar_t* src = dy + (int64_t(p0 + r) * W + q0 + o - r * tw) * C + c0 + half * E;
    float v[E];
#pragma unroll
    for (int u = 0; u < E / V; ++u) {
      float f[V];
      load_vec<scalar_t, V>(src + u * V, f);
#pragma unroll
      for (int k = 0; k < V; ++k) v[u * V + k] = f[k];
    }
#pragma unroll
    for (int u = 0; u < E / 4; ++u) {
      *reinterpret_cast<float4*>(D + o * CB + half * E + 4 * u) =
          make_float4(v[4 * u], v[4 * u + 1], v[4 * u + 2], v[4 * u + 3]);
    }
#pragma unroll
    for (int k = 0; k < E; ++k) bsum[k] += v[k];
  }
}

// Weight-gradient partial sums of an output tile of g's grid, CB channels, images in chunks of
// params.io.chunk, 8 PASSES points a block (blockIdx.y: the slice of points [blockIdx.y * that,
// + that) of tables of g.K rows; the bias gradient rides along with the first slice). The x tile's
// halo is clipped to the plane (a point with |dh| >= H or |dw| >= W reads only zero padding, its sum
// is 0); its part beyond the plane is zeroed once, and per image the block copies the part inside the
// plane (cp.async) while it converts the tile's dy to float32. Warp w takes the tile's outputs w,
// w + 8, ... and, in each of the PASSES passes, lane slot s the point 8 pass + s: per output one
// broadcast load of dy for the eight slots, then per pass one load of x and V multiply-adds. At the
// end the warps' sums are added in warp order (deterministic) into partial[c][part][point], part =
// tile * chunks + chunk.
// The x tile's pitch is odd, or even where the block's lines are diagonal (equal halos), so that the
// eight slots' pixels of consecutive points along the line fall on distinct 32-byte bank groups (two
// ways at most).
template <typename scalar_t, int PASSES>
__global__ void __launch_bounds__(kFastThreads, 3) vec_wgrad_across_kernel(const VecWgradParams<scalar_t> params) {
  constexpr int CB = VecTraits<scalar_t>::kCB, V = VecTraits<scalar_t>::kV, PCAP = 8 * PASSES;
  constexpr int kWarps = kFastThreads / 32;
  const FastGeometry g = params.g;
  const int H = g.H, W = g.W, nmax = g.TH * g.TW;  // the layout's outputs: the largest tile's
  const WgradPart part = wgrad_part(g.tiles, params.io.N, params.io.chunk);
  if (params.skip != nullptr && params.skip[part.c]) return;
  const auto [p0, q0, th, tw] = output_tile(g, part.tile);
  const int nout = th * tw;
  const int j0 = blockIdx.y * PCAP;
  const PointWgradTables tables = params.tables.of_class(0, g.C, g.K);
  float* __restrict__ partial = params.io.partial;
  const int c0 = part.c * CB;
  const int lane = threadIdx.x & 31, quarter = lane & 3, slot = lane >> 2, warp = threadIdx.x >> 5;
  const int kq = quarter * V;
  extern __shared__ __align__(16) unsigned char smem[];

  __shared__ int s_np, s_ph, s_pw, s_uniform[4];
  __shared__ float s_bias[kWarps][CB];
  block_channel_summary<V>(tables.npts, tables.halo, tables.same, c0, CB, g.C, &s_np, &s_ph, &s_pw, s_uniform);
  __syncthreads();
  const int np = min(max(s_np - j0, 0), PCAP);
  const bool with_bias = params.bpartial != nullptr && blockIdx.y == 0;
  if (np == 0 && !with_bias) return;  // a slice beyond the block's points
  const int ph = min(s_ph, H - 1), pw = min(s_pw, W - 1);
  const int EW = tw + 2 * pw, rows = th + 2 * ph;
  const bool diagonal = s_ph == s_pw && s_ph > 0;
  const int pitch = EW + ((EW & 1) == (diagonal ? 1 : 0) ? 1 : 0);  // odd, or even for diagonal lines
  const AcrossLayout layout = across_layout(PCAP, CB, nmax);
  int* soff = reinterpret_cast<int*>(smem);
  int* outx = reinterpret_cast<int*>(smem + layout.outx);
  float* D = reinterpret_cast<float*>(smem + layout.dy);
  unsigned char* region = smem + layout.region;
  scalar_t* S = reinterpret_cast<scalar_t*>(region);
  // soff[point][channel]: the point's pixel offset in the x tile from its output's, or -1 where the
  // channel has no such point or it lies beyond the plane.
  for (int e = threadIdx.x; e < PCAP * CB; e += blockDim.x) {
    const int j = e / CB, k = e - j * CB, ch = c0 + k;
    int v = -1;
    if (j < np && ch < g.C && j0 + j < tables.npts[ch]) {
      const int2 o = tables.off[int64_t(ch) * g.K + j0 + j];
      if (abs(o.x) < H && abs(o.y) < W) v = (o.x + ph) * pitch + (o.y + pw);
    }
    soff[e] = v;
  }
  for (int o = threadIdx.x; o < nout; o += blockDim.x) outx[o] = ((o / tw) * pitch + o % tw) * 32;
  // The tile's part inside the plane, rows [r0, r1) x columns [s0, s1) of the tile, is copied per
  // image; the rest is zeroed here, once.
  const int r0 = max(ph - p0, 0), r1 = min(rows, H - p0 + ph), s0 = max(pw - q0, 0), s1 = min(EW, W - q0 + pw);
  for (int e = threadIdx.x; e < rows * pitch; e += blockDim.x) {
    const int i = e / pitch, j = e - i * pitch;
    if (i < r0 || i >= r1 || j < s0 || j >= s1) {
      uint4* z = reinterpret_cast<uint4*>(region + e * 32);
      z[0] = make_uint4(0, 0, 0, 0);
      z[1] = make_uint4(0, 0, 0, 0);
    }
  }
  __syncthreads();
  // This thread's point per pass as a byte offset in the x tile from its output's pixel (its V
  // channels' one where they share their points, else one per channel) and whether it exists: a
  // missing one reads the output's own pixel, and its sums are dropped at the end (no test per
  // output).
  const bool uniform = s_uniform[quarter] != 0;
  const int own = ph * pitch + pw;
  int xb[PASSES][V];
  unsigned valid = 0;
#pragma unroll
  for (int pass = 0; pass < PASSES; ++pass) {
#pragma unroll
    for (int k = 0; k < V; ++k) {
      const int off = soff[(pass * 8 + slot) * CB + kq + (uniform ? 0 : k)];
      xb[pass][k] = (off >= 0 ? off : own) * 32 + (kq + (uniform ? 0 : k)) * int(sizeof(scalar_t));
      valid |= (off >= 0 ? 1u : 0u) << (pass * V + k);
    }
  }
  float acc[PASSES][V];
#pragma unroll
  for (int pass = 0; pass < PASSES; ++pass) {
#pragma unroll
    for (int k = 0; k < V; ++k) acc[pass][k] = 0.0f;
  }
  // The bias gradient: channels (threadIdx.x & 1) * CB / 2 + k where dy is staged 16 bytes a thread,
  // else channel threadIdx.x % CB (bsum[0]).
  float bsum[8] = {};
  const int n_end = part.end_image(params.io.N, params.io.chunk);
  for (int n = part.first_image(params.io.chunk); n < n_end; ++n) {
    __syncthreads();  // the previous image's reads of S and D are done
    const int64_t image = int64_t(n) * H * W * g.C;
    scalar_t* inside = S + (r0 * pitch + s0) * CB;
    if (params.vec_ok) {
      issue_nhwc_tile<scalar_t>(inside, params.io.x + image, g.C, H, W, c0, p0 - ph + r0, q0 - pw + s0, r1 - r0,
                                s1 - s0, pitch, W, 1);
      stage_dy_vec<scalar_t>(D, params.io.dy + image, g.C, W, c0, p0, q0, tw, nout, bsum);
      cp_async_wait_all();
    } else {
      stage_nhwc_tile<scalar_t>(inside, params.io.x + image, g.C, H, W, c0, p0 - ph + r0, q0 - pw + s0, r1 - r0,
                                s1 - s0, false, pitch, W, 1);
      for (int e = threadIdx.x; e < nout * CB; e += blockDim.x) {
        const int o = e / CB, ch = c0 + (e - o * CB);
        const int64_t pix = int64_t(p0 + o / tw) * W + q0 + o % tw;
        const float v = ch < g.C ? static_cast<float>(params.io.dy[image + pix * g.C + ch]) : 0.0f;
        D[e] = v;
        bsum[0] += v;
      }
    }
    __syncthreads();
    const unsigned char* Sb = reinterpret_cast<const unsigned char*>(S);
    // Per output one broadcast load of dy, then per pass this thread's point's x (load_x) and V
    // multiply-adds.
    auto accumulate = [&](auto load_x) {
      for (int o = warp; o < nout; o += kWarps) {
        float dv[V];
        load_floats<V>(D + o * CB + kq, dv);
        const unsigned char* px = Sb + outx[o];
#pragma unroll
        for (int pass = 0; pass < PASSES; ++pass) {
          float xv[V];
          load_x(px, pass, xv);
#pragma unroll
          for (int k = 0; k < V; ++k) acc[pass][k] += dv[k] * xv[k];
        }
      }
    };
    if (uniform) {
      accumulate([&](const unsigned char* px, int pass, float(&xv)[V]) {
        load_vec<scalar_t, V>(reinterpret_cast<const scalar_t*>(px + xb[pass][0]), xv);
      });
    } else {
      // The quarter's channels straddle two angle groups: a load per channel.
      accumulate([&](const unsigned char* px, int pass, float(&xv)[V]) {
#pragma unroll
        for (int k = 0; k < V; ++k) xv[k] = static_cast<float>(*reinterpret_cast<const scalar_t*>(px + xb[pass][k]));
      });
    }
  }
  // Each warp's bias sums: lanes of one parity hold the same channels (16-byte staging), lanes
  // l, l + CB, ... the same channel (element staging); lane 0/1 (lanes < CB) keep the warp's.
  if (params.vec_ok) {
#pragma unroll
    for (int k = 0; k < CB / 2; ++k) {
      for (int m = 2; m < 32; m *= 2) bsum[k] += __shfl_xor_sync(0xffffffffu, bsum[k], m);
    }
    if (lane < 2) {
#pragma unroll
      for (int k = 0; k < CB / 2; ++k) s_bias[warp][lane * (CB / 2) + k] = bsum[k];
    }
  } else {
    for (int m = CB; m < 32; m *= 2) bsum[0] += __shfl_xor_sync(0xffffffffu, bsum[0], m);
    if (lane < CB) s_bias[warp][lane] = bsum[0];
  }
  __syncthreads();  // every read of S is done: its region takes the warps' sums
  float* red = reinterpret_cast<float*>(region);  // [warp][point][channel]
#pragma unroll
  for (int pass = 0; pass < PASSES; ++pass) {
#pragma unroll
    for (int k = 0; k < V; ++k) {
      const bool has = (valid >> (pass * V + (uniform ? 0 : k))) & 1u;
      red[(warp * PCAP + pass * 8 + slot) * CB + kq + k] = has ? acc[pass][k] : 0.0f;
    }
  }
  __syncthreads();
  for (int e = threadIdx.x; e < np * CB; e += blockDim.x) {
    const int j = e / CB, k = e - j * CB, ch = c0 + k;
    if (ch >= g.C || j0 + j >= tables.npts[ch]) continue;
    float v = 0.0f;
    for (int w = 0; w < kWarps; ++w) v += red[(w * PCAP + j) * CB + k];
    partial[part.row(ch) * g.K + j0 + j] = v;
  }
  if (with_bias && threadIdx.x < CB && c0 + threadIdx.x < g.C) {
    float v = 0.0f;
    for (int w = 0; w < kWarps; ++w) v += s_bias[w][threadIdx.x];
    params.bpartial[part.row(c0 + threadIdx.x)] = v;
  }
}

}  // namespace cuda
}  // namespace mmo1d
