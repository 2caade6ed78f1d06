// Channels_last forward and input gradient: line kernels (line_kernels.h) applied directly to the
// NHWC memory, vectorised across the channels of each run, with no layout copies.
//
// Forward: output row p of image n gathers, for each entry (dh, dw) of a run, input row p*s + dh
// at pixels q*s + dw; a work item is a tile of up to 8 consecutive rows, computed block of pixels
// by block of pixels so that the input rows the tile's rows share are read from the cache. Runs
// whose taps spread more along H than along W are computed in a second pass along output columns
// instead: their taps then read along the line, as horizontal taps do along rows.
// Input gradient at stride 1: the same gather on grad_output with the offsets negated. At stride
// s >= 2, input row h takes an entry only when s divides h - dh, and its pixels w = ph + j*s
// (phase ph) only when s divides ph - dw: for each phase the taps gather grad_output row
// (h - dh) / s at pixels j + (ph - dw) / s.
#include <ATen/Parallel.h>

#include <algorithm>
#include <vector>

#include "kernels.h"
#include "line_kernels.h"

namespace mmo1d {
namespace cpu {
namespace {

int64_t max_run_len(const Plan& plan) {
  int64_t m = 0;
  for (const Run& run : plan.runs) {
    m = std::max(m, run.len());
  }
  return m;
}

// x = s * floor(x / s) + mod(x, s) with 0 <= mod < s.
int64_t floor_div(int64_t x, int64_t s) {
  return (x - ((x % s) + s) % s) / s;
}

// The taps of each run (and for the strided input gradient of each run, row phase and column
// phase), shared by all lines: taps[first[k] .. first[k + 1]).
template <typename T>
struct TapLists {
  std::vector<Tap<T>> taps;
  std::vector<int64_t> first;
  void close() { first.push_back(static_cast<int64_t>(taps.size())); }
};

template <typename T>
struct GatherArgs {
  const T* in;
  T* out;
  const T* bias;  // nullptr: none
  const Plan* plan;
  const TapLists<T>* lists;
  int64_t C, Hin, Win, Hout, Wout, s;
  const std::vector<char>* columns;  // GatherTiles: per run, whose lines are columns
  bool column_pass;                  // GatherTiles: the runs computed along columns, else along rows
  bool blend;                        // GatherTiles: overhangs stored blended (see for_pieces)
  int64_t tile;                      // GatherTiles: lines per work item
};

// Tiles of lines of one image, for the runs of one pass: out[n, p, q] = bias + sum over entries
// of w * in[n, p*s + dh, q*s + dw] (+ in[n, p*s, q*s]). A line is an output row (row pass) or an
// output column (column pass: runs whose taps spread more along H than along W, which then read
// along the line like horizontal taps); work item = (n, tile of up to `tile` lines).
template <typename T>
struct GatherTiles {
  template <int VB>
  static MMO1D_CPU_INLINE void run(const GatherArgs<T>& a, int64_t begin, int64_t end) {
    const Plan& plan = *a.plan;
    const int64_t lines = a.column_pass ? a.Wout : a.Hout;
    const int64_t tiles_per_image = (lines + a.tile - 1) / a.tile;
    for (int64_t item = begin; item < end; ++item) {
      const int64_t n = item / tiles_per_image, l0 = item % tiles_per_image * a.tile;
      const T* image = a.in + n * a.Hin * a.Win * a.C;
      T* out = a.out + n * a.Hout * a.Wout * a.C;
      for (size_t r = 0; r < plan.runs.size(); ++r) {
        if (static_cast<bool>((*a.columns)[r]) != a.column_pass) {
          continue;
        }
        const Run& run = plan.runs[r];
        const int64_t first = a.lists->first[r];
        const T* bias = a.bias != nullptr ? a.bias + run.c0 : nullptr;
        const TileLines<T> tile = a.column_pass ? TileLines<T>{a.lists->taps.data() + first,
                                                               a.lists->first[r + 1] - first,
                                                               {image + run.c0, l0 * a.s, a.Win, a.C},
                                                               std::min(a.tile, lines - l0),
                                                               a.s,
                                                               bias,
                                                               out + l0 * a.C + run.c0,
                                                               a.C,
                                                               a.Hout,
                                                               a.Wout * a.C,
                                                               a.s * a.Win * a.C}
                                                : TileLines<T>{a.lists->taps.data() + first,
                                                               a.lists->first[r + 1] - first,
                                                               {image + run.c0, l0 * a.s, a.Hin, a.Win * a.C},
                                                               std::min(a.tile, lines - l0),
                                                               a.s,
                                                               bias,
                                                               out + l0 * a.Wout * a.C + run.c0,
                                                               a.Wout * a.C,
                                                               a.Wout,
                                                               a.C,
                                                               a.s * a.C};
        for_pieces<T, VB, GatherTileOp<T>>(run.c0, run.len(), a.C, a.blend, tile);
      }
    }
  }
};

// Lines (n, h) of the input gradient at stride s >= 2, phase by phase (see the top of the file):
// the taps of run r for rows h with mod(h, s) = hm and column phase ph are list
// (r * s + hm) * s + ph, counted from row floor(h / s) of grad_output. The arguments' in is
// grad_output (Hin x Win = Ho x Wo), out is dx (Hout x Wout = H x W).
template <typename T>
struct StridedInputGradLines {
  template <int VB>
  static MMO1D_CPU_INLINE void run(const GatherArgs<T>& a, int64_t begin, int64_t end) {
    const Plan& plan = *a.plan;
    const int64_t s = a.s;
    for (int64_t line = begin; line < end; ++line) {
      const int64_t n = line / a.Hout, h = line % a.Hout;
      for (int64_t ph = 0; ph < s && ph < a.Wout; ++ph) {
        const int64_t nout = (a.Wout - ph + s - 1) / s;
        for (size_t r = 0; r < plan.runs.size(); ++r) {
          const Run& run = plan.runs[r];
          const int64_t k = (static_cast<int64_t>(r) * s + h % s) * s + ph;
          const int64_t first = a.lists->first[k];
          const TileLines<T> one{a.lists->taps.data() + first,
                                 a.lists->first[k + 1] - first,
                                 {a.in + n * a.Hin * a.Win * a.C + run.c0, h / s, a.Hin, a.Win * a.C},
                                 1,
                                 0,
                                 nullptr,
                                 a.out + (line * a.Wout + ph) * a.C + run.c0,
                                 0,
                                 nout,
                                 s * a.C,
                                 a.C};
          for_pieces<T, VB, GatherTileOp<T>>(run.c0, run.len(), a.C, false, one);
        }
      }
    }
  }
};

// Whether each run is computed along columns: its taps spread more along H than along W.
std::vector<char> column_runs(const Plan& plan) {
  std::vector<char> columns;
  for (const Run& run : plan.runs) {
    columns.push_back(plan.max_abs_dh(run) > plan.max_abs_dw(run));
  }
  return columns;
}

// Taps of the gather of output (p, q) from input (p*s + dh, q*s + dw), per run (plus the residual
// tap, weight 1 at (0, 0), when `ones`): along rows, output j = q of line p reads row p*s + dh at
// pixel j*s + dw; along columns, output j = p of line q reads column q*s + dw at row j*s + dh.
template <typename T>
TapLists<T> gather_taps(const Plan& plan, const std::vector<char>& columns, const T* merged, const T* ones, int64_t C,
                        int64_t s, int64_t Hin, int64_t Win, int64_t Hout, int64_t Wout) {
  TapLists<T> lists;
  lists.first.push_back(0);
  for (size_t r = 0; r < plan.runs.size(); ++r) {
    const Run& run = plan.runs[r];
    const bool along_columns = columns[r];
    for (int64_t e = 0; e < run.ne; ++e) {
      const Offset o = plan.entries[run.e0 + e];
      const T* w = merged + run.w0 + e * run.len();
      Tap<T> tap = along_columns ? Tap<T>{o.dw, o.dh * Win * C, w, 0, 0} : Tap<T>{o.dh, o.dw * C, w, 0, 0};
      if (along_columns) {
        valid_span(o.dh, s, Hin, Hout, &tap.j0, &tap.j1);
      } else {
        valid_span(o.dw, s, Win, Wout, &tap.j0, &tap.j1);
      }
      lists.taps.push_back(tap);
    }
    if (ones != nullptr) {
      lists.taps.push_back({0, 0, ones, 0, along_columns ? Hout : Wout});
    }
    lists.close();
  }
  return lists;
}

// Taps of the strided input gradient (see StridedInputGradLines): entry (dh, dw) feeds rows h with
// mod(h, s) = mod(dh, s), from grad_output row floor(h / s) - floor(dh / s), and column phase
// mod(dw, s), from grad_output pixel j - floor(dw / s) for output j (pixel mod(dw, s) + j * s).
template <typename T>
TapLists<T> strided_taps(const Plan& plan, const T* merged, const T* ones, int64_t C, int64_t s, int64_t Wo,
                         int64_t W) {
  TapLists<T> lists;
  lists.first.push_back(0);
  for (const Run& run : plan.runs) {
    for (int64_t hm = 0; hm < s; ++hm) {
      for (int64_t ph = 0; ph < s; ++ph) {
        const int64_t nout = ph < W ? (W - ph + s - 1) / s : 0;
        for (int64_t e = 0; e < run.ne; ++e) {
          const Offset o = plan.entries[run.e0 + e];
          const int64_t dh_div = floor_div(o.dh, s), dw_div = floor_div(o.dw, s);
          if (o.dh - s * dh_div != hm || o.dw - s * dw_div != ph) {
            continue;
          }
          Tap<T> tap{-dh_div, -dw_div * C, merged + run.w0 + e * run.len(), 0, 0};
          valid_span(-dw_div, 1, Wo, nout, &tap.j0, &tap.j1);
          lists.taps.push_back(tap);
        }
        if (ones != nullptr && hm == 0 && ph == 0) {
          lists.taps.push_back({0, 0, ones, 0, nout});
        }
        lists.close();
      }
    }
  }
  return lists;
}

// Lines per tile: up to 8 (the input rows that vertical-leaning taps of neighbouring lines share
// then stay in the cache), fewer when that would leave threads idle. Results do not depend on it.
int64_t tile_lines(int64_t N, int64_t lines) {
  const int64_t wanted = N * lines / (4 * static_cast<int64_t>(at::get_num_threads()));
  return std::max<int64_t>(1, std::min<int64_t>(8, wanted));
}

// Gather of out (N, Hout, Wout) from in (N, Hin, Win): a pass over row tiles for the runs computed
// along rows, then one over column tiles for the others.
template <typename T>
void run_gather(GatherArgs<T> args, int64_t N, int64_t K) {
  const std::vector<char>& columns = *args.columns;
  const bool any_rows = std::find(columns.begin(), columns.end(), 0) != columns.end();
  const bool any_columns = std::find(columns.begin(), columns.end(), 1) != columns.end();
  // Overhangs into the runs of the other pass cannot rely on being rewritten later.
  args.blend = any_rows && any_columns;
  for (const bool column_pass : {false, true}) {
    if (!(column_pass ? any_columns : any_rows)) {
      continue;
    }
    args.column_pass = column_pass;
    const int64_t lines = column_pass ? args.Wout : args.Hout;
    args.tile = tile_lines(N, lines);
    const int64_t items = N * ((lines + args.tile - 1) / args.tile);
    const int64_t line_work = (column_pass ? args.Hout : args.Wout) * args.C * K;
    parallel_run<GatherTiles<T>>(args, items, grain_for(args.tile * line_work));
  }
}

}  // namespace

template <typename T>
void nhwc_forward(const T* x, const Plan& plan, const T* merged, const T* bias, T* y, const Geometry& g,
                  bool residual) {
  const std::vector<T> ones(max_run_len(plan) + 2 * kRunPad, T(1));
  const std::vector<char> columns = column_runs(plan);
  const TapLists<T> lists =
      gather_taps(plan, columns, merged, residual ? ones.data() + kRunPad : nullptr, g.C, g.s, g.H, g.W, g.Ho, g.Wo);
  run_gather<T>({x, y, bias, &plan, &lists, g.C, g.H, g.W, g.Ho, g.Wo, g.s, &columns, false, false, 0}, g.N, g.K);
}

template <typename T>
void nhwc_backward_input(const T* dy, const Plan& plan, const T* merged, T* dx, const Geometry& g, bool residual) {
  const std::vector<T> ones(max_run_len(plan) + 2 * kRunPad, T(1));
  const T* res = residual ? ones.data() + kRunPad : nullptr;
  if (g.s == 1) {
    const Plan transposed = plan.negated();
    const std::vector<char> columns = column_runs(transposed);
    const TapLists<T> lists = gather_taps(transposed, columns, merged, res, g.C, 1, g.H, g.W, g.H, g.W);
    run_gather<T>({dy, dx, nullptr, &transposed, &lists, g.C, g.Ho, g.Wo, g.H, g.W, 1, &columns, false, false, 0}, g.N,
                  g.K);
    return;
  }
  const TapLists<T> lists = strided_taps(plan, merged, res, g.C, g.s, g.Wo, g.W);
  const GatherArgs<T> args{dy, dx, nullptr, &plan, &lists, g.C, g.Ho, g.Wo, g.H, g.W, g.s, nullptr, false, false, 1};
  parallel_run<StridedInputGradLines<T>>(args, g.N * g.H, grain_for(g.W * g.C * g.K / g.s));
}

MMO1D_CPU_INSTANTIATE_GATHER(nhwc, float)
MMO1D_CPU_INSTANTIATE_GATHER(nhwc, double)

}  // namespace cpu
}  // namespace mmo1d
