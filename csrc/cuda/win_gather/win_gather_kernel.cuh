// The channels_last window gather's kernel: stride-1 forward / input gradient and the stride-2 input
// gradient per parity class, over the tasks (win_tasks.cuh) and tables (win_tables.cuh) of the path.
#pragma once

#include "../common/channels_last.cuh"
#include "../common/tap_weights.cuh"
#include "win_tables.cuh"
#include "win_tasks.cuh"

namespace mmo1d {
namespace cuda {

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
  // and column lines in 16-bit (float32's loops spilled with a pad known only at run time).
  constexpr bool kFixedPad = SMALL || sizeof(scalar_t) == 4;
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
  // entries), whose tile then starts where the other lists would have (staged_list_bytes' sizes, written
  // out: calling it here spilled float32 SMALL's loop, 32 / 96 bytes).
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
