// NCHW weight gradient: one channel per work item; for each image its plane of x is copied into
// the padded, phase-split buffer of the forward (plane_kernels.h) and grad_output into rows of whole
// vectors, and each entry's gradient is the dot product of the two over the plane (dot_plane).
// Deterministic: a channel's sums run in a fixed order (images, then register blocks).
#include <algorithm>
#include <cstring>
#include <vector>

#include "kernels.h"
#include "plane_kernels.h"

namespace mmo1d {
namespace cpu {
namespace {

template <typename T>
struct PlaneGradArgs {
  const T* dy;
  const T* x;
  const Plan* plan;
  double* grad_merged;
  int64_t N, C, H, W, Hout, Wout, s;
};

// Channels [begin, end): the gradient of every entry of the channel's run.
template <typename T, int VB, int R, int VQ>
struct PlaneGradChannels {
  static MMO1D_CPU_INLINE void run(const PlaneGradArgs<T>& a, const Block& block, int64_t begin, int64_t end) {
    const Plan& plan = *a.plan;
    std::vector<T> buf;
    std::vector<T> dy_rows(a.Hout * block.cols, T(0));
    std::vector<int64_t> offs;
    std::vector<double> sums;
    for (int64_t c = begin; c < end; ++c) {
      const Run& run = plan.runs[plan.run_of[c]];
      const PlaneLayout lay = make_layout(a.H, a.W, a.Hout, a.s, plan.max_abs_dh(run), plan.max_abs_dw(run), block);
      buf.resize(std::max<size_t>(buf.size(), lay.size()));
      offs.clear();
      for (int64_t e = 0; e < run.ne; ++e) {
        offs.push_back(lay.tap_offset(plan.entries[run.e0 + e].dh, plan.entries[run.e0 + e].dw));
      }
      sums.assign(run.ne, 0.0);
      for (int64_t n = 0; n < a.N; ++n) {
        const int64_t plane = n * a.C + c;
        fill_plane(buf.data(), a.x + plane * a.H * a.W, lay);
        for (int64_t p = 0; p < a.Hout; ++p) {
          std::memcpy(dy_rows.data() + p * block.cols, a.dy + (plane * a.Hout + p) * a.Wout, sizeof(T) * a.Wout);
        }
        for (int64_t e = 0; e < run.ne; ++e) {
          dot_plane<T, VB, R, VQ>(buf.data(), lay, offs[e], dy_rows.data(), block.cols, a.Hout, a.Wout, &sums[e]);
        }
      }
      for (int64_t e = 0; e < run.ne; ++e) {
        a.grad_merged[run.w0 + e * run.len() + (c - run.c0)] = sums[e];
      }
    }
  }
};

}  // namespace

template <typename T>
void nchw_backward_weight(const T* dy, const T* x, const Plan& plan, double* grad_merged, const Geometry& g) {
  const PlaneGradArgs<T> args{dy, x, &plan, grad_merged, g.N, g.C, g.H, g.W, g.Ho, g.Wo, g.s};
  parallel_run<BlockedPlanes<T, PlaneGradChannels>>(args, g.C, grain_for(g.N * g.Ho * g.Wo * g.K));
}

MMO1D_CPU_INSTANTIATE_WGRAD(nchw, float)
MMO1D_CPU_INSTANTIATE_WGRAD(nchw, double)

}  // namespace cpu
}  // namespace mmo1d
