// Launcher of the interpolated window family: the stride-1 gathers (forward, input gradient) of
// 'bilinear' and 'gaussian' taps on channels_last float32, float16 and bfloat16 tensors whose C is a
// multiple of the channel block, through the channels_last window kernel (win_gather/) over the
// runs that the points of the taps' samples form, each block of channels walking the union of its
// channels' points (interp_win_segments.cuh).
#include "../common/tiling.cuh"
#include "../families.cuh"
#include "../win_gather/win_gather.cuh"
#include "interp_win_segments.cuh"

namespace mmo1d {
namespace cuda {

// Domain: interpolated taps, channels_last, aligned, C % (32 bytes of channels) == 0, stride 1,
// gathers; tables of at most kSegMaxPoints rows whose offsets fit the segment builder's grid.
template <typename scalar_t>
bool InterpWin::plan(const Problem& p, Pass pass, Plan* plan) {
  constexpr int CB = VecTraits<scalar_t>::kCB;
  if (pass == Pass::kWeightGrad || !p.nhwc || !p.aligned || p.C % CB != 0 || p.stride != 1) return false;
  const int rows = interp_rows(p.rule, p.K), h = interp_halo(p.rule, p.K);
  if (rows > kSegMaxPoints || (2 * h + 1) * (2 * h + 1) > kSegGridCells) return false;
  plan->path = "interp_win";
  // The tile budget of the rounded taps' window gather, beside the larger tables; the blocks' channels
  // walk their union, one list (the other blocks read their lists from global memory).
  const int64_t soft = kVecGatherBudget - win_fixed_bytes<scalar_t>(p.K) + win_fixed_bytes<scalar_t>(rows, true);
  return plan_win_gather<scalar_t>(p, rows, 2 * h + 1, soft, 1, plan, true);
}

template <typename scalar_t>
void InterpWin::run(const Plan& plan, const Args<scalar_t>& a) {
  const auto t = build_interp_tables<scalar_t, float>(a.theta, a.weight, a.rule, a.residual,
                                                      interp_tables_use(false, a.sign));
  const int h = interp_halo(a.rule, static_cast<int>(a.weight.size(1)));
  // Each block's channels walk the union of their points (the halo is the block's largest anyway).
  const InterpSegments s = build_united_segments<VecTraits<scalar_t>::kCB>(t, t.npts_gather(), h, a.sign);
  launch_win_gather<scalar_t>(plan, a, s.view(t.halo()));
}

MMO1D_INSTANTIATE_FAMILY(InterpWin)

}  // namespace cuda
}  // namespace mmo1d
