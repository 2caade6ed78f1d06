// Launcher of the interpolated stride-2 family: the forward and the input gradient of 'bilinear' and
// 'gaussian' taps at stride 2 on channels_last float32, float16 and bfloat16 tensors whose C is a
// multiple of the channel block, through truncation's polyphase kernels: the forward's four
// parity-class gathers summed in one tile (stride2.cuh) and the input gradient's window gather per
// parity class (nhwc_window.cuh), over the runs that each class's sampled pixels form at halved
// offsets (interp_segments.cuh, classes = 4). The weight gradient stays with the general family.
#include "families.cuh"
#include "interp_segments.cuh"
#include "nhwc_window.cuh"
#include "stride2.cuh"
#include "tiling.cuh"

namespace mmo1d {
namespace cuda {

// Domain: interpolated taps, channels_last, aligned, C % (32 bytes of channels) == 0, stride 2,
// forward and input gradient; tables of at most kSegMaxPoints rows whose offsets fit the segment
// builder's grid.
template <typename scalar_t>
bool InterpS2::plan(const Problem& p, Pass pass, Plan* plan) {
  constexpr int CB = VecTraits<scalar_t>::kCB;
  if (pass == Pass::kWeightGrad || !p.nhwc || !p.aligned || p.C % CB != 0 || p.stride != 2) return false;
  const int rows = interp_rows(*p.interp, p.K), h = interp_halo(*p.interp, p.K);
  if (rows > kSegMaxPoints || (2 * h + 1) * (2 * h + 1) > kSegGridCells) return false;
  if (pass == Pass::kForward) {
    plan->path = "interp_s2_nhwc";
    return plan_s2_gather<scalar_t>(p, rows, 2 * h + 1, plan);
  }
  plan->path = "interp_win_classes_nhwc";
  // The tile budget of the rounded taps' window gather, beside the larger tables.
  const int64_t soft = kVecGatherBudget - win_fixed_bytes<scalar_t>(p.K) + win_fixed_bytes<scalar_t>(rows);
  return plan_win_gather<scalar_t>(p, rows, class_halo_k(2 * h + 1), soft, 4, plan);
}

template <typename scalar_t>
void InterpS2::run(const Plan& plan, const Args<scalar_t>& a) {
  const auto t = build_interp_tables<scalar_t, float>(a.theta, a.weight, *a.interp, a.residual, true);
  const int h = interp_halo(*a.interp, static_cast<int>(a.weight.size(1)));
  const InterpSegments s = build_interp_segments(t, t.npts_gather(), h, a.sign, false, 4);
  if (a.sign > 0) {
    launch_s2_gather<scalar_t>(plan, a.src, a.out, a.bias, s.info(), s.segs(), s.w(), s.halo());
  } else {
    launch_win_gather<scalar_t>(plan, a.src, a.out, a.bias, s.info(), s.segs(), s.w(), s.halo());
  }
}

MMO1D_INSTANTIATE_FAMILY(InterpS2)

}  // namespace cuda
}  // namespace mmo1d
