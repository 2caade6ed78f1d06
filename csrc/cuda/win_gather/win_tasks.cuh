// The tasks of the channels_last window path: a thread's outputs walking the segments of its
// channels' lines over a staged tile (win_tasks), for the window gather and the stride-2 forward.
#pragma once

#include "../common/channels_last.cuh"
#include "../common/window_walk.cuh"

namespace mmo1d {
namespace cuda {

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

}  // namespace cuda
}  // namespace mmo1d
