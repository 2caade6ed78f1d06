// Channels_last weight gradient: for every run and entry, the sum over n, p, q of
// dy[n, p, q, c] * x[n, p*s + dh, q*s + dw, c], vectorised across the run's channels (dot_line).
//
// Deterministic: the lines (n, p) are cut into a number of blocks that depends on the shapes only;
// a task sums one run over one block of lines, in line order, into its own double buffer, and the
// blocks' buffers are then added in block order.
#include <ATen/Parallel.h>

#include <algorithm>
#include <vector>

#include "kernels.h"
#include "line_kernels.h"

namespace mmo1d {
namespace cpu {
namespace {

// Blocks of lines of the weight gradient: enough tasks for many cores, few partial buffers.
constexpr int64_t kLineBlocks = 32;

template <typename T>
struct WeightGradArgs {
  const T* dy;
  const T* x;
  const Plan* plan;
  const Tap<T>* taps;  // per entry (weights unused)
  double* partial;     // (blocks, plan.merged_size)
  int64_t blocks, lines;
  int64_t C, H, W, Ho, Wo, s;
};

// Work item = (block of lines, run).
template <typename T>
struct WeightGradTasks {
  template <int VB>
  static MMO1D_CPU_INLINE void run(const WeightGradArgs<T>& a, int64_t begin, int64_t end) {
    const Plan& plan = *a.plan;
    const int64_t nruns = static_cast<int64_t>(plan.runs.size());
    for (int64_t item = begin; item < end; ++item) {
      const int64_t block = item / nruns;
      const Run& run = plan.runs[item % nruns];
      const int64_t len = run.len();
      double* sums = a.partial + block * plan.merged_size + run.w0;
      std::fill(sums, sums + run.ne * len, 0.0);
      const int64_t first = block * a.lines / a.blocks, last = (block + 1) * a.lines / a.blocks;
      for (int64_t line = first; line < last; ++line) {
        const int64_t n = line / a.Ho, p = line % a.Ho;
        const T* dy_line = a.dy + line * a.Wo * a.C + run.c0;
        for (int64_t e = 0; e < run.ne; ++e) {
          const Tap<T>& tap = a.taps[run.e0 + e];
          const int64_t row = p * a.s + tap.dh;
          if (row < 0 || row >= a.H) {
            continue;
          }
          const T* src = a.x + ((n * a.H + row) * a.W) * a.C + run.c0 + tap.off;
          for_pieces<T, VB, DotOp<T>>(run.c0, len, a.C, false, dy_line, tap, src, sums + e * len, a.C, a.s * a.C);
        }
      }
    }
  }
};

}  // namespace

template <typename T>
void nhwc_backward_weight(const T* dy, const T* x, const Plan& plan, double* grad_merged, const Geometry& g) {
  const int64_t lines = g.N * g.Ho;
  const int64_t blocks = std::max<int64_t>(1, std::min(lines, kLineBlocks));
  const int64_t nruns = static_cast<int64_t>(plan.runs.size());
  std::vector<double> partial(blocks * plan.merged_size);
  std::vector<Tap<T>> taps;
  for (const Offset& o : plan.entries) {
    Tap<T> tap{o.dh, o.dw * g.C, nullptr, 0, 0};
    valid_span(o.dw, g.s, g.W, g.Wo, &tap.j0, &tap.j1);
    taps.push_back(tap);
  }
  const WeightGradArgs<T> args{dy,  x,   &plan, taps.data(), partial.data(), blocks, lines,
                               g.C, g.H, g.W,   g.Ho,        g.Wo,           g.s};
  parallel_run<WeightGradTasks<T>>(args, blocks * nruns, 1);
  at::parallel_for(0, plan.merged_size, 4096, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) {
      double total = 0.0;
      for (int64_t b = 0; b < blocks; ++b) {
        total += partial[b * plan.merged_size + i];
      }
      grad_merged[i] = total;
    }
  });
}

MMO1D_CPU_INSTANTIATE_WGRAD(nhwc, float)
MMO1D_CPU_INSTANTIATE_WGRAD(nhwc, double)

}  // namespace cpu
}  // namespace mmo1d
