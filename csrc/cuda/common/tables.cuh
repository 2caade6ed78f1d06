// Per-call tables of the oriented depthwise 1D convolution: for every channel the distinct points
// of its oriented line (TablesT: offsets, merged weights, tap -> point map, halo) and the same
// points as runs along one axis (SegTables, for the fast paths). Built on the GPU at each call from
// theta and the weight; the host builders are defined in tables.cu.
#pragma once

#include <ATen/core/Tensor.h>
#include <climits>
#include "../../oriented_dwconv1d.h"
#include "common.cuh"

namespace mmo1d {
namespace cuda {

// ----------------------------------------------------------------------------------------------
// Tables: for every channel the distinct points of its oriented line, their merged weights, the
// tap -> point map and the halo (max |dh|, max |dw|).
// With classes = 4 (stride-2 weight gradient), entry cls * C + c holds the taps of channel c whose
// offsets have parities (cls >> 1, cls & 1), at offsets (dh >> 1, dw >> 1); the other taps map to
// point -1.
// ----------------------------------------------------------------------------------------------
// Whether the taps of channel c have the same offsets as those of channel c - 1 (theta: float angles),
// so that every table derived from them coincides: the NHWC kernels then give a lane's channels one
// vector load per point. Computed once per call here rather than by comparing tables in each block.
__device__ __forceinline__ bool same_offsets_as_prev(const float* __restrict__ theta, int c, int K,
                                                     TapMode mode) {
  if (c == 0) return false;
  const float a = theta[c - 1], b = theta[c];
  if (__float_as_int(a) == __float_as_int(b)) return true;
  float sa, ca, sb, cb;
  angle_sincos(a, &sa, &ca);
  angle_sincos(b, &sb, &cb);
  for (int t = 0; t < K; ++t) {
    int ha, wa, hb, wb;
    tap_offset(t, K, sa, ca, mode, &ha, &wa);
    tap_offset(t, K, sb, cb, mode, &hb, &wb);
    if (ha != hb || wa != wb) return false;
  }
  return true;
}

// Per quarter of a channel block of V-channel quarters from c0: whether all its channels share the
// first one's offsets. Every lane of the warp calls it with its channel's same-as-previous flag
// (lane k: channel c0 + k has the offsets of channel c0 + k - 1, TablesT::same or SegInfo::same;
// false past the block or C); lanes 0-3 get their quarter's answer from one ballot, where a loop of
// V - 1 dependent loads per quarter had held the block's first barrier.
template <int V>
__device__ __forceinline__ bool quarter_uniform(bool same_k, int c0, int C) {
  static_assert(V >= 2 && 4 * V <= 32, "four quarters of 2 to 8 channels");
  const unsigned flags = __ballot_sync(0xffffffffu, same_k);
  const int q = static_cast<int>(threadIdx.x & 31u);
  if (q >= 4 || c0 + (q + 1) * V > C) return false;
  constexpr unsigned kRest = (1u << (V - 1)) - 1u;  // the quarter's channels 1 .. V - 1
  return ((flags >> (q * V + 1)) & kRest) == kRest;
}

// What the builders of the rounded taps' tables read: the angles (float) of C channels of K taps,
// the rounding, the sign of the offsets, the parity classes (1, or 4: entry cls * C + c holds the
// taps of channel c whose offsets have parities (cls >> 1, cls & 1), at halved offsets), and the
// (C, K) weight merged as the taps are walked (null: none; residual: + 1 at the centre tap).
template <typename scalar_t>
struct TapTableSpec {
  const float* theta;
  const scalar_t* weight;
  int C, K;
  TapMode mode;
  bool residual;
  int sign, classes;
};

// A builder thread's entry idx = cls * C + c (one thread per entry): its channel and class (-1
// without classes), the sine and cosine of the channel's angle, and whether the channel has the
// previous one's offsets.
struct TapTableEntry {
  int idx, c, cls;
  float s, co;
  bool same;
};

// The calling thread's entry; false for threads past the last entry.
template <typename scalar_t>
__device__ __forceinline__ bool tap_table_entry(const TapTableSpec<scalar_t>& spec, TapTableEntry* e) {
  e->idx = blockIdx.x * blockDim.x + threadIdx.x;
  if (e->idx >= spec.C * spec.classes) return false;
  e->c = e->idx % spec.C;
  e->cls = spec.classes == 4 ? e->idx / spec.C : -1;
  e->same = same_offsets_as_prev(spec.theta, e->c, spec.K, spec.mode);
  angle_sincos(spec.theta[e->c], &e->s, &e->co);
  return true;
}

// Tap t's offset in entry e's coordinates (halved in a class, times the sign); false: the tap
// belongs to another class.
template <typename scalar_t>
__device__ __forceinline__ bool entry_tap_offset(const TapTableSpec<scalar_t>& spec, const TapTableEntry& e, int t,
                                                 int* dh, int* dw) {
  tap_offset(t, spec.K, e.s, e.co, spec.mode, dh, dw);
  if (e.cls >= 0) {
    if ((*dh & 1) != (e.cls >> 1) || (*dw & 1) != (e.cls & 1)) return false;
    *dh >>= 1;  // floor(dh / 2)
    *dw >>= 1;
  }
  *dh *= spec.sign;
  *dw *= spec.sign;
  return true;
}

// The arguments of build_tables_kernel, built by its launcher (spec.sign is 1).
template <typename scalar_t, typename acc_t>
struct BuildTablesParams {
  TapTableSpec<scalar_t> spec;
  int2* off;
  acc_t* pw;
  int* npts;
  int* tap_pt;
  int2* halo;
  int* same;
};

template <typename scalar_t, typename acc_t>
__global__ void build_tables_kernel(const BuildTablesParams<scalar_t, acc_t> params) {
  const TapTableSpec<scalar_t>& spec = params.spec;
  int2* __restrict__ off = params.off;
  acc_t* __restrict__ pw = params.pw;
  int* __restrict__ tap_pt = params.tap_pt;
  TapTableEntry e;
  if (!tap_table_entry(spec, &e)) return;
  const int K = spec.K, idx = e.idx;
  params.same[idx] = e.same;
  int n = -1, ph = 0, pwid = 0, prev_dh = INT_MIN, prev_dw = INT_MIN;
  const int64_t wbase = static_cast<int64_t>(e.c) * K, base = static_cast<int64_t>(idx) * K;
  // A point's weight is summed in a register (its taps are consecutive) and stored once.
  acc_t wsum = acc_t(0);
  for (int t = 0; t < K; ++t) {
    int dh, dw;
    if (!entry_tap_offset(spec, e, t, &dh, &dw)) {
      tap_pt[base + t] = -1;
      continue;
    }
    if (dh != prev_dh || dw != prev_dw) {
      if (n >= 0 && pw != nullptr) pw[base + n] = wsum;
      ++n;
      off[base + n] = make_int2(dh, dw);
      wsum = acc_t(0);
      prev_dh = dh;
      prev_dw = dw;
      ph = max(ph, abs(dh));
      pwid = max(pwid, abs(dw));
    }
    if (pw != nullptr) {
      wsum += static_cast<acc_t>(spec.weight[wbase + t]) + ((spec.residual && t == K / 2) ? acc_t(1) : acc_t(0));
    }
    tap_pt[base + t] = n;
  }
  if (pw != nullptr && n >= 0) pw[base + n] = wsum;
  // Unused table slots: weight 0 at the centre, so padded loops read valid memory and add nothing.
  for (int j = n + 1; j < K; ++j) {
    off[base + j] = make_int2(0, 0);
    if (pw != nullptr) pw[base + j] = acc_t(0);
  }
  params.npts[idx] = n + 1;
  params.halo[idx] = make_int2(ph, pwid);
}

// Point tables as the kernels read them (TablesT's layout; or the interpolated taps' tables and
// block unions): per entry its points' offsets and merged weights (w null: the kernel reads none),
// point count, halo and same-as-previous flag (same: TablesT::same; null where not read).
// The point tables as a weight gradient reads them (no weights; same: null where not read).
struct PointWgradTables {
  const int2* off;
  const int* npts;
  const int2* halo;
  const int* same;
  // The tables of parity class cls, in tables of classes x C entries of K rows.
  __host__ __device__ PointWgradTables of_class(int cls, int C, int K) const {
    const int64_t e = int64_t(cls) * C;
    return PointWgradTables{off + e * K, npts + e, halo + e, same + e};
  }
};

template <typename acc_t>
struct PointTableView {
  const int2* off;
  const acc_t* w;
  const int* npts;
  const int2* halo;
  const int* same;
  PointWgradTables wgrad() const { return PointWgradTables{off, npts, halo, same}; }
};

template <typename acc_t>
struct TablesT {
  at::Tensor ints;  // off (C*K*2) | halo (C*2) | npts (C) | tap_pt (C*K) | same (C): int2 arrays 8-byte aligned
  at::Tensor weights;
  int C, K;  // C: entries (channels x parity classes)
  const int2* off() const { return reinterpret_cast<const int2*>(ints.data_ptr<int>()); }
  const int2* halo() const { return reinterpret_cast<const int2*>(ints.data_ptr<int>() + 2 * int64_t(C) * K); }
  const int* npts() const { return ints.data_ptr<int>() + 2 * int64_t(C) * K + 2 * C; }
  const int* tap_pt() const { return npts() + C; }
  const int* same() const { return tap_pt() + int64_t(C) * K; }  // offsets as the previous channel's
  const acc_t* w() const { return weights.defined() ? weights.data_ptr<acc_t>() : nullptr; }
  PointTableView<acc_t> view() const { return PointTableView<acc_t>{off(), w(), npts(), halo(), same()}; }
};

struct SegInfo {
  int mode;  // 0: u = (0, 1), 1: u = (1, 0), 2: u = (1, 1), 3: u = (1, -1)
  int nseg;
  int npts;
  int same;  // the taps' offsets are those of the previous channel (same segments)
};

// Segment tables as the kernels read them (SegTables' layout; or the interpolated taps'
// InterpSegments with their tables' halos): per entry its SegInfo and halo, and its row of segments
// and of merged weights (segw null: the kernel takes its weights elsewhere, or needs none).
// The segment tables as a weight gradient reads them (no weights).
struct SegWgradTables {
  const SegInfo* info;
  const int4* segs;
  const int2* halo;
};

struct SegTableView {
  const SegInfo* info;
  const int4* segs;
  const float* segw;
  const int2* halo;
  SegWgradTables wgrad() const { return SegWgradTables{info, segs, halo}; }
};

// A segment {dh0, dw0, L, first weight slot} as the kernels stage it: {offset of its first point in
// a staged tile of this row pitch, L, first weight slot, 0}; OFFSET: dh0 and dw0 as two 16-bit halves
// instead of 0 (staged_segment_offset).
template <bool OFFSET = false>
__device__ __forceinline__ int4 staged_segment(int4 seg, int pitch) {
  if constexpr (OFFSET) {
    const unsigned packed = (static_cast<unsigned>(seg.x) & 0xffffu) | (static_cast<unsigned>(seg.y) << 16);
    return make_int4(seg.x * pitch + seg.y, seg.z, seg.w, static_cast<int>(packed));
  } else {
    return make_int4(seg.x * pitch + seg.y, seg.z, seg.w, 0);
  }
}

// The first point's offset (dh0, dw0) of a segment staged with OFFSET.
__device__ __forceinline__ int2 staged_segment_offset(int4 staged) {
  return make_int2(static_cast<short>(staged.w & 0xffff), staged.w >> 16);
}

// The nseg segments of one channel's row into shared memory (the NCHW kernels: a channel per block).
__device__ __forceinline__ void stage_channel_segments(int4* __restrict__ seg_smem, const int4* __restrict__ segs,
                                                       int nseg, int pitch) {
  for (int s = threadIdx.x; s < nseg; s += blockDim.x) seg_smem[s] = staged_segment(segs[s], pitch);
}

// The merged weights of one channel's npts points into shared memory.
__device__ __forceinline__ void stage_channel_weights(float* __restrict__ w_smem, const float* __restrict__ segw,
                                                      int npts) {
  for (int j = threadIdx.x; j < npts; j += blockDim.x) w_smem[j] = segw[j];
}

__host__ __device__ __forceinline__ void mode_step(int mode, int* ui, int* uj) {
  *ui = mode == 0 ? 0 : 1;
  *uj = mode == 1 ? 0 : (mode == 3 ? -1 : 1);
}

// The arguments of build_segments_kernel, built by its launcher.
template <typename scalar_t>
struct BuildSegmentsParams {
  TapTableSpec<scalar_t> spec;
  SegInfo* info;
  int4* segs;
  float* segw;
  int2* halo;
  int* tap_sp;
  int scratch_bytes;
};

// Segment tables of every channel for the gather with offsets sign * (dh, dw): per channel the
// axis, the segments {dh0, dw0, L, first weight} (point l of a segment is (dh0, dw0) + l * u) and
// the merged weights in segment order; the halo (max |dh|, max |dw|).
// With classes = 4 (polyphase input gradient at stride 2), entry cls * C + c holds the taps of
// channel c whose offsets have parities (cls >> 1, cls & 1), at offsets sign * (dh >> 1, dw >> 1);
// the other taps map to slot -1.
template <typename scalar_t>
__global__ void build_segments_kernel(const BuildSegmentsParams<scalar_t> params) {
  const TapTableSpec<scalar_t>& spec = params.spec;
  int4* __restrict__ segs = params.segs;
  TapTableEntry e;
  if (!tap_table_entry(spec, &e)) return;
  const int K = spec.K;
  const int64_t wbase = static_cast<int64_t>(e.c) * K;   // weight row
  const int64_t base = static_cast<int64_t>(e.idx) * K;  // table rows
  // Weights and tap -> slot map are built in this thread's shared-memory scratch when the launch
  // gave one (K floats + K ints per thread), then copied out: pass 2 reads back and reverses them.
  extern __shared__ __align__(16) unsigned char scratch[];
  const bool in_smem = params.scratch_bytes > 0;
  float* scratch_w = reinterpret_cast<float*>(scratch);
  int* scratch_tsp = reinterpret_cast<int*>(scratch + sizeof(float) * K * blockDim.x);
  float* __restrict__ w = in_smem ? scratch_w + int64_t(threadIdx.x) * K : params.segw + base;
  int* __restrict__ tsp = in_smem ? scratch_tsp + int64_t(threadIdx.x) * K : params.tap_sp + base;
  // Pass 1: number of distinct points, halo and, for each axis, the number of runs.
  int np = 0, ph = 0, pwid = 0;
  int runs[4] = {0, 0, 0, 0}, dir[4] = {0, 0, 0, 0};
  int prev_h = INT_MIN, prev_w = INT_MIN;
  for (int t = 0; t < K; ++t) {
    int dh, dw;
    if (!entry_tap_offset(spec, e, t, &dh, &dw)) continue;
    if (dh == prev_h && dw == prev_w) continue;
    ph = max(ph, abs(dh));
    pwid = max(pwid, abs(dw));
#pragma unroll
    for (int m = 0; m < 4; ++m) {
      int ui, uj;
      mode_step(m, &ui, &uj);
      const int eh = dh - prev_h, ew = dw - prev_w;
      const int d = (np > 0 && eh == ui && ew == uj) ? 1 : ((np > 0 && eh == -ui && ew == -uj) ? -1 : 0);
      if (d != 0 && (dir[m] == 0 || dir[m] == d)) {
        dir[m] = d;
      } else {
        ++runs[m];
        dir[m] = 0;
      }
    }
    prev_h = dh;
    prev_w = dw;
    ++np;
  }
  int axis = 0;  // the axis of the fewest runs (SegInfo::mode; spec.mode is the tap rule's)
#pragma unroll
  for (int m = 1; m < 4; ++m) {
    if (runs[m] < runs[axis]) axis = m;
  }
  int ui, uj;
  mode_step(axis, &ui, &uj);
  // Pass 2: the runs along the chosen axis, weights merged per point.
  int nseg = 0, nw = 0, run_len = 0, run_dir = 0;
  int run_h = 0, run_w = 0;  // first point of the current run (in tap order)
  prev_h = INT_MIN;
  prev_w = INT_MIN;
  auto close_run = [&](int taps_done) {
    if (run_len == 0) return;
    // Store the run so that l grows along +u: a run walked along -u starts at its last point and
    // its weights are reversed.
    int h0 = run_h, w0 = run_w;
    const int first = nw - run_len;
    if (run_dir < 0) {
      h0 = run_h - (run_len - 1) * ui;
      w0 = run_w - (run_len - 1) * uj;
      for (int a = first, b = nw - 1; a < b; ++a, --b) {
        const float tmp = w[a];
        w[a] = w[b];
        w[b] = tmp;
      }
    }
    segs[base + nseg] = make_int4(h0, w0, run_len, first);
    ++nseg;
    // Taps of a reversed run point at reversed weight slots.
    for (int t = 0; run_dir < 0 && t < taps_done; ++t) {
      const int j = tsp[t];
      if (j >= first && j < nw) tsp[t] = first + (nw - 1 - j);
    }
  };
  const int centre = K / 2;
  for (int t = 0; t < K; ++t) {
    int dh, dw;
    if (!entry_tap_offset(spec, e, t, &dh, &dw)) {
      tsp[t] = -1;
      continue;
    }
    float wt = spec.weight != nullptr
                   ? static_cast<float>(spec.weight[wbase + t]) + ((spec.residual && t == centre) ? 1.0f : 0.0f)
                   : 0.0f;
    if (dh == prev_h && dw == prev_w) {
      w[nw - 1] += wt;
      tsp[t] = nw - 1;
      continue;
    }
    const int eh = dh - prev_h, ew = dw - prev_w;
    const int d = (run_len > 0 && eh == ui && ew == uj) ? 1 : ((run_len > 0 && eh == -ui && ew == -uj) ? -1 : 0);
    if (d != 0 && (run_dir == 0 || run_dir == d)) {
      run_dir = d;
      ++run_len;
    } else {
      close_run(t);
      run_h = dh;
      run_w = dw;
      run_len = 1;
      run_dir = 0;
    }
    tsp[t] = nw;
    w[nw++] = wt;
    prev_h = dh;
    prev_w = dw;
  }
  close_run(K);
  if (in_smem) {
    for (int k = 0; k < nw; ++k) params.segw[base + k] = w[k];
    for (int t = 0; t < K; ++t) params.tap_sp[base + t] = tsp[t];
  }
  params.info[e.idx] = SegInfo{axis, nseg, np, e.same};
  params.halo[e.idx] = make_int2(ph, pwid);
}

// The merged weights of tables whose structure was built without them (weight == nullptr above, or
// cached): pw[e * K + j] = sum over the taps t of entry e (channel e % C) that map to point or slot j
// (tap_map[e * K + t] == j), in tap order, of weight[c * K + t], plus 1 at the centre tap in the
// residual form; 0 where no tap maps. The sums run in the order of the builds above, so the weights
// are theirs bit for bit.
template <typename scalar_t, typename acc_t>
__global__ void merge_weights_kernel(const int* __restrict__ tap_map, const scalar_t* __restrict__ weight, int C,
                                     int K, int entries, bool residual, acc_t* __restrict__ pw) {
  const int64_t idx = blockIdx.x * int64_t(blockDim.x) + threadIdx.x;
  if (idx >= int64_t(entries) * K) return;
  const int64_t e = idx / K;
  const int j = static_cast<int>(idx - e * K);
  const int* map = tap_map + e * K;
  const scalar_t* w = weight + (e % C) * K;
  acc_t v = acc_t(0);
  for (int t = 0; t < K; ++t) {
    if (map[t] == j) v += static_cast<acc_t>(w[t]) + ((residual && t == K / 2) ? acc_t(1) : acc_t(0));
  }
  pw[idx] = v;
}

struct SegTables {
  at::Tensor ints;     // info (C * 4) | halo (C * 2) | pad | segs (C * K * 4) | tap -> weight slot (C * K)
  at::Tensor weights;  // C * K
  int C, K;            // C: entries (channels x parity classes)
  int64_t head;        // ints before segs (6 * C rounded up to 4: int4 alignment)
  const SegInfo* info() const { return reinterpret_cast<const SegInfo*>(ints.data_ptr<int>()); }
  const int2* halo() const { return reinterpret_cast<const int2*>(ints.data_ptr<int>() + 4 * int64_t(C)); }
  const int4* segs() const { return reinterpret_cast<const int4*>(ints.data_ptr<int>() + head); }
  const float* w() const { return weights.defined() ? weights.data_ptr<float>() : nullptr; }
  const int* tap_sp() const { return ints.data_ptr<int>() + head + 4 * int64_t(C) * K; }
  SegTableView view() const { return SegTableView{info(), segs(), w(), halo()}; }
};

// Host builders (tables.cu; instantiated for double/double, float/float, Half/float, BFloat16/float).
// The structure (everything but the merged weights) comes from the table cache (table_cache.cuh);
// the merged weights are computed at each call from the call's weight.
template <typename scalar_t, typename acc_t>
TablesT<acc_t> build_tables(const at::Tensor& theta, const at::Tensor& weight, const TapRule& rule, bool residual,
                            bool with_weights, int classes = 1);

// Instantiated for float, Half and BFloat16. Without weights (with_weights false: weight gradients)
// SegTables::weights stays undefined and no kernel runs once the structure is cached.
template <typename scalar_t>
SegTables build_segments(const at::Tensor& theta, const at::Tensor& weight, const TapRule& rule, bool residual,
                         int sign, int classes = 1, bool with_weights = true);

}  // namespace cuda
}  // namespace mmo1d
