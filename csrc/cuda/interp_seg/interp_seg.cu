// Launcher of the interpolated segment family: the stride-1 gathers (forward, input gradient) and
// weight gradient of 'bilinear' and 'gaussian' taps on NCHW float32, float16 and bfloat16 tensors,
// through the NCHW segment-window kernels (seg_gather/, seg_wgrad/) over the runs that the points
// of the taps' samples form (interp_segments.cuh). The weight gradient sums dy * x at every point
// in slices of points (all points when the angle's gradient is wanted); the weight and angle
// gradients are the contractions of those sums, as in the interpolated family (interp.cu).
#include <algorithm>

#include "../common/interp_contract.cuh"
#include "../common/interp_segments.cuh"
#include "../families.cuh"
#include "../seg_gather/seg_gather.cuh"
#include "../seg_wgrad/seg_wgrad.cuh"

namespace mmo1d {
namespace cuda {

// Points per weight-gradient block, a slice of the tables: per-thread sums of all of a bilinear line's
// points (up to 124 for K=31) would take 127 KB. On an H200 (fp32, 64 x 512 x 56 x 56, K=31, angles
// moved by up to 0.05 rad) slices of 80 points took 2.08 / 2.00 ms for bilinear / gaussian, of 88
// 2.08 / 2.00, of 72 2.26 / 1.99, of 48 2.24 / 2.16, of 36 2.40 / 2.17, of 96 3.26 / 3.10 (fewer
// blocks per multiprocessor); with the angles on the 8 directions 80 was as good as 88 too.
// The kernel's variant (seg_wgrad.cuh), on an H200 (64 x C x 56 x 56, the same angles; bilinear /
// gaussian, ms): float32 (C = 512) walks two tasks per thread, 1.75 / 1.66 against 1.95 / 1.84
// with one (2.11 / 1.99 with columns shared by two lanes); 16-bit (bf16, C = 384) shares the
// columns between two lanes, 1.77 / 1.68 against 1.95 / 1.88 (1.80 / 1.75 with two tasks per thread).
constexpr int kInterpSegWgradPoints = 80;

// Domain: interpolated taps, NCHW, stride 1; tables of at most kSegMaxPoints rows whose offsets fit
// the segment builder's grid.
template <typename scalar_t>
bool InterpSeg::plan(const Problem& p, Pass pass, Plan* plan) {
  if (p.nhwc || p.stride != 1) return false;
  const int rows = interp_rows(p.rule, p.K), h = interp_halo(p.rule, p.K);
  if (rows > kSegMaxPoints || (2 * h + 1) * (2 * h + 1) > kSegGridCells) return false;
  if (pass == Pass::kWeightGrad) {
    plan->path = "interp_seg_wgrad";
    return plan_seg_wgrad<scalar_t>(p, rows, 2 * h + 1, std::min(rows, kInterpSegWgradPoints), plan,
                                    sizeof(scalar_t) == 2 ? kSegWgradSharedColumns : kSegWgradTwoTasks);
  }
  plan->path = "interp_seg";
  return plan_seg_gather<scalar_t>(p, rows, 2 * h + 1, plan);
}

template <typename scalar_t>
void InterpSeg::run(const Plan& plan, const Args<scalar_t>& a) {
  const auto t = build_interp_tables<scalar_t, float>(a.theta, a.weight, a.rule, a.residual,
                                                      interp_tables_use(a.dy != nullptr, a.sign));
  const int h = interp_halo(a.rule, static_cast<int>(a.weight.size(1)));
  if (a.dy == nullptr) {
    const InterpSegments s = build_interp_segments(t, t.npts_gather(), h, a.sign);
    launch_seg_gather<scalar_t>(plan, a, s.view(t.halo()));
    return;
  }
  const bool all = a.dtheta != nullptr;
  const InterpSegments s = build_interp_segments(t, t.npts(all), h, 1, true);
  const at::Tensor partial = launch_seg_wgrad_partials<scalar_t>(plan, a.src, *a.dy, s.view(t.halo()));
  // The sums per slot (run order): each point's row is its slot.
  contract<scalar_t, float>(t, partial, plan.parts, s.slot_of(), all, a.weight, a.out, a.dtheta);
}

MMO1D_INSTANTIATE_FAMILY(InterpSeg)

}  // namespace cuda
}  // namespace mmo1d
