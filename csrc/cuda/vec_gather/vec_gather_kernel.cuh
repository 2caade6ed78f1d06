// The channels_last vector gather: every tap of outputs 64 pixels apart, forward / input gradient
// (any C).
#pragma once

#include "../common/channels_last.cuh"

namespace mmo1d {
namespace cuda {

// The arguments of vec_gather_nhwc_kernel, built by its launcher: out = the gather of src at
// offsets sign * off (tables.w: the merged weights).
template <typename scalar_t>
struct VecGatherParams {
  GatherIO<scalar_t> io;
  PointTableView<float> tables;
  FastGeometry g;
  int sign;
  bool vec_ok;
  int tile_bytes;
};

// One block: image n, an output tile, CB channels. Lane = 4 * pixel slot + channel quarter;
// the thread owns OUTPUTS outputs 64 pixels apart (consecutive pixels across a warp's slots).
template <typename scalar_t, int OUTPUTS>
__global__ void __launch_bounds__(kFastThreads, 3) vec_gather_nhwc_kernel(const VecGatherParams<scalar_t> params) {
  scalar_t* __restrict__ out = params.io.out;
  const scalar_t* __restrict__ bias = params.io.bias;
  const int2* __restrict__ toff = params.tables.off;
  const float* __restrict__ tw_ = params.tables.w;
  const int* __restrict__ tnpts = params.tables.npts;
  const FastGeometry g = params.g;
  const int sign = params.sign;
  const bool vec_ok = params.vec_ok;
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
  block_channel_summary<V>(tnpts, params.tables.halo, params.tables.same, c0, CB, g.C, &s_np, &s_ph, &s_pw, s_uniform);
  __syncthreads();
  const int np = s_np, ph = s_ph, pwid = s_pw;
  const int EW = twd + 2 * pwid;
  // Output rows per strip: the whole tile, or fewer when channels at different angles together
  // need a larger halo than one line at any angle (the allocation's bound).
  const int strip = min(th, params.tile_bytes / (32 * EW) - 2 * ph);
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
    stage_nhwc_tile<scalar_t>(S, params.io.src + n * g.H * g.W * g.C, g.C, g.H, g.W, c0, p0 + ps - ph, q0 - pwid,
                              sh + 2 * ph, EW, vec_ok, EW, g.W, 1);
    __syncthreads();
    const int nout = sh * twd;
    for (int base = 0; base < nout; base += slots * OUTPUTS) {
      int sbB[OUTPUTS];  // byte offset of each output's pixel in S
      round_pixel_bytes(sbB, div_tw, base, slots, slot, nout, EW);
      float acc[OUTPUTS][V];
#pragma unroll
      for (int r = 0; r < OUTPUTS; ++r) {
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
          for (int r = 0; r < OUTPUTS; ++r) {
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
            const unsigned char* St =
                reinterpret_cast<const unsigned char*>(S + quarter * V + k) + soff[j * CB + quarter * V + k] * 32;
            const float w = sw[j * CB + quarter * V + k];
#pragma unroll
            for (int r = 0; r < OUTPUTS; ++r) {
              acc[r][k] += w * static_cast<float>(*reinterpret_cast<const scalar_t*>(St + sbB[r]));
            }
          }
        }
      }
#pragma unroll
      for (int r = 0; r < OUTPUTS; ++r) {
        const int o = base + r * slots + slot;
        if (o >= nout) continue;
        const auto [p, q] = div_tw.divmod(o);
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

}  // namespace cuda
}  // namespace mmo1d
