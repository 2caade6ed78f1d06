// The channels_last vector weight gradient (stride 1, and stride 2 per parity class): every tap of
// outputs 64 pixels apart.
#pragma once

#include "../common/channels_last.cuh"

namespace mmo1d {
namespace cuda {

// The arguments of vec_wgrad_nhwc_kernel, built by its launcher: x of Hx x Wx pixels, N images in
// chunks of `chunk`, pcap points per block shared out among `groups` groups of warps.
template <typename scalar_t>
struct VecWgradParams {
  WgradOperands<scalar_t, float> io;
  PointWgradTables tables;
  float* bpartial;
  FastGeometry g;
  int Hx, Wx;
  bool vec_ok;
  int tile_bytes;
  int pcap;
  int groups;
  const int* skip;  // per block of CB channels, or null: 1 where another family sums the block
};

// Weight-gradient partial sums, NHWC fast path: per tap, each thread sums dy * x over its outputs,
// the eight pixel slots of a warp are added with shuffles, each warp accumulates into its own
// shared-memory row; the block writes partial[c][part][point] (part = tile * chunks + chunk).
// GROUPED: the warps form params.groups groups (warp % groups), each covering the whole tile with
// its pixel slots and taking every groups-th point: on small tiles a group's fewer slots run more
// outputs each, so each point's sum over the slots is amortised over more of them. The groups' points
// are disjoint, so the warps of one place in their groups (warp / groups) share a row. Otherwise one
// group (params.groups is 1).
// g: dy's plane (stride 1: also x's). P = 2 (stride 2): blockIdx.y is a parity class (a, b), and
// the class's taps, at halved offsets, pair dy with the phase plane x[a::2, b::2] of the Hx x Wx
// input; each class has its own tables and partial sums. P = 1: blockIdx.y is a slice of pcap
// points, [blockIdx.y * pcap, + pcap), of tables of g.K rows (long tables, whose per-warp sums
// would not fit the shared memory of several blocks at once, are summed slice by slice); the bias
// gradient rides along with the first slice.
// Whole planes (GROUPED, stride 1; the launcher adds room for three planes after the tile:
// vec_wgrad_prefetch_bytes): each next image's plane and dy are copied (cp.async) into that room while
// an image computes; dy is then read from there.
template <typename scalar_t, int OUTPUTS, int P, bool GROUPED>
__global__ void __launch_bounds__(kFastThreads, OUTPUTS > kVecRLarge ? kVecWgradWideBlocks : 3)
    vec_wgrad_nhwc_kernel(const VecWgradParams<scalar_t> params) {
  const scalar_t* __restrict__ dy = params.io.dy;
  const FastGeometry g = params.g;
  const int Hx = params.Hx, Wx = params.Wx, pcap = params.pcap;
  const bool vec_ok = params.vec_ok;
  constexpr int CB = VecTraits<scalar_t>::kCB, V = VecTraits<scalar_t>::kV;
  extern __shared__ __align__(16) unsigned char smem[];
  const WgradPart part = wgrad_part(g.tiles, params.io.N, params.io.chunk);
  if (params.skip != nullptr && params.skip[part.c]) return;
  const int cls = P == 1 ? 0 : blockIdx.y;
  const int j0 = P == 1 ? blockIdx.y * pcap : 0;  // the block's first point
  const int pa = cls >> 1, pb = cls & 1;
  const PointWgradTables tables = params.tables.of_class(cls, g.C, g.K);
  float* __restrict__ partial = params.io.partial + int64_t(cls) * g.C * g.tiles * part.chunks * g.K;
  const int Hs = (Hx - pa + P - 1) / P, Ws = (Wx - pb + P - 1) / P;  // source plane
  const int c0 = part.c * CB;
  const auto [p0, q0, th, twd] = output_tile(g, part.tile);
  const int lane = threadIdx.x & 31, quarter = lane & 3, warp = threadIdx.x >> 5, nwarps = blockDim.x >> 5;
  const int groups = GROUPED ? params.groups : 1, group = GROUPED ? warp % groups : 0;
  const int slot = (warp / groups) * 8 + (lane >> 2);
  const int slots = GROUPED ? (nwarps / groups) * 8 : blockDim.x >> 2;

  __shared__ int s_np, s_ph, s_pw, s_uniform[4];
  __shared__ float s_bias[kFastThreads / 32][CB];  // per warp: the bias gradient's partial sums
  // The grouped kernel at stride 1 (small planes) skips the points that lie beyond the plane for every
  // channel of the block (|dh| >= H or |dw| >= W: sums of zero padding): bit j of s_beyond is point j
  // of the slice's, for slices of up to kVecWgradSkipPoints points.
  constexpr bool kSkip = GROUPED && P == 1;
  __shared__ unsigned s_beyond[kSkip ? kVecWgradSkipPoints / 32 : 1];
  if (kSkip && threadIdx.x < kVecWgradSkipPoints / 32) s_beyond[threadIdx.x] = ~0u;
  block_channel_summary<V>(tables.npts, tables.halo, tables.same, c0, CB, g.C, &s_np, &s_ph, &s_pw, s_uniform);
  __syncthreads();
  const int np = min(max(s_np - j0, 0), pcap), ph = s_ph, pwid = s_pw;
  // The bias gradient (sum of dy over the block's outputs) rides along in the first class's (or
  // slice's) blocks: every output's dy is loaded once there.
  const bool with_bias = params.bpartial != nullptr && blockIdx.y == 0;
  if (np == 0 && !with_bias) return;  // a slice beyond the block's points
  const bool bias_sums = with_bias && group == 0;  // each group loads every output's dy: one sums it
  const int EW = twd + 2 * pwid;
  const int strip = min(th, params.tile_bytes / (32 * EW) - 2 * ph);  // as in vec_gather_nhwc_kernel
  int* soff = reinterpret_cast<int*>(smem);
  float* red = reinterpret_cast<float*>(smem + align16(sizeof(int) * pcap * CB));  // [warp / groups][point][channel]
  scalar_t* S = reinterpret_cast<scalar_t*>(smem + align16(sizeof(int) * pcap * CB) +
                                            align16(sizeof(float) * pcap * CB * (kFastThreads / 32 / groups)));
  const int row0 = (warp / groups) * np;  // this warp's row of sums
  const int n_end = part.end_image(params.io.N, params.io.chunk);
  // A tile of the whole plane in one strip (stride 1): the first image stages it with its zero halo,
  // the later images find that halo in place and copy the plane alone (7 x 7 at K=31: 49 of 1369
  // pixels).
  const bool whole_plane = P == 1 && th == Hs && twd == Ws && strip >= th;
  const int n_first = part.first_image(params.io.chunk);
  // Strip ps of image n staged into S: by cp.async when vec_ok (`wait`: and waited for), else
  // element by element.
  auto stage_strip = [&](int n, int ps, bool wait) {
    const bool plane = whole_plane && n > n_first;
    scalar_t* tile = S + (plane ? (ph * EW + pwid) * CB : 0);
    const scalar_t* src = params.io.x + (int64_t(n) * Hx * Wx + int64_t(pa) * Wx + pb) * g.C;
    const int gi0 = plane ? 0 : p0 + ps - ph, gj0 = plane ? 0 : q0 - pwid;
    const int EH = plane ? Hs : min(strip, th - ps) + 2 * ph, ew = plane ? Ws : EW;
    if (vec_ok && !wait) {
      issue_nhwc_tile<scalar_t>(tile, src, g.C, Hs, Ws, c0, gi0, gj0, EH, ew, EW, int64_t(P) * Wx, P);
    } else {
      stage_nhwc_tile<scalar_t>(tile, src, g.C, Hs, Ws, c0, gi0, gj0, EH, ew, vec_ok, EW, int64_t(P) * Wx, P);
    }
  };
  // The first strip's copies in flight while the block writes its point offsets and clears its sums
  // (the strip's region of shared memory follows theirs).
  const bool first_issued = vec_ok && n_first < n_end;
  if (first_issued) stage_strip(n_first, 0, false);
  // The grouped kernel over whole planes of several images: while an image computes, the next image's
  // plane (into X2) and dy (into D2[its parity], as dy is read from there) are in flight, so that the
  // image's chain holds no load from global memory: X2 is copied into the tile's plane after a barrier.
  const bool prefetch = kSkip && whole_plane && vec_ok && n_end - n_first > 1;
  const int plane_elems = Hs * Ws * CB;
  scalar_t* X2 = S + params.tile_bytes / int(sizeof(scalar_t));
  scalar_t* D2 = X2 + plane_elems;  // two planes of dy
  auto issue_image = [&](int n, bool with_x) {
    const int64_t image = int64_t(n) * g.H * g.W * g.C;
    if (with_x) issue_nhwc_tile<scalar_t>(X2, params.io.x + image, g.C, Hs, Ws, c0, 0, 0, Hs, Ws, Ws, Ws, 1);
    issue_nhwc_tile<scalar_t>(D2 + (n & 1) * plane_elems, dy + image, g.C, g.H, g.W, c0, 0, 0, g.H, g.W, g.W, g.W, 1);
  };
  if (prefetch) issue_image(n_first, false);
  for (int e = threadIdx.x; e < np * CB; e += blockDim.x) {
    const int j = e / CB, k = e - j * CB, ch = c0 + k;
    const bool has = ch < g.C && j0 + j < tables.npts[ch];
    const int2 o = has ? tables.off[int64_t(ch) * g.K + j0 + j] : make_int2(0, 0);
    soff[e] = (o.x + ph) * EW + (o.y + pwid);
    if (kSkip && has && abs(o.x) < Hs && abs(o.y) < Ws && j < kVecWgradSkipPoints) {
      atomicAnd(&s_beyond[j >> 5], ~(1u << (j & 31)));
    }
  }
  // The points kept, their offsets moved to rows 0..nkept-1 in order (through red's memory). A point's
  // group is its kept row's, not its own row's: the group's warps cover the tile with the same slots
  // in the same order whichever group it is, so each kept point's sum is what it was.
  const bool skipping = kSkip && np <= kVecWgradSkipPoints;
  auto kept_before = [&](int j) {  // kept points among [0, j) (skipping)
    int n = 0;
    for (int w = 0; w < (j >> 5); ++w) n += __popc(~s_beyond[w]);
    return n + __popc(~s_beyond[j >> 5] & ((1u << (j & 31)) - 1u));
  };
  auto is_kept = [&](int j) { return ((s_beyond[j >> 5] >> (j & 31)) & 1u) == 0u; };
  int nkept = np;
  if (skipping) {
    __syncthreads();  // soff and s_beyond written
    nkept = np == 0 ? 0 : kept_before(np - 1) + (is_kept(np - 1) ? 1 : 0);
    int* moved = reinterpret_cast<int*>(red);
    for (int e = threadIdx.x; e < np * CB; e += blockDim.x) {
      const int j = e / CB;
      if (is_kept(j)) moved[kept_before(j) * CB + e - j * CB] = soff[e];
    }
    __syncthreads();
    for (int e = threadIdx.x; e < nkept * CB; e += blockDim.x) soff[e] = moved[e];
    __syncthreads();  // red's memory read before it is cleared
  }
  for (int e = threadIdx.x; e < np * CB * (nwarps / groups); e += blockDim.x) red[e] = 0.0f;
  const bool uniform = s_uniform[quarter] != 0;
  const int cq = c0 + quarter * V;
  const FastDiv div_tw(twd);
  float bacc[V];
#pragma unroll
  for (int k = 0; k < V; ++k) bacc[k] = 0.0f;
  for (int n = n_first; n < n_end; ++n) {
    for (int ps = 0; ps < th; ps += strip) {
      const int sh = min(strip, th - ps);
      if (first_issued && n == n_first && ps == 0) {
        cp_async_wait_all();
      } else if (prefetch) {
        cp_async_wait_all();
        __syncthreads();  // the image's copies landed; the previous image's reads of S and D2 are done
        for (int e = threadIdx.x; e < Hs * Ws * 2; e += blockDim.x) {  // two 16-byte halves a pixel
          const int pix = e >> 1, i = pix / Ws, j = pix - i * Ws;
          reinterpret_cast<uint4*>(S + ((ph + i) * EW + pwid + j) * CB)[e & 1] =
              reinterpret_cast<const uint4*>(X2 + pix * CB)[e & 1];
        }
      } else {
        __syncthreads();  // the previous strip's reads of S are done
        stage_strip(n, ps, true);
      }
      __syncthreads();  // the strip (and, the first time, the offsets and cleared sums) written
      if (prefetch && n + 1 < n_end) issue_image(n + 1, true);
      const scalar_t* dyn = dy + int64_t(n) * g.H * g.W * g.C;
      const scalar_t* dpl = D2 + (n & 1) * plane_elems + quarter * V;  // prefetch: the image's dy plane
      const int nout = sh * twd;
      for (int base = 0; base < nout; base += slots * OUTPUTS) {
        int sbB[OUTPUTS];  // byte offset of each output's pixel in S
        float gv[OUTPUTS][V];
        if (vec_ok) {
          // Every output's dy is loaded before any is used, so that the round waits for global memory
          // once, not once an output (ncu: the loads each stalled in a branch of their own). An output
          // past the strip loads its clamped pixel (strip_output) and counts zero.
          uint2 raw[OUTPUTS];
#pragma unroll
          for (int r = 0; r < OUTPUTS; ++r) {
            const auto [p, q, byte] = strip_output(div_tw, base + r * slots + slot, nout, EW);
            sbB[r] = byte;
            if (prefetch) {  // the whole plane: (p, q) is the pixel
              raw[r] = *reinterpret_cast<const uint2*>(dpl + (p * g.W + q) * CB);
            } else {
              raw[r] = *reinterpret_cast<const uint2*>(dyn + (int64_t(p0 + ps + p) * g.W + q0 + q) * g.C + cq);
            }
          }
#pragma unroll
          for (int r = 0; r < OUTPUTS; ++r) {
            unpack_vec<scalar_t, V>(raw[r], gv[r]);
            const bool in_strip = base + r * slots + slot < nout;
#pragma unroll
            for (int k = 0; k < V; ++k) gv[r][k] = in_strip ? gv[r][k] : 0.0f;
          }
        } else {
#pragma unroll
          for (int r = 0; r < OUTPUTS; ++r) {
            const int o = base + r * slots + slot;
            const auto [p, q, byte] = strip_output(div_tw, o, nout, EW);
            sbB[r] = byte;
            const scalar_t* src = dyn + (int64_t(p0 + ps + p) * g.W + q0 + q) * g.C + cq;
#pragma unroll
            for (int k = 0; k < V; ++k) gv[r][k] = (o < nout && cq + k < g.C) ? static_cast<float>(src[k]) : 0.0f;
          }
        }
        if (bias_sums) {
#pragma unroll
          for (int r = 0; r < OUTPUTS; ++r) {
#pragma unroll
            for (int k = 0; k < V; ++k) bacc[k] += gv[r][k];
          }
        }
        for (int j = group; j < nkept; j += groups) {
          float part[V];
#pragma unroll
          for (int k = 0; k < V; ++k) part[k] = 0.0f;
          if (uniform) {
            const unsigned char* St =
                reinterpret_cast<const unsigned char*>(S) + quarter * 8 + soff[j * CB + quarter * V] * 32;
#pragma unroll
            for (int r = 0; r < OUTPUTS; ++r) {
              float xv[V];
              load_vec<scalar_t, V>(reinterpret_cast<const scalar_t*>(St + sbB[r]), xv);
#pragma unroll
              for (int k = 0; k < V; ++k) part[k] += gv[r][k] * xv[k];
            }
          } else {
#pragma unroll
            for (int k = 0; k < V; ++k) {
              const unsigned char* St =
                  reinterpret_cast<const unsigned char*>(S + quarter * V + k) + soff[j * CB + quarter * V + k] * 32;
#pragma unroll
              for (int r = 0; r < OUTPUTS; ++r) {
                part[k] += gv[r][k] * static_cast<float>(*reinterpret_cast<const scalar_t*>(St + sbB[r]));
              }
            }
          }
          // Lanes quarter, quarter + 4, ..., quarter + 28 hold the same channels.
          int k;
          const float sum = slot_sum<V>(part, lane, &k);
          if (lane < 16 && (V == 4 || lane < 8)) red[(row0 + j) * CB + quarter * V + k] += sum;
        }
      }
    }
  }
  if (with_bias) {
    int k;
    const float sum = slot_sum<V>(bacc, lane, &k);
    if (lane < 16 && (V == 4 || lane < 8)) s_bias[warp][quarter * V + k] = sum;
  }
  __syncthreads();
  for (int e = threadIdx.x; e < np * CB; e += blockDim.x) {
    const int j = e / CB, k = e - j * CB, ch = c0 + k;
    if (ch >= g.C || j0 + j >= tables.npts[ch]) continue;
    int row = j;
    if constexpr (kSkip) {
      if (skipping && !is_kept(j)) {
        partial[part.row(ch) * g.K + j0 + j] = 0.0f;  // a point beyond the plane
        continue;
      }
      if (skipping) row = kept_before(j);
    }
    float v = 0.0f;
    for (int w = row % groups; w < nwarps; w += groups) v += red[((w / groups) * np + row) * CB + k];
    partial[part.row(ch) * g.K + j0 + j] = v;
  }
  if (with_bias && threadIdx.x < CB && c0 + threadIdx.x < g.C) {
    float v = 0.0f;
    for (int w = 0; w < nwarps; w += groups) v += s_bias[w][threadIdx.x];
    params.bpartial[part.row(c0 + threadIdx.x)] = v;
  }
}

}  // namespace cuda
}  // namespace mmo1d
