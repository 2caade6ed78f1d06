// The tables and sub-tiles of the channels_last window path: segment lists and weights staged in
// shared memory (clipped to small planes), lists read from global memory, the sub-tile each block
// stages (choose_subtile) and the room its lists take.
#pragma once

#include "../common/channels_last.cuh"

namespace mmo1d {
namespace cuda {

// The segment tables of a block's CB channels [c0, c0 + CB) in shared memory:
// seg_smem[channel][s] = {offset of the segment's first point in a staged tile of this pitch, L,
// first weight} for the nseg[channel] segments of each channel, and w_smem[point][channel] the
// weights (none when w_smem is null). OFFSET: the segments carry their first point's offset
// (staged_segment). lists: the first that many channels' segments (1: a block whose channels all
// share channel c0's).
template <int CB, bool OFFSET = false>
__device__ __forceinline__ void stage_segment_tables(int4* __restrict__ seg_smem, float* __restrict__ w_smem,
                                                     const int4* __restrict__ segs, const float* __restrict__ segw,
                                                     const int* nseg, int c0, int K, int pitch, int lists = CB) {
  for (int e = threadIdx.x; e < CB * K; e += blockDim.x) {
    const int k = e / K, s = e - k * K;
    if (k < lists && s < nseg[k]) seg_smem[e] = staged_segment<OFFSET>(segs[int64_t(c0 + k) * K + s], pitch);
    if (w_smem != nullptr) w_smem[s * CB + k] = segw[int64_t(c0 + k) * K + s];
  }
}

// The merged weights alone, as stage_segment_tables stages them: w_smem[point][channel].
template <int CB>
__device__ __forceinline__ void stage_point_weights(float* __restrict__ w_smem, const float* __restrict__ segw, int c0,
                                                    int K) {
  for (int e = threadIdx.x; e < CB * K; e += blockDim.x) {
    const int k = e / K, s = e - k * K;
    w_smem[s * CB + k] = segw[int64_t(c0 + k) * K + s];
  }
}

// A segment (SegTables' {dh, dw, L, first weight}, points (dh, dw) + l u for u = (ui, uj)) cut to
// the points that can read inside a plane of H x W task positions, |dh| < H and |dw| < W: for any
// task position, the others fall outside the plane and read only zero padding. L = 0 when none is
// left.
__device__ __forceinline__ int4 clip_segment(int4 seg, int ui, int uj, int H, int W) {
  int lo = 0, hi = seg.z - 1;
  // Keeps 1 - n <= d0 + l u <= n - 1.
  auto clip_axis = [&](int d0, int u, int n) {
    if (u == 0) {
      if (d0 <= -n || d0 >= n) hi = -1;
    } else {
      lo = max(lo, u > 0 ? 1 - n - d0 : d0 + 1 - n);
      hi = min(hi, u > 0 ? n - 1 - d0 : d0 + n - 1);
    }
  };
  clip_axis(seg.x, ui, H);
  clip_axis(seg.y, uj, W);
  if (lo > hi) return make_int4(0, 0, 0, 0);
  return make_int4(seg.x + lo * ui, seg.y + lo * uj, hi - lo + 1, seg.w + lo);
}

// stage_segment_tables' segments on a plane of H x W task positions, each clipped (clip_segment)
// and the empty ones dropped: nseg[channel] becomes the count kept. A warp per channel, its lanes
// over 32 segments at a time. OFFSET: as stage_segment_tables'.
template <int CB, bool OFFSET>
__device__ __forceinline__ void stage_clipped_segments(int4* __restrict__ seg_smem, const int4* __restrict__ segs,
                                                       int* nseg, const int* mode, int c0, int K, int pitch, int H,
                                                       int W) {
  const int lane = threadIdx.x & 31;
  for (int k = threadIdx.x >> 5; k < CB; k += blockDim.x >> 5) {
    int ui, uj;
    mode_step(mode[k], &ui, &uj);
    const int n = nseg[k];
    int kept = 0;
    for (int s0 = 0; s0 < n; s0 += 32) {
      int4 e = make_int4(0, 0, 0, 0);
      if (s0 + lane < n) e = clip_segment(segs[int64_t(c0 + k) * K + s0 + lane], ui, uj, H, W);
      const unsigned keep = __ballot_sync(0xffffffffu, e.z > 0);
      if (e.z > 0) seg_smem[k * K + kept + __popc(keep & ((1u << lane) - 1u))] = staged_segment<OFFSET>(e, pitch);
      kept += __popc(keep);
    }
    __syncwarp();  // every lane has read nseg[k]
    if (lane == 0) nseg[k] = kept;
  }
}

// The sub-tile of a th x tw output tile that the block stages at a time (sub_h x sub_w outputs; the
// last ones along each axis may be smaller): among the heights OUTPUTS, 2 OUTPUTS, ... (one per
// lane of warp 0, all 32 lanes call this) with the widest width whose staged tile (halo ph, pw)
// fits in tile_bytes, split evenly, the one with the least estimated work in warp instructions
// (tiling.h's kSubtileCost*): about one per staged pixel, 3 K per task (a warp runs 8 tasks of
// about 26 K), a latency allowance per round of tasks over the block's slots and one per sub-tile
// (its staging and two barriers: ncu put 37% of a K=31 gather's stall samples at those barriers; on
// an H200 this allowance took a 0-degree line from four sub-tiles of 8 x 28 outputs to two of
// 16 x 28, 10% faster).
template <int OUTPUTS>
__device__ __forceinline__ int2 choose_subtile(int th, int tw, int ph, int pw, int pad, int mode, int K,
                                               int tile_bytes, int slots) {
  const int lane = threadIdx.x & 31;
  float cost = __int_as_float(0x7f800000);  // +inf: no candidate
  int2 sub = make_int2(OUTPUTS, OUTPUTS);
  const int cand = (lane + 1) * OUTPUTS;
  if (cand < round_up(th, OUTPUTS) + OUTPUTS) {
    const int nsh = (th + cand - 1) / cand;
    const int sub_h = round_up((th + nsh - 1) / nsh, OUTPUTS);
    const int rows = seg_tile_rows<OUTPUTS>(sub_h, ph);
    const int cols_max = tile_bytes / (32 * rows) - 1;  // (cols | 1) <= cols + 1
    const int sub_w_max = (cols_max - 2 * pw - 2 * pad) / OUTPUTS * OUTPUTS;
    if (sub_w_max >= OUTPUTS) {
      const int nsw = (tw + min(sub_w_max, round_up(tw, OUTPUTS)) - 1) / min(sub_w_max, round_up(tw, OUTPUTS));
      const int sub_w = round_up((tw + nsw - 1) / nsw, OUTPUTS);
      const int pitch = seg_tile_cols<OUTPUTS>(sub_w, pw, pad) | 1;
      const int tasks = seg_ntasks<OUTPUTS>(mode, min(sub_h, th), min(sub_w, tw));
      const int rounds = (tasks + slots - 1) / slots;
      cost = float(nsh * nsw) * (float(rows * pitch) + kSubtileCostPerTapTask * float(K) * float(tasks) +
                                 kSubtileCostPerRound * float(rounds) + kSubtileCostPerSubtile);
      sub = make_int2(min(sub_h, th), min(sub_w, tw));
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

// A channel's segments read from global memory (SegTables' layout, first points as offsets (dh, dw)),
// as the staged tables hold them: the first point's offset in a staged tile of this pitch.
struct GlobalSegs {
  const int4* segs;
  int pitch;
  __device__ __forceinline__ int4 operator[](int s) const { return staged_segment(segs[s], pitch); }
};

// The bytes of a block's staged segment lists: CB lists of K entries (win_fixed_bytes' room), or the
// one list of nseg entries of a block of the sub-tile path whose channels all share it.
template <int CB>
__device__ __forceinline__ int staged_list_bytes(bool united, int K, int nseg) {
  return static_cast<int>(united ? align16(sizeof(int4) * nseg) : align16(sizeof(int4) * K * CB));
}

}  // namespace cuda
}  // namespace mmo1d
