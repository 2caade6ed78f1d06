// The channels_last window weight gradient (stride 1, C a multiple of the channel block, aligned):
// the segment windows of the window gather (nhwc_window_kernel.cuh) turned around, with the points
// shared out between the warps, for tables whose blocks of channels mostly walk one list of points
// (the interpolated taps' united points, interp_union.cuh).
#pragma once

#include "nhwc_window_kernel.cuh"  // load_channels, choose_subtile

namespace mmo1d {
namespace cuda {

// Outputs per task: a point costs one vector load for R * V multiply-adds.
constexpr int kWinWgradR = 8;
// Points per warp (a lane keeps a sum per point for each of its channels) and per block slice.
constexpr int kWinWgradPointsPerWarp = 8;
constexpr int kWinWgradPoints = kWinWgradPointsPerWarp * (kFastThreads / 32);

// Where a weight-gradient block works: blockIdx.x runs over tiles, then image chunks, then blocks
// of CB channels; blockIdx.y is a slice of the points.
struct WgradBlock {
  int c0, tile, ck, p0, q0, th, tw;
};

template <int CB>
__device__ __forceinline__ WgradBlock wgrad_block(const FastGeometry& g, int chunks) {
  WgradBlock b;
  b.tile = blockIdx.x % g.tiles;
  b.ck = (blockIdx.x / g.tiles) % chunks;
  b.c0 = static_cast<int>(blockIdx.x / (g.tiles * chunks)) * CB;
  b.p0 = (b.tile / g.tiles_w) * g.TH;
  b.q0 = (b.tile % g.tiles_w) * g.TW;
  b.th = min(g.TH, g.H - b.p0);
  b.tw = min(g.TW, g.W - b.q0);
  return b;
}

// One lane's part of a staged sub-tile (sth x stw outputs; dys: dy at its first output, channel
// c0 of the block) for NV channels from channel kc that walk one list: the warp's points [0, cnt)
// of the list's slice are tab[j] (the byte offset of the point in S, plus 1 where a run starts; CNT:
// cnt known at compile time, 0: not), and a task is R outputs (p, q) + r * u along the list's axis
// (mode), their dy in registers. Along a run a point needs one new source vector: output r reads
// the vector r steps further, which the window of R registers holds from the previous points (a
// window rotated by the point's index j, known at compile time). acc[j][k] += sum_r dy[r][k]
// x[r][k] over the lane's tasks (slot, slot + 8, ...).
template <typename scalar_t, int R, int NV, int CNT>
__device__ __forceinline__ void win_wgrad_tasks(const scalar_t* __restrict__ S, const scalar_t* __restrict__ dys,
                                                int kc, int mode, const int* __restrict__ tab, int cnt, int sth,
                                                int stw, int ph, int pw, int pitch, int W, int C, int slot,
                                                float (&acc)[kWinWgradPointsPerWarp][NV]) {
  constexpr int PW = kWinWgradPointsPerWarp;
  if constexpr (CNT > 0) cnt = CNT;
  int ui, uj;
  mode_step(mode, &ui, &uj);
  const int ustep = (ui * pitch + uj) * 32;
  const int ntasks = seg_ntasks<R>(mode, sth, stw);
  const int64_t dstep = int64_t(ui * W + uj) * C;  // dy's step along a task
  const unsigned char* Sc = reinterpret_cast<const unsigned char*>(S) + kc * sizeof(scalar_t);
  for (int t = slot; t < ntasks; t += 8) {
    int p, q;
    seg_task<R>(mode, t, sth, stw, &p, &q);
    const scalar_t* dyt = dys + (int64_t(p) * W + q) * C + kc;
    float gv[R][NV];
#pragma unroll
    for (int r = 0; r < R; ++r) {
      const int pr = p + r * ui, qr = q + r * uj;
      if (pr < sth && qr >= 0 && qr < stw) {
        load_channels<scalar_t, NV>(reinterpret_cast<const unsigned char*>(dyt + r * dstep), gv[r]);
      } else {
#pragma unroll
        for (int k = 0; k < NV; ++k) gv[r][k] = 0.0f;
      }
    }
    const unsigned char* St = Sc + ((p + ph) * pitch + q + pw + (R - 1)) * 32;
    float v[R][NV];
    static_for<0, PW>([&](auto jc) {
      constexpr int J = decltype(jc)::value;
      if (CNT > 0 ? J < CNT : J < cnt) {
        const int e = tab[J];
        const unsigned char* P = St + (e & ~1);
        if (J == 0 || (e & 1) != 0) {  // a run starts: the vectors of outputs 0 .. R - 2
#pragma unroll
          for (int m = 0; m < R - 1; ++m) load_channels<scalar_t, NV>(P + m * ustep, v[(J + m) % R]);
        }
        load_channels<scalar_t, NV>(P + (R - 1) * ustep, v[(J + R - 1) % R]);
#pragma unroll
        for (int k = 0; k < NV; ++k) {
#pragma unroll
          for (int r = 0; r < R; ++r) acc[J][k] += gv[r][k] * v[(J + r) % R][k];
        }
      }
    });
  }
}

// win_wgrad_tasks for the V channels of a quarter, with cnt (1 .. PW) known at compile time.
template <typename scalar_t, int R, int V, int CNT = kWinWgradPointsPerWarp>
__device__ __forceinline__ void win_wgrad_tasks_v(const scalar_t* __restrict__ S, const scalar_t* __restrict__ dys,
                                                  int kc, int mode, const int* __restrict__ tab, int cnt, int sth,
                                                  int stw, int ph, int pw, int pitch, int W, int C, int slot,
                                                  float (&acc)[kWinWgradPointsPerWarp][V]) {
  if (cnt < CNT) {
    if constexpr (CNT > 1) {
      win_wgrad_tasks_v<scalar_t, R, V, CNT - 1>(S, dys, kc, mode, tab, cnt, sth, stw, ph, pw, pitch, W, C, slot, acc);
    } else {
      win_wgrad_tasks<scalar_t, R, V, 0>(S, dys, kc, mode, tab, cnt, sth, stw, ph, pw, pitch, W, C, slot, acc);
    }
    return;
  }
  win_wgrad_tasks<scalar_t, R, V, CNT>(S, dys, kc, mode, tab, cnt, sth, stw, ph, pw, pitch, W, C, slot, acc);
}

// Weight-gradient partial sums at the points of segment tables (SegTables' layout, the interpolated
// taps' united points: interp_union.cuh, interp_segments.cuh): partial[c][part][point_at[c][slot]]
// for every point slot of channel c (part = tile * chunks + chunk), the sum over the block's outputs
// and images of dy * x at the point; with bpartial, bpartial[c][part] the sum of dy. One block: CB
// channels, an output tile of g's plane, a chunk of images, and (blockIdx.y) a slice of the slots
// (split evenly over gridDim.y slices of at most kWinWgradPoints). The tile is staged (cp.async) in sub-tiles
// that fit tile_bytes with the block's halo (choose_subtile). Each warp takes an equal share of the
// slice's points over every output of the sub-tile, a lane's eight pixel slots the tasks, so that a
// lane keeps its sums per point in registers until the end, when the eight slots add theirs in a
// fixed order. A block whose channels all have the same segments (SegInfo::same) walks them with one
// vector load per point for V channels; otherwise each quarter of V channels that shares its
// segments does so, and the channels of the other quarters walk their own one at a time.
template <typename scalar_t, int R>
__global__ void __launch_bounds__(kFastThreads, 2)
    win_wgrad_nhwc_kernel(const scalar_t* __restrict__ x, const scalar_t* __restrict__ dy,
                          const SegInfo* __restrict__ info, const int4* __restrict__ segs,
                          const int* __restrict__ point_at, const int2* __restrict__ halo, float* __restrict__ partial,
                          float* __restrict__ bpartial, const FastGeometry g, int N, int chunk, int tile_bytes) {
  constexpr int CB = VecTraits<scalar_t>::kCB, V = VecTraits<scalar_t>::kV, PW = kWinWgradPointsPerWarp;
  constexpr int pcap = kWinWgradPoints;
  extern __shared__ __align__(16) unsigned char smem[];
  const int chunks = (N + chunk - 1) / chunk;
  const WgradBlock blk = wgrad_block<CB>(g, chunks);
  const int c0 = blk.c0;
  const int lane = threadIdx.x & 31, quarter = lane & 3, warp = threadIdx.x >> 5, nwarps = blockDim.x >> 5;
  const int slot = lane >> 2;  // one of the warp's 8 pixel slots
  const bool with_bias = bpartial != nullptr && blockIdx.y == 0;

  __shared__ int s_united, s_np, s_ph, s_pw, s_sh, s_sw, s_uniform[4];
  __shared__ float s_bias[kFastThreads / 32][CB];
  __shared__ int tab[CB][pcap];  // per channel (only the first when united): tab entries of the slice's slots
  if (threadIdx.x < 32) {
    // Warp 0: the block's halo and most points, whether all its channels share their segments, per
    // quarter whether its V channels do, and the sub-tile.
    int ph = 0, pw = 0, np = 0, same = 1;
    if (lane < CB) {
      const SegInfo f = info[c0 + lane];
      np = f.npts;
      same = lane == 0 || f.same != 0;
      const int2 hl = halo[c0 + lane];
      ph = hl.x;
      pw = hl.y;
    }
    ph = warp_max(ph);
    pw = warp_max(pw);
    np = warp_max(np);
    const int united = __all_sync(0xffffffffu, same);
    const int2 sub = choose_subtile<R>(blk.th, blk.tw, ph, pw, info[c0].mode, min(np, pcap), tile_bytes, 8);
    if (lane == 0) {
      s_united = united;
      s_np = np;
      s_ph = ph;
      s_pw = pw;
      s_sh = sub.x;
      s_sw = sub.y;
    }
    if (lane < 4) s_uniform[lane] = quarter_uniform<V>([&](int c) { return info[c].same; }, c0 + lane * V, g.C);
  }
  __syncthreads();
  // The slice's slots (of the most any channel has): the slots split evenly over the slices.
  const int per = (s_np + gridDim.y - 1) / gridDim.y;  // <= pcap: s_np <= the tables' rows
  const int j0 = blockIdx.y * per;
  const int np = min(max(s_np - j0, 0), per);
  if (np == 0 && !with_bias) return;  // a slice beyond the block's points
  const bool united = s_united != 0;
  const int ph = s_ph, pw = s_pw, sh = s_sh, sw_ = s_sw;
  const int pitch = seg_tile_cols<R>(sw_, pw) | 1;
  // The tab entries of the slice's slots, channel by channel: a slot beyond a channel's points
  // reads the centre (its sums are not written).
  const int ntab = united ? 1 : CB;
  for (int e = threadIdx.x; e < ntab * pcap; e += blockDim.x) tab[e / pcap][e % pcap] = 1;
  __syncthreads();
  for (int e = threadIdx.x; e < ntab * g.K; e += blockDim.x) {
    const int k = e / g.K, s = e - k * g.K, c = c0 + k;
    const SegInfo f = info[c];
    if (s >= f.nseg) continue;
    int ui, uj;
    mode_step(f.mode, &ui, &uj);
    const int4 sg = segs[int64_t(c) * g.K + s];  // first point (dh, dw), length, first slot
    for (int l = max(j0 - sg.w, 0); l < sg.z && sg.w + l < j0 + np; ++l) {
      tab[k][sg.w + l - j0] = ((sg.x + l * ui) * pitch + sg.y + l * uj) * 32 + (l == 0 ? 1 : 0);
    }
  }
  // The warp's share of the slice's slots: [a, a + cnt).
  const int share = (np + nwarps - 1) / nwarps;
  const int a = min(warp * share, np), cnt = min(share, np - a);
  const int k0 = quarter * V;
  float acc[PW][V];
#pragma unroll
  for (int j = 0; j < PW; ++j) {
#pragma unroll
    for (int k = 0; k < V; ++k) acc[j][k] = 0.0f;
  }
  float bacc[V];  // the bias gradient: each warp sums dy over an eighth of the outputs
#pragma unroll
  for (int k = 0; k < V; ++k) bacc[k] = 0.0f;
  const bool uniform = s_uniform[quarter] != 0;
  const SegInfo fq = info[c0 + k0];
  const int subs_w = (blk.tw + sw_ - 1) / sw_, subs = (blk.th + sh - 1) / sh * subs_w;
  const int n_end = min(N, (blk.ck + 1) * chunk);
  for (int n = blk.ck * chunk; n < n_end; ++n) {
    const scalar_t* img = x + int64_t(n) * g.H * g.W * g.C;
    for (int sub = 0; sub < subs; ++sub) {
      const int ps = (sub / subs_w) * sh, qs = (sub % subs_w) * sw_;
      const int sth = min(sh, blk.th - ps), stw = min(sw_, blk.tw - qs);
      __syncthreads();  // tables written; the previous sub-tile's reads of S are done
      stage_nhwc_tile<scalar_t>(reinterpret_cast<scalar_t*>(smem), img, g.C, g.H, g.W, c0, blk.p0 + ps - ph,
                                blk.q0 + qs - pw - (R - 1), seg_tile_rows<R>(sth, ph), seg_tile_cols<R>(stw, pw), true,
                                pitch, g.W, 1);
      __syncthreads();
      const scalar_t* S = reinterpret_cast<const scalar_t*>(smem);
      const scalar_t* dys = dy + ((int64_t(n) * g.H + blk.p0 + ps) * g.W + blk.q0 + qs) * g.C + c0;
      if (with_bias) {
        for (int o = warp * 8 + slot; o < sth * stw; o += nwarps * 8) {
          const int pr = o / stw, qr = o - pr * stw;
          float d[V];
          load_vec<scalar_t, V>(dys + (int64_t(pr) * g.W + qr) * g.C + k0, d);
#pragma unroll
          for (int k = 0; k < V; ++k) bacc[k] += d[k];
        }
      }
      if (cnt == 0) continue;  // a warp without points (a short slice)
      if (united || uniform) {
        win_wgrad_tasks_v<scalar_t, R, V>(S, dys, k0, fq.mode, tab[united ? 0 : k0] + a, cnt, sth, stw, ph, pw, pitch,
                                          g.W, g.C, slot, acc);
      } else {
        // The quarter's channels walk different lists: one channel at a time, its sums in acc[.][kk].
#pragma unroll
        for (int kk = 0; kk < V; ++kk) {
          float ak[PW][1];
#pragma unroll
          for (int j = 0; j < PW; ++j) ak[j][0] = acc[j][kk];
          win_wgrad_tasks<scalar_t, R, 1, 0>(S, dys, k0 + kk, info[c0 + k0 + kk].mode, tab[k0 + kk] + a, cnt, sth, stw,
                                             ph, pw, pitch, g.W, g.C, slot, ak);
#pragma unroll
          for (int j = 0; j < PW; ++j) acc[j][kk] = ak[j][0];
        }
      }
    }
  }
  // Each point's sums over the warp's eight slots (a fixed order), written at the point's row.
  const int parts = g.tiles * chunks;
  const int part = blk.tile * chunks + blk.ck;
#pragma unroll
  for (int j = 0; j < PW; ++j) {
    if (j < cnt) {
      int k;
      const float sum = slot_sum<V>(acc[j], lane, &k);
      const int c = c0 + k0 + k, sl = j0 + a + j;
      if (lane < 4 * V && sl < info[c].npts) {
        partial[(int64_t(c) * parts + part) * g.K + point_at[int64_t(c) * g.K + sl]] = sum;
      }
    }
  }
  if (with_bias) {
    int k;
    const float sum = slot_sum<V>(bacc, lane, &k);
    if (lane < 4 * V) s_bias[warp][k0 + k] = sum;
    __syncthreads();
    if (threadIdx.x < CB) {
      float v = 0.0f;
      for (int w = 0; w < nwarps; ++w) v += s_bias[w][threadIdx.x];
      bpartial[int64_t(c0 + threadIdx.x) * parts + part] = v;
    }
  }
}

}  // namespace cuda
}  // namespace mmo1d
