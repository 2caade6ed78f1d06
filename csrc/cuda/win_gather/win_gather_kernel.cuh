// The channels_last window path (C a multiple of the channel block): segment windows over staged
// tiles of 32 bytes of channels per pixel; stride-1 forward / input gradient and the stride-2 input
// gradient per parity class.
#pragma once

#include "../common/channels_last.cuh"
#include "../common/tap_weights.cuh"
#include "../common/window_walk.cuh"

namespace mmo1d {
namespace cuda {

// ---- NHWC window path (C a multiple of the channel block) --------------------------------------
// The segment windows of the NCHW fast path on an NHWC tile: four lanes share a pixel, each holding
// V channels; a thread owns OUTPUTS outputs that follow each other along its channels' segment axis
// and, for a segment of L points, loads OUTPUTS + L - 1 channel vectors from shared memory (each
// converted to float once) for OUTPUTS * L * V multiply-adds. The eight pixel slots of a warp take
// neighbouring tasks (neighbouring rows for the row axis, neighbouring columns otherwise), which
// the odd row pitch makes conflict-free. Lanes whose V channels have different segment lists (at
// the boundary of two angle groups that splits a lane's channels) walk them one channel at a time.
// Forward and input gradient at stride 1; at stride 2 the input gradient, polyphase:
// dx[2i + a, 2j + b] gathers dy over the taps whose offsets have parities (a, b), at halved offsets,
// so each parity class is a stride-1 gather over dy with its own segment tables that writes every
// other pixel of dx (output step OS = 2).

// CHANNELS consecutive channels of a pixel <-> floats: the lane's vector (CHANNELS = V) or one
// channel (CHANNELS = 1).
template <typename scalar_t, int CHANNELS>
__device__ __forceinline__ void load_channels(const unsigned char* __restrict__ p, float (&f)[CHANNELS]) {
  if constexpr (CHANNELS == 1) {
    f[0] = static_cast<float>(*reinterpret_cast<const scalar_t*>(p));
  } else {
    load_vec<scalar_t, CHANNELS>(reinterpret_cast<const scalar_t*>(p), f);
  }
}

template <typename scalar_t, int CHANNELS>
__device__ __forceinline__ void store_channels(scalar_t* __restrict__ p, const float (&f)[CHANNELS]) {
  if constexpr (CHANNELS == 1) {
    *p = static_cast<scalar_t>(f[0]);
  } else {
    store_vec<scalar_t, CHANNELS>(p, f);
  }
}

// acc[r][k] += sum_l w[l * wstride + k] * S[a + (r + l) * axis_step][k] for CHANNELS channels: the
// channels of pixel i start at channel_tile + 32 * i. SPLIT_TAIL: see walk_segment (the stride-2
// forward, whose tasks also add into an fp32 tile, takes the test per point: it stays free of
// spills).
template <typename scalar_t, int OUTPUTS, int CHANNELS, bool SPLIT_TAIL>
__device__ __forceinline__ void run_segment_px(const unsigned char* __restrict__ channel_tile, int a, int axis_step,
                                               int L, const float* __restrict__ w, int wstride,
                                               float (&acc)[OUTPUTS][CHANNELS]) {
  float v[OUTPUTS][CHANNELS];
  walk_segment<OUTPUTS, SPLIT_TAIL>(
      channel_tile + a * 32, axis_step * 32, L, v,
      [](const unsigned char* p, float (&f)[CHANNELS]) { load_channels<scalar_t, CHANNELS>(p, f); },
      [&](int l, auto i) {
        constexpr int I = decltype(i)::value;
        float wl[CHANNELS];
        load_floats<CHANNELS>(w + l * wstride, wl);
#pragma unroll
        for (int r = 0; r < OUTPUTS; ++r) {
#pragma unroll
          for (int k = 0; k < CHANNELS; ++k) acc[r][k] += wl[k] * v[(I + r) % OUTPUTS][k];
        }
      });
}

// The points [*l0, *l1] of a segment (first point (dh, dw), L points along u = (ui, uj)) that a
// task of OUTPUTS outputs from source pixel (P, Q) along u needs inside the SH x SW source plane:
// window position m (output r + point l) reads pixel (P + dh + m ui, Q + dw + m uj); point l is
// needed when some r < OUTPUTS puts that pixel inside the plane. The others read only the staged
// zero halo (*l0 > *l1 when none is left).
template <int OUTPUTS>
__device__ __forceinline__ void task_segment_points(int P, int Q, int dh, int dw, int ui, int uj, int L, int SH,
                                                    int SW, int* l0, int* l1) {
  int lo = 0, hi = OUTPUTS + L - 2;  // window positions inside the plane
  auto axis = [&](int x0, int u, int n) {
    if (u == 0) {
      if (static_cast<unsigned>(x0) >= static_cast<unsigned>(n)) hi = -1;
    } else if (u > 0) {
      lo = max(lo, -x0);
      hi = min(hi, n - 1 - x0);
    } else {
      lo = max(lo, x0 - n + 1);
      hi = min(hi, x0);
    }
  };
  axis(P + dh, ui, SH);
  axis(Q + dw, uj, SW);
  *l0 = max(lo - (OUTPUTS - 1), 0);
  *l1 = lo <= hi ? min(hi, L - 1) : -1;
}

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

// A source plane of SH x SW pixels whose lines have the halo (hh, hw) (win_tasks' CLIP).
struct PlaneClip {
  int hh = 0, hw = 0, SH = 0, SW = 0;
};

// The tasks of one staged sub-tile (sth x stw task positions at (p0s, q0s)) for CHANNELS channels
// starting at channel kc of the block (c in the tensor) that share one segment list (seg_smem[s]:
// staged, or GlobalSegs). Task position (p, q) reads source pixel (p0s + p, q0s + q), staged with ph
// rows above the tile and pw + OUTPUTS - 1 columns left of it (the halo and seg_tile_cols' pad; a
// sub-tile staged without the pad passes its halo less OUTPUTS - 1), and writes output pixel
// (OS p + oa, OS q + ob) of the OH x OW image plane `op`.
// CLIP (the several-images path): the tasks whose lines (of halo clip.hh, clip.hw) reach past the
// clip.SH x clip.SW source plane walk only the points that read it for one of their outputs
// (task_segment_points), so that a halo of OUTPUTS - 1 staged around the plane suffices.
// images: sub-tiles of that many images, staged one below the other (image m's from pixel
// m * image_pixels of S) and written to the planes that follow op, one each (OS = 1, not ACC).
// ACC: instead of storing, add the sums into the block's fp32 tile `accs` (CB floats per output
// pixel, stw | 1 pixels per row), one class of the stride-2 forward at a time. A lane adds its
// CHANNELS channels with one vector access; the odd row pitch puts the eight pixel slots of a warp
// on different banks whether they take neighbouring rows or columns.
// pieces: diagonal lines (modes 2, 3) take the pieces of the tile's whole diagonals (diag_piece;
// their last outputs may read up to OUTPUTS - 1 rows below the staged tile's rows).
template <typename scalar_t, int OUTPUTS, int OS, int CHANNELS, bool ACC = false, bool CLIP = false,
          bool SPLIT_LAST = false, typename Segs = const int4*>
__device__ __forceinline__ void win_tasks(const scalar_t* __restrict__ S, scalar_t* __restrict__ op, int kc, int c,
                                          int mode, int nseg, Segs seg_smem, const float* __restrict__ sw,
                                          const float (&b)[CHANNELS], int sth, int stw, int p0s, int q0s, int ph,
                                          int pw, int pitch, int OH, int OW, int oa, int ob, int C, int slot, int slots,
                                          float* __restrict__ accs = nullptr, int images = 1, int image_pixels = 0,
                                          bool pieces = false, PlaneClip clip = {}) {
  constexpr int CB = VecTraits<scalar_t>::kCB;
  int ui, uj;
  mode_step(mode, &ui, &uj);
  const int axis_step = ui * pitch + uj;
  const bool cut = pieces && mode >= 2;
  const int ntasks = cut ? diag_npieces<OUTPUTS>(sth, stw) : seg_ntasks<OUTPUTS>(mode, sth, stw);
  const unsigned char* channel_tile = reinterpret_cast<const unsigned char*>(S) + kc * sizeof(scalar_t);
  // Output r of a task is ostep elements after output 0 (its pointer is formed once per task).
  const int64_t ostep = int64_t(OS) * (int64_t(ui) * OW + uj) * C;
  // Task t's NOUT outputs from its output r0 (NOUT = OUTPUTS, r0 = 0: the whole task).
  auto run_task = [&](int t, int r0, auto nout) {
    constexpr int NOUT = decltype(nout)::value;
    int p, q, m = 0;
    if (images > 1) m = t / ntasks;
    if (cut) {
      diag_piece<OUTPUTS>(mode, t - m * ntasks, sth, stw, &p, &q);
    } else {
      seg_task<OUTPUTS>(mode, t - m * ntasks, sth, stw, &p, &q);
    }
    p += r0 * ui;
    q += r0 * uj;
    const int b0 = m * image_pixels + (p + ph) * pitch + q + pw + (OUTPUTS - 1);
    float acc[NOUT][CHANNELS];
#pragma unroll
    for (int r = 0; r < NOUT; ++r) {
#pragma unroll
      for (int k = 0; k < CHANNELS; ++k) acc[r][k] = b[k];
    }
    // CLIP: a task whose window stays inside the source plane at the lines' halo walks every point;
    // the others only the points that read the plane for one of their outputs (the rest multiply
    // zeros), which read at most NOUT - 1 positions past the plane.
    const int P = p0s + p, Q = q0s + q;
    const bool inside = !CLIP || (P >= clip.hh && P + (NOUT - 1) + clip.hh < clip.SH && Q >= (NOUT - 1) + clip.hw &&
                                  Q + (NOUT - 1) + clip.hw < clip.SW);
    for (int s = 0; s < nseg; ++s) {
      const int4 e = seg_smem[s];
      int l0 = 0, L = e.y;
      if (!inside) {
        const int2 d = staged_segment_offset(e);
        int l1;
        task_segment_points<NOUT>(P, Q, d.x, d.y, ui, uj, e.y, clip.SH, clip.SW, &l0, &l1);
        if (l1 < l0) continue;
        L = l1 - l0 + 1;
      }
      run_segment_px<scalar_t, NOUT, CHANNELS, !ACC>(channel_tile, b0 + e.x + l0 * axis_step, axis_step, L,
                                                     sw + (e.z + l0) * CB + kc, CB, acc);
    }
    scalar_t* o = op + ((int64_t(m) * OH + (OS * (p0s + p) + oa)) * OW + OS * (q0s + q) + ob) * C + c;
#pragma unroll
    for (int r = 0; r < NOUT; ++r, o += ostep) {
      const int pr = p + r * ui, qr = q + r * uj;
      const int oi = OS * (p0s + pr) + oa, oj = OS * (q0s + qr) + ob;
      if (pr < sth && qr >= 0 && qr < stw && (OS == 1 || (oi < OH && oj < OW))) {
        if constexpr (ACC) {
          add_floats<CHANNELS>(accs + (pr * (stw | 1) + qr) * CB + kc, acc[r]);
        } else {
          store_channels<scalar_t, CHANNELS>(o, acc[r]);
        }
      }
    }
  };
  // The tasks in rounds over the slots. SPLIT_LAST: a last round of at most slots / OUTPUTS tasks runs
  // their outputs one a slot, which takes about the time of one output instead of a task's OUTPUTS (a
  // 28 x 28 tile's 196 row or column tasks on 64 slots: three rounds, then 4 tasks as 16 outputs).
  // (The several-images path, ONE_LIST and float32 leave it out: their loops spilled more with it.)
  const int total = ntasks * images, last = total % slots;
  const bool split = SPLIT_LAST && OUTPUTS > 1 && last > 0 && last * OUTPUTS <= slots;
  const int whole = split ? total - last : total;
  for (int t = slot; t < whole; t += slots) run_task(t, 0, std::integral_constant<int, OUTPUTS>{});
  if constexpr (SPLIT_LAST) {
    if (split && slot < last * OUTPUTS) {
      run_task(whole + slot / OUTPUTS, slot % OUTPUTS, std::integral_constant<int, 1>{});
    }
  }
}

// The arguments of win_gather_nhwc_kernel, built by its launcher: out has OH x OW pixels; the
// tables' merged weights, or (tables.segw null) the taps' weights merged by the blocks.
template <typename scalar_t>
struct WinGatherParams {
  GatherIO<scalar_t> io;
  SegTableView tables;
  FastGeometry g;
  int OH, OW;
  int tile_bytes;
  TapWeights<scalar_t> taps;
};

// The SMALL kernel's: also the batch, the images staged together and the groups of them per block.
template <typename scalar_t>
struct WinSmallParams : WinGatherParams<scalar_t> {
  int N, images, groups;
};

template <typename scalar_t, bool SMALL>
using WinParams = std::conditional_t<SMALL, WinSmallParams<scalar_t>, WinGatherParams<scalar_t>>;

// One block: image n, a tile of the source plane's task positions, CB channels (C % CB == 0, 16-byte
// aligned tensors); with OS = 2 the parity class blockIdx.y, whose tables follow the previous
// class's (C entries each) and whose outputs go to (2p + a, 2q + b) of the OH x OW output plane.
// The tile (up to kWinRegion a side) is staged (cp.async, storage dtype) in sub-tiles that fit the
// allocation with the block's own halo (choose_subtile): the whole tile when it fits. A block whose
// channels all have one segment list (rounded taps grouped by angle) stages that list alone and adds
// the other lists' room to its tile (staged_list_bytes: 7.5 KB at K=31 in 16-bit). Row and column
// lines stage no columns beyond their halo in 16-bit (kFixedPad).
// SMALL (a plane that one block covers, not ONE_LIST, OS = 1; every channel's list staged):
// params.groups groups of params.images images from n * images * groups (fewer in the last block),
// one group after the other over the same tables; a group's planes staged whole, one below the
// other with a zero halo of at most OUTPUTS - 1 (the tasks skip the points past it: win_tasks),
// their tasks shared out over the block's slots; and the lines clipped to the plane (clip_segment)
// where their halo reaches past it.
// Weights: segw, merged; or, when segw is null, the (C, K) weight taps.w merged by each block through
// the tables' tap -> slot map taps.tap_sp (stage_merged_weights; one class of rounded taps, not
// ONE_LIST). SMALL takes segw with TABLE_WEIGHTS (the interpolated taps' tables, whose blocks would
// share one list: SMALL stages every channel's), the taps' otherwise.
// ONE_LIST (tables whose blocks of channels mostly share one list, the interpolated taps' united
// points): shared memory holds one channel's segments instead of CB, for blocks whose channels all
// have the same segments; the other blocks read theirs from global memory.
template <typename scalar_t, int OUTPUTS, int OS, bool ONE_LIST = false, bool SMALL = false,
          bool TABLE_WEIGHTS = false>
__global__ void __launch_bounds__(kFastThreads, kWinBlocks)
    win_gather_nhwc_kernel(const WinParams<scalar_t, SMALL> params) {
  static_assert(!SMALL || (OS == 1 && !ONE_LIST), "several images a block: stride-1 gathers over their own lists");
  static_assert(!TABLE_WEIGHTS || SMALL, "TABLE_WEIGHTS: SMALL over the tables' merged weights");
  const scalar_t* __restrict__ bias = params.io.bias;
  const SegInfo* __restrict__ info = params.tables.info;
  const int4* __restrict__ segs = params.tables.segs;
  const float* __restrict__ segw = params.tables.segw;
  const int2* __restrict__ halo = params.tables.halo;
  const FastGeometry g = params.g;
  const int OH = params.OH, OW = params.OW;
  constexpr int CB = VecTraits<scalar_t>::kCB, V = VecTraits<scalar_t>::kV;
  extern __shared__ __align__(16) unsigned char smem[];
  const auto [c0, n, p0, q0, th, tw, lane, quarter, slot, slots] = fast_block<CB>(g);
  int64_t n0 = n;
  int images = 1;  // SMALL: the block's images, in groups of params.images
  if constexpr (SMALL) {
    n0 = n * params.images * params.groups;
    images = static_cast<int>(min(int64_t(params.images) * params.groups, params.N - n0));
  }
  const int cls = OS == 1 ? 0 : blockIdx.y;
  const int oa = cls >> 1, ob = cls & 1;
  info += int64_t(cls) * g.C;
  halo += int64_t(cls) * g.C;
  segs += int64_t(cls) * g.C * g.K;
  segw += int64_t(cls) * g.C * g.K;

  // Columns staged beyond the halo (seg_tile_cols' pad): OUTPUTS - 1 a side where a channel's diagonal
  // tasks start outside the tile (and for SMALL, whose clipped tasks read past the plane); none for row
  // and column lines in 16-bit (float32's loops spilled with a pad known only at run time, ONE_LIST's
  // 16-bit loops more: 68 / 104 bytes of spill stores / loads against 56 / 76 with the pad fixed).
  constexpr bool kFixedPad = SMALL || ONE_LIST || sizeof(scalar_t) == 4;
  __shared__ int s_mode[CB], s_nseg[CB], s_uniform[4], s_ph, s_pw, s_pad, s_sh, s_sw, s_united, s_clip;
  if (threadIdx.x < 32) {
    // Warp 0: the channels' axes and segment counts, the block's halo, the sub-tile, and per quarter
    // whether its V channels walk the same segments (then one vector load per point).
    int ph = 0, pw = 0, mode = 0, same = 1, nseg = 0;
    bool same_k = false;  // channel c0 + threadIdx.x has the previous channel's segments
    if (threadIdx.x < CB) {
      const SegInfo f = info[c0 + threadIdx.x];
      mode = f.mode;
      s_mode[threadIdx.x] = f.mode;
      s_nseg[threadIdx.x] = f.nseg;
      nseg = f.nseg;
      same_k = f.same != 0;
      same = threadIdx.x == 0 || same_k;
      const int2 hl = halo[c0 + threadIdx.x];
      ph = hl.x;
      pw = hl.y;
    }
    ph = warp_max(ph);
    pw = warp_max(pw);
    const bool clip = SMALL && (ph >= g.H || pw >= g.W);
    if (clip) {
      ph = min(ph, g.H - 1);
      pw = min(pw, g.W - 1);
    }
    if (!SMALL) {
      same = __all_sync(0xffffffffu, same);
      if (threadIdx.x == 0) s_united = same;
    }
    const int pad = kFixedPad || __any_sync(0xffffffffu, mode >= 2) ? OUTPUTS - 1 : 0;
    mode = __shfl_sync(0xffffffffu, mode, 0);  // the first channel's axis stands for the block's
    if (!SMALL) nseg = __shfl_sync(0xffffffffu, nseg, 0);
    // A united block of the sub-tile path stages its one list: the rest of the lists' room joins its tile.
    const bool compact = !ONE_LIST && !SMALL && same;
    const int freed = compact ? staged_list_bytes<CB>(false, g.K, 0) - staged_list_bytes<CB>(true, g.K, nseg) : 0;
    const int tile_bytes = params.tile_bytes + freed;
    const int2 sub =
        SMALL ? make_int2(th, tw) : choose_subtile<OUTPUTS>(th, tw, ph, pw, pad, mode, g.K, tile_bytes, slots);
    if (threadIdx.x == 0) {
      if (SMALL) s_clip = clip;
      s_ph = ph;
      s_pw = pw;
      if (!kFixedPad) s_pad = pad;
      s_sh = sub.x;
      s_sw = sub.y;
    }
    const bool uniform = quarter_uniform<V>(same_k, c0, g.C);
    if (threadIdx.x < 4) s_uniform[threadIdx.x] = uniform;
  }
  __syncthreads();
  const int ph = s_ph, pw = s_pw, sh = s_sh, sw_ = s_sw;
  const int pad = kFixedPad ? OUTPUTS - 1 : s_pad;
  // The halo staged: the lines' (ph, pw); SMALL in 16-bit at most OUTPUTS - 1 (win_small_halo: its
  // planes' halo is all zero padding, which its tasks read no further than that).
  constexpr bool kClip = SMALL && WinTraits<scalar_t>::kSmallClips;
  const int sph = SMALL ? WinTraits<scalar_t>::small_halo(ph) : ph;
  const int spw = SMALL ? WinTraits<scalar_t>::small_halo(pw) : pw;
  const int pitch = seg_tile_cols<OUTPUTS>(sw_, spw, pad) | 1;
  // Tables: seg_smem[channel][s] = {offset of the segment's first point in S, L, first weight},
  // sw[point][channel]. seg_smem holds channel c0's list alone (lists = 1) for ONE_LIST (K entries'
  // room) and for the sub-tile path's united blocks (every channel has c0's segments: their nseg
  // entries), whose tile then starts where the other lists would have (staged_list_bytes).
  const bool united = !SMALL && s_united != 0;
  const int lists = ONE_LIST || united ? 1 : CB;
  const int list_bytes = static_cast<int>(united && !ONE_LIST ? align16(sizeof(int4) * s_nseg[0])
                                                               : align16(sizeof(int4) * g.K * lists));
  int4* seg_smem = reinterpret_cast<int4*>(smem);
  float* sw = reinterpret_cast<float*>(smem + list_bytes);
  scalar_t* S = reinterpret_cast<scalar_t*>(smem + list_bytes + align16(sizeof(float) * g.K * CB));
  // The tables (the tile's region of shared memory follows theirs). Without SMALL, staged while the
  // first sub-tile's copies are in flight: a barrier after the copies' wait covers both. (SMALL
  // stages them first: its group loop keeps more values live, which the hoisted copies spilled.)
  auto stage_tables = [&] {
    if constexpr (ONE_LIST) {
      for (int e = threadIdx.x; e < CB * g.K; e += blockDim.x) {
        const int k = e / g.K, s = e - k * g.K;
        if (united && k == 0 && s < s_nseg[0]) seg_smem[s] = staged_segment(segs[int64_t(c0) * g.K + s], pitch);
        sw[s * CB + k] = segw[int64_t(c0 + k) * g.K + s];
      }
    } else if (SMALL && s_clip) {  // SMALL: the lines clipped; the tables' merged weights or the taps'
      stage_clipped_segments<CB, kClip>(seg_smem, segs, s_nseg, s_mode, c0, g.K, pitch, g.H, g.W);
      if constexpr (TABLE_WEIGHTS) {
        stage_point_weights<CB>(sw, segw, c0, g.K);
      } else {
        stage_merged_weights<scalar_t, CB>(sw, params.taps.w, params.taps.tap_sp, c0, g.K, params.taps.residual);
      }
    } else if (segw != nullptr) {
      stage_segment_tables<CB, kClip && TABLE_WEIGHTS>(seg_smem, sw, segs, segw, s_nseg, c0, g.K, pitch, lists);
    } else {
      stage_segment_tables<CB, kClip>(seg_smem, nullptr, segs, nullptr, s_nseg, c0, g.K, pitch, lists);
      stage_merged_weights<scalar_t, CB>(sw, params.taps.w, params.taps.tap_sp, c0, g.K, params.taps.residual);
    }
  };
  const int k0 = quarter * V;
  float b[V];
#pragma unroll
  for (int k = 0; k < V; ++k) b[k] = bias != nullptr ? static_cast<float>(bias[c0 + k0 + k]) : 0.0f;
  const scalar_t* img = params.io.src + n0 * g.H * g.W * g.C;
  scalar_t* op = params.io.out + n0 * OH * OW * g.C;
  // Channel kc's own list (a block that is not united): staged, or (ONE_LIST) read from global memory.
  auto list_of = [&](int kc) {
    if constexpr (ONE_LIST) {
      return GlobalSegs{segs + int64_t(c0 + kc) * g.K, pitch};
    } else {
      return static_cast<const int4*>(seg_smem + kc * g.K);
    }
  };
  // The lane's channels through run(nv, kc, kl, bias_k, list): the tasks of nv channels from kc of
  // the block over the list (seg_smem's or GlobalSegs) of channel kl.
  auto lane_tasks = [&](auto&& run) {
    if (united) {
      // Every channel of the block has channel c0's list (the one staged), mode and segment count.
      run(std::integral_constant<int, V>{}, k0, 0, b, static_cast<const int4*>(seg_smem));
    } else if (s_uniform[quarter]) {
      run(std::integral_constant<int, V>{}, k0, k0, b, list_of(k0));
    } else {
      // The quarter's channels straddle two angle groups: one channel at a time.
#pragma unroll
      for (int kk = 0; kk < V; ++kk) {
        const float bk[1] = {b[kk]};
        run(std::integral_constant<int, 1>{}, k0 + kk, k0 + kk, bk, list_of(k0 + kk));
      }
    }
  };
  if constexpr (SMALL) {
    stage_tables();
    // Groups of params.images planes, each staged whole with a halo of at most OUTPUTS - 1 (sph, spw);
    // with room for two groups' tiles, the next group's copies are in flight while a group computes. A
    // buffer's first group stages its tiles with the zero halo around the planes; the later groups find
    // that halo in place and copy the planes alone.
    const int rows = seg_tile_rows<OUTPUTS>(th, sph), image_pixels = rows * pitch;
    const int per_group = params.images, groups = (images + per_group - 1) / per_group;
    // Diagonal lines in pieces of the plane's whole diagonals where that takes one round of the
    // block's slots instead of two (14 x 14: 60 tasks instead of 68), the group's region followed by
    // the rows that its last image's last pieces read below it.
    const int extra = max(th + OUTPUTS - 1 - round_up(th, OUTPUTS), 0) * pitch;
    const bool diag = __any_sync(0xffffffffu, s_mode[lane % CB] >= 2);  // a channel with diagonal lines
    const bool pieces = diag && diag_npieces<OUTPUTS>(th, tw) * per_group <= slots &&
                        seg_ntasks<OUTPUTS>(2, th, tw) * per_group > slots &&
                        int64_t(per_group * image_pixels + extra) * CB * sizeof(scalar_t) <= params.tile_bytes;
    const int group_elems = (per_group * image_pixels + (pieces ? extra : 0)) * CB;
    const bool two = groups > 1 && int64_t(2) * group_elems * sizeof(scalar_t) <= params.tile_bytes;
    auto stage = [&](int grp) {
      const int m0 = grp * per_group, count = min(per_group, images - m0);
      scalar_t* buf = S + (two && (grp & 1) ? group_elems : 0);
      const bool whole = grp < (two ? 2 : 1);
      for (int m = 0; m < count; ++m) {
        const scalar_t* plane = img + int64_t(m0 + m) * g.H * g.W * g.C;
        scalar_t* tile = buf + m * image_pixels * CB;
        if (whole) {
          issue_nhwc_tile<scalar_t>(tile, plane, g.C, g.H, g.W, c0, -sph, -spw - (OUTPUTS - 1), rows,
                                    seg_tile_cols<OUTPUTS>(tw, spw), pitch, g.W, 1);
        } else {
          issue_nhwc_tile<scalar_t>(tile + (sph * pitch + spw + OUTPUTS - 1) * CB, plane, g.C, g.H, g.W, c0, 0, 0,
                                    g.H, g.W, pitch, g.W, 1);
        }
      }
      cp_async_commit();
    };
    stage(0);
    for (int grp = 0; grp < groups; ++grp) {
      if (two && grp + 1 < groups) {
        stage(grp + 1);
        cp_async_wait_group<1>();
      } else {
        cp_async_wait_group<0>();
      }
      __syncthreads();  // the group's tiles (and, the first time, the tables) written
      const int m0 = grp * per_group, count = min(per_group, images - m0);
      const scalar_t* buf = S + (two && (grp & 1) ? group_elems : 0);
      scalar_t* gop = op + int64_t(m0) * OH * OW * g.C;
      lane_tasks([&](auto nv, int kc, int kl, const auto& bias_k, auto list) {
        win_tasks<scalar_t, OUTPUTS, OS, decltype(nv)::value, false, kClip>(
            buf, gop, kc, c0 + kc, s_mode[kl], s_nseg[kl], list, sw, bias_k, th, tw, 0, 0, sph, spw, pitch, OH, OW, oa,
            ob, g.C, slot, slots, nullptr, count, image_pixels, pieces, PlaneClip{ph, pw, g.H, g.W});
      });
      if (grp + 1 < groups) {
        __syncthreads();  // the group's reads done before its buffer is staged again
        if (!two) stage(grp + 1);
      }
    }
  } else {
    const int subs_w = (tw + sw_ - 1) / sw_, subs = (th + sh - 1) / sh * subs_w;
    // The last round of tasks split into single outputs (win_tasks' SPLIT_LAST): 16-bit, not ONE_LIST.
    constexpr bool kSplitLast = !ONE_LIST && sizeof(scalar_t) == 2;
    const int lead = pw + pad;  // columns staged left of a sub-tile
    // The copies (cp.async) of the sub-tile at (ps, qs) of sth x stw outputs; the caller waits for them.
    auto issue_sub = [&](int ps, int qs, int sth, int stw) {
      issue_nhwc_tile<scalar_t>(S, img, g.C, g.H, g.W, c0, p0 + ps - ph, q0 + qs - lead,
                                seg_tile_rows<OUTPUTS>(sth, ph), seg_tile_cols<OUTPUTS>(stw, lead, 0), pitch, g.W, 1);
    };
    issue_sub(0, 0, min(sh, th), min(sw_, tw));
    stage_tables();
    for (int sub = 0; sub < subs; ++sub) {
      const int ps = (sub / subs_w) * sh, qs = (sub % subs_w) * sw_;
      const int sth = min(sh, th - ps), stw = min(sw_, tw - qs);
      if (sub > 0) {
        __syncthreads();  // the previous sub-tile's reads of S are done
        issue_sub(ps, qs, sth, stw);
      }
      cp_async_wait_all();
      __syncthreads();  // the sub-tile (and, the first time, the tables) written
      lane_tasks([&](auto nv, int kc, int kl, const auto& bias_k, auto list) {
        win_tasks<scalar_t, OUTPUTS, OS, decltype(nv)::value, false, false, kSplitLast>(
            S, op, kc, c0 + kc, s_mode[kl], s_nseg[kl], list, sw, bias_k, sth, stw, p0 + ps, q0 + qs, ph,
            lead - (OUTPUTS - 1), pitch, OH, OW, oa, ob, g.C, slot, slots);
      });
    }
  }
}

}  // namespace cuda
}  // namespace mmo1d
