// The channels_last window weight gradient (stride 1, C a multiple of the channel block): the
// segment windows of the window gather, turned around. For a segment of L points along the axis u
// and a thread's R outputs (p, q) + r u, point l of the segment pairs output r with the source pixel
// r + l steps along the segment, so
//   dw[point l] += sum_r dy[(p, q) + r u] * x[first point + (r + l) u]
// reads R + L - 1 source vectors (a rotating window) and R dy vectors for R * L * V multiply-adds.
// The points are split into chunks (a segment, or a piece of at most kLC of its points); a warp
// keeps one chunk's sums in registers over many tasks and adds them into its own shared-memory row
// only when it moves to the next chunk, so the cross-lane sums are paid per chunk, not per task
// and point as in the vector weight gradient.
#pragma once

#include "nhwc_window_kernel.cuh"

namespace mmo1d {
namespace cuda {

// The family's limits, with its kernel.
struct WinWgradTraits {
  static constexpr int kLC = 8;                   // points per chunk: kLC * V sums per thread
  static constexpr int kTile = 64;                // largest output tile side of a block
  static constexpr int64_t kBudget = 108 * kKiB;  // shared memory per block: two blocks per SM
  // Chunk-table entries per channel: one per segment, plus one per further kLC points.
  static constexpr int chunks(int K) { return K + K / kLC; }
};

// Bytes of the two staged tiles of a sub-tile of th x tw outputs with halo (ph, pw): the source
// tile of the window gather, and dy over the tasks' positions (rows rounded up to R, R - 1 columns
// either side, zero outside the sub-tile so that no task needs a bound test).
template <int R>
__host__ __device__ __forceinline__ int64_t win_wgrad_src_bytes(int th, int tw, int ph, int pw) {
  return int64_t(seg_tile_rows<R>(th, ph)) * (seg_tile_cols<R>(tw, pw) | 1) * 32;
}
template <int R>
__host__ __device__ __forceinline__ int64_t win_wgrad_dy_bytes(int th, int tw) {
  return int64_t(round_up(th, R)) * (seg_tile_cols<R>(tw, 0) | 1) * 32;
}

// Fixed shared memory: the chunk tables and the warps' sum rows (K points x CB channels each).
template <typename scalar_t>
int64_t win_wgrad_fixed_bytes(int K) {
  constexpr int CB = VecTraits<scalar_t>::kCB;
  return align16(sizeof(int4) * CB * WinWgradTraits::chunks(K)) + align16(sizeof(float) * (kFastThreads / 32) * K * CB);
}

// As choose_subtile, for the two tiles of the weight gradient (dy's has no halo).
template <int R>
__device__ __forceinline__ int2 choose_wgrad_subtile(int th, int tw, int ph, int pw, int mode, int K, int tile_bytes,
                                                     int slots) {
  const int lane = threadIdx.x & 31;
  float cost = __int_as_float(0x7f800000);  // +inf: no candidate
  int2 sub = make_int2(R, R);
  const int cand = (lane + 1) * R;
  if (cand < round_up(th, R) + R) {
    const int nsh = (th + cand - 1) / cand;
    const int sh = round_up((th + nsh - 1) / nsh, R);
    const int xrows = seg_tile_rows<R>(sh, ph);
    // Widest multiple of R whose two tiles fit ((cols | 1) <= cols + 1).
    const int avail = tile_bytes / 32 - xrows * (2 * pw + 2 * R - 1) - sh * (2 * R - 1);
    const int sw_max = avail / (xrows + sh) / R * R;
    if (sw_max >= R) {
      const int nsw = (tw + min(sw_max, round_up(tw, R)) - 1) / min(sw_max, round_up(tw, R));
      const int sw = round_up((tw + nsw - 1) / nsw, R);
      const int staged = xrows * (seg_tile_cols<R>(sw, pw) | 1) + sh * (seg_tile_cols<R>(sw, 0) | 1);
      const int tasks = seg_ntasks<R>(mode, min(sh, th), min(sw, tw));
      const int rounds = (tasks + slots - 1) / slots;
      cost = float(nsh * nsw) * (float(staged) + 3.0f * float(K) * float(tasks) + 2000.0f * float(rounds));
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

// Adds a chunk's sums (acc[l], l < L, for NV channels) of the 8 lanes of this quarter (mask) into
// the warp's row red[(slot + l) * CB + channel], and clears them. NV = V: slot_sum's transposed
// sums; NV = 1: one channel, summed in three steps.
template <int CB, int LC, int NV>
__device__ __forceinline__ void flush_chunk(float (&acc)[LC][NV], int L, int slot, float* __restrict__ red, int kc,
                                            int lane, unsigned mask) {
#pragma unroll
  for (int l = 0; l < LC; ++l) {
    if (l < L) {
      float* row = red + (slot + l) * CB + kc;
      if constexpr (NV == 1) {
        float s = acc[l][0];
        s += __shfl_xor_sync(mask, s, 4);
        s += __shfl_xor_sync(mask, s, 8);
        s += __shfl_xor_sync(mask, s, 16);
        if (lane < 4) row[0] += s;
      } else {
        int k;
        const float s = slot_sum<NV>(acc[l], lane, &k, mask);
        if (lane < 16 && (NV == 4 || lane < 8)) row[k] += s;
      }
    }
#pragma unroll
    for (int k = 0; k < NV; ++k) acc[l][k] = 0.0f;
  }
}

// One task of one chunk: the thread's R outputs (dy at ds, ds + dstep, ...) against the chunk's
// points (the first one's source pixel at xs, the next ones ustep bytes apart), for LCV >= L points
// without a branch: the R + LCV - 1 window vectors are loaded at once, those past the chunk's last
// source pixel clamped to it, and the sums of points l >= L are never flushed. With add_bias (the
// chunk is the first: every task's dy once), dy is also added into the bias gradient's sums bsum.
template <typename scalar_t, int R, int LC, int LCV, int NV>
__device__ __forceinline__ void wgrad_task(const unsigned char* __restrict__ xs, int ustep,
                                           const unsigned char* __restrict__ ds, int dstep, int L, float (&acc)[LC][NV],
                                           bool add_bias, float (&bsum)[NV]) {
  float g[R][NV];
#pragma unroll
  for (int r = 0; r < R; ++r) load_channels<scalar_t, NV>(ds + r * dstep, g[r]);
  if (add_bias) {
#pragma unroll
    for (int r = 0; r < R; ++r) {
#pragma unroll
      for (int k = 0; k < NV; ++k) bsum[k] += g[r][k];
    }
  }
  const int last = L + R - 2;
  float v[R + LCV - 1][NV];
#pragma unroll
  for (int m = 0; m < R + LCV - 1; ++m) load_channels<scalar_t, NV>(xs + min(m, last) * ustep, v[m]);
#pragma unroll
  for (int l = 0; l < LCV; ++l) {
#pragma unroll
    for (int r = 0; r < R; ++r) {
#pragma unroll
      for (int k = 0; k < NV; ++k) acc[l][k] += g[r][k] * v[l + r][k];
    }
  }
}

// One quarter's (NV = V) or one channel's (NV = 1) share of a staged sub-tile: the units (chunk,
// group of 8 tasks) in chunk-major order, warp w taking units w, w + nwarps, ...; lane slot i of the
// warp takes task 8 * group + i. X, D: the source and dy tiles at this lane's first channel;
// chunks: {offset of the chunk's first point in X, L, first point slot}; red: the warp's rows;
// with_bias: add the first chunk's dy into bsum, the bias gradient's sums.
template <typename scalar_t, int R, int NV>
__device__ __forceinline__ void wgrad_units(const unsigned char* __restrict__ X, const unsigned char* __restrict__ D,
                                            const int4* __restrict__ chunks, int nch, int mode, int sth, int stw,
                                            int ph, int pw, int pitch, int dpitch, float* __restrict__ red, int kc,
                                            int lane, int warp, int nwarps, bool with_bias, float (&bsum)[NV]) {
  constexpr int CB = VecTraits<scalar_t>::kCB, LC = WinWgradTraits::kLC;
  const unsigned mask = 0x11111111u << (lane & 3);
  int ui, uj;
  mode_step(mode, &ui, &uj);
  const int ustep = (ui * pitch + uj) * 32, dstep = (ui * dpitch + uj) * 32;
  const int ntasks = seg_ntasks<R>(mode, sth, stw);
  const int groups = (ntasks + 7) / 8;
  const int units = nch * groups;
  float acc[LC][NV];
#pragma unroll
  for (int l = 0; l < LC; ++l) {
#pragma unroll
    for (int k = 0; k < NV; ++k) acc[l][k] = 0.0f;
  }
  int cur = -1;
  int4 ch = make_int4(0, 0, 0, 0);
  for (int u = warp; u < units; u += nwarps) {
    const int c = u / groups;
    if (c != cur) {
      if (cur >= 0) flush_chunk<CB, LC, NV>(acc, ch.y, ch.z, red, kc, lane, mask);
      cur = c;
      ch = chunks[c];
    }
    const int t = (u - c * groups) * 8 + (lane >> 2);
    if (t >= ntasks) continue;
    int p, q;
    seg_task<R>(mode, t, sth, stw, &p, &q);
    const unsigned char* xs = X + ((p + ph) * pitch + q + pw + (R - 1) + ch.x) * 32;
    const unsigned char* ds = D + (p * dpitch + q + (R - 1)) * 32;
    const bool bs = with_bias && c == 0;
    if (ch.y <= 2) {
      wgrad_task<scalar_t, R, LC, 2, NV>(xs, ustep, ds, dstep, ch.y, acc, bs, bsum);
    } else if (ch.y <= 4) {
      wgrad_task<scalar_t, R, LC, 4, NV>(xs, ustep, ds, dstep, ch.y, acc, bs, bsum);
    } else {
      wgrad_task<scalar_t, R, LC, LC, NV>(xs, ustep, ds, dstep, ch.y, acc, bs, bsum);
    }
  }
  if (cur >= 0) flush_chunk<CB, LC, NV>(acc, ch.y, ch.z, red, kc, lane, mask);
}

// One block: CB channels, a tile of the plane (blockIdx.x runs over tiles, then image chunks of
// `chunk` images, then channel blocks); it writes partial[c][tile * chunks + image chunk][slot] for
// the segment tables' point slots and, with bpartial, the bias gradient's partial sums
// bpartial[c][part]. The tile is staged in sub-tiles that fit the allocation with the block's halo.
template <typename scalar_t, int R>
__global__ void __launch_bounds__(kFastThreads, 2)
    win_wgrad_nhwc_kernel(const scalar_t* __restrict__ x, const scalar_t* __restrict__ dy,
                          const SegInfo* __restrict__ info, const int4* __restrict__ segs,
                          const int2* __restrict__ halo, float* __restrict__ partial, float* __restrict__ bpartial,
                          const FastGeometry g, int N, int chunk, int tile_bytes) {
  constexpr int CB = VecTraits<scalar_t>::kCB, V = VecTraits<scalar_t>::kV;
  constexpr int LC = WinWgradTraits::kLC;
  extern __shared__ __align__(16) unsigned char smem[];
  const int KC = WinWgradTraits::chunks(g.K);
  const int chunks_n = (N + chunk - 1) / chunk;
  const int tile = blockIdx.x % g.tiles;
  const int ck = (blockIdx.x / g.tiles) % chunks_n;
  const int c0 = static_cast<int>(blockIdx.x / (g.tiles * chunks_n)) * CB;
  const int p0 = (tile / g.tiles_w) * g.TH, q0 = (tile % g.tiles_w) * g.TW;
  const int th = min(g.TH, g.H - p0), tw = min(g.TW, g.W - q0);
  const int lane = threadIdx.x & 31, quarter = lane & 3, warp = threadIdx.x >> 5, nwarps = blockDim.x >> 5;
  const int slots = blockDim.x >> 2;

  __shared__ int s_mode[CB], s_nseg[CB], s_npts[CB], s_nch[CB], s_uniform[4], s_ph, s_pw, s_sh, s_sw;
  __shared__ float s_bias[kFastThreads / 32][CB];
  if (threadIdx.x < 32) {
    int ph = 0, pw = 0, mode = 0;
    if (threadIdx.x < CB) {
      const SegInfo f = info[c0 + threadIdx.x];
      mode = f.mode;
      s_mode[threadIdx.x] = f.mode;
      s_nseg[threadIdx.x] = f.nseg;
      s_npts[threadIdx.x] = f.npts;
      const int2 hl = halo[c0 + threadIdx.x];
      ph = hl.x;
      pw = hl.y;
    }
    ph = warp_max(ph);
    pw = warp_max(pw);
    mode = __shfl_sync(0xffffffffu, mode, 0);
    const int2 sub = choose_wgrad_subtile<R>(th, tw, ph, pw, mode, g.K, tile_bytes, slots);
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
  const int pitch = seg_tile_cols<R>(sw_, pw) | 1, dpitch = seg_tile_cols<R>(sw_, 0) | 1;
  int4* schunks = reinterpret_cast<int4*>(smem);
  float* red = reinterpret_cast<float*>(smem + align16(sizeof(int4) * CB * KC));
  unsigned char* X = smem + align16(sizeof(int4) * CB * KC) + align16(sizeof(float) * nwarps * g.K * CB);
  unsigned char* D = X + align16(win_wgrad_src_bytes<R>(sh, sw_, ph, pw));
  // The segments, staged in X's space, become per-channel chunk lists (one thread per channel).
  int4* sseg = reinterpret_cast<int4*>(X);
  for (int e = threadIdx.x; e < CB * g.K; e += blockDim.x) {
    const int k = e / g.K, s = e - k * g.K;
    if (s < s_nseg[k]) sseg[e] = segs[int64_t(c0 + k) * g.K + s];
  }
  for (int e = threadIdx.x; e < nwarps * g.K * CB; e += blockDim.x) red[e] = 0.0f;
  __syncthreads();
  if (threadIdx.x < CB) {
    const int k = threadIdx.x;
    int ui, uj;
    mode_step(s_mode[k], &ui, &uj);
    int n = 0;
    for (int s = 0; s < s_nseg[k]; ++s) {
      const int4 sg = sseg[k * g.K + s];
      for (int l0 = 0; l0 < sg.z; l0 += LC) {
        schunks[k * KC + n++] =
            make_int4(sg.x * pitch + sg.y + l0 * (ui * pitch + uj), min(LC, sg.z - l0), sg.w + l0, 0);
      }
    }
    s_nch[k] = n;
  }
  const int k0 = quarter * V;
  const bool with_bias = bpartial != nullptr;
  float bacc[V];
#pragma unroll
  for (int k = 0; k < V; ++k) bacc[k] = 0.0f;
  float* wred = red + warp * g.K * CB;
  const int subs_w = (tw + sw_ - 1) / sw_, subs = (th + sh - 1) / sh * subs_w;
  const int n_end = min(N, (ck + 1) * chunk);
  for (int n = ck * chunk; n < n_end; ++n) {
    const scalar_t* xn = x + int64_t(n) * g.H * g.W * g.C;
    const scalar_t* dyn = dy + int64_t(n) * g.H * g.W * g.C;
    for (int sub = 0; sub < subs; ++sub) {
      const int ps = (sub / subs_w) * sh, qs = (sub % subs_w) * sw_;
      const int sth = min(sh, th - ps), stw = min(sw_, tw - qs);
      __syncthreads();  // chunk tables written; the previous sub-tile's reads of X and D are done
      stage_nhwc_tile<scalar_t>(reinterpret_cast<scalar_t*>(X), xn, g.C, g.H, g.W, c0, p0 + ps - ph,
                                q0 + qs - pw - (R - 1), seg_tile_rows<R>(sth, ph), seg_tile_cols<R>(stw, pw), true,
                                pitch, g.W, 1);
      // dy of the sub-tile only: rows and columns outside it (bounds sth x stw) are zero.
      stage_nhwc_tile<scalar_t>(reinterpret_cast<scalar_t*>(D), dyn + (int64_t(p0 + ps) * g.W + q0 + qs) * g.C, g.C,
                                sth, stw, c0, 0, -(R - 1), round_up(sth, R), seg_tile_cols<R>(stw, 0), true, dpitch,
                                g.W, 1);
      __syncthreads();
      if (s_uniform[quarter]) {
        wgrad_units<scalar_t, R, V>(X + k0 * sizeof(scalar_t), D + k0 * sizeof(scalar_t), schunks + k0 * KC, s_nch[k0],
                                    s_mode[k0], sth, stw, ph, pw, pitch, dpitch, wred, k0, lane, warp, nwarps,
                                    with_bias, bacc);
      } else {
        // The quarter's channels straddle two angle groups: one channel at a time.
#pragma unroll
        for (int kk = 0; kk < V; ++kk) {
          const int kc = k0 + kk;
          float b1[1] = {0.0f};
          wgrad_units<scalar_t, R, 1>(X + kc * sizeof(scalar_t), D + kc * sizeof(scalar_t), schunks + kc * KC,
                                      s_nch[kc], s_mode[kc], sth, stw, ph, pw, pitch, dpitch, wred, kc, lane, warp,
                                      nwarps, with_bias, b1);
          bacc[kk] += b1[0];
        }
      }
    }
  }
  if (with_bias) {
    int k;
    const float sum = slot_sum<V>(bacc, lane, &k);
    if (lane < 16 && (V == 4 || lane < 8)) s_bias[warp][k0 + k] = sum;
  }
  __syncthreads();
  const int parts = g.tiles * chunks_n;
  for (int e = threadIdx.x; e < g.K * CB; e += blockDim.x) {
    const int j = e / CB, k = e - j * CB;
    if (j >= s_npts[k]) continue;
    float v = 0.0f;
    for (int w = 0; w < nwarps; ++w) v += red[(w * g.K + j) * CB + k];
    partial[(int64_t(c0 + k) * parts + tile * chunks_n + ck) * g.K + j] = v;
  }
  if (with_bias && threadIdx.x < CB) {
    float v = 0.0f;
    for (int w = 0; w < nwarps; ++w) v += s_bias[w][threadIdx.x];
    bpartial[int64_t(c0 + threadIdx.x) * parts + tile * chunks_n + ck] = v;
  }
}

}  // namespace cuda
}  // namespace mmo1d
